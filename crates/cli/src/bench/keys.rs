//! (d) What keys, the usage ledger and budgets cost together: (a)'s
//! non-streamed stream through a gateway with all three off (no key
//! store, no ledger, so no budgets: the caller is the open gateway's
//! default tenant), then through one with all three on, as a key whose
//! tenant has budgets (an authentication from the cache, the per-key
//! limit, a reserve and a settle, and a ledger record per call).

use serde_json::json;

use sluice_sim::SimConfig;

use super::report::{Cpu, KeysPart};
use super::requests::{chat, client, keyed_request, warm};
use super::{BENCH_ADMIN, GatewayArgs, MODEL, PROVIDER, limits_off_for, note, open_loop};
use crate::stack::Stack;

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

/// (d): (a)'s stream through a gateway of its own with keys, ledger and
/// budgets off, then through the in-process gateway at `base` (key
/// store and ledger on, as by default) as a key with budgets. The first
/// gateway is stopped before the second row, so the gateway CPU counted
/// in each row is its own gateway's (the other is idle, or gone).
pub(super) async fn keys_and_budgets(
    args: &GatewayArgs,
    client_on: &reqwest::Client,
    base: &str,
    max_outstanding: usize,
) -> Result<KeysPart, String> {
    note(
        args.json,
        "(d) (a) through a gateway with no key store, no ledger, no budgets",
    );
    // With `--redis` too, as the other side (the first stack) has it.
    let with_redis = limits_off_for(args);
    let stack = Stack::start(SimConfig::unlimited(), |c| {
        with_redis(c);
        c.keys.enabled = false;
        c.ledger.enabled = false;
    })
    .await?;
    let bare = stack.gateway_url();
    let bare = bare.trim_end_matches('/');
    let client_off = client(args.connections);
    warm(&client_off, bare, false, 50).await?;
    let before = cpu_now();
    let off = open_loop::run(
        args.rate,
        args.duration,
        max_outstanding,
        chat(&client_off, bare, false),
    )
    .await;
    let off_cpu = cpu_between(before, &off);
    stack.stop().await;

    let key = bench_key(client_on, base).await?;
    // Warm the key, tenant and tier caches, open the budgets and read
    // their past from the ledger.
    let make = keyed_chat(client_on, base, &key);
    for _ in 0..50 {
        if !open_loop::send(make()).await {
            return Err("(d) the gateway does not answer the bench's key".into());
        }
    }
    note(
        args.json,
        "(d) the same with keys, ledger and budgets on: a key with a limit, its tenant's budgets",
    );
    let before = cpu_now();
    let on = open_loop::run(args.rate, args.duration, max_outstanding, make).await;
    let on_cpu = cpu_between(before, &on);
    Ok(KeysPart::new(
        &off,
        &on,
        [off_cpu[0], on_cpu[0]],
        [off_cpu[1], on_cpu[1]],
    ))
}

/// The gateway's CPU so far: its request threads, and with the threads
/// that write for it.
pub(super) fn cpu_now() -> [Option<std::time::Duration>; 2] {
    [
        crate::stack::gateway_cpu(),
        crate::stack::gateway_and_writers_cpu(),
    ]
}

/// Per request of `stream`, since `before` ([`cpu_now`]).
fn cpu_between(
    before: [Option<std::time::Duration>; 2],
    stream: &super::open_loop::Measured,
) -> [Option<Cpu>; 2] {
    let now = cpu_now();
    [
        Cpu::between(before[0], now[0], stream),
        Cpu::between(before[1], now[1], stream),
    ]
}
