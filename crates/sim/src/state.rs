//! The sim's shared state: one target (model or API) per name, each with
//! its quota, faults and counters, and the request log. One lock guards
//! it all, so a decision, its counters and its log line agree.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;

use crate::config::{Faults, Latency, SimConfig};
use crate::faults::Fault;
use crate::log::{Line, Log, LogPage};
use crate::quota::{Dimension, QuotaView, Verdict};
use crate::stats::Stats;

mod control;
mod target;

pub use control::Scope;
use target::{Target, target};

/// Distinct models (and, separately, APIs) tracked at most: names beyond
/// are answered 404 so that a client inventing names cannot grow memory.
pub(crate) const MAX_TARGETS: usize = 1_024;

#[derive(Debug)]
pub(crate) struct Shared {
    pub config: SimConfig,
    pub start: Instant,
    pub shutdown: watch::Receiver<bool>,
    /// The simulated Discord API.
    pub discord: crate::discord::Discord,
    inner: Mutex<Inner>,
}

#[derive(Debug)]
struct Inner {
    models: HashMap<String, Target>,
    apis: HashMap<String, Target>,
    /// Faults set at runtime for every target, also for ones made later.
    fault_override: Option<Faults>,
    log: Log,
    rng: fastrand::Rng,
}

/// Whether a request is for a model or a SaaS API.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Model,
    Api,
}

/// One request, as the quota sees it.
#[derive(Debug)]
pub(crate) struct Ask<'a> {
    pub kind: Kind,
    pub name: &'a str,
    /// The provider a model is served as (ignored for APIs).
    pub provider: &'a str,
    pub tokens_in: u64,
    /// `max_tokens` of a generating request; `None` for one that
    /// generates nothing (embeddings, APIs).
    pub max_tokens: Option<Option<u64>>,
    /// How many output tokens the answer will hold, as the quota and the
    /// counters count them.
    pub out: Output,
    pub line: Line,
}

/// How long a generated answer is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Output {
    /// Text of the model's natural length, cut at `max_tokens`.
    Text,
    /// Exactly this many tokens (a tool call's arguments, a JSON
    /// document made from a schema: written whole).
    Exact(u64),
    /// [`Output::Text`]'s tokens and this many more around them (a JSON
    /// object wrapping the text).
    Wrapped(u64),
}

/// What the sim decided.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Decision {
    Admitted {
        fault: Fault,
        tokens_out: u64,
        latency: Latency,
        /// `max_tokens` cut the completion short.
        truncated: bool,
        /// The prompt tokens the answer claims, whatever it used
        /// ([`crate::Faults::claim_prompt_tokens`]).
        claim: Option<u64>,
    },
    Limited {
        retry_after: Duration,
        on: Dimension,
    },
    TooLarge {
        on: Dimension,
    },
    Forced {
        retry_after: Duration,
    },
    UnknownTarget,
}

impl Decision {
    pub(crate) fn status(&self) -> u16 {
        match self {
            Decision::Admitted {
                fault: Fault::Error(s),
                ..
            } => *s,
            Decision::Admitted { .. } => 200,
            Decision::Limited { .. } | Decision::TooLarge { .. } | Decision::Forced { .. } => 429,
            Decision::UnknownTarget => 404,
        }
    }
}

/// A decision, the quota after it, and the log position of the request.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Outcome {
    pub decision: Decision,
    pub view: QuotaView,
    pub seq: u64,
}

impl Shared {
    pub(crate) fn new(config: SimConfig, shutdown: watch::Receiver<bool>) -> Self {
        let rng = config
            .seed
            .map_or_else(fastrand::Rng::new, fastrand::Rng::with_seed);
        let inner = Inner {
            models: HashMap::new(),
            apis: HashMap::new(),
            fault_override: None,
            log: Log::new(config.log_capacity),
            rng,
        };
        Shared {
            config,
            start: Instant::now(),
            shutdown,
            discord: crate::discord::Discord::default(),
            inner: Mutex::new(inner),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic elsewhere must not take the sim down with it.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn uptime(&self, now: Instant) -> Duration {
        now.saturating_duration_since(self.start)
    }

    /// Decides a request and records it (counters and log).
    pub(crate) fn decide(&self, ask: Ask<'_>) -> Outcome {
        let now = Instant::now();
        let uptime = self.uptime(now);
        let mut guard = self.lock();
        let Inner {
            models,
            apis,
            fault_override,
            log,
            rng,
        } = &mut *guard;
        let at_ms = uptime.as_millis() as u64;
        let map = match ask.kind {
            Kind::Model => models,
            Kind::Api => apis,
        };
        let made = target(map, &self.config, fault_override.as_ref(), &ask, now);
        let Some(target) = made else {
            let seq = log.push(ask.line, at_ms, Some(ask.name), 404, None);
            return Outcome {
                decision: Decision::UnknownTarget,
                view: QuotaView::default(),
                seq,
            };
        };
        // A completion runs to its natural length unless max_tokens cuts it.
        let natural = u64::from(target.output_tokens);
        let (tokens_out, truncated) = match ask.max_tokens {
            Some(max) => {
                let max = max.unwrap_or(u64::from(self.config.defaults.max_tokens));
                (max.min(natural), max < natural)
            }
            None => (0, false),
        };
        let (tokens_out, truncated) = match ask.out {
            Output::Text => (tokens_out, truncated),
            Output::Exact(n) => (n, false),
            Output::Wrapped(extra) => (tokens_out.saturating_add(extra), truncated),
        };
        let decision = if target.faults.faults.force_429 {
            Decision::Forced {
                retry_after: Duration::from_millis(target.faults.faults.force_429_retry_after_ms),
            }
        } else {
            match target
                .quota
                .try_admit(ask.tokens_in.saturating_add(tokens_out), now)
            {
                Verdict::Admit => {
                    target.counters.admit(uptime.as_secs());
                    Decision::Admitted {
                        fault: target.faults.draw(rng),
                        tokens_out,
                        latency: target.latency,
                        truncated,
                        claim: target.faults.faults.claim_prompt_tokens,
                    }
                }
                Verdict::Wait { after, on } => Decision::Limited {
                    retry_after: after,
                    on,
                },
                Verdict::Never { on } => Decision::TooLarge { on },
            }
        };
        let fault = match decision {
            Decision::Admitted { fault, .. } => fault,
            _ => Fault::None,
        };
        let status = decision.status();
        target
            .counters
            .count(status, fault, (ask.tokens_in, tokens_out));
        let view = target.quota.view();
        let seq = log.push(ask.line, at_ms, Some(ask.name), status, fault.name());
        Outcome {
            decision,
            view,
            seq,
        }
    }

    /// Logs a request that was answered before it named a target (bad
    /// key, bad body, unknown path); returns its log position.
    pub(crate) fn log_only(&self, line: Line, status: u16) -> u64 {
        let at_ms = self.uptime(Instant::now()).as_millis() as u64;
        self.lock().log.push(line, at_ms, None, status, None)
    }

    /// The counters so far.
    pub(crate) fn stats(&self) -> Stats {
        let uptime_ms = self.uptime(Instant::now()).as_millis() as u64;
        let inner = self.lock();
        let snap = |m: &HashMap<String, Target>| {
            m.iter()
                .map(|(k, t)| (k.clone(), t.counters.clone()))
                .collect()
        };
        Stats {
            uptime_ms,
            models: snap(&inner.models),
            apis: snap(&inner.apis),
        }
    }

    /// Log entries after `since`.
    pub(crate) fn log_page(&self, since: u64) -> LogPage {
        self.lock().log.page(since)
    }
}
