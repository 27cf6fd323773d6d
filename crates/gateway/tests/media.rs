//! OpenAI's other endpoints through the gateway, against the sim on
//! 127.0.0.1: the legacy `/v1/completions` (passed through to OpenAI,
//! translated via chat for Anthropic's and Gemini's models),
//! `/v1/audio/transcriptions` (a multipart form, its `model` rewritten),
//! `/v1/images/generations` and `/v1/moderations`, passed through to
//! OpenAI-format providers and refused with a 400 naming why elsewhere;
//! the ledger records the tokens the sim served.

mod common;

use common::{ACME, Harness, sim_config, sse_data, two_tenants};
use reqwest::StatusCode;
use serde_json::{Value, json};
use sluice_gateway::config::{Config, ProviderConfig, WireFormat};
use sluice_ledger::LedgerStore;

/// `google/…` on the sim's native Gemini API, and two tenants.
fn config(c: &mut Config) {
    let anthropic = c.providers.iter().find(|p| p.name == "anthropic").unwrap();
    let sim = anthropic
        .base_url
        .trim_end_matches("/anthropic/v1")
        .to_owned();
    let gemini = ProviderConfig {
        name: "google".into(),
        base_url: format!("{sim}/google/v1beta"),
        format: WireFormat::Gemini,
        ..anthropic.clone()
    };
    c.providers.retain(|p| p.name != "google");
    c.providers.push(gemini);
    two_tenants(c);
}

/// A transcription form as an SDK writes it, by hand.
fn audio_form(model: &str, extra: &str) -> (String, Vec<u8>) {
    let mut body = format!(
        "--XyZ\r\nContent-Disposition: form-data; name=\"model\"\r\n\r\n{model}\r\n{extra}\
         --XyZ\r\nContent-Disposition: form-data; name=\"file\"; filename=\"hello.wav\"\r\n\
         Content-Type: audio/wav\r\n\r\n"
    )
    .into_bytes();
    body.extend_from_slice(b"RIFF\x00\x01\x02\r\n--X not the boundary");
    body.extend(std::iter::repeat_n(7u8, 2_500));
    body.extend_from_slice(b"\r\n--XyZ--\r\n");
    ("multipart/form-data; boundary=XyZ".into(), body)
}

async fn upload(h: &Harness, content_type: &str, body: Vec<u8>) -> reqwest::Response {
    h.http
        .post(h.url("/v1/audio/transcriptions"))
        .bearer_auth(ACME)
        .header("content-type", content_type)
        .body(body)
        .send()
        .await
        .unwrap()
}

/// A 400's body, its `error.param` checked by the caller.
async fn bad_request(res: reqwest::Response) -> Value {
    let status = res.status();
    let text = res.text().await.unwrap();
    assert_eq!(status, StatusCode::BAD_REQUEST, "{text}");
    serde_json::from_str(&text).unwrap()
}

async fn ok_json(res: reqwest::Response) -> Value {
    let status = res.status();
    let text = res.text().await.unwrap();
    assert_eq!(status, StatusCode::OK, "{text}");
    serde_json::from_str(&text).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn completions_reach_every_provider_plain_and_streamed() {
    let h = Harness::with(sim_config(), config).await;
    for model in [
        "openai/gpt-3.5-turbo-instruct",
        "anthropic/claude-sonnet-4-5",
        "google/gemini-2.5-flash",
    ] {
        let body = json!({"model": model, "prompt": "Say hello", "max_tokens": 5});
        let c = ok_json(
            h.post("/v1/completions", &body)
                .bearer_auth(ACME)
                .send()
                .await
                .unwrap(),
        )
        .await;
        assert_eq!(c["object"], "text_completion", "{model}: {c}");
        let text = c["choices"][0]["text"].as_str().unwrap();
        assert_eq!(text.split_whitespace().count(), 5, "{model}: {c}");
        assert_eq!(c["choices"][0]["finish_reason"], "length", "{model}: {c}");
        assert_eq!(c["usage"]["completion_tokens"], 5, "{model}: {c}");

        let mut body = body.clone();
        body["stream"] = json!(true);
        body["stream_options"] = json!({"include_usage": true});
        let res = h
            .post("/v1/completions", &body)
            .bearer_auth(ACME)
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), StatusCode::OK, "{model}");
        let events = sse_data(&res.text().await.unwrap());
        assert_eq!(events.last().map(String::as_str), Some("[DONE]"), "{model}");
        let chunks: Vec<Value> = events[..events.len() - 1]
            .iter()
            .map(|e| serde_json::from_str(e).unwrap())
            .collect();
        let streamed: String = chunks
            .iter()
            .filter_map(|c| c["choices"][0]["text"].as_str())
            .collect();
        assert_eq!(
            streamed.split_whitespace().count(),
            5,
            "{model}: {chunks:?}"
        );
        assert!(
            chunks.iter().all(|c| c["object"] == "text_completion"),
            "{model}"
        );
        let usage = chunks
            .iter()
            .find_map(|c| c.get("usage").filter(|u| !u.is_null()));
        assert_eq!(
            usage.map(|u| u["completion_tokens"].clone()),
            Some(json!(5)),
            "{model}"
        );
    }
    // What chat cannot express is named, with the provider.
    let body = json!({"model": "anthropic/claude-sonnet-4-5", "prompt": "x", "echo": true});
    let res = h
        .post("/v1/completions", &body)
        .bearer_auth(ACME)
        .send()
        .await
        .unwrap();
    let e = bad_request(res).await;
    assert_eq!(e["error"]["param"], "echo", "{e}");
    assert!(
        e["error"]["message"]
            .as_str()
            .unwrap()
            .contains("Anthropic"),
        "{e}"
    );
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transcription_form_reaches_openai_with_its_model_rewritten() {
    let h = Harness::with(sim_config(), config).await;
    let (ct, body) = audio_form(
        "openai/gpt-4o-transcribe",
        "--XyZ\r\nContent-Disposition: form-data; name=\"language\"\r\n\r\nen\r\n",
    );
    let t = ok_json(upload(&h, &ct, body).await).await;
    assert!(!t["text"].as_str().unwrap().is_empty(), "{t}");
    // The sim read the form and counted the audio (2,5xx bytes: 3 tokens).
    assert_eq!(t["usage"]["input_tokens"], 3, "{t}");
    let seen = h.sim.stats().model("gpt-4o-transcribe");
    assert_eq!((seen.requests, seen.ok), (1, 1));

    // `text` comes back as text.
    let (ct, body) = audio_form(
        "openai/whisper-1",
        "--XyZ\r\nContent-Disposition: form-data; name=\"response_format\"\r\n\r\ntext\r\n",
    );
    let res = upload(&h, &ct, body).await;
    assert_eq!(res.status(), StatusCode::OK);
    assert!(
        res.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/plain")
    );
    assert!(!res.text().await.unwrap().is_empty());

    // Broken forms are 400s naming what is wrong, before the upstream.
    let res = upload(&h, "application/json", b"{}".to_vec()).await;
    let e = bad_request(res).await;
    assert_eq!(e["error"]["param"], "content-type", "{e}");
    let no_file =
        b"--b\r\nContent-Disposition: form-data; name=\"model\"\r\n\r\nopenai/whisper-1\r\n--b--"
            .to_vec();
    let res = upload(&h, "multipart/form-data; boundary=b", no_file).await;
    let e = bad_request(res).await;
    assert_eq!(e["error"]["param"], "file", "{e}");
    let (ct, mut cut) = audio_form("openai/whisper-1", "");
    cut.truncate(cut.len() - 12);
    let res = upload(&h, &ct, cut).await;
    bad_request(res).await;
    let (ct, body) = audio_form(
        "openai/whisper-1",
        "--XyZ\r\nContent-Disposition: form-data; name=\"stream\"\r\n\r\ntrue\r\n",
    );
    let e = bad_request(upload(&h, &ct, body).await).await;
    assert_eq!(e["error"]["param"], "stream", "{e}");
    // Only OpenAI-format providers have it.
    let (ct, body) = audio_form("anthropic/claude-sonnet-4-5", "");
    let e = bad_request(upload(&h, &ct, body).await).await;
    assert_eq!(e["error"]["param"], "model", "{e}");
    assert!(
        e["error"]["message"]
            .as_str()
            .unwrap()
            .contains("/v1/audio/transcriptions"),
        "{e}"
    );
    assert_eq!(h.sim.stats().model("whisper-1").requests, 1);
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn images_and_moderations_pass_through_to_openai_only() {
    let h = Harness::with(sim_config(), config).await;
    let body = json!({"model": "openai/gpt-image-1", "prompt": "a sluice gate", "n": 2,
        "size": "1024x1024", "response_format": "b64_json"});
    let i = ok_json(
        h.post("/v1/images/generations", &body)
            .bearer_auth(ACME)
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(i["data"].as_array().unwrap().len(), 2, "{i}");
    assert!(i["data"][0]["b64_json"].is_string(), "{i}");
    assert_eq!(i["usage"]["output_tokens"], 544, "{i}");
    // The sim is as strict as OpenAI: a size it does not make is named.
    let bad = json!({"model": "openai/gpt-image-1", "prompt": "x", "size": "7x7"});
    let res = h
        .post("/v1/images/generations", &bad)
        .bearer_auth(ACME)
        .send()
        .await
        .unwrap();
    let e = bad_request(res).await;
    assert_eq!(e["error"]["param"], "size", "{e}");

    let body = json!({"model": "openai/omni-moderation-latest", "input": ["a", "b"]});
    let m = ok_json(
        h.post("/v1/moderations", &body)
            .bearer_auth(ACME)
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(m["results"].as_array().unwrap().len(), 2, "{m}");
    assert_eq!(m["results"][0]["flagged"], false);

    for (path, body) in [
        (
            "/v1/images/generations",
            json!({"model": "google/gemini-2.5-flash", "prompt": "x"}),
        ),
        (
            "/v1/moderations",
            json!({"model": "anthropic/claude-sonnet-4-5", "input": "x"}),
        ),
    ] {
        let res = h.post(path, &body).bearer_auth(ACME).send().await.unwrap();
        let e = bad_request(res).await;
        assert_eq!(e["error"]["param"], "model", "{e}");
        assert!(
            e["error"]["message"].as_str().unwrap().contains(path),
            "{e}"
        );
    }
    // Streams of images are refused by name rather than passed unmetered.
    let body = json!({"model": "openai/gpt-image-1", "prompt": "x", "stream": true});
    let res = h
        .post("/v1/images/generations", &body)
        .bearer_auth(ACME)
        .send()
        .await
        .unwrap();
    let e = bad_request(res).await;
    assert_eq!(e["error"]["param"], "stream", "{e}");
    // The tenant key is checked as on every model route.
    let res = h
        .post(
            "/v1/moderations",
            &json!({"model": "openai/omni-moderation-latest", "input": "x"}),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::UNAUTHORIZED);
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_ledger_records_what_the_sim_served_on_every_endpoint() {
    let mut h = Harness::with(sim_config(), config).await;
    let calls = [
        (
            "/v1/completions",
            json!({"model": "openai/gpt-3.5-turbo-instruct", "prompt": "hi", "max_tokens": 4}),
        ),
        (
            "/v1/completions",
            json!({"model": "anthropic/claude-sonnet-4-5", "prompt": "hi", "max_tokens": 4, "stream": true}),
        ),
        (
            "/v1/images/generations",
            json!({"model": "openai/gpt-image-1", "prompt": "a gate"}),
        ),
        (
            "/v1/moderations",
            json!({"model": "openai/omni-moderation-latest", "input": "hello there"}),
        ),
    ];
    for (path, body) in &calls {
        let res = h.post(path, body).bearer_auth(ACME).send().await.unwrap();
        assert_eq!(res.status(), StatusCode::OK, "{path}");
        res.text().await.unwrap();
    }
    let (ct, body) = audio_form("openai/gpt-4o-transcribe", "");
    ok_json(upload(&h, &ct, body).await).await;
    h.shutdown().await;
    let store = LedgerStore::open(h.data_dir.join("ledger.db"))
        .await
        .unwrap();
    let t = store.totals(0, i64::MAX, None).await.unwrap();
    let stats = h.sim.stats();
    let (p, c) = [
        "gpt-3.5-turbo-instruct",
        "claude-sonnet-4-5",
        "gpt-image-1",
        "gpt-4o-transcribe",
    ]
    .iter()
    .fold((0, 0), |(p, c), m| {
        let s = stats.model(m);
        (p + s.tokens_in, c + s.tokens_out)
    });
    assert_eq!(t.records, 5);
    // Moderations report no usage: their record holds the estimate,
    // which the sim's count of the same input matches.
    let moderation = stats.model("omni-moderation-latest");
    assert_eq!(
        (t.prompt_tokens, t.completion_tokens),
        (p + moderation.tokens_in, c),
        "ledger {t:?}"
    );
}
