//! Keys issued through the admin API, for the tests of keys and budgets:
//! the operator's calls, a call as a key, and gateways that share one key
//! store (PostgreSQL) and one Redis.

use serde_json::Value;
use sluice_gateway::config::{Config, RedisSettings};

use super::{Harness, chat};

/// The operator's token in these tests.
pub const ADMIN: &str = "the-operator";
/// A model the sim serves and the price table prices.
pub const MODEL: &str = "openai/gpt-4o-mini";

/// The operator's token on, and refusals at once rather than after a wait.
pub fn with_admin(c: &mut Config) {
    c.admin_token = Some(ADMIN.into());
    // A refusal comes at once instead of after a wait for the refill.
    c.retry.max_retry_after_ms = 50;
}

/// `method path` with `body` as the operator: the JSON answer of a 2xx.
pub async fn admin(base: &str, method: &str, path: &str, body: Value) -> Value {
    let res = reqwest::Client::new()
        .request(
            reqwest::Method::from_bytes(method.as_bytes()).unwrap(),
            format!("{base}{path}"),
        )
        .bearer_auth(ADMIN)
        .json(&body)
        .send()
        .await
        .expect("the gateway answers");
    let status = res.status();
    let body: Value = res.json().await.unwrap_or(Value::Null);
    assert!(status.is_success(), "{method} {path}: {status} {body}");
    body
}

pub async fn issue(base: &str, body: Value) -> (String, String) {
    let b = admin(base, "POST", "/v1/keys", body).await;
    (
        b["key"].as_str().unwrap().into(),
        b["id"].as_str().unwrap().into(),
    )
}

pub async fn chat_as(h: &Harness, base: &str, key: Option<&str>, model: &str) -> reqwest::Response {
    let mut req = h
        .http
        .post(format!("{base}/v1/chat/completions"))
        .json(&chat(model));
    if let Some(k) = key {
        req = req.bearer_auth(k);
    }
    req.send().await.expect("the gateway answers")
}

pub async fn message(res: reqwest::Response) -> String {
    let b: Value = res.json().await.unwrap_or(Value::Null);
    b["error"]["message"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

pub fn redis_url() -> Option<String> {
    std::env::var("SLUICE_TEST_REDIS_URL")
        .ok()
        .filter(|u| !u.is_empty())
}

/// A fresh schema in the test PostgreSQL, dropped with the guard; its URL
/// (`.url`) makes connections use it.
pub async fn fresh_schema() -> super::OnServer {
    use sqlx::{AssertSqlSafe, Connection};
    let url = std::env::var("SLUICE_TEST_POSTGRES_URL")
        .expect("SLUICE_TEST_POSTGRES_URL: the shared key store lives in PostgreSQL");
    let schema = format!("keys_gw_{:x}", fastrand::u64(..));
    let mut conn = sqlx::PgConnection::connect(&url).await.expect("connect");
    sqlx::raw_sql(AssertSqlSafe(format!("CREATE SCHEMA {schema}")))
        .execute(&mut conn)
        .await
        .expect("a schema");
    let sep = if url.contains('?') { '&' } else { '?' };
    let with_schema = format!("{url}{sep}options=-c%20search_path%3D{schema}");
    super::OnServer::new(
        &url,
        with_schema,
        format!("DROP SCHEMA IF EXISTS {schema} CASCADE"),
    )
}

/// How long replicas sharing Redis in these tests wait for it before they
/// count it away (see [`shared`]).
pub const REDIS_UP_TIMEOUT_MS: u64 = 10_000;

pub fn shared(redis: &str, prefix: &str, id: &str, store: &str) -> impl FnOnce(&mut Config) {
    let (redis, prefix, id, store) = (
        redis.to_owned(),
        prefix.to_owned(),
        id.to_owned(),
        store.to_owned(),
    );
    move |c: &mut Config| {
        with_admin(c);
        c.keys.store = store;
        let mut r = RedisSettings::new(redis);
        r.prefix = prefix;
        r.replica_id = Some(id);
        // Redis is up throughout these tests. The production timeout
        // (250 ms) is a bound a loaded test machine can miss, and a call
        // whose shared count times out goes on uncounted (`fail_open`),
        // as if Redis were away: not what these tests are about.
        r.timeout_ms = REDIS_UP_TIMEOUT_MS;
        c.redis = Some(r);
    }
}
