//! The request log's page (`/ui/requests`) in the same browser: a tenant
//! opens it with its API key and sees its own requests only; the operator
//! opens it with the admin token, sees every tenant's, narrows them by
//! tenant, model and status, reads on to an older page, and opens one
//! request whose bodies show with the key its prompt held redacted.

use serde_json::{Value, json};
use sluice_gateway::config::BodiesKept;

use super::{Driver, browser, tempdir};
use crate::common::{ACME, GLOBEX, Harness, sim_config, two_tenants, wait_until};

const OPERATOR: &str = "the-operator";
const LEAKED: &str = "sk-live-0123456789abcdefghij";

async fn click(d: &Driver, css: &str) {
    let el = d.element(css).await;
    d.session("POST", &format!("/element/{el}/click"), Some(json!({})))
        .await;
}

async fn type_into(d: &Driver, css: &str, text: &str) {
    let el = d.element(css).await;
    d.session("POST", &format!("/element/{el}/clear"), Some(json!({})))
        .await;
    d.session(
        "POST",
        &format!("/element/{el}/value"),
        Some(json!({"text": text})),
    )
    .await;
}

async fn log_in(d: &Driver, token: &str) {
    type_into(d, "#token", token).await;
    click(d, "#login-form button[type=submit]").await;
}

/// The ids of the rows shown, once `ready` (a JS condition on `rows`,
/// the rows' `data-id`s) holds.
async fn rows(d: &Driver, what: &str, ready: &str) -> Vec<i64> {
    let v = d
        .until(
            what,
            &format!(
                "const rows = Array.from(document.querySelectorAll('#requests tbody tr')).map(r => Number(r.dataset.id)); return ({ready}) ? rows : null;"
            ),
        )
        .await;
    serde_json::from_value(v).unwrap()
}

async fn chat(h: &Harness, key: &str, model: &str, rid: &str) {
    let res = h
        .post(
            "/v1/chat/completions",
            &json!({"model": model, "messages": [{"role": "user", "content": format!("use {LEAKED}")}]}),
        )
        .bearer_auth(key)
        .header("x-request-id", rid)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tenants_and_the_operator_read_the_request_log_from_the_page() {
    let (driver, chromium) = match browser() {
        Ok(found) => found,
        Err(why) if std::env::var_os("SLUICE_TEST_REQUIRE_BROWSER").is_none() => {
            eprintln!("skipped: {why} (SLUICE_TEST_REQUIRE_BROWSER is unset)");
            return;
        }
        Err(why) => panic!("{why}, and SLUICE_TEST_REQUIRE_BROWSER is set"),
    };
    let h = Harness::with(sim_config(), |c| {
        two_tenants(c);
        c.admin_token = Some(OPERATOR.into());
        c.request_log.bodies = BodiesKept::All;
    })
    .await;
    // 27 of acme's (two models), one of globex's: more than a page of 25.
    for i in 0..27 {
        let model = if i % 9 == 0 {
            "openai/gpt-4o"
        } else {
            "openai/gpt-4o-mini"
        };
        chat(&h, ACME, model, &format!("acme-{i}")).await;
    }
    chat(&h, GLOBEX, "openai/gpt-4o-mini", "globex-0").await;
    wait_until("the ledger has all 28", || async {
        let all = h.get_json("/v1/requests/all?limit=100", OPERATOR).await;
        all["requests"].as_array().map(Vec::len) == Some(28)
    })
    .await;
    let all: Value = h.get_json("/v1/requests/all?limit=100", OPERATOR).await;
    let id_of = |rid: &str| {
        all["requests"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["request_id"] == rid)
            .unwrap()["id"]
            .as_i64()
            .unwrap()
    };
    let theirs = id_of("globex-0");

    let profile = tempdir();
    let d = Driver::start(&driver, &chromium, &profile).await;
    d.go(&h.url("/ui/requests")).await;
    // A tenant: its own requests only, no tenant filter.
    log_in(&d, ACME).await;
    let mine = rows(
        &d,
        "acme's first page",
        "rows.length === 50 || rows.length === 27",
    )
    .await;
    assert_eq!(mine.len(), 27);
    assert!(!mine.contains(&theirs), "globex's request shown to acme");
    let hidden = d
        .script("return document.getElementById('l-tenant').hidden")
        .await;
    assert_eq!(hidden, json!(true));
    click(&d, "#logout").await;

    // The operator: every tenant's, a page of 25 then the older ones.
    log_in(&d, OPERATOR).await;
    rows(&d, "every tenant's requests", "rows.length === 28").await;
    d.script("document.getElementById('f-limit').value = '25'; return true;")
        .await;
    click(&d, "#filter button[type=submit]").await;
    let first = rows(&d, "a page of 25", "rows.length === 25").await;
    assert!(first.windows(2).all(|w| w[0] > w[1]), "newest first");
    click(&d, "#more").await;
    let both = rows(&d, "the older page below", "rows.length === 28").await;
    assert_eq!(&both[..25], &first[..]);

    // Narrowed to globex: its one request.
    type_into(&d, "#f-tenant", "globex").await;
    click(&d, "#filter button[type=submit]").await;
    let one = rows(&d, "globex's request", "rows.length === 1").await;
    assert_eq!(one, vec![theirs]);
    // By model (and tenant): acme's three calls of gpt-4o.
    type_into(&d, "#f-tenant", "acme").await;
    type_into(&d, "#f-model", "openai/gpt-4o").await;
    click(&d, "#filter button[type=submit]").await;
    rows(&d, "acme's gpt-4o calls", "rows.length === 3").await;
    // By status: none failed.
    type_into(&d, "#f-status", "500").await;
    click(&d, "#filter button[type=submit]").await;
    rows(&d, "no request answered 500", "rows.length === 0").await;
    type_into(&d, "#f-status", "200").await;
    click(&d, "#filter button[type=submit]").await;
    let gpt4o = rows(&d, "the 200s again", "rows.length === 3").await;

    // One request in full: fields, and bodies without the key.
    click(&d, &format!("#requests tr[data-id=\"{}\"]", gpt4o[0])).await;
    let tenant = d
        .until(
            "the request's fields",
            &format!("const r = document.getElementById('request'); if (r.hidden || r.dataset.id !== '{}') return null; const f = document.querySelector('#request-fields tr[data-field=\"tenant\"]'); return f ? f.textContent : null;", gpt4o[0]),
        )
        .await;
    assert_eq!(tenant, json!("tenantacme"));
    let request = d
        .script("return document.getElementById('request-body').textContent")
        .await;
    let request = request.as_str().unwrap();
    assert!(request.contains("use [redacted]"), "{request}");
    assert!(!request.contains(LEAKED), "{request}");
    let response = d
        .script("return document.getElementById('response-body').textContent")
        .await;
    assert!(
        response.as_str().unwrap().contains("chat.completion"),
        "{response}"
    );

    d.session("DELETE", "", None).await;
    drop(d);
    let _ = std::fs::remove_dir_all(&profile);
    h.stop().await;
}
