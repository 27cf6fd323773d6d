//! `sluice demo --scenario cache`: agents that repeat themselves. Every
//! agent asks, again and again, one of a few questions at `temperature` 0
//! (the same system prompt and question from many workers), first with the
//! response cache off (`x-sluice-cache: off`), then on; each run lasts the
//! same time against the same simulated provider and its limit. The
//! summary shows the calls and tokens the cache saved.

use std::time::Duration;

use serde::Serialize;
use serde_json::{Value, json};
use tokio::time::Instant;

use super::DemoArgs;
use crate::stack::Stack;
use crate::table::Table;

/// The model every agent asks.
const MODEL: &str = "openai/gpt-4o-mini";
/// Distinct questions per tenant: agents pick among these.
const QUESTIONS: usize = 8;
/// Pause between an agent's calls (it reads the answer, thinks).
const THINK: Duration = Duration::from_millis(200);
/// The admin token of the demo's gateway, for `GET /v1/cache/stats`.
const ADMIN: &str = "demo-admin";
/// The longest one call may take before the agent gives up on it.
const CALL_TIMEOUT: Duration = Duration::from_secs(10);

/// One run's figures.
#[derive(Debug, Default, Serialize)]
pub struct CacheRun {
    /// Answers the agents got (2xx).
    pub answers: u64,
    /// Calls that failed (non-2xx or no answer).
    pub errors: u64,
    /// Calls that reached the provider.
    pub upstream_calls: u64,
    /// Tokens the provider processed (prompt + completion).
    pub upstream_tokens: u64,
    /// Answers from the cache.
    pub hits: u64,
    /// Tokens those answers did not cost (prompt + completion).
    pub saved_tokens: u64,
    /// Median and 99th percentile latency of an answer, ms.
    pub p50_ms: f64,
    pub p99_ms: f64,
}

/// The JSON summary.
#[derive(Debug, Serialize)]
struct CacheSummary {
    agents: usize,
    tenants: usize,
    questions_per_tenant: usize,
    duration_s: f64,
    cache_off: CacheRun,
    cache_on: CacheRun,
}

pub async fn demo(args: DemoArgs) -> Result<(), String> {
    let sim = super::sim_config(args.provider_rps.as_ref());
    let token = if args.ui {
        Some(super::ui_token()?)
    } else {
        None
    };
    let stack = Stack::start(sim, |c| {
        c.admin_token = Some(ADMIN.to_owned());
        c.ui.token.clone_from(&token);
    })
    .await?;
    if let Some(t) = &token {
        super::announce_ui(&stack, t);
    }
    if !args.json {
        println!(
            "sluice demo --scenario cache: {} agents in {} tenants ask one of {QUESTIONS} questions each, again and again, for {} s per run\n",
            args.agents,
            args.tenants,
            args.duration.as_secs_f64(),
        );
    }
    let client = reqwest::Client::builder()
        .timeout(CALL_TIMEOUT)
        .build()
        .map_err(|e| e.to_string())?;
    let mut runs = Vec::new();
    for (cache, title) in [(false, "1/2 cache off"), (true, "2/2 cache on")] {
        if !args.json {
            eprintln!("{title} …");
        }
        stack.fresh_start([("gpt-4o-mini", "model")]);
        runs.push(run(&stack, &client, &args, cache).await);
    }
    stack.stop().await;
    let (on, off) = (
        runs.pop().unwrap_or_default(),
        runs.pop().unwrap_or_default(),
    );
    if args.json {
        let summary = CacheSummary {
            agents: args.agents,
            tenants: args.tenants,
            questions_per_tenant: QUESTIONS,
            duration_s: args.duration.as_secs_f64(),
            cache_off: off,
            cache_on: on,
        };
        println!(
            "{}",
            serde_json::to_string_pretty(&summary).map_err(|e| e.to_string())?
        );
    } else {
        print!("{}", table(&off, &on));
    }
    Ok(())
}

/// One timed run of every agent.
async fn run(stack: &Stack, client: &reqwest::Client, args: &DemoArgs, cache: bool) -> CacheRun {
    let url = format!("{}/v1/chat/completions", stack.gateway_url());
    let ends = Instant::now() + args.duration;
    let agents = (0..args.agents).map(|agent| {
        let (client, url) = (client.clone(), url.clone());
        let tenant = format!("tenant-{}", agent % args.tenants.max(1) + 1);
        let mut rng = fastrand::Rng::with_seed(agent as u64);
        tokio::spawn(async move {
            let mut latencies = Vec::new();
            let mut errors = 0u64;
            while Instant::now() < ends {
                let q = rng.usize(..QUESTIONS);
                let body = json!({
                    "model": MODEL,
                    "temperature": 0,
                    "max_tokens": 64,
                    "messages": [
                        {"role": "system", "content": "You are a careful research agent."},
                        {"role": "user", "content": format!("Question {q}: what does the spec say?")},
                    ],
                });
                let mut req = client.post(&url).json(&body).header("x-sluice-workspace", &tenant);
                if !cache {
                    req = req.header("x-sluice-cache", "off");
                }
                let sent = Instant::now();
                let answered = match req.send().await {
                    Ok(r) if r.status().is_success() => r.bytes().await.is_ok(),
                    _ => false,
                };
                if answered {
                    latencies.push(sent.elapsed());
                } else {
                    errors += 1;
                }
                tokio::time::sleep(THINK).await;
            }
            (latencies, errors)
        })
    });
    let mut all = Vec::new();
    let mut out = CacheRun::default();
    for agent in futures_util::future::join_all(agents).await {
        let Ok((latencies, errors)) = agent else {
            continue;
        };
        out.errors += errors;
        all.extend(latencies);
    }
    out.answers = all.len() as u64;
    all.sort_unstable();
    let at = |q: f64| {
        all.get(((all.len() as f64 * q) as usize).min(all.len().saturating_sub(1)))
            .map_or(0.0, |d| d.as_secs_f64() * 1e3)
    };
    (out.p50_ms, out.p99_ms) = (at(0.5), at(0.99));
    let sim = stack.sim.stats().model("gpt-4o-mini");
    out.upstream_calls = sim.requests;
    out.upstream_tokens = sim.tokens_in + sim.tokens_out;
    let stats = cache_stats(client, stack).await;
    let model = &stats["stats"]["models"][MODEL];
    let count = |v: &Value| v.as_u64().unwrap_or(0);
    // The gateway's counters run on across both runs: the first saved
    // nothing, so they are the second's.
    out.hits = count(&model["hits"]);
    out.saved_tokens =
        count(&model["saved_prompt_tokens"]) + count(&model["saved_completion_tokens"]);
    out
}

async fn cache_stats(client: &reqwest::Client, stack: &Stack) -> Value {
    let url = format!("{}/v1/cache/stats", stack.gateway_url());
    match client.get(url).bearer_auth(ADMIN).send().await {
        Ok(r) => r.json().await.unwrap_or(Value::Null),
        Err(_) => Value::Null,
    }
}

fn table(off: &CacheRun, on: &CacheRun) -> String {
    let saved_calls = on.answers.saturating_sub(on.upstream_calls);
    let share = |part: u64, all: u64| {
        if all == 0 {
            0.0
        } else {
            100.0 * part as f64 / all as f64
        }
    };
    let rows = [
        ("answers", off.answers.to_string(), on.answers.to_string()),
        ("errors", off.errors.to_string(), on.errors.to_string()),
        (
            "upstream calls",
            off.upstream_calls.to_string(),
            on.upstream_calls.to_string(),
        ),
        (
            "cache hits",
            off.hits.to_string(),
            format!("{} ({:.0}%)", on.hits, share(on.hits, on.answers)),
        ),
        (
            "calls saved",
            "0".to_owned(),
            format!("{saved_calls} ({:.0}%)", share(saved_calls, on.answers)),
        ),
        (
            "upstream tokens",
            off.upstream_tokens.to_string(),
            on.upstream_tokens.to_string(),
        ),
        ("tokens saved", "0".to_owned(), on.saved_tokens.to_string()),
        (
            "latency p50 / p99 ms",
            format!("{:.1} / {:.1}", off.p50_ms, off.p99_ms),
            format!("{:.1} / {:.1}", on.p50_ms, on.p99_ms),
        ),
    ];
    let mut t = Table::new(["", "cache off", "cache on"]).right([1, 2]);
    for (name, a, b) in rows {
        t.row([name.to_owned(), a, b]);
    }
    let mut out = format!("\n{}", t.render());
    out.push_str(&format!(
        "\nerrors: calls without an answer: refused, or given up by their agent after {} s (most \
         still queued behind the provider's limit, which the gateway then drops from its queue and \
         traces as 499).\n",
        CALL_TIMEOUT.as_secs()
    ));
    out.push_str(
        "calls saved: answers that made no upstream call, cache hits and identical requests that \
         shared one call in flight.\nA hit spends no provider quota, no limiter token and no budget: \
         the provider's limit serves only the questions asked for the first time.\n",
    );
    out
}
