//! OpenTelemetry export against a real OTLP receiver (sluice-sim's, over
//! HTTP/protobuf and gRPC): the span tree of a request through the
//! gateway and the sim, GenAI attributes on the model call, one span per
//! attempt carrying the `traceparent` sent upstream, the client's trace
//! continued, and nothing exported for what is not sampled.

mod common;

use std::time::Duration;

use common::{Harness, chat, sim_config};
use reqwest::StatusCode;
use serde_json::{Value, json};
use sluice_gateway::config::{OtelSettings, OtlpProtocol};
use sluice_sim::otlp::{AttributeValue, Receiver, Span};
use sluice_sim::{Faults, LogEntry, Scope};

const TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const PARENT: &str = "00f067aa0ba902b7";

const SERVER: i32 = 2;
const CLIENT: i32 = 3;
const INTERNAL: i32 = 1;
const PRODUCER: i32 = 4;

fn otel(receiver: &Receiver, protocol: OtlpProtocol) -> OtelSettings {
    OtelSettings {
        endpoint: receiver.url(),
        protocol,
        headers: [("x-collector-key".to_owned(), "k".to_owned())].into(),
        service_name: "sluice-test".into(),
        sampling_ratio: 1.0,
        batch_size: 512,
        batch_interval_ms: 20,
        queue_size: 2_048,
        timeout_ms: 5_000,
    }
}

async fn harness(receiver: &Receiver, protocol: OtlpProtocol) -> Harness {
    let settings = otel(receiver, protocol);
    Harness::with(sim_config(), move |c| c.otel = Some(settings)).await
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn attr(span: &Span, key: &str) -> Option<AttributeValue> {
    span.attributes
        .iter()
        .find(|kv| kv.key == key)
        .and_then(|kv| kv.value.as_ref())
        .and_then(|v| v.value.clone())
}

fn text(span: &Span, key: &str) -> String {
    match attr(span, key) {
        Some(AttributeValue::StringValue(s)) => s,
        other => panic!("{}: {key} is {other:?}", span.name),
    }
}

fn int(span: &Span, key: &str) -> i64 {
    match attr(span, key) {
        Some(AttributeValue::IntValue(n)) => n,
        other => panic!("{}: {key} is {other:?}", span.name),
    }
}

fn strs(span: &Span, key: &str) -> Vec<String> {
    match attr(span, key) {
        Some(AttributeValue::ArrayValue(a)) => a
            .values
            .into_iter()
            .map(|v| match v.value {
                Some(AttributeValue::StringValue(s)) => s,
                other => panic!("{}: {key} holds {other:?}", span.name),
            })
            .collect(),
        other => panic!("{}: {key} is {other:?}", span.name),
    }
}

/// The one span named `name`.
fn one<'a>(spans: &'a [Span], name: &str) -> &'a Span {
    let found: Vec<&Span> = spans.iter().filter(|s| s.name == name).collect();
    assert_eq!(found.len(), 1, "one {name:?} in {:?}", names(spans));
    found[0]
}

fn names(spans: &[Span]) -> Vec<&str> {
    spans.iter().map(|s| s.name.as_str()).collect()
}

fn children<'a>(spans: &'a [Span], parent: &Span) -> Vec<&'a Span> {
    spans
        .iter()
        .filter(|s| s.parent_span_id == parent.span_id)
        .collect()
}

/// The span ids the sim saw in the `traceparent` of calls to `path`.
fn sent_spans(h: &Harness, path: &str) -> Vec<String> {
    h.sim
        .log(0)
        .entries
        .into_iter()
        .filter(|e: &LogEntry| e.path == path)
        .map(|e| {
            let tp = e.traceparent.expect("a traceparent upstream");
            tp.split('-').nth(2).expect("a span id").to_owned()
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_model_call_is_a_span_tree_in_the_clients_trace_over_http() {
    let receiver = Receiver::start(true).await.expect("a receiver");
    let h = harness(&receiver, OtlpProtocol::HttpProtobuf).await;
    let mut body = chat("openai/gpt-4o-mini");
    body["max_tokens"] = json!(40);
    body["temperature"] = json!(0.5);
    let res = h
        .post("/v1/chat/completions", &body)
        .header("traceparent", format!("00-{TRACE}-{PARENT}-01"))
        .header("x-request-id", "agent-7")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    let answer: Value = res.json().await.unwrap();
    let spans = receiver.wait_for(7, Duration::from_secs(10)).await;
    assert_eq!(
        spans.len(),
        7,
        "request, cache, admission, model call, limiter, attempt, ledger: {:?}",
        names(&spans)
    );
    for s in &spans {
        assert_eq!(
            hex(&s.trace_id),
            TRACE,
            "{} is in the client's trace",
            s.name
        );
        assert!(s.end_time_unix_nano >= s.start_time_unix_nano, "{}", s.name);
    }

    let root = one(&spans, "POST /v1/chat/completions");
    assert_eq!(root.kind, SERVER);
    assert_eq!(hex(&root.parent_span_id), PARENT, "the client's span");
    assert_eq!(root.flags & 0x300, 0x300, "a remote parent");
    assert_eq!(int(root, "http.response.status_code"), 200);
    assert_eq!(text(root, "http.route"), "/v1/chat/completions");
    assert_eq!(text(root, "sluice.request_id"), "agent-7");

    let under_root: Vec<&str> = children(&spans, root)
        .iter()
        .map(|s| s.name.as_str())
        .collect();
    assert_eq!(under_root.len(), 4, "{under_root:?}");
    for name in [
        "sluice.cache",
        "sluice.admission",
        "chat gpt-4o-mini",
        "sluice.ledger",
    ] {
        assert!(under_root.contains(&name), "{name} under the request");
    }
    // The usage record handed to the ledger's writer, with its cost.
    let ledger = one(&spans, "sluice.ledger");
    assert_eq!(ledger.kind, PRODUCER);
    assert!(
        matches!(attr(ledger, "sluice.cost_usd"), Some(AttributeValue::DoubleValue(c)) if c > 0.0),
        "{:?}",
        attr(ledger, "sluice.cost_usd")
    );
    assert_eq!(
        attr(ledger, "sluice.usage.estimated"),
        Some(AttributeValue::BoolValue(false))
    );
    assert!(ledger.start_time_unix_nano >= root.start_time_unix_nano);
    assert!(ledger.end_time_unix_nano <= root.end_time_unix_nano);
    assert_eq!(
        text(one(&spans, "sluice.cache"), "sluice.cache.result"),
        "bypass"
    );
    assert_eq!(one(&spans, "sluice.admission").kind, INTERNAL);

    let model = one(&spans, "chat gpt-4o-mini");
    assert_eq!(model.kind, CLIENT);
    assert_eq!(text(model, "gen_ai.operation.name"), "chat");
    assert_eq!(text(model, "gen_ai.provider.name"), "openai");
    assert_eq!(text(model, "gen_ai.system"), "openai");
    assert_eq!(text(model, "gen_ai.request.model"), "gpt-4o-mini");
    assert_eq!(int(model, "gen_ai.request.max_tokens"), 40);
    assert_eq!(
        attr(model, "gen_ai.request.temperature"),
        Some(AttributeValue::DoubleValue(0.5))
    );
    assert_eq!(
        text(model, "gen_ai.response.model"),
        answer["model"].as_str().unwrap()
    );
    assert_eq!(
        text(model, "gen_ai.response.id"),
        answer["id"].as_str().unwrap()
    );
    assert_eq!(
        int(model, "gen_ai.usage.input_tokens"),
        answer["usage"]["prompt_tokens"].as_i64().unwrap()
    );
    assert_eq!(
        int(model, "gen_ai.usage.output_tokens"),
        answer["usage"]["completion_tokens"].as_i64().unwrap()
    );
    assert!(
        matches!(
            attr(model, "gen_ai.response.finish_reasons"),
            Some(AttributeValue::ArrayValue(_))
        ),
        "finish reasons"
    );
    assert_eq!(model.status, None, "no error");

    let under_model: Vec<&Span> = children(&spans, model);
    let limiter = one(&spans, "sluice.limiter");
    let attempt = one(&spans, "POST");
    assert_eq!(under_model.len(), 2);
    assert_eq!(limiter.parent_span_id, model.span_id);
    assert_eq!(attempt.parent_span_id, model.span_id);
    assert_eq!(attempt.kind, CLIENT);
    assert_eq!(int(attempt, "http.response.status_code"), 200);
    assert_eq!(text(attempt, "server.address"), "127.0.0.1");
    assert!(text(attempt, "url.full").ends_with("/openai/v1/chat/completions"));
    assert_eq!(
        sent_spans(&h, "/openai/v1/chat/completions"),
        [hex(&attempt.span_id)],
        "the provider's parent is the attempt's span"
    );
    let (http, grpc) = receiver.exports();
    assert!(http >= 1 && grpc == 0, "{http} {grpc}");
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retried_call_has_a_span_per_attempt_over_grpc() {
    let receiver = Receiver::start(true).await.expect("a receiver");
    let h = harness(&receiver, OtlpProtocol::Grpc).await;
    // Every second call fails: the first request's only attempt is
    // answered, the second request's first attempt fails (500) and its
    // retry is answered.
    h.sim
        .set_faults(
            Scope::Model("flaky".into()),
            Faults {
                error_every: Some(2),
                ..Faults::none()
            },
        )
        .unwrap();
    for _ in 0..2 {
        let res = h.send("/v1/chat/completions", &chat("openai/flaky")).await;
        assert_eq!(res.status(), StatusCode::OK);
    }
    let spans = receiver.wait_for(13, Duration::from_secs(10)).await;
    let roots: Vec<&Span> = spans
        .iter()
        .filter(|s| s.name == "POST /v1/chat/completions")
        .collect();
    assert_eq!(roots.len(), 2, "{:?}", names(&spans));
    let second = roots
        .iter()
        .find(|r| int(r, "sluice.attempts") == 2)
        .expect("the retried request");
    assert!(second.parent_span_id.is_empty(), "a trace of its own");
    let in_trace: Vec<Span> = spans
        .iter()
        .filter(|s| s.trace_id == second.trace_id)
        .cloned()
        .collect();
    let model = one(&in_trace, "chat flaky");
    let attempts: Vec<&Span> = children(&in_trace, model)
        .into_iter()
        .filter(|s| s.name == "POST")
        .collect();
    assert_eq!(attempts.len(), 2, "{:?}", names(&in_trace));
    let failed = attempts
        .iter()
        .find(|s| int(s, "sluice.attempt") == 1)
        .unwrap();
    let retried = attempts
        .iter()
        .find(|s| int(s, "sluice.attempt") == 2)
        .unwrap();
    assert_eq!(int(failed, "http.response.status_code"), 500);
    assert_eq!(text(failed, "error.type"), "500");
    assert_eq!(failed.status.as_ref().map(|s| s.code), Some(2), "an error");
    assert_eq!(int(retried, "http.response.status_code"), 200);
    assert_eq!(int(retried, "http.request.resend_count"), 1);
    let limiters = children(&in_trace, model)
        .into_iter()
        .filter(|s| s.name == "sluice.limiter")
        .count();
    assert_eq!(limiters, 2, "each attempt clears the limiter");
    // The two attempts sent their own span ids upstream.
    let sent = sent_spans(&h, "/openai/v1/chat/completions");
    for a in &attempts {
        assert!(
            sent.contains(&hex(&a.span_id)),
            "{} sent upstream",
            hex(&a.span_id)
        );
    }
    let (http, grpc) = receiver.exports();
    assert!(grpc >= 1 && http == 0, "{http} {grpc}");
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_and_a_fallback_are_spans_of_their_own() {
    let receiver = Receiver::start(true).await.expect("a receiver");
    let settings = otel(&receiver, OtlpProtocol::HttpProtobuf);
    let h = Harness::with(sim_config(), move |c| {
        c.otel = Some(settings);
        c.fallbacks
            .insert("openai/gpt-4o".into(), vec!["openai/gpt-4o-mini".into()]);
    })
    .await;
    h.sim
        .set_faults(
            Scope::Model("gpt-4o".into()),
            Faults {
                error_every: Some(1),
                ..Faults::none()
            },
        )
        .unwrap();
    let mut body = chat("openai/gpt-4o");
    body["stream"] = json!(true);
    body["stream_options"] = json!({"include_usage": true});
    let res = h.send("/v1/chat/completions", &body).await;
    assert_eq!(res.status(), StatusCode::OK);
    let text_body = res.text().await.unwrap();
    assert!(text_body.contains("[DONE]"), "{text_body}");
    // Request, cache, admission, two model calls, three failed attempts
    // and the answered one with their limiter waits, the stream, the
    // ledger.
    let spans = receiver.wait_for(15, Duration::from_secs(10)).await;
    let primary = one(&spans, "chat gpt-4o");
    let fallback = one(&spans, "chat gpt-4o-mini");
    assert_eq!(primary.parent_span_id, fallback.parent_span_id, "siblings");
    assert_eq!(text(primary, "error.type"), "upstream_error");
    assert!(fallback.status.is_none(), "the fallback answered");
    let stream = one(&spans, "sluice.stream");
    assert_eq!(stream.parent_span_id, fallback.span_id);
    assert_eq!(text(stream, "sluice.stream.outcome"), "complete");
    assert!(
        int(fallback, "gen_ai.usage.output_tokens") > 0,
        "the stream's usage"
    );
    // What the stream said of its answer, as a whole answer tells it.
    let chunks: Vec<Value> = text_body
        .split("\n\n")
        .filter_map(|e| e.strip_prefix("data: "))
        .filter_map(|d| serde_json::from_str(d).ok())
        .collect();
    assert_eq!(
        text(fallback, "gen_ai.response.id"),
        chunks[0]["id"].as_str().unwrap()
    );
    assert_eq!(
        text(fallback, "gen_ai.response.model"),
        chunks[0]["model"].as_str().unwrap()
    );
    let reasons: Vec<String> = chunks
        .iter()
        .flat_map(|c| c["choices"].as_array().cloned().unwrap_or_default())
        .filter_map(|c| c["finish_reason"].as_str().map(str::to_owned))
        .collect();
    assert!(!reasons.is_empty(), "the sim ends its choices");
    assert_eq!(strs(fallback, "gen_ai.response.finish_reasons"), reasons);
    assert!(
        attr(primary, "gen_ai.response.id").is_none(),
        "the failed call told nothing"
    );
    let ledger = one(&spans, "sluice.ledger");
    assert_eq!(
        ledger.parent_span_id,
        one(&spans, "POST /v1/chat/completions").span_id,
        "the stream's record is the request's"
    );
    assert!(fallback.end_time_unix_nano >= stream.end_time_unix_nano);
    let root = one(&spans, "POST /v1/chat/completions");
    assert!(
        root.end_time_unix_nano >= stream.end_time_unix_nano,
        "the request ends with its stream"
    );
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_proxied_get_of_a_cached_api_has_a_cache_span() {
    let receiver = Receiver::start(true).await.expect("a receiver");
    let settings = otel(&receiver, OtlpProtocol::HttpProtobuf);
    let mut sim = sim_config();
    sim.apis.get_mut("github").unwrap().cache_control = Some("max-age=60".into());
    let h = Harness::with(sim, move |c| {
        c.otel = Some(settings);
        c.cache
            .apis
            .insert("github".into(), sluice_gateway::config::ApiCache::default());
    })
    .await;
    let path = "/proxy/github/repos/o/r/issues";
    for expected in ["miss", "hit"] {
        let res = h.get(path).send().await.unwrap();
        assert_eq!(res.status(), StatusCode::OK);
        assert_eq!(res.headers()["x-sluice-cache"], expected);
    }
    // A write is never cached: bypassed.
    let res = h
        .post(&path.replace("/issues", "/labels"), &json!({}))
        .send()
        .await
        .unwrap();
    assert!(res.status().is_success(), "{}", res.status());
    let mut h = h;
    h.shutdown().await; // flushes the exporter
    let spans = receiver.spans();
    let mut results = Vec::new();
    for root in spans.iter().filter(|s| s.name.ends_with(" /proxy/github")) {
        let caches: Vec<&Span> = children(&spans, root)
            .into_iter()
            .filter(|s| s.name == "sluice.cache")
            .collect();
        assert_eq!(caches.len(), 1, "one lookup under {}", root.name);
        assert_eq!(caches[0].kind, INTERNAL);
        let went_upstream = children(&spans, root).iter().any(|s| s.kind == CLIENT);
        results.push((
            root.name.clone(),
            text(caches[0], "sluice.cache.result"),
            went_upstream,
        ));
    }
    results.sort();
    assert_eq!(
        results,
        [
            ("GET /proxy/github".to_owned(), "hit".to_owned(), false),
            ("GET /proxy/github".to_owned(), "miss".to_owned(), true),
            ("POST /proxy/github".to_owned(), "bypass".to_owned(), true),
        ],
        "the hit never went upstream: {:?}",
        names(&spans)
    );
    h.sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_is_not_sampled_is_not_exported() {
    let receiver = Receiver::start(true).await.expect("a receiver");
    let mut settings = otel(&receiver, OtlpProtocol::HttpProtobuf);
    settings.sampling_ratio = 0.0;
    let h = Harness::with(sim_config(), move |c| c.otel = Some(settings)).await;
    // A new trace at ratio 0, and a client's trace it did not sample.
    let res = h
        .send("/v1/chat/completions", &chat("openai/gpt-4o-mini"))
        .await;
    assert_eq!(res.status(), StatusCode::OK);
    let res = h
        .post("/v1/chat/completions", &chat("openai/gpt-4o-mini"))
        .header("traceparent", format!("00-{TRACE}-{PARENT}-00"))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    // A sampled client trace is exported whatever the ratio.
    let res = h
        .post("/v1/chat/completions", &chat("openai/gpt-4o-mini"))
        .header("traceparent", format!("00-{TRACE}-{PARENT}-01"))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    let mut h = h;
    h.shutdown().await; // flushes the exporter
    let spans = receiver.spans();
    assert!(!spans.is_empty());
    assert!(
        spans.iter().all(|s| hex(&s.trace_id) == TRACE),
        "only the sampled client trace: {:?}",
        names(&spans)
    );
    let flags: Vec<String> = h
        .sim
        .log(0)
        .entries
        .iter()
        .filter_map(|e| e.traceparent.clone())
        .map(|tp| tp.rsplit('-').next().unwrap().to_owned())
        .collect();
    assert_eq!(flags, ["00", "00", "01"], "the decision travels upstream");
    h.sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_attempt_is_a_span_and_the_upstreams_parent() {
    let receiver = Receiver::start(true).await.expect("a receiver");
    let h = harness(&receiver, OtlpProtocol::Grpc).await;
    let res = h
        .post(
            "/v1/jobs",
            &json!({
                "queue": "default",
                "kind": "http",
                "payload": {"api": "slack", "method": "POST", "path": "/api/chat.postMessage", "body": {}}
            }),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::CREATED);
    let id = res.json::<Value>().await.unwrap()["id"].as_i64().unwrap();
    let spans = receiver.wait_for(1, Duration::from_secs(20)).await;
    let job = one(&spans, "job http");
    assert_eq!(job.kind, 5, "CONSUMER");
    assert!(job.parent_span_id.is_empty(), "a job is a trace of its own");
    assert_eq!(text(job, "messaging.message.id"), id.to_string());
    assert_eq!(text(job, "messaging.destination.name"), "default");
    assert_eq!(int(job, "sluice.job.attempt"), 1);
    assert_eq!(text(job, "sluice.job.outcome"), "completed");
    let sent: Vec<String> = h
        .sim
        .log(0)
        .entries
        .into_iter()
        .filter(|e| e.path == "/slack/api/chat.postMessage")
        .filter_map(|e| e.traceparent)
        .collect();
    assert_eq!(
        sent,
        [format!(
            "00-{}-{}-01",
            hex(&job.trace_id),
            hex(&job.span_id)
        )],
        "the upstream's parent is the attempt's span, sampled"
    );
    h.stop().await;
}
