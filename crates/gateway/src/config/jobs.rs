//! The `[jobs]` section: where durable jobs are stored, how long finished
//! ones are kept, and the queues workers serve.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// `store` for the embedded SQLite file `{data_dir}/jobs.db`.
pub const SQLITE: &str = "sqlite";

/// The queue jobs go to when they name none in the defaults, and the
/// seed's Discord queue.
const DEFAULT_QUEUES: &[&str] = &["default", "discord"];

/// Durable jobs (`POST /v1/jobs`, workers, retention).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct JobsConfig {
    /// Whether the job store opens and the jobs API answers (default true).
    pub enabled: bool,
    /// Whether this gateway runs workers (default true). Off for a replica
    /// that only takes and answers API calls while others run the jobs.
    pub workers: bool,
    /// `"sqlite"` (the file `{data_dir}/jobs.db`) or a
    /// `postgres://user:password@host:port/database` URL.
    pub store: String,
    /// Completed jobs are deleted this long after they finished (seed: 1 h).
    pub completed_retention_seconds: u64,
    /// Dead jobs are deleted this long after they died (seed: 24 h).
    pub dead_retention_seconds: u64,
    /// Cancelled jobs are deleted this long after they were cancelled.
    pub cancelled_retention_seconds: u64,
    /// Job events (`GET /v1/jobs/events`) are deleted this long after they
    /// happened: how far back a client can resume with `Last-Event-ID`.
    pub events_retention_seconds: u64,
    /// How long an `Idempotency-Key` deduplicates enqueues (seed: 24 h).
    pub idempotency_ttl_seconds: u64,
    /// How long a worker's claim on a job lasts without a heartbeat; a
    /// crashed worker's jobs are rescued after it.
    pub lease_ms: u64,
    /// How often a worker renews the lease of a job it runs.
    pub heartbeat_ms: u64,
    /// How often finished jobs past their retention are deleted.
    pub cleanup_interval_seconds: u64,
    /// The queues workers serve, by name. Jobs may only be enqueued to a
    /// queue named here. Merged by name over the defaults (`default`,
    /// `discord`).
    pub queues: BTreeMap<String, QueueSettings>,
    /// Completion webhooks (a job's `callback_url`).
    pub callbacks: CallbacksConfig,
}

/// `[jobs.callbacks]`: where a job's `callback_url` may point and how its
/// callbacks are signed (see `sluice_jobs_http::callback`). Off (every
/// `callback_url` refused) while `allow` is empty.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CallbacksConfig {
    /// URL prefixes a callback may go to: the same scheme, host and port,
    /// and a path under the prefix's path.
    pub allow: Vec<String>,
    /// The environment variable holding the HMAC-SHA256 secret (required
    /// when `allow` is set).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub secret_env: Option<String>,
    /// Each delivery's timeout.
    pub timeout_ms: u64,
    /// Deliveries of one callback before it goes dead.
    pub max_attempts: u32,
}

impl Default for CallbacksConfig {
    fn default() -> Self {
        CallbacksConfig {
            allow: Vec::new(),
            secret_env: None,
            timeout_ms: 10_000,
            max_attempts: 5,
        }
    }
}

/// One queue's workers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct QueueSettings {
    /// Jobs of this queue running at once (seed: 5).
    pub concurrency: u32,
    /// Jobs started per second at most (seed: 10; fractions allowed).
    pub rate: f64,
    /// Jobs started per second at most within one group, if limited.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub group_rate: Option<f64>,
    /// Attempts a job gets when it names none (seed: 3).
    pub max_attempts: u32,
    /// Jobs claimed ahead of free slots (leased, run as slots free up); as
    /// many as `concurrency` when unset, 0 to claim only for free slots.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prefetch: Option<u32>,
    /// Runs whose handler returned that may wait for their outcome's
    /// commit without holding a slot (four times `concurrency` when unset). A
    /// crash repeats at most `concurrency` + this many runs; 0 holds every
    /// slot until its outcome is durable.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub awaiting_commit: Option<u32>,
}

impl Default for QueueSettings {
    /// The seed's: 5 at once, 10 jobs a second, 3 attempts.
    fn default() -> Self {
        QueueSettings {
            concurrency: 5,
            rate: 10.0,
            group_rate: None,
            max_attempts: 3,
            prefetch: None,
            awaiting_commit: None,
        }
    }
}

impl Default for JobsConfig {
    /// The seed's retention (completed 1 h, dead 24 h) and idempotency TTL
    /// (24 h), on SQLite.
    fn default() -> Self {
        JobsConfig {
            enabled: true,
            workers: true,
            store: SQLITE.to_owned(),
            completed_retention_seconds: 3_600,
            dead_retention_seconds: 86_400,
            cancelled_retention_seconds: 86_400,
            events_retention_seconds: 3_600,
            idempotency_ttl_seconds: 86_400,
            lease_ms: 30_000,
            heartbeat_ms: 10_000,
            cleanup_interval_seconds: 60,
            queues: DEFAULT_QUEUES
                .iter()
                .map(|&q| (q.to_owned(), QueueSettings::default()))
                .collect(),
            callbacks: CallbacksConfig::default(),
        }
    }
}

/// Where the job store lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreLocation {
    /// A SQLite file.
    Sqlite(PathBuf),
    /// A PostgreSQL URL.
    Postgres(String),
}

impl StoreLocation {
    /// The location as shown in errors: the file's path, or the URL with
    /// its password hidden.
    pub fn display(&self) -> String {
        match self {
            StoreLocation::Sqlite(path) => path.display().to_string(),
            StoreLocation::Postgres(url) => redact_url(url),
        }
    }

    /// Where a store configured as `store` lives: `"jobs"` (the file
    /// `{data_dir}/{file}` beside SQLite jobs, or the job store's
    /// PostgreSQL), `"sqlite"` (`{data_dir}/{file}`) or a PostgreSQL URL.
    pub fn beside_jobs(
        store: &str,
        data_dir: &Path,
        jobs: &JobsConfig,
        file: &str,
    ) -> StoreLocation {
        let file = || StoreLocation::Sqlite(data_dir.join(file));
        match store {
            super::WITH_JOBS => match jobs.location(data_dir) {
                StoreLocation::Sqlite(_) => file(),
                pg @ StoreLocation::Postgres(_) => pg,
            },
            SQLITE => file(),
            url => StoreLocation::Postgres(url.to_owned()),
        }
    }

    /// Creates the directory of a SQLite file (PostgreSQL needs none).
    ///
    /// # Errors
    /// The directory cannot be created.
    pub fn create_dir(&self) -> std::io::Result<()> {
        match self {
            StoreLocation::Sqlite(path) => match path.parent() {
                Some(dir) if !dir.as_os_str().is_empty() => std::fs::create_dir_all(dir),
                _ => Ok(()),
            },
            StoreLocation::Postgres(_) => Ok(()),
        }
    }
}

impl JobsConfig {
    /// Where the store lives, `data_dir` holding the SQLite file.
    pub fn location(&self, data_dir: &Path) -> StoreLocation {
        if self.store == SQLITE {
            StoreLocation::Sqlite(data_dir.join("jobs.db"))
        } else {
            StoreLocation::Postgres(self.store.clone())
        }
    }
}

/// Whether `store` names a store the gateway can open.
pub(crate) fn store_problem(store: &str) -> Option<String> {
    if store == SQLITE {
        return None;
    }
    if !(store.starts_with("postgres://") || store.starts_with("postgresql://")) {
        return Some(format!(
            "must be \"sqlite\" or a postgres:// URL, not {:?}",
            redact_url(store)
        ));
    }
    match url::Url::parse(store) {
        Ok(url) if url.host_str().is_some_and(|h| !h.is_empty()) => None,
        Ok(_) => Some("the postgres:// URL has no host".into()),
        Err(e) => Some(format!("is not a URL: {e}")),
    }
}

/// `url` with its password, if any, replaced by `redacted`.
pub(crate) fn redact_url(url: &str) -> String {
    match url::Url::parse(url) {
        Ok(mut parsed) if parsed.password().is_some() => {
            let _ = parsed.set_password(Some("redacted"));
            parsed.to_string()
        }
        Ok(_) => url.to_owned(),
        // Not a URL: it may still hold a secret, so show only its scheme.
        Err(_) => match url.split_once("://") {
            Some((scheme, _)) => format!("{scheme}://<redacted>"),
            None => url.to_owned(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::load_str;

    fn load(text: &str, env: &[(&str, &str)]) -> Result<crate::config::Config, String> {
        let env = env.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned()));
        load_str(text, "sluice.toml", env).map_err(|e| e.to_string())
    }

    #[test]
    fn defaults_are_the_seeds() {
        let c = load("", &[]).unwrap();
        let j = &c.jobs;
        assert!(j.enabled && j.workers);
        assert_eq!(j.store, "sqlite");
        assert_eq!(
            j.location(&c.data_dir),
            StoreLocation::Sqlite("./sluice-data/jobs.db".into())
        );
        assert_eq!(
            (j.completed_retention_seconds, j.dead_retention_seconds),
            (3_600, 86_400)
        );
        assert_eq!(j.idempotency_ttl_seconds, 86_400);
        let q = &j.queues["default"];
        assert_eq!(
            (q.concurrency, q.rate, q.group_rate, q.max_attempts),
            (5, 10.0, None, 3)
        );
    }

    #[test]
    fn queues_merge_by_name_and_take_overrides() {
        let c = load(
            "[jobs.queues.email]\nconcurrency = 2\n[jobs.queues.default]\ngroup_rate = 1.5\nprefetch = 0\nawaiting_commit = 40",
            &[
                ("SLUICE_JOBS__QUEUES__DISCORD__RATE", "2.5"),
                ("SLUICE_JOBS__STORE", "postgres://db/jobs"),
            ],
        )
        .unwrap();
        let q = &c.jobs.queues;
        assert_eq!(q["email"].concurrency, 2);
        assert_eq!(q["email"].rate, 10.0, "unset keys take the queue defaults");
        assert_eq!(q["default"].group_rate, Some(1.5));
        assert_eq!(q["default"].concurrency, 5);
        assert_eq!(
            (q["default"].prefetch, q["default"].awaiting_commit),
            (Some(0), Some(40))
        );
        assert_eq!(q["discord"].rate, 2.5);
        assert_eq!(
            (q["email"].prefetch, q["email"].awaiting_commit),
            (None, None)
        );
        assert_eq!(
            c.jobs.location(&c.data_dir),
            StoreLocation::Postgres("postgres://db/jobs".into())
        );
    }

    #[test]
    fn bad_keys_and_values_are_named() {
        for (text, key) in [
            ("[jobs]\ncolour = 1", "colour"),
            ("[jobs.queues.email]\nconcurency = 2", "concurency"),
            ("[jobs]\nstore = \"mysql://db\"", "jobs.store"),
            ("[jobs]\nlease_ms = 0", "jobs.lease_ms"),
            ("[jobs]\nheartbeat_ms = 30000", "jobs.heartbeat_ms"),
            (
                "[jobs.queues.email]\nconcurrency = 0",
                "jobs.queues.email.concurrency",
            ),
            ("[jobs.queues.email]\nrate = -1.0", "jobs.queues.email.rate"),
            (
                "[jobs.queues.email]\nmax_attempts = 0",
                "jobs.queues.email.max_attempts",
            ),
            (
                "[jobs.queues.default]\ngroup_rate = 0.0",
                "jobs.queues.default.group_rate",
            ),
        ] {
            let e = load(text, &[]).expect_err(text);
            assert!(e.contains(key), "{text}: {e}");
        }
        let e = load("", &[("SLUICE_JOBS__LEASE_MS", "soon")]).unwrap_err();
        assert!(
            e.contains("jobs.lease_ms") && e.contains("SLUICE_JOBS__LEASE_MS"),
            "{e}"
        );
    }

    #[test]
    fn check_config_hides_the_store_password() {
        let c = load("[jobs]\nstore = \"postgres://u:hunter2@db/jobs\"", &[]).unwrap();
        let shown = c.to_toml();
        assert!(!shown.contains("hunter2"), "{shown}");
        assert!(shown.contains("[jobs.queues.default]"), "{shown}");
    }

    #[test]
    fn passwords_are_hidden() {
        assert_eq!(
            redact_url("postgres://u:secret@db:5432/jobs"),
            "postgres://u:redacted@db:5432/jobs"
        );
        assert_eq!(redact_url("postgres://db/jobs"), "postgres://db/jobs");
        assert_eq!(store_problem("sqlite"), None);
        assert_eq!(store_problem("postgres://db/jobs"), None);
        assert!(store_problem("mysql://db").is_some());
    }
}
