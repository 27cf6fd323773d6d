//! Running an `http` job: the call under the API's limiter resource, and
//! the answer turned into an outcome.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use reqwest::header::{HeaderName, HeaderValue};
use sluice_limit::headers::RateLimitHeaders;

use crate::http::{AuthHeader, HttpApis, HttpPayload};
use crate::metrics;
use crate::response;
use sluice_jobs::Job;
use sluice_jobs::worker::{BoxFuture, JobHandler, Outcome};
use sluice_limit::SharedLimiter;

/// How long a call waits for its API's limiter before it is rescheduled.
const LIMIT_WAIT: Duration = Duration::from_secs(30);
/// How long one call may take.
const CALL_TIMEOUT: Duration = Duration::from_secs(60);

/// Runs `http` jobs.
#[derive(Debug, Clone)]
pub struct HttpHandler {
    apis: Arc<HttpApis>,
    client: reqwest::Client,
    limiter: SharedLimiter,
}

impl HttpHandler {
    /// Calls `apis` with `client`, each call through `limiter`'s
    /// `api:{name}` resource (the one the gateway's proxy uses): a
    /// [`sluice_limit::Limiter`] or any [`SharedLimiter`].
    pub fn new(apis: HttpApis, client: reqwest::Client, limiter: impl Into<SharedLimiter>) -> Self {
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
        // The credential is chosen before the API's bucket is spent: a job
        // that may not call takes nothing from other callers.
        let auth = match api
            .auth
            .as_ref()
            .map(|a| auth_header(&p.api, a, &job.tenant))
        {
            None => None,
            Some(Ok(header)) => header,
            Some(Err(outcome)) => return outcome,
        };
        let resource = sluice_limit::api_resource(&p.api);
        let grant = match response::take(&self.limiter, &resource, LIMIT_WAIT).await {
            Ok(g) => g,
            Err(outcome) => return outcome,
        };
        let method =
            reqwest::Method::from_bytes(p.method.as_bytes()).unwrap_or(reqwest::Method::POST);
        let request = self
            .client
            .request(method, format!("{}{}", api.base_url, p.path))
            .timeout(CALL_TIMEOUT)
            .header("x-sluice-job-id", job.id.to_string());
        let mut request = crate::context::attach(job, request);
        for (name, value) in &p.headers {
            // Refused when the job was enqueued; skipped here too for a
            // job stored before that rule.
            if name.eq_ignore_ascii_case(super::payload::JOB_ID_HEADER) {
                continue;
            }
            if let (Ok(n), Ok(v)) = (
                HeaderName::from_bytes(name.as_bytes()),
                HeaderValue::from_str(value),
            ) {
                request = request.header(n, v);
            }
        }
        if let Some((name, value)) = auth {
            request = request.header(name, value);
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
            .observe(Some(&grant), Some(&resource), None, status, &parsed)
            .await
        {
            tracing::debug!(%resource, error = %e, "jobs: cannot apply rate-limit headers");
        }
        drop(grant);
        let (bytes, cut) = response::body(answer).await;
        classify(&p.api, status, &headers, &bytes, cut)
    }
}

/// The header carrying `tenant`'s credential for `api`, if one is sent.
///
/// # Errors
/// A fatal outcome when the tenant may use no credential (its own or a
/// shared one), or the credential cannot be read or sent.
fn auth_header(
    api: &str,
    auth: &AuthHeader,
    tenant: &str,
) -> Result<Option<(HeaderName, HeaderValue)>, Outcome> {
    let fatal = |why: String| Outcome::fatal(format!("api {api:?}: {why}"));
    let secret = match auth.credentials.for_tenant(tenant) {
        Ok(Some(secret)) => secret,
        Ok(None) => return Ok(None),
        Err(e) => return Err(fatal(format!("no_credential: {e}"))),
    };
    let secret = secret
        .read()
        .map_err(|e| fatal(format!("{e} (for its {} header)", auth.header)))?;
    let name = HeaderName::from_bytes(auth.header.as_bytes())
        .map_err(|_| fatal(format!("{:?} is not a header name", auth.header)))?;
    let mut value = HeaderValue::from_str(&format!("{}{secret}", auth.prefix)).map_err(|_| {
        fatal(format!(
            "the {} credential is not a valid header value",
            auth.header
        ))
    })?;
    value.set_sensitive(true);
    Ok(Some((name, value)))
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
