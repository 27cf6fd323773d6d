//! One agent: a closed loop of steps (a model call, sometimes a tool call,
//! a pause to think), each call wrapped in the retry loop agents typically
//! use: on a 429 or a 5xx, sleep for the Retry-After (or back off
//! exponentially) and try again, up to a few times.

use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use reqwest::StatusCode;
use reqwest::header::HeaderMap;
use tokio::time::Instant;

use super::record::{Outcome, Record, Tally};
use super::{Mode, RetryPolicy, Workload};

/// What every agent shares.
#[derive(Debug)]
pub(crate) struct Shared {
    pub client: reqwest::Client,
    /// The gateway replicas (or the sim) calls go to, one at random.
    pub bases: Vec<String>,
    /// Each tenant to one replica instead of one at random.
    pub tenant_per_replica: bool,
    pub mode: Mode,
    pub workload: Workload,
    pub retry: RetryPolicy,
    pub tenants: Vec<String>,
    pub tally: Tally,
    /// Tool calls over MCP (`{base}/mcp`) instead of HTTP to the API.
    pub mcp: Option<super::mcp::Sessions>,
}

/// Runs agent `seed`'s loop for `tenant` until the task is aborted.
pub(crate) async fn run(shared: Arc<Shared>, tenant: usize, seed: u64) {
    let mut rng = fastrand::Rng::with_seed(seed);
    // Agents do not all start at once: spread their first steps over the
    // shortest think time.
    let spread = shared.workload.think.0.as_micros() as u64;
    tokio::time::sleep(Duration::from_micros(rng.u64(0..=spread))).await;
    // Nor at the same point of their loop: as in a swarm that was already
    // running, some begin with a step's tool call. (Were every agent to
    // begin with a model call, the APIs would idle until the first model
    // answers came back, their burst unused.)
    if let Some(api) = shared.workload.pick_start(&mut rng) {
        let priority = shared.workload.pick_priority(&mut rng);
        call(&shared, tenant, api, false, priority, &mut rng).await;
        tokio::time::sleep(shared.workload.pick_think(&mut rng)).await;
    }
    loop {
        let priority = shared.workload.pick_priority(&mut rng);
        let (model, stream) = shared.workload.pick_model(&mut rng);
        call(&shared, tenant, model, stream, priority, &mut rng).await;
        for api in shared.workload.pick_tools(&mut rng) {
            call(&shared, tenant, api, false, priority, &mut rng).await;
        }
        tokio::time::sleep(shared.workload.pick_think(&mut rng)).await;
    }
}

/// What one attempt got.
struct Answer {
    status: StatusCode,
    headers: HeaderMap,
    /// The whole body arrived (a stream to its end).
    complete: bool,
}

async fn call(
    shared: &Shared,
    tenant: usize,
    target: usize,
    stream: bool,
    priority: &'static str,
    rng: &mut fastrand::Rng,
) {
    let in_flight = shared.tally.begin(target);
    let started = Instant::now();
    let mut r = Record {
        tenant,
        target,
        latency: Duration::ZERO,
        outcome: Outcome::Failed,
        attempts: 0,
        wasted: 0,
        upstream_429s: 0,
        backoff: Duration::ZERO,
    };
    loop {
        r.attempts += 1;
        let base = match shared.bases.len() {
            1 => &shared.bases[0],
            n if shared.tenant_per_replica => &shared.bases[tenant % n],
            n => &shared.bases[rng.usize(..n)],
        };
        let tool = (shared.mcp.as_ref()).and_then(|m| Some((m, shared.workload.api_of(target)?)));
        let answer = match tool {
            Some((sessions, api)) => {
                let name = shared.tenants[tenant].as_str();
                let a = sessions.call(base, (tenant, name), priority, api).await;
                a.map(|a| {
                    let mut headers = HeaderMap::new();
                    if let Some(ms) = a
                        .retry_after
                        .and_then(|d| d.as_millis().to_string().parse().ok())
                    {
                        headers.insert("retry-after-ms", ms);
                    }
                    Answer {
                        status: a.status,
                        headers,
                        complete: true,
                    }
                })
            }
            None => {
                let request = shared
                    .workload
                    .request(&shared.client, base, shared.mode, target, stream)
                    .header("x-sluice-workspace", &shared.tenants[tenant])
                    .header("x-sluice-priority", priority);
                send(request).await
            }
        };
        let retry_after = match &answer {
            Ok(a) if a.status.is_success() && a.complete => {
                r.outcome = Outcome::Ok;
                r.upstream_429s += gateway_429s(shared.mode, a);
                break;
            }
            Ok(a) => {
                r.upstream_429s += match shared.mode {
                    Mode::Direct => u32::from(a.status == StatusCode::TOO_MANY_REQUESTS),
                    Mode::Gateway => gateway_429s(shared.mode, a),
                };
                let transient = a.status == StatusCode::TOO_MANY_REQUESTS
                    || a.status == StatusCode::REQUEST_TIMEOUT
                    || a.status.is_server_error()
                    || !a.complete;
                if !transient {
                    // A 4xx other than 429: retrying would not help.
                    break;
                }
                r.wasted += 1;
                retry_after(&a.headers)
            }
            Err(()) => {
                r.wasted += 1;
                None
            }
        };
        if r.attempts > shared.retry.max_retries {
            break;
        }
        let wait = shared.retry.wait(r.attempts, retry_after, rng);
        shared.tally.backing_off(target, true);
        tokio::time::sleep(wait).await;
        shared.tally.backing_off(target, false);
        r.backoff += wait;
    }
    r.latency = started.elapsed();
    in_flight.finish(r);
}

/// Sends and reads the whole answer; `Err` for a transport error.
async fn send(request: reqwest::RequestBuilder) -> Result<Answer, ()> {
    let response = request.send().await.map_err(|_| ())?;
    let status = response.status();
    let headers = response.headers().clone();
    let mut body = response.bytes_stream();
    let mut complete = true;
    while let Some(chunk) = body.next().await {
        if chunk.is_err() {
            complete = false;
            break;
        }
    }
    Ok(Answer {
        status,
        headers,
        complete,
    })
}

/// Upstream 429s behind a gateway's answer, from its `x-sluice-attempts`:
/// each attempt before the last was retried after a 429 or a 5xx (the
/// swarm's upstreams inject no 5xx), and a 429 passed on after attempts
/// means the last one was throttled too. A 429 of the gateway's own
/// (queue full, limiter wait too long) made no attempt.
fn gateway_429s(mode: Mode, a: &Answer) -> u32 {
    if mode == Mode::Direct {
        return 0;
    }
    let attempts: u32 = a
        .headers
        .get("x-sluice-attempts")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    if a.status == StatusCode::TOO_MANY_REQUESTS {
        attempts
    } else {
        attempts.saturating_sub(1)
    }
}

/// The wait an answer asks for: `retry-after-ms` (OpenAI's SDKs read it
/// first), else `Retry-After` in seconds.
fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let read = |name: &str| headers.get(name)?.to_str().ok()?.trim().parse::<f64>().ok();
    let wait = read("retry-after-ms")
        .map(|ms| ms / 1e3)
        .or_else(|| read("retry-after"))?;
    Duration::try_from_secs_f64(wait).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_prefers_milliseconds() {
        let mut h = HeaderMap::new();
        assert_eq!(retry_after(&h), None);
        h.insert("retry-after", "2".parse().unwrap());
        assert_eq!(retry_after(&h), Some(Duration::from_secs(2)));
        h.insert("retry-after-ms", "350".parse().unwrap());
        assert_eq!(retry_after(&h), Some(Duration::from_millis(350)));
    }

    #[test]
    fn gateway_attempts_count_upstream_429s() {
        let answer = |status: u16, attempts: Option<&str>| {
            let mut headers = HeaderMap::new();
            if let Some(a) = attempts {
                headers.insert("x-sluice-attempts", a.parse().unwrap());
            }
            Answer {
                status: StatusCode::from_u16(status).unwrap(),
                headers,
                complete: true,
            }
        };
        assert_eq!(gateway_429s(Mode::Gateway, &answer(200, Some("1"))), 0);
        assert_eq!(gateway_429s(Mode::Gateway, &answer(200, Some("3"))), 2);
        assert_eq!(gateway_429s(Mode::Gateway, &answer(429, Some("3"))), 3);
        assert_eq!(gateway_429s(Mode::Gateway, &answer(429, Some("0"))), 0);
        assert_eq!(gateway_429s(Mode::Gateway, &answer(200, None)), 0);
        assert_eq!(gateway_429s(Mode::Direct, &answer(200, Some("3"))), 0);
    }
}
