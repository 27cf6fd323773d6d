//! (d) What keys and budgets cost: (a)'s non-streamed stream through the
//! in-process gateway without a key, then as a key whose tenant has
//! budgets.

use serde_json::json;

use super::report::{Cpu, KeysPart};
use super::requests::{chat, keyed_request};
use super::{BENCH_ADMIN, GatewayArgs, MODEL, PROVIDER, note, open_loop};

/// (a)'s non-streamed chat completion through the gateway, as `key`.
fn keyed_chat(
    client: &reqwest::Client,
    base: &str,
    key: &str,
) -> impl Fn() -> reqwest::RequestBuilder + Send + Sync + 'static {
    let url = format!("{base}/v1/chat/completions");
    let body = json!({"model": format!("{PROVIDER}/{MODEL}"), "max_tokens": 16, "messages": [{"role": "user", "content": "ping"}]});
    keyed_request(client, url, body, Some(key.to_owned()))
}

/// A tenant with budgets far above the load (so every call reserves and
/// settles, none is refused) and a key of it with a request limit, issued
/// through the admin API; the key.
async fn bench_key(client: &reqwest::Client, base: &str) -> Result<String, String> {
    let post = |path: &str, body: serde_json::Value| {
        client
            .post(format!("{base}{path}"))
            .bearer_auth(BENCH_ADMIN)
            .json(&body)
            .send()
    };
    let tenant = json!({"name": "bench", "budgets": [
        {"name": "monthly", "money": "1000000", "period": "month", "time_zone": "Europe/Paris"},
        {"name": "daily", "tokens": 1_000_000_000_000u64, "requests": 1_000_000_000u64, "window_seconds": 86_400}
    ]});
    let key = json!({"tenant": "bench", "limits": {"requests_per_minute": 100_000_000u64}});
    let failed = |what: &str, e: String| format!("(d) cannot create the bench's {what}: {e}");
    let res = post("/v1/tenants", tenant)
        .await
        .map_err(|e| failed("tenant", e.to_string()))?;
    if !res.status().is_success() {
        return Err(failed("tenant", res.text().await.unwrap_or_default()));
    }
    let res = post("/v1/keys", key)
        .await
        .map_err(|e| failed("key", e.to_string()))?;
    let body: serde_json::Value = res.json().await.map_err(|e| failed("key", e.to_string()))?;
    body["key"]
        .as_str()
        .map(str::to_owned)
        .ok_or_else(|| failed("key", body.to_string()))
}

/// (d): (a)'s stream through the in-process gateway without a key, then
/// with a key and budgets.
pub(super) async fn keys_and_budgets(
    args: &GatewayArgs,
    client: &reqwest::Client,
    base: &str,
    max_outstanding: usize,
) -> Result<KeysPart, String> {
    note(args.json, "(d) (a) through the gateway again, no key");
    let before = crate::stack::gateway_cpu();
    let off = open_loop::run(
        args.rate,
        args.duration,
        max_outstanding,
        chat(client, base, false),
    )
    .await;
    let off_cpu = Cpu::between(before, crate::stack::gateway_cpu(), &off);
    let key = bench_key(client, base).await?;
    // Warm the key, tenant and tier caches and open the budgets.
    let make = keyed_chat(client, base, &key);
    for _ in 0..50 {
        if !open_loop::send(make()).await {
            return Err("(d) the gateway does not answer the bench's key".into());
        }
    }
    note(args.json, "(d) the same with a key, its limit and budgets");
    let before = crate::stack::gateway_cpu();
    let on = open_loop::run(args.rate, args.duration, max_outstanding, make).await;
    let on_cpu = Cpu::between(before, crate::stack::gateway_cpu(), &on);
    Ok(KeysPart::new(&off, &on, off_cpu, on_cpu))
}
