//! The request log end to end: calls through `sluice serve` in front of
//! `sluice sim`, read back at `GET /v1/requests` (a tenant's own),
//! `/v1/requests/all` (the operator's) and with `sluice requests`.

mod common;

use common::{Stack, read_until, requests_cli};
use serde_json::Value;

fn config(sim: &str, data: &std::path::Path) -> String {
    format!(
        "data_dir = {:?}\nadmin_token = \"adm\"\n[trace]\nenabled = false\n[jobs]\nenabled = false\n\
         [[tenants]]\nname = \"acme\"\napi_key_env = \"ACME_KEY\"\n\
         [[tenants]]\nname = \"globex\"\napi_key_env = \"GLOBEX_KEY\"\n{}",
        data.display().to_string(),
        common::sim_providers(sim, &["openai"])
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_tenant_reads_its_own_requests_and_the_operator_all() {
    let env = [("ACME_KEY", "key-acme"), ("GLOBEX_KEY", "key-globex")];
    let stack = Stack::start("cli-requests", &env, config);
    let url = stack.gateway.url.clone();
    let http = common::client();
    let chat = format!("{url}/v1/chat/completions");
    for (key, id) in [
        ("key-acme", "acme-1"),
        ("key-acme", "acme-2"),
        ("key-globex", "globex-1"),
    ] {
        let res = http
            .post(&chat)
            .bearer_auth(key)
            .header("x-request-id", id)
            .json(&common::chat("openai/gpt-4o-mini", false))
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 200);
    }
    // A refusal is in the log too: a model no provider serves.
    let refused = http
        .post(&chat)
        .bearer_auth("key-acme")
        .header("x-request-id", "acme-bad")
        .json(&common::chat("nobody/model", false))
        .send()
        .await
        .unwrap();
    let refused_status = refused.status().as_u16();
    assert!(refused_status >= 400);

    // The ledger writes in the background: wait for the three calls.
    let ids = |body: &Value| -> Vec<String> {
        body["requests"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["request_id"].as_str().unwrap().to_owned())
            .collect()
    };
    let all = read_until(&http, &format!("{url}/v1/requests/all"), "adm", |all| {
        ids(all)
            .iter()
            .filter(|i| !i.starts_with("acme-bad"))
            .count()
            >= 3
    })
    .await;
    let everyone = ids(&all);
    for id in ["acme-1", "acme-2", "globex-1"] {
        assert!(everyone.contains(&id.to_owned()), "{id} missing: {all}");
    }
    let own = common::read_json(
        "GET /v1/requests",
        http.get(format!("{url}/v1/requests"))
            .bearer_auth("key-globex"),
    )
    .await;
    assert_eq!(ids(&own), ["globex-1"], "a tenant sees its own only: {own}");
    let first = &own["requests"][0];
    assert_eq!(first["tenant"], "globex");
    assert_eq!(first["status"], 200);
    assert!(first["prompt_tokens"].as_u64().unwrap() > 0, "{first}");

    // A tenant may not name another.
    let res = http
        .get(format!("{url}/v1/requests?tenant=acme"))
        .bearer_auth("key-globex")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 400);

    // The CLI: a page of one, then the next, as acme.
    let page = requests_cli(
        &url,
        &["--api-key", "key-acme", "--limit", "1", "--status", "200"],
    );
    assert_eq!(ids(&page), ["acme-2"], "{page}");
    let before = page["next_before"]
        .as_i64()
        .expect("a next page")
        .to_string();
    let next = requests_cli(
        &url,
        &[
            "--api-key",
            "key-acme",
            "--limit",
            "1",
            "--status",
            "200",
            "--before",
            &before,
        ],
    );
    assert_eq!(ids(&next), ["acme-1"], "{next}");
    // The operator, one tenant.
    let globex = requests_cli(&url, &["--admin-token", "adm", "--tenant", "globex"]);
    assert_eq!(ids(&globex), ["globex-1"]);
}

/// A call of a model without a price is marked `unpriced` (its cost is
/// unknown, not 0) in the request log and counted in usage; a priced
/// one is not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unpriced_call_is_marked_so_not_free() {
    let env = [("ACME_KEY", "key-acme"), ("GLOBEX_KEY", "key-globex")];
    let stack = Stack::start("cli-unpriced", &env, config);
    let url = stack.gateway.url.clone();
    let http = common::client();
    for (model, id) in [
        ("openai/gpt-4o-mini", "priced"),
        ("openai/sluice-no-such-price", "unpriced"),
    ] {
        let res = http
            .post(format!("{url}/v1/chat/completions"))
            .bearer_auth("key-acme")
            .header("x-request-id", id)
            .json(&common::chat(model, false))
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 200, "{model}");
    }
    let log = read_until(&http, &format!("{url}/v1/requests"), "key-acme", |log| {
        log["requests"].as_array().is_some_and(|r| r.len() >= 2)
    })
    .await;
    let row = |id: &str| -> Value {
        log["requests"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["request_id"] == id)
            .unwrap_or_else(|| panic!("{id} missing: {log}"))
            .clone()
    };
    let (priced, unpriced) = (row("priced"), row("unpriced"));
    assert_eq!(priced["unpriced"], false, "{priced}");
    assert!(priced["cost_usd"].as_f64().unwrap() > 0.0, "{priced}");
    assert_eq!(unpriced["unpriced"], true, "{unpriced}");
    assert_eq!(unpriced["cost_usd"], 0.0, "{unpriced}");
    assert!(
        unpriced["prompt_tokens"].as_u64().unwrap() > 0,
        "{unpriced}"
    );
    let usage: Value = http
        .get(format!("{url}/v1/usage?group_by=model"))
        .bearer_auth("key-acme")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let rows = usage["rows"].as_array().expect("usage rows");
    let of = |model: &str| {
        rows.iter()
            .find(|r| r["model"] == model)
            .unwrap_or_else(|| panic!("{model} missing: {usage}"))["unpriced"]
            .clone()
    };
    assert_eq!(of("openai/sluice-no-such-price"), 1, "{usage}");
    assert_eq!(of("openai/gpt-4o-mini"), 0, "{usage}");
}
