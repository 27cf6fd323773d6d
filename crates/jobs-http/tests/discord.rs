//! Discord jobs against the simulated Discord API of `sluice sim`, on
//! 127.0.0.1: every job has its effect exactly once, and the learned
//! buckets keep the 429s away.

mod common;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use common::{Limit, Rules, count, eventually, fast, sqlite};
use serde_json::{Value, json};
use sluice_jobs::worker::{QueueConfig, WorkerPool};
use sluice_jobs::{JobState, JobStore, NewJob, SqliteStore};
use sluice_jobs_http::discord::DiscordConfig;
use sluice_jobs_http::http::HttpApis;
use sluice_jobs_http::{Credentials, Secret};
use sluice_limit::Limiter;
use sluice_sim::discord::DiscordLimits;
use sluice_sim::{Sim, SimConfig, SimHandle};

async fn sim() -> SimHandle {
    Sim::start(SimConfig::default(), "127.0.0.1:0".parse().unwrap())
        .await
        .expect("start the sim")
}

fn pool(
    store: &Arc<SqliteStore>,
    sim: &SimHandle,
    limiter: &Limiter,
    discord: DiscordConfig,
) -> WorkerPool {
    let discord = DiscordConfig {
        token: Credentials::none(),
        ..discord
    };
    pool_with_token(store, sim, limiter, discord)
}

/// As [`pool`], keeping `discord`'s token.
fn pool_with_token(
    store: &Arc<SqliteStore>,
    sim: &SimHandle,
    limiter: &Limiter,
    discord: DiscordConfig,
) -> WorkerPool {
    let discord = DiscordConfig {
        base_url: format!("{}/discord/api/v10", sim.url()),
        ..discord
    };
    let handlers =
        sluice_jobs_http::handlers(limiter, HttpApis::new(), discord, common::client()).unwrap();
    WorkerPool::builder(Arc::clone(store), limiter.clone())
        .handlers(handlers)
        .queue(QueueConfig::new("discord").unlimited().concurrency(20))
        .configure(fast)
        .start()
        .unwrap()
}

/// The `n`th job of a mix of all seven operations over ten guilds and ten
/// channels.
fn nth_job(n: u64) -> (&'static str, Value) {
    let guild = (1_000 + n % 10).to_string();
    let channel = (5_000 + n % 10).to_string();
    let id = (900_000 + n).to_string();
    match n % 7 {
        0 => (
            "discord.create_role",
            json!({"guild_id": guild, "name": format!("role-{n}"), "color": 255, "reason": "sync tiers"}),
        ),
        1 => (
            "discord.delete_role",
            json!({"guild_id": guild, "role_id": id}),
        ),
        2 => (
            "discord.assign_role",
            json!({"guild_id": guild, "user_id": id, "role_id": "77"}),
        ),
        3 => (
            "discord.remove_role",
            json!({"guild_id": guild, "user_id": id, "role_id": "77"}),
        ),
        4 => (
            "discord.create_channel",
            json!({"guild_id": guild, "name": format!("chan-{n}"), "type": 0, "topic": "t"}),
        ),
        5 => ("discord.delete_channel", json!({"channel_id": id})),
        _ => (
            "discord.update_permissions",
            json!({"channel_id": channel, "overwrite_id": id, "type": 1, "allow": "1024"}),
        ),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_hundred_jobs_each_have_their_effect_once_without_a_global_429() {
    let sim = sim().await;
    let store = Arc::new(sqlite().await);
    let limiter = Limiter::new(common::api_rules()).unwrap();
    let mut jobs = HashMap::new();
    for n in 0..200 {
        let (kind, payload) = nth_job(n);
        sluice_jobs_http::validate_payload(kind, &payload).expect("a valid payload");
        let job = NewJob::new("discord", kind, payload).group(format!("guild-{}", n % 10));
        let id = store.enqueue(job).await.unwrap().job.id;
        jobs.insert(id.to_string(), kind);
    }
    let pool = pool(&store, &sim, &limiter, DiscordConfig::default());
    eventually("200 completed", || async {
        count(&*store, "discord", JobState::Completed).await == 200
    })
    .await;
    let report = pool.shutdown(Duration::from_secs(5)).await;
    assert_eq!((report.completed, report.dead), (200, 0));

    let discord = sim.discord();
    println!(
        "discord sim: {} requests, {} effects, {} route 429s, {} global 429s",
        discord.requests,
        discord.effects.len(),
        discord.route_429,
        discord.global_429
    );
    assert_eq!(discord.global_429, 0, "the global bucket is never hit");
    assert!(
        discord.route_429 <= 3,
        "learned buckets wait instead of drawing 429s: {}",
        discord.route_429
    );
    let mut seen: HashMap<String, u32> = HashMap::new();
    for effect in &discord.effects {
        let job = effect.job.clone().expect("every call names its job");
        let kind = jobs.get(&job).expect("an effect of one of our jobs");
        assert_eq!(format!("discord.{}", effect.op), *kind);
        *seen.entry(job).or_default() += 1;
    }
    assert_eq!(seen.len(), 200, "every job had its effect");
    assert!(seen.values().all(|n| *n == 1), "and only once");
    // Every job completed on its first attempt.
    let page = store
        .list(&sluice_jobs::ListFilter {
            limit: 1_000,
            ..Default::default()
        })
        .await
        .unwrap();
    assert!(
        page.jobs
            .iter()
            .all(|j| j.attempts == 1 && j.reschedules == 0)
    );
    let role = page
        .jobs
        .iter()
        .find(|j| j.kind == "discord.create_role")
        .unwrap();
    // A list leaves results out: read the job itself.
    let role = store.get(role.id).await.unwrap().unwrap();
    let result = role.result.as_ref().unwrap();
    assert_eq!(result["status"], 200);
    assert!(result["body"]["id"].is_string(), "{result}");
    let effect = discord
        .effects
        .iter()
        .find(|e| e.op == "create_role")
        .unwrap();
    assert_eq!(effect.reason.as_deref(), Some("sync tiers"));
}

#[tokio::test]
async fn a_global_429_reschedules_without_using_attempts() {
    let sim = sim().await;
    sim.set_discord_limits(DiscordLimits {
        global_per_second: 2,
        ..DiscordLimits::default()
    });
    let store = Arc::new(sqlite().await);
    // The client believes in 50/s: Discord (the sim) says otherwise.
    let limiter = Limiter::new(Rules::new()).unwrap();
    let config = DiscordConfig {
        global_limit: Some(Limit::per_second(50)),
        ..DiscordConfig::default()
    };
    let mut ids = Vec::new();
    for n in 0..8 {
        let payload = json!({"guild_id": (2_000 + n).to_string(), "name": "r"});
        let job = NewJob::new("discord", "discord.create_role", payload).max_attempts(1);
        ids.push(store.enqueue(job).await.unwrap().job.id);
    }
    let pool = WorkerPool::builder(Arc::clone(&store), limiter.clone())
        .handlers(
            sluice_jobs_http::handlers(
                &limiter,
                HttpApis::new(),
                DiscordConfig {
                    base_url: format!("{}/discord/api/v10", sim.url()),
                    token: Credentials::none(),
                    ..config
                },
                common::client(),
            )
            .unwrap(),
        )
        .queue(QueueConfig::new("discord").unlimited().concurrency(8))
        .configure(|c| {
            fast(c);
            c.max_throttles = 100;
        })
        .start()
        .unwrap();
    eventually("8 completed", || async {
        count(&*store, "discord", JobState::Completed).await == 8
    })
    .await;
    pool.shutdown(Duration::from_secs(5)).await;
    let discord = sim.discord();
    assert!(discord.global_429 > 0, "the sim's global limit was hit");
    assert_eq!(discord.effects.len(), 8);
    let mut rescheduled = 0;
    for id in ids {
        let job = store.get(id).await.unwrap().unwrap();
        assert_eq!(job.attempts, 1, "a global 429 uses no attempt");
        rescheduled += job.reschedules;
    }
    assert_eq!(u64::from(rescheduled), discord.global_429);
    // The shared bucket was throttled for everyone.
    assert!(limiter.get_capacity("api:discord").unwrap().is_reduced());
}

#[tokio::test]
async fn an_invalid_payload_goes_dead_naming_the_field() {
    let sim = sim().await;
    let store = Arc::new(sqlite().await);
    let limiter = Limiter::new(common::api_rules()).unwrap();
    let bad = json!({"guild_id": "12ab", "name": "r"});
    let id = store
        .enqueue(NewJob::new("discord", "discord.create_role", bad))
        .await
        .unwrap()
        .job
        .id;
    let pool = pool(&store, &sim, &limiter, DiscordConfig::default());
    eventually("the job to die", || async {
        store.get(id).await.unwrap().unwrap().state == JobState::Dead
    })
    .await;
    pool.shutdown(Duration::from_secs(5)).await;
    let job = store.get(id).await.unwrap().unwrap();
    assert_eq!(job.attempts, 1);
    assert!(job.last_error.unwrap().contains("payload.guild_id"));
    assert_eq!(sim.discord().requests, 0, "nothing was sent");
}

#[tokio::test]
async fn a_tenant_without_a_bot_token_of_its_own_is_refused_without_a_call() {
    let sim = sim().await;
    let store = Arc::new(sqlite().await);
    let limiter = Limiter::new(common::api_rules()).unwrap();
    let payload = json!({"guild_id": "1000", "name": "mods"});
    let mut ids = Vec::new();
    for tenant in ["acme", "globex"] {
        let job = NewJob::new("discord", "discord.create_role", payload.clone()).tenant(tenant);
        ids.push(store.enqueue(job).await.unwrap().job.id);
    }
    let token = Credentials::shared(Secret::value("shared-bot"))
        .tenant("acme", Secret::value("acme-bot"))
        .not_shared();
    let discord = DiscordConfig {
        token,
        ..DiscordConfig::default()
    };
    let pool = pool_with_token(&store, &sim, &limiter, discord);
    eventually("both jobs to finish", || async {
        let mut done = true;
        for id in &ids {
            done &= store.get(*id).await.unwrap().unwrap().state.is_final();
        }
        done
    })
    .await;
    pool.shutdown(Duration::from_secs(5)).await;
    let acme = store.get(ids[0]).await.unwrap().unwrap();
    assert_eq!(acme.state, JobState::Completed, "{:?}", acme.last_error);
    let globex = store.get(ids[1]).await.unwrap().unwrap();
    assert_eq!(globex.state, JobState::Dead);
    let error = globex.last_error.unwrap();
    assert!(
        error.contains("no_credential") && error.contains("globex"),
        "{error}"
    );
    assert_eq!(sim.discord().requests, 1, "only acme's call was sent");
}
