//! Completion webhooks: the `callback` kind posts a job's end (completed,
//! dead or cancelled, with its result or error) to a URL of an allow-list,
//! signed with HMAC-SHA256.
//!
//! A job with a callback is stored as a flow (see `sluice_jobs::flow`):
//! the callback is the parent, the job its one child, failures ignored. So
//! the callback is a job of its own, stored with the job in one
//! transaction, that runs once the job ended however it ended, and is
//! retried with the queue's backoff until the receiver answers 2xx.
//!
//! The request: `POST {url}` with a JSON body `{"event", "job": {…}}` and
//!
//! | header | value |
//! |---|---|
//! | `x-sluice-signature` | `t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>.<body>")>` |
//! | `x-sluice-delivery` | the callback job's id: the same on every retry, for the receiver to drop repeats |
//! | `x-sluice-event` | `completed`, `dead` or `cancelled` |
//!
//! A receiver recomputes the HMAC over the timestamp, a dot and the body
//! as received, compares in constant time, and refuses old timestamps.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use sluice_jobs::worker::{BoxFuture, JobHandler, Outcome, children};
use sluice_jobs::{Job, JobState};

use crate::payload::PayloadError;

/// The kind of a callback job.
pub const CALLBACK_KIND: &str = "callback";
/// The header that carries the signature.
pub const SIGNATURE_HEADER: &str = "x-sluice-signature";
/// The header that names the delivery (the callback job's id).
pub const DELIVERY_HEADER: &str = "x-sluice-delivery";
/// The header that names the event.
pub const EVENT_HEADER: &str = "x-sluice-event";
/// The longest callback URL.
pub const MAX_URL_LEN: usize = 2_048;

/// Where callbacks may go and how they are signed.
#[derive(Clone)]
pub struct CallbackConfig {
    allow: Vec<url::Url>,
    secret: Vec<u8>,
    timeout: Duration,
}

impl std::fmt::Debug for CallbackConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CallbackConfig")
            .field(
                "allow",
                &self.allow.iter().map(url::Url::as_str).collect::<Vec<_>>(),
            )
            .field("secret", &"…")
            .field("timeout", &self.timeout)
            .finish()
    }
}

impl CallbackConfig {
    /// Callbacks to URLs under one of `allow` (each an `http(s)` URL: the
    /// same scheme, host and port, and a path under its path), signed with
    /// `secret`, each request given `timeout`.
    ///
    /// # Errors
    /// The allowed URL that is not an absolute `http(s)` URL, or an empty
    /// secret.
    pub fn new(allow: &[String], secret: Vec<u8>, timeout: Duration) -> Result<Self, String> {
        if secret.is_empty() {
            return Err("the callback secret is empty".into());
        }
        let allow = allow
            .iter()
            .map(|a| match url::Url::parse(a) {
                Ok(u) if matches!(u.scheme(), "http" | "https") && u.host().is_some() => Ok(u),
                _ => Err(format!("{a:?} is not an http(s) URL")),
            })
            .collect::<Result<_, _>>()?;
        Ok(Self {
            allow,
            secret,
            timeout,
        })
    }

    /// Whether `url` may be called back: `Ok` with it parsed, else why not.
    ///
    /// # Errors
    /// A [`PayloadError`] for field `callback_url`.
    pub fn check(&self, url: &str) -> Result<url::Url, PayloadError> {
        let bad = |m: String| PayloadError::new("callback_url", m);
        if url.len() > MAX_URL_LEN {
            return Err(bad(format!("longer than {MAX_URL_LEN} bytes")));
        }
        let parsed = url::Url::parse(url).map_err(|e| bad(format!("not a URL: {e}")))?;
        if parsed.username() != "" || parsed.password().is_some() {
            return Err(bad("must not carry credentials".into()));
        }
        let allowed = self.allow.iter().any(|a| {
            a.scheme() == parsed.scheme()
                && a.host() == parsed.host()
                && a.port_or_known_default() == parsed.port_or_known_default()
                && under(a.path(), parsed.path())
        });
        if allowed {
            Ok(parsed)
        } else {
            Err(bad(format!(
                "{url:?} is not under an allowed prefix ([jobs.callbacks] allow)"
            )))
        }
    }

    /// `t=<seconds>,v1=<hex HMAC-SHA256(secret, "<t>.<body>")>`.
    pub fn signature(&self, at_seconds: u64, body: &[u8]) -> String {
        let mut signed = format!("{at_seconds}.").into_bytes();
        signed.extend_from_slice(body);
        format!(
            "t={at_seconds},v1={}",
            hex(&hmac_sha256(&self.secret, &signed))
        )
    }
}

/// Whether `path` is `prefix` or below it (`/hooks` allows `/hooks` and
/// `/hooks/…`, not `/hooksmith`).
fn under(prefix: &str, path: &str) -> bool {
    path == prefix
        || path
            .strip_prefix(prefix)
            .is_some_and(|rest| prefix.ends_with('/') || rest.starts_with('/'))
}

/// HMAC-SHA256 (RFC 2104).
pub fn hmac_sha256(key: &[u8], message: &[u8]) -> [u8; 32] {
    const BLOCK: usize = 64;
    let mut k = [0u8; BLOCK];
    if key.len() > BLOCK {
        k[..32].copy_from_slice(&Sha256::digest(key));
    } else {
        k[..key.len()].copy_from_slice(key);
    }
    let pad = |byte: u8| k.map(|b| b ^ byte);
    let inner = Sha256::new()
        .chain_update(pad(0x36))
        .chain_update(message)
        .finalize();
    Sha256::new()
        .chain_update(pad(0x5c))
        .chain_update(inner)
        .finalize()
        .into()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The payload of a callback job: `{"url"}`.
///
/// # Errors
/// A [`PayloadError`] naming the field.
pub fn validate_payload(payload: &Value) -> Result<(), PayloadError> {
    let bad = |field: &str, m: &str| PayloadError::new(format!("payload.{field}"), m);
    let Value::Object(o) = payload else {
        return Err(bad("url", "a callback's payload is {\"url\"}"));
    };
    match o.get("url") {
        Some(Value::String(u)) if u.len() <= MAX_URL_LEN => {}
        _ => return Err(bad("url", "must be a URL of at most 2048 bytes")),
    }
    if let Some(k) = o.keys().find(|k| *k != "url") {
        return Err(bad(k, "unknown field: url"));
    }
    Ok(())
}

/// What a callback says of the job it follows.
fn body(job: &Job) -> Value {
    let event = match job.state {
        JobState::Completed => "completed",
        JobState::Cancelled => "cancelled",
        _ => "dead",
    };
    json!({
        "event": event,
        "job": {
            "id": job.id,
            "queue": job.queue,
            "kind": job.kind,
            "tenant": job.tenant,
            "state": job.state,
            "attempts": job.attempts,
            "result": job.result,
            "last_error": job.last_error,
            "finished_at": job.finished_at,
        },
    })
}

/// The `callback` kind's handler.
#[derive(Debug, Clone)]
pub struct CallbackHandler {
    config: CallbackConfig,
    client: reqwest::Client,
}

impl CallbackHandler {
    /// Posts with `client`, as `config` allows.
    pub fn new(config: CallbackConfig, client: reqwest::Client) -> Self {
        Self { config, client }
    }

    async fn deliver(&self, job: &Job) -> Outcome {
        if let Err(e) = validate_payload(&job.payload) {
            return Outcome::Fatal(format!("`{}`: {}", e.field, e.message));
        }
        let raw = job.payload["url"].as_str().unwrap_or_default();
        // Checked again: the allow-list may have shrunk since the enqueue.
        let url = match self.config.check(raw) {
            Ok(u) => u,
            Err(e) => return Outcome::Fatal(e.message),
        };
        let ended = match children().await {
            Ok(c) => c,
            Err(e) => return Outcome::retry(format!("reading the job called back: {e}")),
        };
        let Some(child) = ended.first() else {
            return Outcome::Fatal("a callback follows a job: it has none".into());
        };
        let body = body(child);
        let bytes = serde_json::to_vec(&body).unwrap_or_default();
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let answer = self
            .client
            .post(url)
            .timeout(self.config.timeout)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .header(SIGNATURE_HEADER, self.config.signature(now, &bytes))
            .header(DELIVERY_HEADER, job.id.to_string())
            .header(EVENT_HEADER, body["event"].as_str().unwrap_or("dead"))
            .body(bytes)
            .send()
            .await;
        match answer {
            Err(e) => Outcome::retry(format!("callback not delivered: {e}")),
            Ok(res) if res.status().is_success() => {
                Outcome::Completed(json!({"status": res.status().as_u16(), "job": child.id}))
            }
            Ok(res) => {
                let status = res.status();
                let error = format!("callback answered {status}");
                if status.as_u16() == 429 {
                    Outcome::Throttled {
                        error,
                        retry_after: retry_after(&res),
                    }
                } else if status.is_client_error() && status.as_u16() != 408 {
                    Outcome::Fatal(error)
                } else {
                    Outcome::retry(error)
                }
            }
        }
    }
}

fn retry_after(res: &reqwest::Response) -> Option<Duration> {
    res.headers()
        .get(reqwest::header::RETRY_AFTER)?
        .to_str()
        .ok()?
        .trim()
        .parse::<u64>()
        .ok()
        .map(|s| Duration::from_secs(s.min(3_600)))
}

impl JobHandler for CallbackHandler {
    fn run<'a>(&'a self, job: &'a Job) -> BoxFuture<'a, Outcome> {
        Box::pin(self.deliver(job))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hmac_matches_rfc_4231() {
        // Test case 2.
        assert_eq!(
            hex(&hmac_sha256(b"Jefe", b"what do ya want for nothing?")),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
        // Test case 6: a key longer than a block is hashed first.
        assert_eq!(
            hex(&hmac_sha256(
                &[0xaa; 131],
                b"Test Using Larger Than Block-Size Key - Hash Key First"
            )),
            "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"
        );
    }

    #[test]
    fn only_urls_under_an_allowed_prefix_pass() {
        let c = CallbackConfig::new(
            &[
                "https://hooks.example.com/sluice".into(),
                "http://127.0.0.1:9000/".into(),
            ],
            b"k".to_vec(),
            Duration::from_secs(1),
        )
        .unwrap();
        for ok in [
            "https://hooks.example.com/sluice",
            "https://hooks.example.com/sluice/a?b=c",
            "https://hooks.example.com:443/sluice/x",
            "http://127.0.0.1:9000/anything",
        ] {
            assert!(c.check(ok).is_ok(), "{ok}");
        }
        for bad in [
            "https://hooks.example.com/sluicer",
            "https://hooks.example.com/",
            "http://hooks.example.com/sluice",
            "https://hooks.example.com.evil.io/sluice",
            "http://127.0.0.1:9001/",
            "http://127.0.0.1:900/",
            "http://user:pw@127.0.0.1:9000/",
            "not a url",
        ] {
            let e = c.check(bad).unwrap_err();
            assert_eq!(e.field, "callback_url", "{bad}");
        }
        assert!(
            c.check(&format!(
                "http://127.0.0.1:9000/{}",
                "a".repeat(MAX_URL_LEN)
            ))
            .is_err()
        );
        assert!(CallbackConfig::new(&["ftp://x/".into()], b"k".to_vec(), Duration::ZERO).is_err());
        assert!(CallbackConfig::new(&[], Vec::new(), Duration::ZERO).is_err());
    }

    #[test]
    fn the_signature_covers_time_and_body() {
        let c = CallbackConfig::new(&[], b"s3cret".to_vec(), Duration::ZERO).unwrap();
        let sig = c.signature(1_700_000_000, b"{}");
        assert_eq!(
            sig,
            format!(
                "t=1700000000,v1={}",
                hex(&hmac_sha256(b"s3cret", b"1700000000.{}"))
            )
        );
        assert_ne!(sig, c.signature(1_700_000_001, b"{}"));
        assert_ne!(sig, c.signature(1_700_000_000, b"{ }"));
    }
}
