//! The SQLite files the gateway keeps (`jobs.db`, `ledger.db`, `keys.db`,
//! `audit.db`), checked before any of them opens: SQLite creates a missing
//! file and takes an empty one for a new database, so a deleted `keys.db`
//! would start the gateway with no keys (and, without `[[tenants]]`, with
//! no authentication at all), and an emptied `jobs.db` would drop every
//! job, each without a word.
//!
//! Each store that opened leaves a marker beside its file
//! (`keys.db.marker`): a file that is missing while its marker is there
//! existed before, and start-up is refused, naming the file and how to
//! restore it. A file of 0 bytes, one that cannot be read, or one whose
//! header is not SQLite's is refused too. A first start on a fresh data
//! directory (no file, no marker) creates the stores as before.
//!
//! SQLite creates a new file empty and writes its first page a moment
//! later, so a first start killed in between leaves a file of 0 bytes and
//! no marker. That start leaves a second marker first (`keys.db.creating`)
//! while it creates the file, removed once every store opened: an empty
//! file beside it is that start's, and the next start creates it again.
//!
//! `sluice check-config --stores` runs the same checks without starting,
//! and reads every page of each file (SQLite's `quick_check`).

use std::io::Read;
use std::path::{Path, PathBuf};

use crate::config::{Config, StoreLocation};

/// The first 16 bytes of every SQLite database file.
const SQLITE_HEADER: &[u8; 16] = b"SQLite format 3\0";

/// One store the config enables.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Store {
    /// What it holds, as its config section is named: `jobs`, `ledger`,
    /// `keys`, `audit`.
    pub name: &'static str,
    /// Where it lives.
    pub location: StoreLocation,
}

impl Store {
    /// The marker beside a SQLite file (`keys.db.marker`); none for
    /// PostgreSQL.
    pub fn marker(&self) -> Option<PathBuf> {
        match &self.location {
            StoreLocation::Sqlite(path) => Some(marker_of(path)),
            StoreLocation::Postgres(_) => None,
        }
    }

    /// The store as messages name it ("the job store").
    fn noun(&self) -> &'static str {
        match self.name {
            "jobs" => "job store",
            "ledger" => "usage ledger",
            "keys" => "key store",
            _ => "audit store",
        }
    }

    /// What losing this store costs, for the refusal.
    fn stakes(&self) -> &'static str {
        match self.name {
            "keys" => {
                "every key issued so far would be refused, and with no [[tenants]] in the \
                 config every caller would be let in with no authentication"
            }
            "jobs" => "every job stored there would be lost",
            "ledger" => "the usage and spend recorded there would be lost",
            _ => "what it recorded would be lost",
        }
    }
}

fn marker_of(path: &Path) -> PathBuf {
    suffixed(path, ".marker")
}

/// The marker a first start leaves while it creates `path`.
fn creating_of(path: &Path) -> PathBuf {
    suffixed(path, ".creating")
}

fn suffixed(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(suffix);
    path.with_file_name(name)
}

/// The stores `config` enables, in start-up order.
pub fn configured(config: &Config) -> Vec<Store> {
    let dir = &config.data_dir;
    let mut out = Vec::new();
    if config.jobs.enabled {
        out.push(Store {
            name: "jobs",
            location: config.jobs.location(dir),
        });
    }
    if config.ledger.enabled {
        out.push(Store {
            name: "ledger",
            location: config.ledger.location(dir, &config.jobs),
        });
    }
    if config.keys.enabled {
        out.push(Store {
            name: "keys",
            location: config.keys.location(dir, &config.jobs),
        });
    }
    if config.audit.enabled {
        out.push(Store {
            name: "audit",
            location: config.audit.location(dir, &config.jobs),
        });
    }
    out
}

/// What the file of a store looks like before it opens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FileState {
    /// A SQLite file of this many bytes, readable, with SQLite's header.
    Present(u64),
    /// No file and no marker: the first start creates it.
    New,
    /// Not a file: PostgreSQL.
    Server,
}

/// Why a store's file must not be opened.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{detail}")]
pub struct Refused {
    /// The file.
    pub path: PathBuf,
    /// What is wrong, and how to restore it.
    pub detail: String,
}

/// Checks the file of `store` without opening it as a database.
///
/// # Errors
/// [`Refused`] when it is missing although its marker says it existed,
/// empty, unreadable, or not a SQLite file; the message names the file
/// and how to restore it.
pub fn check(store: &Store) -> Result<FileState, Refused> {
    let StoreLocation::Sqlite(path) = &store.location else {
        return Ok(FileState::Server);
    };
    let marker = marker_of(path);
    let file = file_name(path);
    let what = store.noun();
    let refuse = |detail: String| Refused {
        path: path.clone(),
        detail,
    };
    let restore = format!(
        "restore {file} from a backup (with sluice stopped, copy it to {})",
        path.display()
    );
    let meta = match std::fs::metadata(path) {
        Ok(meta) => meta,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return match marker.try_exists() {
                Ok(false) => Ok(FileState::New),
                Ok(true) => Err(refuse(format!(
                    "{} is missing, but {} says the {what} was created there before. \
                     On a new, empty one {}. To go on, {restore}; to start with an empty {what} on \
                     purpose, delete {}",
                    path.display(),
                    marker.display(),
                    store.stakes(),
                    marker.display()
                ))),
                Err(e) => Err(refuse(format!(
                    "{} is missing and its marker {} cannot be read ({e}); fix the data \
                     directory's permissions, or {restore}",
                    path.display(),
                    marker.display()
                ))),
            };
        }
        Err(e) => {
            return Err(refuse(format!(
                "the {what} {} cannot be read ({e}); give the user sluice runs as read \
                 and write access to it and its directory, or {restore}",
                path.display()
            )));
        }
    };
    if !meta.is_file() {
        return Err(refuse(format!(
            "{} is not a file; the {what} must be a SQLite file there",
            path.display()
        )));
    }
    if meta.len() == 0 {
        // A first start killed before SQLite wrote the first page.
        if creating_of(path).exists() && !marker.exists() {
            return Ok(FileState::New);
        }
        return Err(refuse(format!(
            "{} is empty (0 bytes): it was truncated or never written, and would be taken for \
             a new, empty {what} ({}). To go on, {restore}; to start with an empty {what} \
             on purpose, delete {} and {}",
            path.display(),
            store.stakes(),
            path.display(),
            marker.display()
        )));
    }
    let mut header = [0_u8; 16];
    let read = std::fs::File::open(path).and_then(|mut f| f.read_exact(&mut header));
    if let Err(e) = read {
        return Err(refuse(format!(
            "the {what} {} cannot be read ({e}); give the user sluice runs as read and \
             write access to it, or {restore}",
            path.display()
        )));
    }
    if &header != SQLITE_HEADER {
        return Err(refuse(format!(
            "the {what} {} is not a SQLite database (its first bytes are not SQLite's \
             header): it was overwritten or damaged; {restore}",
            path.display()
        )));
    }
    Ok(FileState::Present(meta.len()))
}

/// Checks every store `config` enables, before they open; the first
/// refusal. Beside each one about to be created it leaves the marker of
/// a first start (see the module), which [`mark_all`] removes.
///
/// # Errors
/// [`Refused`], as [`check`].
pub fn check_all(config: &Config) -> Result<(), Refused> {
    let stores = configured(config);
    let mut new = Vec::new();
    for store in &stores {
        if let (FileState::New, StoreLocation::Sqlite(path)) = (check(store)?, &store.location) {
            new.push(path);
        }
    }
    for path in new {
        let creating = creating_of(path);
        let written = creating
            .parent()
            .map_or(Ok(()), std::fs::create_dir_all)
            .and_then(|()| {
                std::fs::write(
                    &creating,
                    "sluice is creating the store beside this file for the first time; \
                     it removes this file once the store opened.\n",
                )
            });
        if let Err(e) = written {
            tracing::warn!(marker = %creating.display(), error = %e,
                "cannot write the marker of a first start: if this start is killed before \
                 the store is written, the next one refuses its empty file");
        }
    }
    Ok(())
}

/// Leaves a marker beside every SQLite file of `config` that exists now
/// (all of them opened), so that a later start knows they existed. A
/// marker that cannot be written is logged: the stores work, only the
/// check of a later start is weaker.
pub fn mark_all(config: &Config) {
    for store in configured(config) {
        let (StoreLocation::Sqlite(path), Some(marker)) = (&store.location, store.marker()) else {
            continue;
        };
        if !path.exists() {
            continue;
        }
        let creating = creating_of(path);
        if marker.exists() {
            let _ = std::fs::remove_file(creating);
            continue;
        }
        let file = file_name(path);
        let text = format!(
            "sluice opened the {what} {file} in this directory. While this marker is here, \
             sluice refuses to start if {file} is missing or empty instead of creating a new, \
             empty one. Restore {file} from a backup, or delete this marker to start with an \
             empty {what} on purpose.\n",
            what = store.noun()
        );
        match std::fs::write(&marker, text) {
            Ok(()) => {
                let _ = std::fs::remove_file(creating);
            }
            Err(e) => tracing::warn!(marker = %marker.display(), error = %e,
                "cannot write the store's marker: a later start cannot tell that it existed"),
        }
    }
}

fn file_name(path: &Path) -> String {
    path.file_name().map_or_else(
        || path.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    )
}

/// What `sluice check-config --stores` found of one store.
#[derive(Debug, Clone)]
pub struct Inspection {
    /// The store.
    pub store: Store,
    /// `Ok` with what was found, or what is wrong.
    pub result: Result<String, String>,
}

/// Checks every store `config` enables without starting: the checks of
/// start-up, then each SQLite file opened read-only and every page read
/// (`PRAGMA quick_check`). PostgreSQL stores are connected to.
pub async fn inspect_all(config: &Config) -> Vec<Inspection> {
    let mut out = Vec::new();
    for store in configured(config) {
        let result = inspect(&store).await;
        out.push(Inspection { store, result });
    }
    out
}

async fn inspect(store: &Store) -> Result<String, String> {
    match check(store).map_err(|r| r.detail)? {
        FileState::New => Ok("not created yet: the first start creates it".to_owned()),
        FileState::Present(len) => {
            let StoreLocation::Sqlite(path) = &store.location else {
                return Err("not a SQLite file".to_owned());
            };
            quick_check(path)
                .await
                .map(|()| format!("ok: {len} bytes, every page read"))
        }
        FileState::Server => {
            let StoreLocation::Postgres(url) = &store.location else {
                return Err("not a PostgreSQL URL".to_owned());
            };
            use sqlx::Connection;
            let connect = sqlx::PgConnection::connect(url);
            match tokio::time::timeout(std::time::Duration::from_secs(5), connect).await {
                Ok(Ok(c)) => {
                    let _ = c.close().await;
                    Ok("PostgreSQL: connects".to_owned())
                }
                Ok(Err(e)) => Err(format!("PostgreSQL: cannot connect: {e}")),
                Err(_) => Err("PostgreSQL: no answer in 5 s".to_owned()),
            }
        }
    }
}

/// Opens `path` read-only and reads every page.
async fn quick_check(path: &Path) -> Result<(), String> {
    use sqlx::Connection;
    let restore = format!(
        "restore {} from a backup (with sluice stopped)",
        file_name(path)
    );
    let options = sqlx::sqlite::SqliteConnectOptions::new()
        .filename(path)
        .read_only(true);
    let mut c = sqlx::SqliteConnection::connect_with(&options)
        .await
        .map_err(|e| format!("cannot be opened: {e}; {restore}"))?;
    let rows: Vec<(String,)> = sqlx::query_as("PRAGMA quick_check(20)")
        .fetch_all(&mut c)
        .await
        .map_err(|e| format!("damaged: {e}; {restore}"))?;
    let _ = c.close().await;
    match rows.as_slice() {
        [(ok,)] if ok == "ok" => Ok(()),
        problems => Err(format!(
            "damaged: {}; {restore}",
            problems
                .iter()
                .map(|(p,)| p.as_str())
                .collect::<Vec<_>>()
                .join("; ")
        )),
    }
}

#[cfg(test)]
mod tests;
