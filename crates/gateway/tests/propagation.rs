//! Context propagation: `x-request-id` on every answer and upstream, and
//! W3C Trace Context continued from the client to the provider, the
//! proxied API and job attempts (the sim logs the headers it receives).

mod common;

use common::{Harness, chat, header, sim_config};
use reqwest::StatusCode;
use serde_json::json;
use sluice_sim::LogEntry;

const TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const PARENT: &str = "00f067aa0ba902b7";

fn traceparent() -> String {
    format!("00-{TRACE}-{PARENT}-01")
}

/// The `(trace id, span id, flags)` of a logged `traceparent`.
fn parts(entry: &LogEntry) -> (String, String, String) {
    let tp = entry
        .traceparent
        .as_deref()
        .expect("a traceparent upstream");
    let f: Vec<&str> = tp.split('-').collect();
    assert_eq!((f.len(), f[0]), (4, "00"), "{tp}");
    assert_eq!((f[1].len(), f[2].len(), f[3].len()), (32, 16, 2), "{tp}");
    (f[1].to_owned(), f[2].to_owned(), f[3].to_owned())
}

/// The sim's log entries for `path`, after `since`.
fn upstream(h: &Harness, since: u64, path: &str) -> Vec<LogEntry> {
    h.sim
        .log(since)
        .entries
        .into_iter()
        .filter(|e| e.path == path)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_model_call_continues_the_clients_trace_and_id_upstream() {
    let h = Harness::start().await;
    let since = h.sim.log(0).next;
    let res = h
        .post("/v1/chat/completions", &chat("openai/gpt-4o-mini"))
        .header("x-request-id", "agent-7.step:3")
        .header("traceparent", traceparent())
        .header("tracestate", "congo=t61rcWkgMzE")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    assert_eq!(header(&res, "x-request-id"), "agent-7.step:3");
    let sent = upstream(&h, since, "/openai/v1/chat/completions");
    assert_eq!(sent.len(), 1, "{sent:?}");
    assert_eq!(sent[0].request_id.as_deref(), Some("agent-7.step:3"));
    let (trace, span, flags) = parts(&sent[0]);
    assert_eq!(trace, TRACE, "the same trace");
    assert_ne!(span, PARENT, "a span of Sluice's own");
    assert_eq!(flags, "01", "the sampling decision is the client's");
    assert_eq!(sent[0].tracestate.as_deref(), Some("congo=t61rcWkgMzE"));
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_context_a_request_gets_an_id_and_a_new_trace() {
    let h = Harness::start().await;
    let since = h.sim.log(0).next;
    let mut ids = Vec::new();
    for _ in 0..2 {
        let res = h
            .send("/v1/chat/completions", &chat("openai/gpt-4o-mini"))
            .await;
        assert_eq!(res.status(), StatusCode::OK);
        ids.push(header(&res, "x-request-id"));
    }
    assert_ne!(ids[0], ids[1]);
    let sent = upstream(&h, since, "/openai/v1/chat/completions");
    assert_eq!(sent.len(), 2);
    for (entry, id) in sent.iter().zip(&ids) {
        assert_eq!(entry.request_id.as_ref(), Some(id), "the id answered");
        assert_eq!(entry.tracestate, None);
    }
    assert_ne!(parts(&sent[0]).0, parts(&sent[1]).0, "a trace each");
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_context_headers_are_replaced_not_refused() {
    let h = Harness::start().await;
    let since = h.sim.log(0).next;
    let long = "x".repeat(500);
    let res = h
        .post("/v1/chat/completions", &chat("openai/gpt-4o-mini"))
        .header("x-request-id", "has spaces/and slashes")
        .header("traceparent", format!("00-{}-{PARENT}-01", "0".repeat(32)))
        .header("tracestate", "congo=t61rcWkgMzE")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    let id = header(&res, "x-request-id");
    assert!(id.starts_with("req_"), "a new id: {id}");
    let res = h
        .post("/v1/chat/completions", &chat("openai/gpt-4o-mini"))
        .header("x-request-id", &long)
        .header("traceparent", "not-a-traceparent")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    assert_ne!(header(&res, "x-request-id"), long);
    let sent = upstream(&h, since, "/openai/v1/chat/completions");
    assert_eq!(sent.len(), 2);
    assert_eq!(sent[0].request_id.as_ref(), Some(&id));
    for entry in &sent {
        let (trace, _, flags) = parts(entry);
        assert_ne!(trace, "0".repeat(32));
        assert_eq!(flags, "00", "a new trace, not sampled");
        assert_eq!(entry.tracestate, None, "dropped with its traceparent");
    }
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_answer_carries_a_request_id_errors_included() {
    let h = Harness::start().await;
    // A 404, a 405, a 400 for a header, a 400 for the body, a route with
    // no model: each answers with the client's id, or one of its own.
    let cases: Vec<(reqwest::RequestBuilder, u16)> = vec![
        (h.get("/no/such/route"), 404),
        (h.get("/v1/chat/completions"), 405),
        (
            h.post("/v1/chat/completions", &chat("openai/gpt-4o-mini"))
                .header("x-sluice-priority", "urgent-ish"),
            400,
        ),
        (h.post("/v1/chat/completions", &json!({"model": 7})), 400),
        (h.get("/v1/limits"), 200),
        (h.get("/healthz"), 200),
    ];
    for (i, (req, status)) in cases.into_iter().enumerate() {
        let res = req.try_clone().unwrap().send().await.unwrap();
        assert_eq!(res.status().as_u16(), status, "case {i}");
        assert!(header(&res, "x-request-id").starts_with("req_"), "case {i}");
        let mine = format!("mine-{i}");
        let res = req.header("x-request-id", &mine).send().await.unwrap();
        assert_eq!(res.status().as_u16(), status, "case {i}");
        assert_eq!(header(&res, "x-request-id"), mine, "case {i}");
    }
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_caller_still_gets_a_request_id() {
    let h = Harness::with(sim_config(), |c| {
        c.admin_token = Some("s3cret-admin-token".into());
    })
    .await;
    let res = h
        .http
        .put(h.url("/v1/limits/openai%2Fgpt-4o-mini"))
        .header("x-request-id", "who-am-i")
        .json(&json!({"requests_per_minute": 10}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::UNAUTHORIZED);
    assert_eq!(header(&res, "x-request-id"), "who-am-i");
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_proxied_call_carries_the_context() {
    let h = Harness::start().await;
    let since = h.sim.log(0).next;
    let res = h
        .post("/proxy/slack/chat.postMessage", &json!({"text": "hi"}))
        .header("x-request-id", "proxied-1")
        .header("traceparent", traceparent())
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    assert_eq!(header(&res, "x-request-id"), "proxied-1");
    let sent = upstream(&h, since, "/slack/chat.postMessage");
    assert_eq!(sent.len(), 1, "{sent:?}");
    assert_eq!(sent[0].request_id.as_deref(), Some("proxied-1"));
    let (trace, span, _) = parts(&sent[0]);
    assert_eq!((trace.as_str(), span == PARENT), (TRACE, false));
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retried_attempts_are_spans_of_one_trace() {
    let h = Harness::start().await;
    let broken = sluice_sim::Faults {
        error_every: Some(1),
        ..sluice_sim::Faults::none()
    };
    h.sim
        .set_faults(sluice_sim::Scope::Model("broken".into()), broken)
        .unwrap();
    let since = h.sim.log(0).next;
    let res = h
        .post("/v1/chat/completions", &chat("openai/broken"))
        .header("traceparent", traceparent())
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::BAD_GATEWAY);
    assert_eq!(header(&res, "x-sluice-attempts"), "3");
    let sent = upstream(&h, since, "/openai/v1/chat/completions");
    assert_eq!(sent.len(), 3, "{sent:?}");
    let spans: std::collections::HashSet<String> = sent
        .iter()
        .map(|e| {
            let (trace, span, _) = parts(e);
            assert_eq!(trace, TRACE);
            span
        })
        .collect();
    assert_eq!(spans.len(), 3, "a new span per attempt");
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn job_attempts_carry_an_id_and_a_traceparent() {
    let h = Harness::start().await;
    let since = h.sim.log(0).next;
    let id = enqueue(&h, None).await["id"].as_i64().unwrap();
    let sent = common::wait_for("the job's call", || async {
        let sent = upstream(&h, since, "/slack/api/chat.postMessage");
        (!sent.is_empty()).then_some(sent)
    })
    .await;
    assert_eq!(sent[0].request_id, Some(format!("job-{id}-1")));
    parts(&sent[0]);
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn job_attempts_continue_the_enqueuers_trace() {
    let h = Harness::start().await;
    // The first attempt fails (a 500), the second succeeds.
    let flaky = sluice_sim::Faults {
        error_every: Some(2),
        ..sluice_sim::Faults::none()
    };
    h.sim
        .set_faults(sluice_sim::Scope::Api("slack".into()), flaky)
        .unwrap();
    // The sim's first slack call is #1, which succeeds: use it up.
    let res = h
        .post("/proxy/slack/chat.postMessage", &json!({"text": "warm"}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    let since = h.sim.log(0).next;
    let job = enqueue(&h, Some(traceparent())).await;
    assert_eq!(job["traceparent"], traceparent().as_str(), "stored: {job}");
    let sent = common::wait_for("both attempts", || async {
        let sent = upstream(&h, since, "/slack/api/chat.postMessage");
        (sent.len() >= 2).then_some(sent)
    })
    .await;
    let id = job["id"].as_i64().unwrap();
    let mut spans = std::collections::HashSet::new();
    for (n, e) in sent.iter().enumerate() {
        assert_eq!(e.request_id, Some(format!("job-{id}-{}", n + 1)));
        let (trace, span, flags) = parts(e);
        assert_eq!(
            trace,
            TRACE,
            "attempt {} continues the enqueuer's trace",
            n + 1
        );
        assert_eq!(flags, "01", "with its sampling decision");
        assert_ne!(span, PARENT, "as a child span");
        spans.insert(span);
    }
    assert_eq!(spans.len(), sent.len(), "a span per attempt");
    h.stop().await;
}

/// Enqueues a job that posts to the sim's Slack (3 attempts), with
/// `traceparent` when given: the job as answered.
async fn enqueue(h: &Harness, traceparent: Option<String>) -> serde_json::Value {
    let mut req = h.post(
        "/v1/jobs",
        &json!({
            "queue": "default",
            "kind": "http",
            "max_attempts": 3,
            "payload": {"api": "slack", "method": "POST", "path": "/api/chat.postMessage", "body": {}}
        }),
    );
    if let Some(tp) = traceparent {
        req = req.header("traceparent", tp);
    }
    let res = req.send().await.unwrap();
    assert_eq!(res.status(), StatusCode::CREATED);
    res.json().await.unwrap()
}
