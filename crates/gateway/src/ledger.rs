//! The usage ledger in the gateway: the store `[ledger]` names, opened at
//! start-up; the background writer every call hands its record to; the
//! token and cost counters; retention.
//!
//! A model call's record is started when its body is read ([`Draft`], in
//! the request's notes), learns its provider, model and usage on the way
//! up, and is handed to the writer once the answer is known: by observe
//! for a whole answer or a refusal, by the stream's relay when a stream
//! ends (however it ends: a client that goes away included). Handing it
//! over is one push on a bounded queue; the request never waits for the
//! database, and a full queue spills to `{data_dir}/ledger-spill.jsonl`.
//! The writer runs on a thread of its own ([`LEDGER_THREAD`]).

mod jobs;

use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use sluice_ledger::{Bodies, Granularity, Ledger, LedgerStore, Record};
use sluice_spool::{SpoolConfig, SpoolTask};
use sluice_usage::{Details, PriceTable, Usage};
use tokio::time::Instant;

use crate::config::{BodiesKept, Config, RequestLogConfig, StoreLocation};
use crate::error::{Cause, StartError, chain};
use crate::metrics::LabelValues;
use crate::pools::DeploymentState;
use crate::request::Context;

pub(crate) use jobs::recorded;

/// A record handed to the writer, as the request's `sluice.ledger` span
/// tells it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Handed {
    pub start: Instant,
    pub end: Instant,
    pub cost_nanos: u64,
    pub estimated: bool,
    /// Records waiting for the writer just after this one joined them.
    pub queued: usize,
}

/// The name of the ledger writer's thread.
pub const LEDGER_THREAD: &str = "sluice-ledger";

/// How often old records and rollups (and audit entries) are deleted.
pub(crate) const RETENTION_EVERY: Duration = Duration::from_secs(3_600);

const DAY_MS: i64 = 86_400_000;

/// The open ledger and its writer.
#[derive(Debug)]
pub(crate) struct UsageLedger {
    pub(crate) store: LedgerStore,
    writer: Ledger,
    task: tokio::sync::Mutex<Option<SpoolTask>>,
    /// The tenants and models the Prometheus counters name.
    tenants: LabelValues,
    models: LabelValues,
}

impl UsageLedger {
    /// Opens the store `config.ledger` names (creating the data directory
    /// for SQLite), starts the writer (writing back a spill file a crash
    /// left) and the retention task.
    ///
    /// # Errors
    /// [`StartError::Ledger`] naming the file or URL (password hidden).
    pub(crate) async fn open(config: &Config) -> Result<Arc<UsageLedger>, StartError> {
        let l = &config.ledger;
        let location = l.location(&config.data_dir, &config.jobs);
        let fail = |source: Cause| StartError::Ledger {
            store: location.display(),
            source,
        };
        location.create_dir().map_err(|e| fail(e.into()))?;
        let store = match &location {
            StoreLocation::Sqlite(path) => LedgerStore::open(path).await,
            StoreLocation::Postgres(url) => LedgerStore::connect(url).await,
        }
        .map_err(|e| fail(e.into()))?;
        // Its own thread: a batch's statements are built and awaited
        // there, never on a worker thread that requests are waiting for.
        let spool = SpoolConfig::new("ledger")
            .capacity(l.queue)
            .batch(l.batch)
            .spill(Some(config.data_dir.join("ledger-spill.jsonl")))
            .thread(LEDGER_THREAD);
        let (writer, task) = Ledger::spawn(store.clone(), spool);
        let ledger = Arc::new(UsageLedger {
            store,
            writer,
            task: tokio::sync::Mutex::new(Some(task)),
            tenants: LabelValues::new(l.metric_labels),
            models: LabelValues::new(l.metric_labels),
        });
        let bodies_days = config.request_log.retention_days;
        if l.retention_days > 0 || l.rollup_retention_days > 0 || bodies_days > 0 {
            tokio::spawn(retention(
                Arc::downgrade(&ledger),
                l.retention_days,
                l.rollup_retention_days,
                bodies_days,
            ));
        }
        Ok(ledger)
    }

    /// Hands `record` to the writer (never waits) and counts its tokens
    /// and cost.
    pub(crate) fn submit(&self, record: Record) {
        let tenant = self.tenants.admit(&record.tenant);
        let model = self.models.admit(&record.model);
        crate::metrics::usage_spent(&tenant, &model, &record);
        self.writer.push(record);
    }

    /// [`UsageLedger::submit`], timed for the request's `sluice.ledger`
    /// span (only requests whose spans are exported pay for the clocks).
    pub(crate) fn submit_timed(&self, record: Record) -> Handed {
        let start = Instant::now();
        let (cost_nanos, estimated) = (record.cost_nanos, record.estimated);
        self.submit(record);
        Handed {
            start,
            end: Instant::now(),
            cost_nanos,
            estimated,
            queued: self.writer.queued(),
        }
    }

    /// The writer's counters, for `/metrics`.
    pub(crate) fn writer_stats(&self) -> (u64, u64, usize) {
        (
            self.writer.spilled(),
            self.writer.lost(),
            self.writer.queued(),
        )
    }

    /// Writes out the queue and the spill file, stops the writer, closes
    /// the store. Records handed over later spill, to be written at the
    /// next start.
    pub(crate) async fn shutdown(&self) {
        if let Some(task) = self.task.lock().await.take() {
            task.shutdown().await;
        }
        self.store.close().await;
    }
}

/// Deletes what is past its retention, once an hour while the ledger
/// lives: records, rollups, and bodies (kept no longer than their
/// records).
async fn retention(
    ledger: std::sync::Weak<UsageLedger>,
    records_days: u64,
    rollup_days: u64,
    bodies_days: u64,
) {
    let mut tick = tokio::time::interval(RETENTION_EVERY);
    loop {
        tick.tick().await;
        let Some(ledger) = ledger.upgrade() else {
            return;
        };
        let now = sluice_ledger::now_ms();
        let before = |d: u64| kept_since(now, d);
        let records = before(records_days);
        let rollups = before(rollup_days);
        // Minute rollups are for recent reading: kept no longer than the
        // records.
        let minutes = if records_days == 0 {
            rollups
        } else {
            records.max(rollups)
        };
        let purge = [
            (Granularity::Minute, minutes),
            (Granularity::Hour, rollups),
            (Granularity::Day, rollups),
        ];
        match ledger.store.purge(records, &purge).await {
            Ok(n) if n > 0 => tracing::info!(rows = n, "ledger retention: deleted"),
            Ok(_) => {}
            Err(e) => tracing::warn!(error = %chain(&e), "ledger retention failed"),
        }
        if bodies_days > 0 {
            match ledger.store.purge_bodies(before(bodies_days)).await {
                Ok(n) if n > 0 => tracing::info!(rows = n, "request log retention: bodies deleted"),
                Ok(_) => {}
                Err(e) => tracing::warn!(error = %chain(&e), "request log retention failed"),
            }
        }
    }
}

/// The oldest time (ms since the Unix epoch) kept `days` days back from
/// `now_ms`; 0 keeps for ever: nothing is before the epoch.
pub(crate) fn kept_since(now_ms: i64, days: u64) -> i64 {
    if days == 0 {
        return 0;
    }
    let span = i64::try_from(days)
        .unwrap_or(i64::MAX / DAY_MS)
        .min(i64::MAX / DAY_MS)
        * DAY_MS;
    now_ms.saturating_sub(span).max(0)
}

/// A call's record while the call runs.
#[derive(Debug)]
pub(crate) struct Draft {
    pub record: Record,
    started: Instant,
    /// Its bodies, while `[request_log] bodies` may keep them (boxed:
    /// most calls keep none).
    bodies: Option<Box<Capture>>,
}

/// A call's bodies as seen so far, kept raw until the record is finished
/// (then redacted and cut, if its outcome is one whose bodies are kept).
#[derive(Debug)]
struct Capture {
    keep: BodiesKept,
    cap: usize,
    request: Bytes,
    /// A whole answer's body.
    response: Option<Bytes>,
    /// A stream's first bytes, up to the cap: raw SSE as the client
    /// received it.
    streamed: BytesMut,
    /// A stream's size so far.
    streamed_bytes: u64,
}

/// Longest body `user` kept (longer ones are not a user id).
const MAX_USER: usize = 256;

impl Draft {
    /// A model call of `ctx` to `model` on `endpoint`; `body_user` is the
    /// body's `user`, used when `x-sluice-user` is absent.
    pub(crate) fn model(
        ctx: &Context,
        endpoint: &'static str,
        model: &str,
        body_user: Option<&str>,
    ) -> Draft {
        let mut d = Draft::new(ctx, "model", "", model, endpoint);
        if d.record.user.is_none() {
            d.record.user = body_user
                .filter(|u| !u.is_empty() && u.len() <= MAX_USER)
                .map(str::to_owned);
        }
        d
    }

    /// A proxied call of `ctx` to the API `api` on `route`.
    pub(crate) fn api(ctx: &Context, api: &str, route: &str) -> Draft {
        Draft::new(ctx, "api", api, api, route)
    }

    /// An MCP tool call of `ctx` to `tool` of `server`, limited as
    /// `api` (the server's name for a tool of no API): the record's
    /// provider is the API, its model `{server}.{tool}`.
    pub(crate) fn tool(ctx: &Context, api: &str, server: &str, tool: &str) -> Draft {
        Draft::new(ctx, "tool", api, &format!("{server}.{tool}"), "/mcp")
    }

    /// A read of `ctx` of a server's own content: `kind` `resource` (the
    /// record's model is the URI, at most [`MAX_TARGET`] bytes) or
    /// `prompt` (its model `{server}.{prompt}`); its provider is the server.
    pub(crate) fn read(ctx: &Context, kind: &str, server: &str, target: &str) -> Draft {
        let model = if kind == "prompt" {
            format!("{server}.{target}")
        } else {
            let mut end = target.len().min(MAX_TARGET);
            while !target.is_char_boundary(end) {
                end -= 1;
            }
            target[..end].to_owned()
        };
        Draft::new(ctx, kind, server, &model, "/mcp")
    }

    fn new(ctx: &Context, kind: &str, provider: &str, model: &str, endpoint: &str) -> Draft {
        let mut record = Record::new(
            ctx.request_id.clone(),
            ctx.workspace.clone(),
            kind,
            provider,
            model,
            endpoint,
        );
        record.key_id = ctx.caller.as_ref().map(|c| c.key_id.to_string());
        record.user.clone_from(&ctx.user);
        record.feature.clone_from(&ctx.feature);
        Draft {
            record,
            started: ctx.started,
            bodies: None,
        }
    }

    /// Keeps the call's `request` body, and its response when it comes,
    /// for the request log, when `log` asks for bodies.
    pub(crate) fn keep_bodies(&mut self, log: &RequestLogConfig, request: &Bytes) {
        if log.bodies == BodiesKept::Off {
            return;
        }
        self.bodies = Some(Box::new(Capture {
            keep: log.bodies,
            cap: log.max_body_bytes,
            request: request.clone(),
            response: None,
            streamed: BytesMut::new(),
            streamed_bytes: 0,
        }));
    }

    /// Whether the call's bodies may be kept (`[request_log] bodies` is
    /// not `off`).
    pub(crate) fn keeps_bodies(&self) -> bool {
        self.bodies.is_some()
    }

    /// The call was answered with this whole `body`.
    pub(crate) fn answered(&mut self, body: &Bytes) {
        if let Some(c) = self.bodies.as_mut() {
            c.response = Some(body.clone());
        }
    }

    /// A stream sent `chunk` to the client: kept while within the cap.
    pub(crate) fn streamed(&mut self, chunk: &[u8]) {
        if let Some(c) = self.bodies.as_mut() {
            let room = c.cap.saturating_sub(c.streamed.len());
            c.streamed
                .extend_from_slice(&chunk[..room.min(chunk.len())]);
            c.streamed_bytes = c.streamed_bytes.saturating_add(chunk.len() as u64);
        }
    }

    /// The call goes to `model` of `provider` (a fallback's, after the
    /// model asked for), through `deployment` when `model` is a pool's.
    pub(crate) fn route(
        &mut self,
        provider: &str,
        model: &str,
        deployment: Option<&DeploymentState>,
    ) {
        provider.clone_into(&mut self.record.provider);
        model.clone_into(&mut self.record.model);
        self.record.deployment =
            deployment.map(|d| format!("{}/{}", d.provider_name, d.upstream_model));
    }

    /// The call used `usage`: the provider's figures when it reported
    /// them (with `details`), else `estimate` (prompt, completion), marked
    /// estimated. Priced from `prices`, cached input at its own price.
    pub(crate) fn used(
        &mut self,
        prices: &PriceTable,
        usage: Option<Usage>,
        estimate: Option<(u64, u64)>,
        details: Details,
    ) {
        let r = &mut self.record;
        r.cached_tokens = details.cached_tokens;
        r.reasoning_tokens = details.reasoning_tokens;
        let (usage, estimated) = match (usage, estimate) {
            (Some(u), _) => (u, false),
            (None, Some((p, c))) => (
                Usage {
                    prompt_tokens: p,
                    completion_tokens: c,
                    total_tokens: p + c,
                },
                true,
            ),
            (None, None) => (Usage::default(), false),
        };
        r.prompt_tokens = usage.prompt_tokens;
        r.completion_tokens = usage.completion_tokens;
        r.estimated = estimated;
        let cost = prices.cost(&r.model, &usage, r.cached_tokens);
        // Tokens spent on a model without a price: the cost is unknown,
        // and said so, never shown as free.
        r.unpriced = cost.is_none() && usage.prompt_tokens + usage.completion_tokens > 0;
        r.cost_nanos = cost.map_or(0, |c| c.nanodollars());
    }

    /// Answered from the response cache: nothing spent upstream.
    pub(crate) fn cache_hit(&mut self) {
        self.record.cache_hit = true;
    }

    /// The record of the call, answered `status` now, after waiting
    /// `queued` and making `attempts` upstream attempts.
    pub(crate) fn finish(mut self, status: u16, queued: Duration, attempts: u32) -> Record {
        let r = &mut self.record;
        r.at_ms = sluice_ledger::now_ms();
        r.status = status;
        r.latency_ms = millis(self.started.elapsed());
        r.queue_ms = millis(queued);
        r.retries = attempts.saturating_sub(1);
        if let Some(c) = self.bodies.take()
            && (c.keep == BodiesKept::All || r.is_error())
        {
            r.bodies = Some(match &c.response {
                Some(whole) => Bodies::capture(&c.request, whole, whole.len() as u64, c.cap),
                None => Bodies::capture(&c.request, &c.streamed, c.streamed_bytes, c.cap),
            });
        }
        self.record
    }
}

/// The longest resource URI a record keeps (a client may send long ones).
const MAX_TARGET: usize = 512;

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}
