//! Running an `http` job: the call under the API's limiter resource, and
//! the answer turned into an outcome.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use reqwest::header::{HeaderName, HeaderValue};
use sluice_limit::headers::RateLimitHeaders;

use crate::SharedLimits;
use crate::job::Job;
use crate::kinds::http::{HttpApis, HttpPayload};
use crate::kinds::response;
use crate::metrics;
use crate::worker::{BoxFuture, JobHandler, Outcome};

/// How long a call waits for its API's limiter before it is rescheduled.
const LIMIT_WAIT: Duration = Duration::from_secs(30);
/// How long one call may take.
const CALL_TIMEOUT: Duration = Duration::from_secs(60);

/// Runs `http` jobs.
#[derive(Debug, Clone)]
pub struct HttpHandler {
    apis: Arc<HttpApis>,
    client: reqwest::Client,
    limiter: SharedLimits,
}

impl HttpHandler {
    /// Calls `apis` with `client`, each call through `limiter`'s
    /// `api:{name}` resource (the one the gateway's proxy uses): a
    /// [`sluice_limit::Limiter`] or any [`SharedLimits`].
    pub fn new(apis: HttpApis, client: reqwest::Client, limiter: impl Into<SharedLimits>) -> Self {
        Self {
            apis: Arc::new(apis),
            client,
            limiter: limiter.into(),
        }
    }

    async fn call(&self, job: &Job) -> Outcome {
        let p = match HttpPayload::parse(&job.payload) {
            Ok(p) => p,
            Err(e) => return Outcome::fatal(format!("invalid payload: {e}")),
        };
        let Some(api) = self.apis.get(&p.api) else {
            let known: Vec<&str> = self.apis.names().collect();
            return Outcome::fatal(format!(
                "payload.api: unknown api {:?}; configured: {}",
                p.api,
                known.join(", ")
            ));
        };
        let resource = sluice_limit::api_resource(&p.api);
        let grant = match response::take(&self.limiter, &resource, LIMIT_WAIT).await {
            Ok(g) => g,
            Err(outcome) => return outcome,
        };
        let method =
            reqwest::Method::from_bytes(p.method.as_bytes()).unwrap_or(reqwest::Method::POST);
        let mut request = self
            .client
            .request(method, format!("{}{}", api.base_url, p.path))
            .timeout(CALL_TIMEOUT)
            .header("x-sluice-job-id", job.id.to_string());
        for (name, value) in &p.headers {
            if let (Ok(n), Ok(v)) = (
                HeaderName::from_bytes(name.as_bytes()),
                HeaderValue::from_str(value),
            ) {
                request = request.header(n, v);
            }
        }
        if let Some(auth) = &api.auth {
            let Ok(secret) = std::env::var(&auth.env) else {
                return Outcome::fatal(format!(
                    "api {:?}: environment variable {} (for its {} header) is not set",
                    p.api, auth.env, auth.header
                ));
            };
            match HeaderValue::from_str(&format!("{}{secret}", auth.prefix)) {
                Ok(mut v) => {
                    v.set_sensitive(true);
                    request = request.header(auth.header.as_str(), v);
                }
                Err(_) => {
                    return Outcome::fatal(format!(
                        "api {:?}: {} does not hold a valid header value",
                        p.api, auth.env
                    ));
                }
            }
        }
        if !p.body.is_null() {
            request = request.json(&p.body);
        }
        let answer = match request.send().await {
            Ok(r) => r,
            Err(e) => return Outcome::retry(format!("calling {}: {e}", p.api)),
        };
        let status = answer.status().as_u16();
        let headers = answer.headers().clone();
        let parsed = RateLimitHeaders::parse(response::pairs(&headers), SystemTime::now());
        // Keep the shared bucket in step with what the API says, and on a
        // 429 throttle it for interactive traffic as well.
        if let Err(e) = self
            .limiter
            .observe_answer(&grant, &resource, status, &parsed)
            .await
        {
            tracing::debug!(%resource, error = %e, "jobs: cannot apply rate-limit headers");
        }
        drop(grant);
        let (bytes, cut) = response::body(answer).await;
        classify(&p.api, status, &headers, &bytes, cut)
    }
}

/// The outcome of an answer: 2xx done, 429 throttled, 408/5xx retry,
/// other 4xx fatal.
fn classify(
    api: &str,
    status: u16,
    headers: &reqwest::header::HeaderMap,
    bytes: &[u8],
    cut: bool,
) -> Outcome {
    match status {
        200..=299 => Outcome::Completed(response::result(status, headers, bytes, cut)),
        429 => {
            let retry_after = response::retry_after(headers);
            metrics::upstream_429(api, retry_after);
            Outcome::Throttled {
                error: response::error_text(api, status, bytes),
                retry_after,
            }
        }
        408 | 500..=599 => Outcome::Retry {
            error: response::error_text(api, status, bytes),
            retry_after: response::retry_after(headers),
        },
        _ => Outcome::Fatal(response::error_text(api, status, bytes)),
    }
}

impl JobHandler for HttpHandler {
    fn run<'a>(&'a self, job: &'a Job) -> BoxFuture<'a, Outcome> {
        Box::pin(self.call(job))
    }
}
