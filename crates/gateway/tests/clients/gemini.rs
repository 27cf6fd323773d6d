//! Gemini clients (`/v1beta/models/{model}:generateContent`, the same
//! under `/v1/models/…`) calling a model of every provider: Gemini's
//! passed through, OpenAI's and Anthropic's translated.

use super::common::{ACME, Harness, sim_config};
use super::{MODELS, config};
use reqwest::StatusCode;
use serde_json::{Value, json};

fn ask() -> Value {
    json!({
        "systemInstruction": {"parts": [{"text": "Be brief."}]},
        "contents": [{"role": "user", "parts": [{"text": "Say hello"}]}],
        "generationConfig": {"maxOutputTokens": 6},
    })
}

async fn post(h: &Harness, path: &str, body: &Value) -> reqwest::Response {
    h.post(path, body)
        .header("x-goog-api-key", ACME)
        .send()
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_provider_answers_generate_content() {
    let h = Harness::with(sim_config(), config).await;
    for (model, upstream) in MODELS {
        // Both bases the google-genai SDK uses; the prefixed model arrives
        // as two path segments.
        for base in ["/v1beta/models", "/v1/models"] {
            let res = post(&h, &format!("{base}/{model}:generateContent"), &ask()).await;
            assert_eq!(res.status(), StatusCode::OK, "{base} {model}");
            let r: Value = res.json().await.unwrap();
            let c = &r["candidates"][0];
            assert_eq!(c["content"]["role"], "model", "{model}: {r}");
            let text = c["content"]["parts"][0]["text"].as_str().unwrap();
            assert_eq!(text.split_whitespace().count(), 6, "{model}: {r}");
            assert_eq!(c["finishReason"], "MAX_TOKENS", "{model}");
            let u = &r["usageMetadata"];
            assert_eq!(u["candidatesTokenCount"], 6, "{model}: {u}");
            let p = u["promptTokenCount"].as_u64().unwrap();
            assert_eq!(
                u["totalTokenCount"].as_u64().unwrap(),
                p + 6,
                "{model}: {u}"
            );
        }
        assert_eq!(h.sim.stats().model(upstream).ok, 2, "{model}");
    }
    // A name without a prefix is Google's.
    let res = post(
        &h,
        "/v1beta/models/gemini-2.5-flash:generateContent",
        &ask(),
    )
    .await;
    assert_eq!(res.status(), StatusCode::OK);
    assert_eq!(h.sim.stats().model("gemini-2.5-flash").ok, 3);
    h.stop().await;
}

/// The chunks of a Gemini stream, SSE or a JSON array.
async fn chunks(res: reqwest::Response, sse: bool) -> Vec<Value> {
    assert_eq!(res.status(), StatusCode::OK);
    let text = res.text().await.unwrap();
    if sse {
        text.split("\r\n\r\n")
            .filter(|e| !e.trim().is_empty())
            .map(|e| serde_json::from_str(e.trim().strip_prefix("data: ").unwrap()).unwrap())
            .collect()
    } else {
        let v: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"));
        v.as_array().unwrap().clone()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streams_come_as_events_or_an_array_for_every_provider() {
    let h = Harness::with(sim_config(), config).await;
    for (model, _) in MODELS {
        for (query, sse) in [("?alt=sse", true), ("", false)] {
            let path = format!("/v1beta/models/{model}:streamGenerateContent{query}");
            let cs = chunks(post(&h, &path, &ask()).await, sse).await;
            assert!(cs.len() > 1, "{model} {query}: {cs:?}");
            let text: String = cs
                .iter()
                .flat_map(|c| c["candidates"].as_array().cloned().unwrap_or_default())
                .flat_map(|c| {
                    c["content"]["parts"]
                        .as_array()
                        .cloned()
                        .unwrap_or_default()
                })
                .filter_map(|p| p["text"].as_str().map(str::to_owned))
                .collect();
            assert_eq!(
                text.split_whitespace().count(),
                6,
                "{model} {query}: {text:?}"
            );
            let last = cs.last().unwrap();
            assert_eq!(
                last["candidates"][0]["finishReason"], "MAX_TOKENS",
                "{model}: {last}"
            );
            assert_eq!(
                last["usageMetadata"]["candidatesTokenCount"], 6,
                "{model}: {last}"
            );
        }
    }
    h.stop().await;
}

fn tools_body() -> Value {
    json!({
        "contents": [{"role": "user", "parts": [{"text": "Weather in Paris?"}]}],
        "tools": [{"functionDeclarations": [{"name": "get_weather",
            "description": "The weather in a city.",
            "parameters": {"type": "OBJECT", "properties": {"city": {"type": "STRING"}},
                "required": ["city"]}}]}],
        "generationConfig": {"maxOutputTokens": 100},
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn function_calls_and_responses_go_both_ways() {
    let h = Harness::with(sim_config(), config).await;
    for (model, _) in MODELS {
        let path = format!("/v1beta/models/{model}:generateContent");
        let r: Value = post(&h, &path, &tools_body()).await.json().await.unwrap();
        let parts = r["candidates"][0]["content"]["parts"]
            .as_array()
            .unwrap()
            .clone();
        let call = parts
            .iter()
            .find_map(|p| p.get("functionCall"))
            .unwrap_or_else(|| panic!("{model}: a functionCall in {r}"))
            .clone();
        assert_eq!(call["name"], "get_weather");
        assert!(call["args"]["city"].is_string(), "{model}: {call}");
        // Streamed: the call comes whole.
        let path_s = format!("/v1beta/models/{model}:streamGenerateContent?alt=sse");
        let cs = chunks(post(&h, &path_s, &tools_body()).await, true).await;
        let streamed = cs
            .iter()
            .flat_map(|c| {
                c["candidates"][0]["content"]["parts"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default()
            })
            .find_map(|p| p.get("functionCall").cloned())
            .unwrap_or_else(|| panic!("{model}: a functionCall in {cs:?}"));
        assert!(streamed["args"]["city"].is_string(), "{model}: {streamed}");
        // The response goes back by the function's name.
        let mut body = tools_body();
        let contents = body["contents"].as_array_mut().unwrap();
        contents.push(json!({"role": "model", "parts": [{"functionCall": {"name": "get_weather", "args": call["args"]}}]}));
        contents.push(json!({"role": "user", "parts": [{"functionResponse":
            {"name": "get_weather", "response": {"weather": "sunny"}}}]}));
        let res = post(&h, &path, &body).await;
        assert_eq!(res.status(), StatusCode::OK, "{model}");
        let r: Value = res.json().await.unwrap();
        let part = &r["candidates"][0]["content"]["parts"][0];
        assert!(part["text"].is_string(), "{model}: {r}");
    }
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn count_tokens_models_keys_and_refusals() {
    let h = Harness::with(sim_config(), config).await;
    for (model, _) in MODELS {
        let r: Value = post(&h, &format!("/v1beta/models/{model}:countTokens"), &ask())
            .await
            .json()
            .await
            .unwrap();
        assert!(r["totalTokens"].as_u64().unwrap() > 0, "{model}: {r}");
    }
    let list = h
        .get("/v1beta/models")
        .header("x-goog-api-key", ACME)
        .send()
        .await
        .unwrap();
    assert_eq!(list.status(), StatusCode::OK);
    let list: Value = list.json().await.unwrap();
    assert!(
        list["models"]
            .as_array()
            .unwrap()
            .iter()
            .all(|m| m["name"].as_str().unwrap().starts_with("models/"))
    );
    // The key as `?key=`; a wrong one is refused before anything runs.
    let path = format!("/v1beta/models/{}:generateContent", MODELS[0].0);
    let res = h
        .post(&format!("{path}?key={ACME}"), &ask())
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    let res = h
        .post(&format!("{path}?key=nope"), &ask())
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::UNAUTHORIZED);
    // What Anthropic cannot take is a 400 naming it.
    let mut body = ask();
    body["generationConfig"]["topK"] = json!(3);
    let path = format!("/v1beta/models/{}:generateContent", MODELS[1].0);
    let res = post(&h, &path, &body).await;
    assert_eq!(res.status(), StatusCode::BAD_REQUEST);
    let text = res.text().await.unwrap();
    assert!(
        text.contains("generationConfig.topK") && text.contains("Anthropic"),
        "{text}"
    );
    let res = post(&h, "/v1beta/models/google/gemini-2.5-flash:predict", &ask()).await;
    assert_eq!(res.status(), StatusCode::NOT_FOUND);
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn embed_content_reaches_openai_embeddings() {
    let h = Harness::with(sim_config(), config).await;
    let base = "/v1beta/models/openai/text-embedding-3-small";
    let one = json!({"content": {"parts": [{"text": "hello"}]}, "outputDimensionality": 8});
    let r: Value = post(&h, &format!("{base}:embedContent"), &one)
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(r["embedding"]["values"].as_array().unwrap().len(), 8, "{r}");
    let batch = json!({"requests": [
        {"model": "models/openai/text-embedding-3-small", "content": {"parts": [{"text": "a"}]}},
        {"model": "models/openai/text-embedding-3-small", "content": {"parts": [{"text": "b"}]}},
    ]});
    let r: Value = post(&h, &format!("{base}:batchEmbedContents"), &batch)
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(r["embeddings"].as_array().unwrap().len(), 2, "{r}");
    // Gemini's task hints cannot be sent to OpenAI: a 400 naming them.
    let mut hinted = one.clone();
    hinted["taskType"] = json!("RETRIEVAL_QUERY");
    let res = post(&h, &format!("{base}:embedContent"), &hinted).await;
    assert_eq!(res.status(), StatusCode::BAD_REQUEST);
    assert!(res.text().await.unwrap().contains("taskType"));
    h.stop().await;
}
