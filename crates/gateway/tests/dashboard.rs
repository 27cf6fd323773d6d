//! The live dashboard's data: who may read it (a token or a browser
//! session, never anonymous), what the snapshot says under load (the same
//! limits as `GET /v1/limits`, rates that rise and fall with traffic, cuts
//! with their reason, tenants' shares), the stream and its bound.

mod common;

use std::time::Duration;

use common::{ACME, GLOBEX, Harness, chat, expect_error, header, sim_config, two_tenants};
use reqwest::StatusCode;
use serde_json::Value;
use sluice_gateway::dashboard::view::{ResourceView, Snapshot};
use sluice_sim::{Faults, Scope};

const ADMIN: &str = "the-operator";
const VIEWER: &str = "the-viewer";

async fn start(edit: impl FnOnce(&mut sluice_gateway::config::Config)) -> Harness {
    Harness::with(sim_config(), |c| {
        two_tenants(c);
        c.admin_token = Some(ADMIN.into());
        c.ui.token = Some(VIEWER.into());
        edit(c);
    })
    .await
}

async fn snapshot(h: &Harness) -> Snapshot {
    serde_json::from_value(h.get_json("/v1/dashboard", VIEWER).await).expect("a snapshot")
}

/// `PUT /v1/limits/openai%2Fgpt-4o` with `token`.
async fn set_capacity(h: &Harness, token: &str, capacity: u64) -> reqwest::Response {
    h.http
        .put(h.url("/v1/limits/openai%2Fgpt-4o"))
        .bearer_auth(token)
        .json(&serde_json::json!({"capacity": capacity}))
        .send()
        .await
        .unwrap()
}

/// Polls snapshots (one a second) until `check` finds what it wants; a
/// bounded wait, not a timing assertion.
async fn until<T>(h: &Harness, what: &str, check: impl Fn(&Snapshot) -> Option<T>) -> T {
    let mut last = None;
    for _ in 0..150 {
        let res = h
            .get("/v1/dashboard")
            .bearer_auth(VIEWER)
            .send()
            .await
            .unwrap();
        if res.status() == StatusCode::SERVICE_UNAVAILABLE {
            // No snapshot taken yet (a loaded machine): wait for the first.
            tokio::time::sleep(Duration::from_millis(100)).await;
            continue;
        }
        assert_eq!(res.status(), StatusCode::OK);
        let s: Snapshot = res.json().await.expect("a snapshot");
        if let Some(found) = check(&s) {
            return found;
        }
        last = Some(s);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("gave up waiting until {what}; last snapshot: {last:#?}");
}

/// Polls snapshots (see [`until`]) until the row of `resource` passes
/// `check`; that row.
async fn until_row(
    h: &Harness,
    what: &str,
    resource: &str,
    check: impl Fn(&ResourceView) -> bool,
) -> ResourceView {
    until(h, what, |s| {
        s.resources
            .iter()
            .find(|r| r.resource == resource && check(r))
            .cloned()
    })
    .await
}

/// `GET path` with the bearer `token`.
async fn get_as(h: &Harness, path: &str, token: &str) -> reqwest::Response {
    h.get(path).bearer_auth(token).send().await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_a_viewer_reads_it_and_a_browser_logs_in_with_a_cookie() {
    let h = start(|_| {}).await;
    let res = h.get("/v1/dashboard").send().await.unwrap();
    expect_error(res, 401, "invalid_api_key").await;
    let res = get_as(&h, "/v1/dashboard", ACME).await;
    expect_error(res, 403, "forbidden").await;
    for token in [VIEWER, ADMIN] {
        let res = get_as(&h, "/v1/dashboard", token).await;
        assert_eq!(res.status(), StatusCode::OK, "{token}");
    }
    // The viewer's token is read-only.
    let res = set_capacity(&h, VIEWER, 1).await;
    expect_error(res, 403, "forbidden").await;

    // The page is anyone's, and says where its script may come from.
    let page = h.get("/ui").send().await.unwrap();
    assert_eq!(page.status(), StatusCode::OK);
    assert!(header(&page, "content-security-policy").contains("script-src 'self'"));
    assert!(page.text().await.unwrap().contains("/ui/assets/app.js"));
    let js = h.get("/ui/assets/app.js").send().await.unwrap();
    assert!(header(&js, "content-type").starts_with("text/javascript"));
    let res = h.get("/ui/assets/secret").send().await.unwrap();
    assert_eq!(res.status(), StatusCode::NOT_FOUND);

    // A wrong token, a body without one: refused, no cookie.
    let bad = h.post("/ui/login", &serde_json::json!({"token": "nope"}));
    let res = bad.send().await.unwrap();
    assert!(res.headers().get("set-cookie").is_none());
    expect_error(res, 401, "invalid_api_key").await;
    let res = h
        .post("/ui/login", &serde_json::json!({}))
        .send()
        .await
        .unwrap();
    let e = expect_error(res, 400, "invalid_request").await;
    assert!(e["message"].as_str().unwrap().contains("token"), "{e}");

    // The right one: a session cookie that the browser alone holds.
    let res = h
        .post("/ui/login", &serde_json::json!({"token": VIEWER}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    let cookie = header(&res, "set-cookie");
    for attr in ["HttpOnly", "SameSite=Strict", "Path=/"] {
        assert!(cookie.contains(attr), "{cookie}");
    }
    assert!(!cookie.contains(VIEWER), "{cookie}");
    let session = cookie.split(';').next().unwrap().to_owned();
    let with_cookie = |path: &str| h.get(path).header("cookie", session.clone());
    let res = with_cookie("/v1/dashboard/history").send().await.unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    let body: Value = res.json().await.unwrap();
    assert_eq!(body["interval_ms"], 1000);
    // A cookie reads the dashboard, nothing more.
    let res = with_cookie("/v1/queues").send().await.unwrap();
    expect_error(res, 401, "invalid_api_key").await;
    // Logged out, the cookie is worth nothing.
    let res = h
        .http
        .post(h.url("/ui/logout"))
        .header("cookie", session.clone())
        .send()
        .await
        .unwrap();
    assert!(header(&res, "set-cookie").contains("Max-Age=0"));
    let res = with_cookie("/v1/dashboard").send().await.unwrap();
    expect_error(res, 401, "invalid_api_key").await;
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_logins_are_limited_per_address_and_audited() {
    let h = start(|_| {}).await;
    let login = |token: &str| {
        h.post("/ui/login", &serde_json::json!({"token": token}))
            .header("x-request-id", format!("login-{token}"))
            .send()
    };
    for _ in 0..5 {
        expect_error(login("guess").await.unwrap(), 401, "invalid_api_key").await;
    }
    // The sixth try from this address is not even checked: the right
    // token waits for the window too.
    let res = login(VIEWER).await.unwrap();
    assert!(res.headers().get("set-cookie").is_none());
    let wait: u64 = header(&res, "retry-after").parse().unwrap();
    assert!((1..=60).contains(&wait), "{wait}");
    expect_error(res, 429, "rate_limited").await;
    // Each failure is in the audit trail, with the address that tried.
    let mut entries = Vec::new();
    for _ in 0..100 {
        let body = h.get_json("/v1/audit?kind=ui.login_failed", ADMIN).await;
        entries = body["entries"].as_array().cloned().unwrap_or_default();
        if entries.len() >= 5 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(entries.len(), 5, "{entries:?}");
    for e in &entries {
        assert_eq!(e["actor"], "address:127.0.0.1", "{e}");
        assert_eq!(e["target"], "/ui/login");
        assert_eq!(e["request_id"], "login-guess");
    }
    h.stop().await;
}

/// Each tenant's spend today is the ledger's, as `GET /v1/usage` reads
/// it for the same day.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenants_spend_is_what_its_usage_says() {
    let h = start(|_| {}).await;
    for (key, calls) in [(ACME, 3), (GLOBEX, 1)] {
        for _ in 0..calls {
            let res = h
                .post("/v1/chat/completions", &chat("openai/gpt-4o-mini"))
                .bearer_auth(key)
                .send()
                .await
                .unwrap();
            assert_eq!(res.status(), StatusCode::OK);
        }
    }
    let (since_ms, acme, globex) = until(&h, "both tenants' spend shows", |s| {
        let d = s.spend.data.as_ref()?;
        let of = |t: &str| d.tenants.iter().find(|x| x.tenant == t).cloned();
        let (a, g) = (of("acme")?, of("globex")?);
        (a.requests == 3 && g.requests == 1).then_some((d.since_ms, a, g))
    })
    .await;
    assert!(acme.cost_nanos > globex.cost_nanos, "{acme:?} {globex:?}");
    assert_eq!(acme.cost_usd, acme.cost_nanos as f64 / 1e9);
    for (key, seen) in [(ACME, &acme), (GLOBEX, &globex)] {
        let usage = h
            .get_json(&format!("/v1/usage?from={since_ms}&granularity=day"), key)
            .await;
        let rows = usage["rows"].as_array().unwrap();
        assert_eq!(rows.len(), 1, "{usage}");
        assert_eq!(rows[0]["cost_nanos"], seen.cost_nanos, "{usage}");
        assert_eq!(rows[0]["requests"], seen.requests);
        assert_eq!(rows[0]["prompt_tokens"], seen.prompt_tokens);
        assert_eq!(rows[0]["completion_tokens"], seen.completion_tokens);
    }
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_token_the_dashboard_is_closed_and_it_can_be_off() {
    let h = Harness::with(sim_config(), |_| {}).await;
    let res = h.get("/v1/dashboard").send().await.unwrap();
    let e = expect_error(res, 403, "forbidden").await;
    assert!(
        e["message"].as_str().unwrap().contains("ui.token_env"),
        "{e}"
    );
    h.stop().await;

    let h = start(|c| c.ui.enabled = false).await;
    for path in ["/ui", "/v1/dashboard"] {
        let res = get_as(&h, path, VIEWER).await;
        let e = expect_error(res, 404, "not_found").await;
        assert!(e["message"].as_str().unwrap().contains("ui.enabled"), "{e}");
    }
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_snapshot_follows_the_load_and_agrees_with_the_limits() {
    let h = start(|_| {}).await;
    let model = "openai/gpt-4o-mini";
    let s = snapshot(&h).await;
    assert_eq!(s.jobs.state, "ok", "{:?}", s.jobs);
    assert_eq!(s.audit.state, "ok", "{:?}", s.audit);

    // Traffic: acme three times as much as globex.
    let send = |key: &'static str| {
        let h = &h;
        async move {
            let res = h
                .post("/v1/chat/completions", &chat(model))
                .bearer_auth(key)
                .send()
                .await
                .unwrap();
            assert_eq!(res.status(), StatusCode::OK);
        }
    };
    for _ in 0..10 {
        for _ in 0..3 {
            send(ACME).await;
        }
        send(GLOBEX).await;
    }
    let row = until_row(&h, "the model's row shows the traffic", model, |r| {
        r.requests_per_second > 0.0 && r.p99_ms.is_some()
    })
    .await;
    assert_eq!(row.kind, "model");
    assert!(row.admitted_per_second > 0.0, "{row:?}");
    assert!(row.p50_ms.unwrap() <= row.p99_ms.unwrap(), "{row:?}");
    assert_eq!(row.upstream_429_total, 0);
    // The limits are the limiter's, as `GET /v1/limits` says them (a
    // grant held keeps the limiter from forgetting an idle resource).
    let res = h
        .post("/v1/limits/acquire", &serde_json::json!({"model": model}))
        .bearer_auth(ACME)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    let held_at = snapshot(&h).await.at_ms;
    let row = until(&h, "a snapshot after the grant", |s| {
        (s.at_ms > held_at)
            .then(|| s.resources.iter().find(|r| r.resource == model).cloned())
            .flatten()
    })
    .await;
    let limits = h.get_json("/v1/limits", ACME).await;
    let listed = limits["resources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["resource"] == model)
        .expect("the model in /v1/limits")
        .clone();
    assert_eq!(Some(listed["per_second"].as_f64().unwrap()), row.per_second);
    assert_eq!(
        Some(listed["configured_per_second"].as_f64().unwrap()),
        row.configured_per_second
    );
    assert!(row.reason.is_none(), "{row:?}");

    let s = snapshot(&h).await;
    let share = |name: &str| {
        s.tenants
            .iter()
            .find(|t| t.tenant == name)
            .map(|t| (t.share, t.requests_total))
    };
    let (acme, acme_total) = share("acme").expect("acme listed");
    let (globex, globex_total) = share("globex").expect("globex listed");
    assert_eq!((acme_total, globex_total), (30, 10));
    assert!(acme > globex, "{:?}", s.tenants);
    assert!(
        s.tenants
            .iter()
            .all(|t| t.queue_wait_ms.is_none_or(|w| w >= 0.0))
    );

    // Without traffic the rate falls back to zero.
    until_row(&h, "the rate falls to zero", model, |r| {
        r.requests_per_second == 0.0
    })
    .await;
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_sources_say_so_and_administrative_acts_show() {
    // No job store, no audit trail: their sections say so, the rest is
    // served.
    let h = start(|c| {
        c.jobs.enabled = false;
        c.audit.enabled = false;
        c.ledger.enabled = false;
    })
    .await;
    let s = snapshot(&h).await;
    assert_eq!(s.jobs.state, "not configured");
    assert_eq!(s.audit.state, "not configured");
    assert_eq!(s.spend.state, "not configured");
    // Configured APIs are listed idle, with their limits.
    let slack = s.resources.iter().find(|r| r.resource == "api:slack");
    assert!(
        slack.is_some_and(|r| r.kind == "api" && r.per_second.is_some()),
        "{s:?}"
    );
    h.stop().await;

    // With them, an operator's act shows among the recent ones.
    let h = start(|_| {}).await;
    let res = set_capacity(&h, ADMIN, 7).await;
    assert_eq!(res.status(), StatusCode::OK);
    let entry = until(&h, "the act shows", |s| {
        s.audit
            .data
            .as_ref()
            .and_then(|d| d.iter().find(|e| e["target"] == "openai/gpt-4o").cloned())
    })
    .await;
    assert_eq!(entry["actor"], "admin", "{entry}");
    let row = until_row(&h, "the new capacity shows", "openai/gpt-4o", |_| true).await;
    assert_eq!(row.per_second, Some(7.0), "{row:?}");
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cut_shows_with_its_reason_and_the_429s_that_caused_it() {
    let h = start(|_| {}).await;
    let model = "openai/m429";
    let scope = Scope::Model("m429".into());
    h.sim
        .set_faults(
            scope.clone(),
            Faults {
                force_429: true,
                force_429_retry_after_ms: 50,
                ..Faults::none()
            },
        )
        .unwrap();
    let res = h
        .post("/v1/chat/completions", &chat(model))
        .bearer_auth(ACME)
        .header("x-sluice-timeout-ms", "3000")
        .send()
        .await
        .unwrap();
    assert!(res.status().is_client_error() || res.status().is_server_error());
    let row = until_row(&h, "the cut shows", model, |r| r.upstream_429_total > 0).await;
    assert!(
        row.per_second.unwrap() < row.configured_per_second.unwrap(),
        "{row:?}"
    );
    assert!(row.reason.is_some(), "{row:?}");
    assert!(row.retries_total >= 1, "{row:?}");
    let history = h.get_json("/v1/dashboard/history", VIEWER).await;
    let points = history["points"].as_array().unwrap();
    assert!(
        points.iter().any(|p| p["resources"][model].is_array()),
        "{history}"
    );
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_stream_sends_history_then_snapshots_and_is_bounded() {
    let h = start(|c| c.ui.max_streams = 1).await;
    let mut first = get_as(&h, "/v1/dashboard/stream", VIEWER).await;
    assert_eq!(first.status(), StatusCode::OK);
    assert_eq!(header(&first, "content-type"), "text/event-stream");
    let mut text = String::new();
    while text.matches("event: snapshot").count() < 2 {
        let chunk = first.chunk().await.unwrap().expect("the stream goes on");
        text.push_str(std::str::from_utf8(&chunk).unwrap());
    }
    assert!(text.starts_with("event: history\ndata: {"), "{text}");
    let last = text
        .rsplit("event: snapshot\ndata: ")
        .next()
        .unwrap()
        .lines()
        .next()
        .unwrap();
    let s: Snapshot = serde_json::from_str(last).expect("a snapshot event");
    assert!(s.at_ms > 0);
    // One stream at most: the next waits for it to end.
    let res = get_as(&h, "/v1/dashboard/stream", VIEWER).await;
    expect_error(res, 503, "unavailable").await;
    drop(first);
    let mut ok = false;
    for _ in 0..100 {
        let res = get_as(&h, "/v1/dashboard/stream", VIEWER).await;
        if res.status() == StatusCode::OK {
            ok = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(ok, "the slot came back when the first stream ended");
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_token_comes_from_its_variable_which_must_be_set() {
    let mut config = sluice_gateway::config::Config::default();
    config.ui.token_env = Some("DASH_TOKEN".into());
    let err = sluice_gateway::AppState::new(config.clone()).unwrap_err();
    assert!(err.to_string().contains("ui.token_env"), "{err}");
    assert!(err.to_string().contains("DASH_TOKEN"), "{err}");

    let h = start(|c| {
        c.ui.token = None;
        c.ui.token_env = Some("DASH_TOKEN".into());
        c.secrets.insert("DASH_TOKEN", "from-the-env");
    })
    .await;
    let res = get_as(&h, "/v1/dashboard", "from-the-env").await;
    assert_eq!(res.status(), StatusCode::OK);
    let res = get_as(&h, "/v1/dashboard", VIEWER).await;
    expect_error(res, 403, "forbidden").await;
    h.stop().await;
}
