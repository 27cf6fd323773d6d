//! Upstream faults from the sim, through a `sluice serve` process: hangs,
//! connections reset mid-stream, malformed JSON and SSE, 5xx storms and a
//! slow first byte. Each test counts what the clients got and what the
//! sim saw.

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use sluice_sim::{Faults, Latency, ModelConfig, Scope, SimConfig, SimHandle};

use crate::procs::{self, Proc, TempDir};
use crate::{body_of, chat, client, get_json, sim};

/// Attempts per request (`retry.max_attempts`).
const ATTEMPTS: u64 = 3;

struct Setup {
    sim: SimHandle,
    _serve: Proc,
    url: String,
    http: reqwest::Client,
    _dir: TempDir,
}

/// A sim with `models` and a gateway in front of it, `limits` being extra
/// `[[models]]` TOML.
async fn setup(what: &str, models: &[(&str, ModelConfig)], limits: &str) -> Setup {
    let mut config = SimConfig::unlimited();
    for (name, m) in models {
        config.models.insert((*name).into(), m.clone());
    }
    let sim = sim(config).await;
    let dir = TempDir::new(what);
    let rest = format!(
        "[trace]\nenabled = false\n[jobs]\nenabled = false\n[retry]\nmax_attempts = {ATTEMPTS}\n\
         initial_backoff_ms = 10\nmax_backoff_ms = 50\n{limits}"
    );
    let (cfg, url) = crate::write_config(&dir.0, "sluice.toml", &sim.url(), &rest);
    let serve = procs::serve(&cfg);
    Setup {
        sim,
        _serve: serve,
        url,
        http: client(),
        _dir: dir,
    }
}

fn faulty(faults: Faults) -> ModelConfig {
    ModelConfig {
        faults: Some(faults),
        ..ModelConfig::default()
    }
}

impl Setup {
    /// Sends `n` requests at once; returns (status, body or transport error).
    async fn burst(
        &self,
        path: &str,
        body: Value,
        n: usize,
        timeout_ms: u64,
    ) -> Vec<(u16, Result<String, String>)> {
        let mut tasks = Vec::new();
        for _ in 0..n {
            let (http, url, body, path) = (
                self.http.clone(),
                self.url.clone(),
                body.clone(),
                path.to_owned(),
            );
            tasks.push(tokio::spawn(async move {
                let res = http
                    .post(format!("{url}{path}"))
                    .header("x-sluice-timeout-ms", timeout_ms.to_string())
                    .json(&body)
                    .send()
                    .await
                    .expect("the gateway answers");
                let status = res.status().as_u16();
                (status, body_of(res).await)
            }));
        }
        let mut out = Vec::new();
        for t in tasks {
            out.push(t.await.unwrap());
        }
        out
    }

    /// A resource of `GET /v1/limits`.
    async fn resource(&self, name: &str) -> Option<Value> {
        let all: Value = self
            .http
            .get(format!("{}/v1/limits", self.url))
            .send()
            .await
            .ok()?
            .json()
            .await
            .ok()?;
        all["resources"]
            .as_array()?
            .iter()
            .find(|r| r["resource"] == name)
            .cloned()
    }

    /// Waits until nothing holds an in-flight slot of `resource`.
    async fn slots_back(&self, resource: &str) {
        let end = Instant::now() + procs::PATIENCE;
        loop {
            let r = self.resource(resource).await;
            if r.as_ref().is_none_or(|r| r["in_flight"] == 0) {
                return;
            }
            assert!(Instant::now() < end, "in-flight slots leaked: {r:?}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

fn error_code(body: &str) -> Value {
    serde_json::from_str::<Value>(body).map_or(Value::Null, |v| v["error"]["code"].clone())
}

/// The last `data:` of an SSE body, as JSON.
fn last_data(body: &str) -> Value {
    body.split("\n\n")
        .filter_map(|e| e.lines().find_map(|l| l.strip_prefix("data: ")))
        .last()
        .and_then(|d| serde_json::from_str(d).ok())
        .unwrap_or(Value::Null)
}

const HANGS: usize = 12;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hangs_end_at_the_deadline_and_give_every_slot_back() {
    let s = setup(
        "hang",
        &[("hang", faulty(Faults { hang_every: Some(1), ..Faults::none() }))],
        "[[models]]\nprefix = \"openai/hang\"\nrequests_per_second = 1000.0\nburst = 1000\nmax_in_flight = 4\n",
    )
    .await;
    let mut answers = s
        .burst(
            "/v1/chat/completions",
            chat("openai/hang", false),
            HANGS / 2,
            500,
        )
        .await;
    answers.extend(
        s.burst(
            "/v1/chat/completions",
            chat("openai/hang", true),
            HANGS / 2,
            500,
        )
        .await,
    );
    // Those sent upstream end at their deadline (504); those whose
    // deadline passes while they wait for a slot are refused by the
    // limiter (429, Retry-After).
    let mut timed_out = 0;
    for (status, body) in &answers {
        let body = body.as_ref().expect("an answer, not a cut");
        match status {
            504 => {
                assert_eq!(error_code(body), "deadline_exceeded", "{body}");
                timed_out += 1;
            }
            429 => assert_eq!(error_code(body), "rate_limited", "{body}"),
            _ => panic!("{status} {body}"),
        }
    }
    s.slots_back("inflight:openai/hang").await;
    let sent = s.sim.stats().model("hang").requests;
    assert!(sent <= HANGS as u64 * ATTEMPTS, "{sent}");
    // Every slot is usable again: more requests than slots, all served.
    s.sim
        .set_faults(Scope::Model("hang".into()), Faults::none())
        .unwrap();
    let after = s
        .burst(
            "/v1/chat/completions",
            chat("openai/hang", false),
            8,
            30_000,
        )
        .await;
    assert!(after.iter().all(|(st, _)| *st == 200), "{after:?}");
    s.slots_back("inflight:openai/hang").await;
    // Less time left than `retry.min_time_left_ms` (50 ms by default):
    // never sent, a 504, and what the request took goes back.
    let served = s.sim.stats().model("hang").requests;
    let late = s
        .burst("/v1/chat/completions", chat("openai/hang", false), 8, 20)
        .await;
    for (status, body) in &late {
        let body = body.as_ref().expect("an answer, not a cut");
        assert_eq!(*status, 504, "{body}");
        assert_eq!(error_code(body), "deadline_exceeded", "{body}");
    }
    assert_eq!(
        s.sim.stats().model("hang").requests,
        served,
        "a call with less than the floor left is not sent"
    );
    s.slots_back("inflight:openai/hang").await;
    eprintln!(
        "figure upstream hang: {HANGS}/{HANGS} answered at a 500 ms deadline ({timed_out} 504, the rest 429 \
         waiting for a slot), {sent} sent upstream \
         (4 in-flight slots), every slot back, then 8/8 served; 8/8 with 20 ms left got 504 unsent"
    );
    s.sim.shutdown().await;
}

const RESETS: usize = 10;
/// Tokens each cut stream reserves for its answer (`max_tokens`).
const RESERVED: u64 = 50_000;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reset_mid_stream_is_an_error_event_in_the_streams_format() {
    let cut = faulty(Faults {
        disconnect_every: Some(1),
        disconnect_after_chunks: 3,
        ..Faults::none()
    });
    let s = setup(
        "reset",
        &[("cut", cut.clone()), ("claude-cut", cut)],
        "[[models]]\nprefix = \"openai/cut\"\nrequests_per_second = 1000.0\nburst = 1000\n\
         tokens_per_minute = 1000000\nmax_in_flight = 4\n\
         [[models]]\nprefix = \"anthropic/claude-cut\"\nrequests_per_second = 1000.0\nburst = 1000\n\
         tokens_per_minute = 1000000\n",
    )
    .await;
    // Each stream reserves its prompt and `max_tokens`: 50,000 tokens,
    // 500,000 for the ten, far more than the minute's refill during the
    // test (1,000,000 a minute) can hide.
    let mut big = chat("openai/cut", true);
    big["max_tokens"] = json!(RESERVED);
    let answers = s.burst("/v1/chat/completions", big, RESETS, 30_000).await;
    for (status, body) in &answers {
        let body = body.as_ref().expect("the stream ends cleanly, not cut");
        assert_eq!(*status, 200);
        assert!(!body.contains("[DONE]"), "{body}");
        assert_eq!(last_data(body)["error"]["code"], "upstream_error", "{body}");
    }
    let anthropic = json!({"model": "anthropic/claude-cut", "max_tokens": RESERVED, "stream": true,
        "messages": [{"role": "user", "content": "hello"}]});
    let answers = s.burst("/v1/messages", anthropic, 2, 30_000).await;
    for (status, body) in &answers {
        let body = body.as_ref().expect("the stream ends cleanly, not cut");
        assert_eq!(*status, 200, "{body}");
        assert!(body.contains("event: error\n"), "{body}");
        assert_eq!(last_data(body)["error"]["type"], "api_error", "{body}");
    }
    s.slots_back("inflight:openai/cut").await;
    let seen = s.sim.stats().model("cut");
    assert_eq!(
        (seen.requests, seen.disconnects),
        (RESETS as u64, RESETS as u64),
        "never resent"
    );
    // Settled at what they streamed (a few words each), not at what they
    // reserved: the bucket is nearly full again.
    let mut charged = Vec::new();
    for (resource, streams) in [
        ("tokens:openai/cut", RESETS),
        ("tokens:anthropic/claude-cut", 2),
    ] {
        let t = s.resource(resource).await.expect("the tokens resource");
        let (available, capacity) = (
            t["available"].as_f64().unwrap(),
            t["capacity"].as_f64().unwrap(),
        );
        assert!(
            capacity - available <= (streams * 1_000) as f64,
            "{resource}: {available} of {capacity} after {streams} cut streams reserving {RESERVED} each"
        );
        charged.push(format!("{resource} {:.0} charged", capacity - available));
    }
    eprintln!(
        "figure upstream reset: {RESETS}/{RESETS} OpenAI and 2/2 Anthropic streams ended with an error event; \
         sent upstream once each; reserved {RESERVED} each, settled at what they streamed: {}",
        charged.join(", ")
    );
    s.sim.shutdown().await;
}

impl Setup {
    /// The calling tenant's usage of `model` in the ledger (`/v1/usage`,
    /// all time), once it holds `requests` calls: (requests, errors,
    /// prompt tokens, completion tokens, cost in nanodollars).
    async fn usage_of(&self, model: &str, requests: u64) -> (u64, u64, u64, u64, u64) {
        let end = Instant::now() + procs::PATIENCE;
        loop {
            let url = format!(
                "{}/v1/usage?group_by=model&granularity=total&from=0",
                self.url
            );
            let all = get_json(&self.http, &url).await;
            let row = all["rows"]
                .as_array()
                .and_then(|rows| rows.iter().find(|r| r["model"] == model).cloned())
                .unwrap_or(Value::Null);
            let n = |f: &str| row[f].as_u64().unwrap_or(0);
            if n("requests") >= requests {
                return (
                    n("requests"),
                    n("errors"),
                    n("prompt_tokens"),
                    n("completion_tokens"),
                    n("cost_nanos"),
                );
            }
            assert!(Instant::now() < end, "{model}: not recorded: {all}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_malformed_200_is_an_upstream_error_and_a_malformed_stream_passes_through() {
    use sluice_sim::MalformedBody;
    let bad = |body| {
        faulty(Faults {
            malformed_every: Some(1),
            malformed_body: body,
            ..Faults::none()
        })
    };
    let s = setup(
        "malformed",
        &[
            ("bad", bad(MalformedBody::Cut)),
            ("bad-html", bad(MalformedBody::Html)),
            ("bad-empty", bad(MalformedBody::Empty)),
        ],
        "[[models]]\nprefix = \"openai/bad\"\nrequests_per_second = 1000.0\nburst = 1000\n\
         tokens_per_minute = 1000000\nmax_in_flight = 4\n",
    )
    .await;
    // A 200 whose body is not an answer (JSON cut in half, an HTML page,
    // nothing) is an upstream error: sent again like a 5xx, then a 502.
    for model in ["bad", "bad-html", "bad-empty"] {
        let answers = s
            .burst(
                "/v1/chat/completions",
                chat(&format!("openai/{model}"), false),
                5,
                30_000,
            )
            .await;
        for (status, body) in &answers {
            let body = body.as_ref().expect("an answer");
            assert_eq!(*status, 502, "{model}: {body}");
            assert_eq!(error_code(body), "bad_gateway", "{model}: {body}");
            assert!(
                body.contains("not a JSON answer") || body.contains("empty body"),
                "{body}"
            );
        }
        assert_eq!(
            s.sim.stats().model(model).requests,
            5 * ATTEMPTS,
            "{model}: retried like a 5xx"
        );
    }
    // A stream passes through untouched: the client's parser decides.
    let streams = s
        .burst("/v1/chat/completions", chat("openai/bad", true), 5, 30_000)
        .await;
    for (status, body) in &streams {
        let body = body.as_ref().expect("a whole stream");
        assert_eq!(*status, 200);
        assert!(
            body.contains("this is not an event"),
            "passed through untouched: {body}"
        );
        assert!(body.contains("data: [DONE]"), "{body}");
    }
    s.slots_back("inflight:openai/bad").await;
    assert_eq!(s.sim.stats().model("bad").requests, 5 * ATTEMPTS + 5);
    // Billed at zero: no usage came with them.
    for model in ["openai/bad-html", "openai/bad-empty"] {
        let (requests, errors, prompt, completion, cost) = s.usage_of(model, 5).await;
        assert_eq!((requests, errors), (5, 5), "{model}");
        assert_eq!(
            (prompt, completion, cost),
            (0, 0, 0),
            "{model}: billed at zero"
        );
    }
    let health = s
        .http
        .get(format!("{}/healthz", s.url))
        .send()
        .await
        .unwrap();
    assert_eq!(health.status(), 200);
    eprintln!(
        "figure upstream malformed: 15/15 malformed 200s (cut JSON, HTML, empty) answered 502 after \
         {ATTEMPTS} attempts each, billed 0; 5/5 broken SSE passed through as sent"
    );
    s.sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn usage_an_upstream_claims_beyond_the_call_is_clamped_and_flagged() {
    const CLAIM: u64 = 9_000_000_000_000_000;
    const CEILING: u64 = 2_000_000;
    let s = setup(
        "claims",
        &[(
            "gpt-4o-mini-liar",
            faulty(Faults {
                claim_prompt_tokens: Some(CLAIM),
                ..Faults::none()
            }),
        )],
        &format!(
            "[tokens]\nmax_call_tokens = {CEILING}\n[prices.\"openai/gpt-4o-mini-liar\"]\n\
             input = \"0.15\"\noutput = \"0.60\"\n[[models]]\nprefix = \"openai/gpt-4o-mini-liar\"\n\
             requests_per_second = 1000.0\nburst = 1000\n"
        ),
    )
    .await;
    let mut body = chat("openai/gpt-4o-mini-liar", false);
    body["max_tokens"] = json!(50);
    for (status, body) in s
        .burst("/v1/chat/completions", body.clone(), 3, 30_000)
        .await
    {
        assert_eq!(status, 200, "{body:?}");
    }
    body["stream"] = json!(true);
    for (status, body) in s.burst("/v1/chat/completions", body, 2, 30_000).await {
        assert_eq!(status, 200, "{body:?}");
    }
    let (requests, _, prompt, completion, cost) = s.usage_of("openai/gpt-4o-mini-liar", 5).await;
    assert_eq!(requests, 5);
    assert!(
        prompt <= 5 * CEILING,
        "prompt tokens billed as claimed: {prompt}"
    );
    assert!(completion <= 5 * 50, "{completion}");
    // Priced as configured: $0.15 a million input tokens, $0.60 output.
    let most = 5 * (CEILING * 150 + 50 * 600);
    assert!(cost > 0 && cost <= most, "cost {cost}, at most {most}");
    let metrics = s
        .http
        .get(format!("{}/metrics", s.url))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let flagged: u64 = metrics
        .lines()
        .filter(|l| l.starts_with("sluice_usage_clamped_total{") && l.contains("prompt_tokens"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .map(|v| v as u64)
        .sum();
    assert!(flagged >= 3, "flagged {flagged}: {metrics}");
    eprintln!(
        "figure usage claims: 5 answers claiming {CLAIM} prompt tokens each billed {prompt} tokens, \
         {cost} nanodollars (ceiling {CEILING} a call); {flagged} flagged"
    );
    s.sim.shutdown().await;
}

const STORM: usize = 20;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_5xx_storm_is_retried_a_bounded_number_of_times() {
    let s = setup(
        "storm",
        &[(
            "storm",
            faulty(Faults {
                error_every: Some(1),
                ..Faults::none()
            }),
        )],
        "",
    )
    .await;
    let answers = s
        .burst(
            "/v1/chat/completions",
            chat("openai/storm", false),
            STORM,
            30_000,
        )
        .await;
    for (status, body) in &answers {
        let body = body.as_ref().expect("an answer");
        assert_eq!(*status, 502, "{body}");
        assert_eq!(error_code(body), "bad_gateway", "{body}");
    }
    let sent = s.sim.stats().model("storm").requests;
    assert_eq!(
        sent,
        STORM as u64 * ATTEMPTS,
        "each request tried max_attempts times, no more"
    );
    eprintln!(
        "figure upstream 5xx storm: {STORM}/{STORM} answered 502 after {ATTEMPTS} attempts each; {sent} sent upstream"
    );
    s.sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_first_byte_waits_within_the_deadline_only() {
    let slow = ModelConfig {
        latency: Some(Latency {
            base_ms: 1_500,
            ttft_ms: 1_500,
            ..Latency::default()
        }),
        ..ModelConfig::default()
    };
    let s = setup("slow", &[("slow", slow)], "").await;
    let short = s
        .burst("/v1/chat/completions", chat("openai/slow", false), 4, 500)
        .await;
    for (status, body) in &short {
        assert_eq!(*status, 504, "{body:?}");
    }
    // A stream's headers come at once, its first event late: the deadline
    // ends it with an error event.
    let short_streams = s
        .burst("/v1/chat/completions", chat("openai/slow", true), 4, 500)
        .await;
    for (status, body) in &short_streams {
        let body = body.as_ref().expect("ends cleanly");
        // Or a 504, if the deadline passed before even the headers came
        // (a busy machine).
        let code = match status {
            200 => last_data(body)["error"]["code"].clone(),
            _ => error_code(body),
        };
        assert_eq!(code, "deadline_exceeded", "{status} {body}");
    }
    let long = s
        .burst(
            "/v1/chat/completions",
            chat("openai/slow", false),
            4,
            20_000,
        )
        .await;
    let long_streams = s
        .burst("/v1/chat/completions", chat("openai/slow", true), 4, 20_000)
        .await;
    for (status, body) in long.iter().chain(&long_streams) {
        assert_eq!(*status, 200, "{body:?}");
    }
    assert!(
        long_streams
            .iter()
            .all(|(_, b)| b.as_ref().unwrap().contains("[DONE]"))
    );
    let sent = s.sim.stats().model("slow").requests;
    eprintln!(
        "figure upstream slow first byte (1.5 s): 8/8 ended at a 500 ms deadline (504 or a stream's error event), 8/8 served under a 20 s one; {sent} sent upstream"
    );
    s.sim.shutdown().await;
}
