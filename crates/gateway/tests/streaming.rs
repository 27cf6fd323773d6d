//! Streams pass through chunk by chunk; the usage chunk the gateway asks
//! for is kept from clients that did not; a client that goes away
//! mid-stream gives back what it held.

mod common;

use std::time::Duration;

use common::{Harness, header, model_limits, sim_config, sim_model, sse_data, wait_until};
use reqwest::StatusCode;
use serde_json::{Value, json};
use sluice_sim::Latency;

fn stream_body(model: &str) -> Value {
    json!({
        "model": model,
        "stream": true,
        "messages": [{"role": "user", "content": "hello there"}],
    })
}

fn paced(per_token_ms: u64, tokens: u32) -> sluice_sim::ModelConfig {
    sim_model(
        Latency {
            per_token_ms,
            ..Latency::default()
        },
        Some(tokens),
    )
}

/// The first chunk gets to the client while the sim is still writing the
/// rest: with 1 s between tokens the whole stream takes 9 s, and a gateway
/// that buffered it could not answer within the 5 s bound.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_first_chunk_arrives_before_the_stream_ends() {
    let mut sim = sim_config();
    sim.models.insert("slow-stream".into(), paced(1_000, 10));
    let h = Harness::with(sim, |_| {}).await;
    let mut res = h
        .send("/v1/chat/completions", &stream_body("openai/slow-stream"))
        .await;
    assert_eq!(res.status(), StatusCode::OK);
    assert!(header(&res, "content-type").starts_with("text/event-stream"));
    assert_eq!(header(&res, "x-sluice-attempts"), "1");
    let first = tokio::time::timeout(Duration::from_secs(5), res.chunk())
        .await
        .expect("a chunk long before the sim's last token")
        .expect("the stream reads")
        .expect("a chunk");
    let text = String::from_utf8_lossy(&first);
    assert!(text.contains("chat.completion.chunk"), "{text}");
    assert!(!text.contains("[DONE]"), "not the end already: {text}");
    drop(res);
    h.stop().await;
}

/// The harness with `model` in the sim, one stream of it read whole:
/// how many non-empty reads it took and the bytes.
async fn stream_reads(model: &str, config: sluice_sim::ModelConfig) -> (Harness, usize, Vec<u8>) {
    let mut sim = sim_config();
    sim.models.insert(model.into(), config);
    let h = Harness::with(sim, |_| {}).await;
    let mut res = h
        .send(
            "/v1/chat/completions",
            &stream_body(&format!("openai/{model}")),
        )
        .await;
    assert_eq!(res.status(), StatusCode::OK);
    let mut reads = 0;
    let mut all = Vec::new();
    while let Some(chunk) = res.chunk().await.expect("the stream reads") {
        if !chunk.is_empty() {
            reads += 1;
            all.extend_from_slice(&chunk);
        }
    }
    (h, reads, all)
}

/// A paced stream arrives in many reads, in order, and whole.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chunks_arrive_one_by_one_and_in_order() {
    let (h, reads, all) = stream_reads("paced", paced(15, 8)).await;
    // Eight tokens 15 ms apart: a buffered body would come in one read.
    assert!(reads >= 4, "only {reads} reads: the stream was buffered");
    let data = sse_data(&String::from_utf8(all).unwrap());
    assert_eq!(data.last().map(String::as_str), Some("[DONE]"));
    let text: String = data
        .iter()
        .filter(|d| *d != "[DONE]")
        .map(|d| serde_json::from_str::<Value>(d).unwrap())
        .filter_map(|c| {
            c["choices"][0]["delta"]["content"]
                .as_str()
                .map(str::to_owned)
        })
        .collect();
    assert_eq!(text.split_whitespace().count(), 8, "every token: {text:?}");
    h.stop().await;
}

/// Events that the upstream sends at once (a sim with no pauses writes
/// its whole stream in one or two writes) reach the client together, not
/// one write, and one read, per event; and whole, in order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_sent_together_go_out_together() {
    let (h, reads, all) = stream_reads("burst", paced(0, 16)).await;
    let data = sse_data(&String::from_utf8(all).unwrap());
    // A role chunk, 16 tokens, the finish chunk and `[DONE]`.
    assert_eq!(data.len(), 19, "{data:?}");
    assert_eq!(data.last().map(String::as_str), Some("[DONE]"));
    assert!(
        reads < data.len() / 2,
        "{reads} reads for {} events",
        data.len()
    );
    h.stop().await;
}

fn usage_chunks(data: &[String]) -> Vec<Value> {
    data.iter()
        .filter(|d| *d != "[DONE]")
        .map(|d| serde_json::from_str::<Value>(d).unwrap())
        .filter(|c| c["usage"].is_object())
        .collect()
}

/// The gateway asks upstream for usage to settle tokens; a client that did
/// not ask must not see it, one that did must.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_usage_chunk_is_kept_only_for_clients_that_asked() {
    let h = Harness::start().await;

    let res = h
        .send("/v1/chat/completions", &stream_body("openai/gpt-4o-mini"))
        .await;
    assert_eq!(res.status(), StatusCode::OK);
    let data = sse_data(&res.text().await.unwrap());
    assert_eq!(data.last().map(String::as_str), Some("[DONE]"));
    assert!(usage_chunks(&data).is_empty(), "usage leaked: {data:?}");
    for d in data.iter().filter(|d| *d != "[DONE]") {
        let c: Value = serde_json::from_str(d).unwrap();
        assert!(
            !c["choices"].as_array().unwrap().is_empty(),
            "the usage-only chunk (empty choices) leaked: {d}"
        );
    }

    let mut asked = stream_body("openai/gpt-4o-mini");
    asked["stream_options"] = json!({"include_usage": true});
    let res = h.send("/v1/chat/completions", &asked).await;
    assert_eq!(res.status(), StatusCode::OK);
    let data = sse_data(&res.text().await.unwrap());
    let usage = usage_chunks(&data);
    assert_eq!(usage.len(), 1, "one usage chunk: {data:?}");
    assert_eq!(usage[0]["choices"], json!([]));
    assert!(usage[0]["usage"]["total_tokens"].as_u64().unwrap() > 0);
    assert_eq!(h.sim.stats().model("gpt-4o-mini").ok, 2);
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn anthropic_and_responses_streams_pass_through() {
    let h = Harness::start().await;
    let res = h
        .send(
            "/v1/messages",
            &json!({
                "model": "anthropic/claude-sonnet-4-5",
                "max_tokens": 4,
                "stream": true,
                "messages": [{"role": "user", "content": "hi"}],
            }),
        )
        .await;
    assert_eq!(res.status(), StatusCode::OK);
    let body = res.text().await.unwrap();
    for event in [
        "message_start",
        "content_block_delta",
        "message_delta",
        "message_stop",
    ] {
        assert!(
            body.contains(&format!("event: {event}")),
            "{event} in {body}"
        );
    }

    let res = h
        .send(
            "/v1/responses",
            &json!({"model": "openai/gpt-4o", "input": "hi", "stream": true}),
        )
        .await;
    assert_eq!(res.status(), StatusCode::OK);
    let body = res.text().await.unwrap();
    assert!(body.contains("event: response.completed"), "{body}");
    h.stop().await;
}

/// With one call in flight allowed, a client that reads one chunk and
/// leaves must free the slot: the next request gets it long before the
/// abandoned stream (20 tokens 200 ms apart) would have ended.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_leaving_mid_stream_releases_its_grant() {
    let mut sim = sim_config();
    sim.models.insert("held".into(), paced(200, 20));
    let h = Harness::with(sim, |c| {
        c.models.push(common::ModelLimits {
            max_in_flight: Some(1),
            ..model_limits("openai/held")
        });
    })
    .await;
    let mut res = h
        .send("/v1/chat/completions", &stream_body("openai/held"))
        .await;
    assert_eq!(res.status(), StatusCode::OK);
    res.chunk().await.unwrap().expect("a first chunk");
    let held = h.resource("inflight:openai/held").await.expect("in use");
    assert_eq!(held["in_flight"], 1, "{held}");
    drop(res);

    // Shorter than what is left of the abandoned stream (about 3.8 s).
    let res = h
        .post("/v1/chat/completions", &common::chat("openai/held"))
        .header("x-sluice-timeout-ms", "3000")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::OK, "the slot came back");
    res.bytes().await.unwrap();
    wait_until("the in-flight slot is free", || async {
        h.resource("inflight:openai/held")
            .await
            .is_none_or(|r| r["in_flight"] == 0)
    })
    .await;
    assert_eq!(h.sim.stats().model("held").requests, 2);
    h.stop().await;
}

/// A client that leaves after the first chunk is charged the tokens it
/// was sent, not the 50,000 its `max_tokens` reserved: the bucket (60,000
/// a minute, 1,000 a second back) is nearly full again at once, where
/// the reservation would take 50 s to come back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_leaving_mid_stream_is_charged_what_it_was_sent() {
    let mut sim = sim_config();
    sim.models.insert("left".into(), paced(200, 20));
    let h = Harness::with(sim, |c| {
        c.models.push(common::ModelLimits {
            tokens_per_minute: Some(60_000),
            ..model_limits("openai/left")
        });
    })
    .await;
    let mut body = stream_body("openai/left");
    body["max_tokens"] = json!(50_000);
    let mut res = h.send("/v1/chat/completions", &body).await;
    assert_eq!(res.status(), StatusCode::OK);
    res.chunk().await.unwrap().expect("a first chunk");
    let reserved = h.resource("tokens:openai/left").await.expect("in use");
    assert!(
        reserved["available"].as_f64().unwrap() < 20_000.0,
        "{reserved}"
    );
    drop(res);
    wait_until("the tokens not streamed come back", || async {
        h.resource("tokens:openai/left")
            .await
            .is_some_and(|r| r["available"].as_f64().unwrap_or(0.0) >= 59_000.0)
    })
    .await;
    h.stop().await;
}

/// The sim drops the connection after two events: the client gets an
/// error event instead of `[DONE]`, and the stream is not sent again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_cut_upstream_is_cut_for_the_client_and_never_resent() {
    let h = Harness::start().await;
    let cut = sluice_sim::Faults {
        disconnect_every: Some(1),
        disconnect_after_chunks: 2,
        ..sluice_sim::Faults::none()
    };
    h.sim
        .set_faults(sluice_sim::Scope::Model("cut-stream".into()), cut)
        .unwrap();
    let mut res = h
        .send("/v1/chat/completions", &stream_body("openai/cut-stream"))
        .await;
    assert_eq!(res.status(), StatusCode::OK);
    assert_eq!(header(&res, "x-sluice-attempts"), "1");
    let mut got = Vec::new();
    let failed = loop {
        match res.chunk().await {
            Ok(Some(c)) => got.extend_from_slice(&c),
            Ok(None) => break false,
            Err(_) => break true,
        }
    };
    let text = String::from_utf8_lossy(&got);
    assert!(
        !text.contains("[DONE]"),
        "a cut stream looked whole: {text}"
    );
    // Told in the stream, in OpenAI's shape, and the stream ends cleanly
    // after it (issue 17): an SDK raises it.
    assert!(!failed, "the stream ends cleanly after its error event");
    let last = text
        .split("\n\n")
        .filter(|e| e.starts_with("data: "))
        .last()
        .expect("an event");
    let e: serde_json::Value = serde_json::from_str(&last["data: ".len()..]).expect("JSON");
    assert_eq!(e["error"]["code"], "upstream_error", "{text}");
    let seen = h.sim.stats().model("cut-stream");
    assert_eq!((seen.requests, seen.disconnects), (1, 1), "not resent");
    h.stop().await;
}

/// A deadline that passes mid-stream ends the stream (and frees its slot)
/// instead of holding the client until the upstream finishes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deadline_passing_mid_stream_ends_it() {
    let mut sim = sim_config();
    sim.models.insert("long".into(), paced(100, 50));
    let h = Harness::with(sim, |c| {
        c.models.push(common::ModelLimits {
            max_in_flight: Some(1),
            ..model_limits("openai/long")
        });
    })
    .await;
    let mut res = h
        .post("/v1/chat/completions", &stream_body("openai/long"))
        .header("x-sluice-timeout-ms", "400")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    // The stream would take 5 s; the deadline ends it long before.
    let read = tokio::time::timeout(Duration::from_secs(3), async {
        let mut got = Vec::new();
        while let Ok(Some(c)) = res.chunk().await {
            got.extend_from_slice(&c);
        }
        got
    })
    .await
    .expect("the stream ends at its deadline");
    let text = String::from_utf8_lossy(&read);
    assert!(!text.contains("[DONE]"));
    assert!(text.contains(r#""code":"deadline_exceeded""#), "{text}");
    wait_until("the in-flight slot is free", || async {
        h.resource("inflight:openai/long")
            .await
            .is_none_or(|r| r["in_flight"] == 0)
    })
    .await;
    h.stop().await;
}
