//! Budgets overspent by leaving out `max_tokens` (issue 33, High 3): the
//! reservation assumed `tokens.default_max_tokens` (1,024) while the
//! OpenAI pass-through and the Gemini translation sent no limit, and the
//! upstream wrote as much as it liked. Here the simulated models write
//! 20,000 tokens unless told otherwise, as a real model writes up to its
//! own maximum: 50 concurrent calls without `max_tokens` against a $1.00
//! budget must spend no more than the budget.

use futures_util::future::join_all;
use serde_json::Value;
use sluice_sim::{ModelConfig, SimConfig};
use sluice_usage::{PriceTable, Usage};

use crate::gateway::{Gateway, chat, client, sim};

/// What the simulated models write when the request sets no limit.
const NATURAL: u32 = 20_000;
/// The budget: $1.00 a month.
const BUDGET: &str = "1.00";
const BUDGET_NANOS: u64 = 1_000_000_000;

fn long_writers() -> SimConfig {
    let mut config = SimConfig::unlimited();
    // A request without a limit gets the model's own maximum.
    config.defaults.max_tokens = 100_000;
    for model in ["gpt-4o", "o3-mini", "gemini-2.5-pro"] {
        config.models.insert(
            model.into(),
            ModelConfig {
                output_tokens: Some(NATURAL),
                ..ModelConfig::default()
            },
        );
    }
    config
}

/// `calls` concurrent calls to `model` as `key`, none with an output
/// limit: how many were answered, and what the answers cost at the
/// price table (from the usage the upstream reported), in nanodollars.
async fn spend(gw: &Gateway, key: &str, model: &str, calls: usize) -> (usize, u64, u64) {
    let http = client();
    let sent = (0..calls).map(|_| {
        http.post(format!("{}/v1/chat/completions", gw.url))
            .bearer_auth(key)
            .json(&chat(model, false))
            .send()
    });
    let prices = PriceTable::defaults();
    let (mut answered, mut spent, mut most) = (0, 0, 0);
    for res in join_all(sent).await {
        let res = res.expect("the gateway answers");
        let status = res.status();
        let body: Value = res.json().await.expect("JSON");
        if status != 200 {
            assert_eq!(status, 429, "refused by the budget, not failed: {body}");
            continue;
        }
        answered += 1;
        let completion = body["usage"]["completion_tokens"].as_u64().unwrap();
        let u = Usage {
            prompt_tokens: body["usage"]["prompt_tokens"].as_u64().unwrap(),
            completion_tokens: completion,
            total_tokens: body["usage"]["total_tokens"].as_u64().unwrap(),
        };
        most = most.max(completion);
        spent += prices.cost(model, &u, 0).unwrap().nanodollars();
    }
    (answered, spent, most)
}

fn dollars(nanos: u64) -> String {
    format!(
        "${}.{:06}",
        nanos / 1_000_000_000,
        nanos % 1_000_000_000 / 1_000
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_without_max_tokens_spend_no_more_than_the_budget() {
    let sim = sim(long_writers()).await;
    let gw = Gateway::start("spend", &sim, "");
    let budget = serde_json::json!([{"name": "monthly", "money": BUDGET, "period": "month"}]);

    // OpenAI pass-through: `max_tokens` for gpt-4o.
    let key = gw.tenant_key("spender", budget.clone()).await;
    let (answered, spent, most) = spend(&gw, &key, "openai/gpt-4o", 50).await;
    println!(
        "openai/gpt-4o: 50 calls without max_tokens, {answered} answered, {} spent of a {} budget, \
         longest answer {most} tokens",
        dollars(spent),
        dollars(BUDGET_NANOS)
    );
    assert!(answered > 0, "some fit the budget");
    assert!(
        most <= 1_024,
        "the reserved limit went upstream: {most} tokens"
    );
    assert!(
        spent <= BUDGET_NANOS,
        "spent {} of {BUDGET}",
        dollars(spent)
    );

    // OpenAI's reasoning models take `max_completion_tokens` only (the sim
    // refuses `max_tokens` for them, as OpenAI does).
    let key = gw.tenant_key("reasoner", budget.clone()).await;
    let (answered, spent, most) = spend(&gw, &key, "openai/o3-mini", 10).await;
    println!(
        "openai/o3-mini: 10 calls, {answered} answered, {} spent",
        dollars(spent)
    );
    assert_eq!(
        answered, 10,
        "every call is answered (none refused for its limit's field)"
    );
    assert!(most <= 1_024, "{most} tokens");
    assert!(spent <= BUDGET_NANOS);

    // The Gemini translation: `generationConfig.maxOutputTokens`.
    let key = gw.tenant_key("gemini", budget).await;
    let (answered, spent, most) = spend(&gw, &key, "google/gemini-2.5-pro", 50).await;
    println!(
        "google/gemini-2.5-pro: 50 calls, {answered} answered, {} spent of {}, longest {most} tokens",
        dollars(spent),
        dollars(BUDGET_NANOS)
    );
    assert!(answered > 0);
    assert!(most <= 1_024, "{most} tokens");
    assert!(spent <= BUDGET_NANOS, "spent {}", dollars(spent));
}
