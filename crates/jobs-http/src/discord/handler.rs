//! Running a Discord job: wait on the route's bucket and the global
//! bucket, call, learn the bucket from the answer, and turn the answer
//! into an outcome.

use std::sync::Arc;
use std::time::Duration;

use reqwest::header::HeaderValue;
use serde_json::Value;
use sluice_limit::Limit;

use crate::discord::buckets::{Buckets, Learned};
use crate::discord::{Call, Operation};
use crate::metrics;
use crate::response;
use crate::{Credentials, Secret};
use sluice_jobs::Job;
use sluice_jobs::worker::{BoxFuture, JobHandler, Outcome};
use sluice_limit::SharedLimiter;

/// How to reach Discord.
#[derive(Debug, Clone, PartialEq)]
pub struct DiscordConfig {
    /// Discord's REST API base, `https://discord.com/api/v10` by default;
    /// `{sim}/discord/api/v10` against `sluice sim`.
    pub base_url: String,
    /// The bot token, sent as `Authorization: Bot {token}`: the job's
    /// tenant's own, or a shared one; [`Credentials::none`] sends no token
    /// (the sim).
    pub token: Credentials,
    /// The limiter resource every call takes from (`api:discord`).
    pub global_resource: String,
    /// The global limit configured on that resource at start, if any: the
    /// seed's 50 requests/s, with a burst of 40 so that network jitter
    /// cannot make Discord see more than 50 in its window. `None` leaves
    /// the resource to the limiter's rules.
    pub global_limit: Option<Limit>,
    /// Buckets (and routes) remembered at most.
    pub max_buckets: usize,
    /// The longest a call waits in-process for an exhausted bucket or the
    /// global limit; beyond, the job is rescheduled instead (no attempt used).
    pub max_wait: Duration,
    /// How long one call may take.
    pub timeout: Duration,
}

impl Default for DiscordConfig {
    fn default() -> Self {
        Self {
            base_url: "https://discord.com/api/v10".to_owned(),
            token: Credentials::shared(Secret::env("DISCORD_BOT_TOKEN")),
            global_resource: sluice_limit::api_resource("discord"),
            global_limit: Some(Limit::per_second(50).burst(40)),
            max_buckets: 4_096,
            max_wait: Duration::from_secs(30),
            timeout: Duration::from_secs(30),
        }
    }
}

impl DiscordConfig {
    /// The defaults against another base URL (a sim), without a token.
    pub fn at(base_url: impl Into<String>) -> Self {
        Self {
            base_url: base_url.into().trim_end_matches('/').to_owned(),
            token: Credentials::none(),
            ..Self::default()
        }
    }
}

/// Runs the seven `discord.*` kinds.
#[derive(Debug, Clone)]
pub struct DiscordHandler {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    config: DiscordConfig,
    client: reqwest::Client,
    limiter: SharedLimiter,
    buckets: Buckets,
}

impl DiscordHandler {
    /// Calls Discord as `config` says, through `limiter` (a
    /// [`sluice_limit::Limiter`] or any [`SharedLimiter`], whose
    /// `api:discord` resource it configures with the global limit).
    ///
    /// # Errors
    /// [`sluice_limit::Error`] if the global limit is invalid or the
    /// limiter is closed.
    pub fn new(
        config: DiscordConfig,
        client: reqwest::Client,
        limiter: impl Into<SharedLimiter>,
    ) -> Result<Self, sluice_limit::Error> {
        let limiter = limiter.into();
        if let Some(limit) = config.global_limit {
            limiter.set_limit(&config.global_resource, limit)?;
        }
        Ok(Self {
            inner: Arc::new(Inner {
                buckets: Buckets::new(config.max_buckets),
                config,
                client,
                limiter,
            }),
        })
    }
}

impl Inner {
    async fn run(&self, job: &Job) -> Outcome {
        let op = match Operation::parse(&job.kind, &job.payload) {
            Some(Ok(op)) => op,
            Some(Err(e)) => return Outcome::fatal(format!("invalid payload: {e}")),
            None => return Outcome::fatal(format!("{:?} is not a Discord kind", job.kind)),
        };
        // Before any bucket is waited on or spent: a job that may not call
        // takes nothing from other callers.
        let token = match self.token(job) {
            Ok(t) => t,
            Err(outcome) => return outcome,
        };
        let call = op.call();
        let endpoint = template(&call.route);
        let lane = self.buckets.lane(&call.route);
        // One call per bucket at a time: the last answer's count is exact.
        let mut bucket = lane.lock().await;
        if let Some(wait) = bucket.wait(tokio::time::Instant::now()) {
            if wait > self.config.max_wait {
                return Outcome::Throttled {
                    error: format!("bucket of {endpoint} exhausted"),
                    retry_after: Some(wait),
                };
            }
            tokio::time::sleep(wait).await;
        }
        let global = &self.config.global_resource;
        let grant = match response::take(&self.limiter, global, self.config.max_wait).await {
            Ok(g) => g,
            Err(outcome) => return outcome,
        };
        let answer = match self.send(job, &call, token).await {
            Ok(a) => a,
            Err(outcome) => return outcome,
        };
        drop(grant);
        let status = answer.status().as_u16();
        let headers = answer.headers().clone();
        let learned = Learned::from_headers(&headers);
        bucket.learn(&learned, tokio::time::Instant::now());
        if let Some(hash) = &learned.bucket {
            self.buckets
                .learn_bucket(&call.route, &call.major, hash, &bucket);
        }
        drop(bucket);
        let (bytes, cut) = response::body(answer).await;
        self.classify(&call, &endpoint, status, &headers, &bytes, cut)
            .await
    }

    /// `Bot {token}` for the job's tenant, if a token is sent.
    ///
    /// # Errors
    /// A fatal outcome when the tenant may use no token (its own or the
    /// shared one), or the token cannot be read or sent.
    fn token(&self, job: &Job) -> Result<Option<HeaderValue>, Outcome> {
        let secret = match self.config.token.for_tenant(&job.tenant) {
            Ok(Some(secret)) => secret,
            Ok(None) => return Ok(None),
            Err(e) => return Err(Outcome::fatal(format!("Discord: no_credential: {e}"))),
        };
        let token = secret
            .read()
            .map_err(|e| Outcome::fatal(format!("the Discord bot token: {e}")))?;
        let mut value = HeaderValue::from_str(&format!("Bot {token}"))
            .map_err(|_| Outcome::fatal("the Discord bot token is not a valid header value"))?;
        value.set_sensitive(true);
        Ok(Some(value))
    }

    async fn send(
        &self,
        job: &Job,
        call: &Call,
        token: Option<HeaderValue>,
    ) -> Result<reqwest::Response, Outcome> {
        let method = reqwest::Method::from_bytes(call.method.as_bytes())
            .map_err(|_| Outcome::fatal(format!("bad method {}", call.method)))?;
        let request = self
            .client
            .request(method, format!("{}{}", self.config.base_url, call.path))
            .timeout(self.config.timeout)
            .header("x-sluice-job-id", job.id.to_string());
        let mut request = crate::context::attach(job, request);
        if let Some(value) = token {
            request = request.header("authorization", value);
        }
        if let Some(reason) = &call.reason {
            // Discord wants the reason URL-encoded; keep it a valid header.
            let encoded: String = reason
                .bytes()
                .map(|b| {
                    if b.is_ascii_alphanumeric() || b"-_.~ ".contains(&b) {
                        (b as char).to_string()
                    } else {
                        format!("%{b:02X}")
                    }
                })
                .collect();
            if let Ok(v) = HeaderValue::from_str(&encoded) {
                request = request.header("x-audit-log-reason", v);
            }
        }
        if let Some(body) = &call.body {
            request = request.json(body);
        }
        request
            .send()
            .await
            .map_err(|e| Outcome::retry(format!("calling Discord {}: {e}", call.method)))
    }

    async fn classify(
        &self,
        call: &Call,
        endpoint: &str,
        status: u16,
        headers: &reqwest::header::HeaderMap,
        bytes: &[u8],
        cut: bool,
    ) -> Outcome {
        match status {
            200..=299 => Outcome::Completed(response::result(status, headers, bytes, cut)),
            // Deleting what is already gone (a run repeated after a crash)
            // has the effect the job wanted.
            404 if call.method == "DELETE" => {
                let mut result = response::result(status, headers, bytes, cut);
                result["already_gone"] = Value::Bool(true);
                Outcome::Completed(result)
            }
            429 => {
                let body = response::body_value(bytes, cut);
                let retry_after = body
                    .get("retry_after")
                    .and_then(Value::as_f64)
                    .filter(|s| s.is_finite() && *s >= 0.0 && *s < 86_400.0)
                    .map(Duration::from_secs_f64)
                    .or_else(|| response::retry_after(headers));
                let global = headers
                    .get("x-ratelimit-global")
                    .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"true"))
                    || body.get("global").and_then(Value::as_bool) == Some(true);
                metrics::upstream_429(endpoint, retry_after);
                if global {
                    metrics::global_429();
                    tracing::error!(
                        critical = true,
                        endpoint,
                        ?retry_after,
                        "jobs: Discord GLOBAL rate limit hit; repeated global 429s get the bot banned"
                    );
                    if let Err(e) = self
                        .limiter
                        .report_throttled(&self.config.global_resource, retry_after)
                        .await
                    {
                        tracing::warn!(error = %e, "jobs: cannot throttle the Discord global bucket");
                    }
                }
                Outcome::Throttled {
                    error: response::error_text("Discord", status, bytes),
                    retry_after,
                }
            }
            408 | 500..=599 => Outcome::Retry {
                error: response::error_text("Discord", status, bytes),
                retry_after: response::retry_after(headers),
            },
            _ => Outcome::Fatal(response::error_text("Discord", status, bytes)),
        }
    }
}

/// The route with every id replaced by `:id`: a metric label of bounded
/// cardinality.
fn template(route: &str) -> String {
    route
        .split('/')
        .map(|seg| {
            if !seg.is_empty() && seg.bytes().all(|b| b.is_ascii_digit()) {
                ":id"
            } else {
                seg
            }
        })
        .collect::<Vec<_>>()
        .join("/")
}

impl JobHandler for DiscordHandler {
    fn run<'a>(&'a self, job: &'a Job) -> BoxFuture<'a, Outcome> {
        Box::pin(self.inner.run(job))
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn templates_hide_ids() {
        assert_eq!(
            super::template("PUT /guilds/123/members/:id/roles/:id"),
            "PUT /guilds/:id/members/:id/roles/:id"
        );
    }
}
