//! The simulated Discord API: its seven routes, per-route buckets with
//! their headers, the global limit, and the effects log.

mod common;

use common::*;
use serde_json::json;
use sluice_sim::SimConfig;
use sluice_sim::discord::{DiscordLimits, DiscordReport};

const API: &str = "/discord/api/v10";

async fn call(
    sim: &sluice_sim::SimHandle,
    method: reqwest::Method,
    path: &str,
    body: Option<serde_json::Value>,
) -> reqwest::Response {
    let mut r = client()
        .request(method, format!("{}{API}{path}", sim.url()))
        .header("x-sluice-job-id", "7")
        .header("x-audit-log-reason", "tiers");
    if let Some(b) = body {
        r = r.json(&b);
    }
    r.send().await.expect("the sim answers")
}

#[tokio::test]
async fn the_seven_routes_answer_and_log_their_effects() {
    let sim = start(SimConfig::default()).await;
    use reqwest::Method as M;
    let calls = [
        (
            M::POST,
            "/guilds/1/roles",
            Some(json!({"name": "mods"})),
            200,
        ),
        (M::DELETE, "/guilds/1/roles/2", None, 204),
        (M::PUT, "/guilds/1/members/3/roles/2", None, 204),
        (M::DELETE, "/guilds/1/members/3/roles/2", None, 204),
        (
            M::POST,
            "/guilds/1/channels",
            Some(json!({"name": "general"})),
            201,
        ),
        (M::DELETE, "/channels/9", None, 200),
        (
            M::PUT,
            "/channels/9/permissions/2",
            Some(json!({"type": 0})),
            204,
        ),
        (M::GET, "/guilds/1/roles", None, 404),
        (
            M::POST,
            "/guilds/abc/roles",
            Some(json!({"name": "x"})),
            404,
        ),
        (M::POST, "/guilds/1/roles", Some(json!({"color": 1})), 400),
    ];
    for (method, path, body, status) in calls {
        let r = call(&sim, method.clone(), path, body).await;
        assert_eq!(r.status().as_u16(), status, "{method} {path}");
    }
    let report: DiscordReport = get_json(&sim, "/_sim/discord/effects", &[]).await;
    assert_eq!(report, sim.discord());
    let ops: Vec<&str> = report.effects.iter().map(|e| e.op.as_str()).collect();
    assert_eq!(
        ops,
        [
            "create_role",
            "delete_role",
            "assign_role",
            "remove_role",
            "create_channel",
            "delete_channel",
            "update_permissions"
        ]
    );
    let role = &report.effects[0];
    assert_eq!(
        (role.seq, role.job.as_deref(), role.reason.as_deref()),
        (1, Some("7"), Some("tiers"))
    );
    assert!(role.created.is_some());
    assert_eq!(report.requests, 10);
}

#[tokio::test]
async fn a_route_bucket_allows_five_per_window_per_major_id_with_headers() {
    let sim = start(SimConfig::default()).await;
    let mut remaining = Vec::new();
    for _ in 0..5 {
        let r = call(&sim, reqwest::Method::DELETE, "/guilds/1/roles/2", None).await;
        assert_eq!(r.status(), 204);
        remaining.push(header(&r, "x-ratelimit-remaining").unwrap());
        assert_eq!(header(&r, "x-ratelimit-limit").as_deref(), Some("5"));
        assert!(header(&r, "x-ratelimit-bucket").is_some());
        let after: f64 = header(&r, "x-ratelimit-reset-after")
            .unwrap()
            .parse()
            .unwrap();
        assert!(after > 0.0 && after <= 2.0, "{after}");
    }
    assert_eq!(remaining, ["4", "3", "2", "1", "0"]);
    let r = call(&sim, reqwest::Method::DELETE, "/guilds/1/roles/3", None).await;
    assert_eq!(r.status(), 429, "another role, same route bucket and guild");
    assert_eq!(header(&r, "x-ratelimit-scope").as_deref(), Some("user"));
    assert!(header(&r, "x-ratelimit-global").is_none());
    let body: serde_json::Value = r.json().await.unwrap();
    assert_eq!(body["global"], false);
    assert!(body["retry_after"].as_f64().unwrap() > 0.0);
    let r = call(&sim, reqwest::Method::DELETE, "/guilds/8/roles/2", None).await;
    assert_eq!(r.status(), 204, "another guild has its own window");
    assert_eq!(sim.discord().route_429, 1);
    assert_eq!(sim.discord().effects.len(), 6);
}

#[tokio::test]
async fn the_global_limit_answers_429_marked_global() {
    let sim = start(SimConfig::default()).await;
    sim.set_discord_limits(DiscordLimits {
        global_per_second: 3,
        ..DiscordLimits::default()
    });
    // Calls until the global limit answers: within one second three are
    // admitted and the fourth refused; on a starved machine a second may
    // pass between calls, so more may be admitted first (never fewer).
    let mut admitted = 0;
    let mut refused = false;
    for g in 0..50 {
        let r = call(
            &sim,
            reqwest::Method::POST,
            &format!("/guilds/{g}/roles"),
            Some(json!({"name": "r"})),
        )
        .await;
        if r.status() == 429 {
            assert_eq!(header(&r, "x-ratelimit-global").as_deref(), Some("true"));
            assert!(header(&r, "retry-after").is_some());
            let body: serde_json::Value = r.json().await.unwrap();
            assert_eq!(body["global"], true);
            refused = true;
            break;
        }
        assert_eq!(r.status(), 200);
        admitted += 1;
    }
    assert!(refused, "the global limit never answered 429");
    assert!(admitted >= 3, "{admitted} admitted before the 429");
    let report = sim.discord();
    assert_eq!((report.global_429, report.effects.len()), (1, admitted));
    sim.reset_discord();
    assert_eq!(sim.discord(), DiscordReport::default());
}
