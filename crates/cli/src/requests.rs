//! `sluice requests`: the request log of a running gateway
//! (`GET /v1/requests` with a tenant's key, `/v1/requests/all` with the
//! admin token), newest first, as a table or JSON.

use std::process::ExitCode;

use reqwest::Method;
use serde_json::Value;
use sluice_usage::Cost;

use crate::client::{Call, Failure};
use crate::jobs::show::{text, time};
use crate::table::Table;
use crate::usage::{Asker, asker};

/// What to read and how to print it.
#[derive(Debug, clap::Args)]
pub struct RequestsArgs {
    /// The gateway's base URL.
    #[arg(long, env = "SLUICE_TARGET", default_value = "http://127.0.0.1:8080")]
    target: String,
    /// The admin token: every tenant's requests.
    #[arg(long, env = "SLUICE_ADMIN_TOKEN", hide_env_values = true)]
    admin_token: Option<String>,
    /// A tenant's API key: its own requests. Given, it is used even when
    /// an admin token is set too, unless `--all` or `--tenant` asks for more.
    #[arg(long, env = "SLUICE_API_KEY", hide_env_values = true)]
    api_key: Option<String>,
    /// Every tenant's requests (admin token).
    #[arg(long, conflicts_with = "tenant")]
    all: bool,
    /// One tenant's requests (admin token).
    #[arg(long)]
    tenant: Option<String>,
    /// The tenant of an open gateway (`x-sluice-workspace`).
    #[arg(long)]
    workspace: Option<String>,
    /// Only this key's (its id).
    #[arg(long)]
    key: Option<String>,
    /// Only this model's (or API's).
    #[arg(long)]
    model: Option<String>,
    /// Only this status.
    #[arg(long)]
    status: Option<u16>,
    /// Only failed and refused ones (status 400 and above).
    #[arg(long)]
    errors: bool,
    /// The request with this id.
    #[arg(long)]
    request_id: Option<String>,
    /// From this time (RFC 3339 or milliseconds since the epoch).
    #[arg(long)]
    from: Option<String>,
    /// Until this time.
    #[arg(long)]
    to: Option<String>,
    /// Older than this (a page's `next_before`).
    #[arg(long)]
    before: Option<i64>,
    /// How many (1 to 1,000).
    #[arg(long, default_value_t = 50)]
    limit: u32,
    /// Print the gateway's JSON answer.
    #[arg(long)]
    json: bool,
}

/// Runs `sluice requests`.
pub async fn run(args: RequestsArgs) -> ExitCode {
    let everyone = args.all || args.tenant.is_some();
    let (admin, key) = (args.admin_token.as_deref(), args.api_key.as_deref());
    let asker = match asker(everyone, admin, key, "requests") {
        Ok(a) => a,
        Err(m) => {
            eprintln!("sluice requests: {m}");
            return ExitCode::from(2);
        }
    };
    let path = path(&args, asker);
    let answer = crate::client::send(Call {
        target: &args.target,
        method: Method::GET,
        path: &path,
        bearer: if asker == Asker::Admin { admin } else { key },
        workspace: args.workspace.as_deref(),
        body: None,
        auth_hint: |s| match s {
            401 | 403 => " (pass --admin-token, or a tenant's --api-key)",
            _ => "",
        },
    })
    .await;
    match answer {
        Ok(body) if args.json => {
            println!(
                "{}",
                serde_json::to_string_pretty(&body).unwrap_or_default()
            );
            ExitCode::SUCCESS
        }
        Ok(body) => {
            print!("{}", table(&body));
            ExitCode::SUCCESS
        }
        Err(Failure::Usage(m)) => {
            eprintln!("sluice requests: {}", crate::table::printable(&m));
            ExitCode::from(2)
        }
        Err(Failure::Failed(m)) => {
            eprintln!("sluice requests: {}", crate::table::printable(&m));
            ExitCode::FAILURE
        }
    }
}

fn path(args: &RequestsArgs, asker: Asker) -> String {
    let route = match asker {
        Asker::Admin => "/v1/requests/all",
        Asker::Tenant => "/v1/requests",
    };
    let mut q = url::form_urlencoded::Serializer::new(String::new());
    q.append_pair("limit", &args.limit.to_string());
    let status = args.status.map(|s| s.to_string());
    let before = args.before.map(|b| b.to_string());
    for (name, value) in [
        ("tenant", &args.tenant),
        ("key", &args.key),
        ("model", &args.model),
        ("status", &status),
        ("request_id", &args.request_id),
        ("from", &args.from),
        ("to", &args.to),
        ("before", &before),
    ] {
        if let Some(v) = value {
            q.append_pair(name, v);
        }
    }
    if args.errors {
        q.append_pair("errors", "true");
    }
    format!("{route}?{}", q.finish())
}

fn table(body: &Value) -> String {
    let head = [
        "TIME (UTC)",
        "STATUS",
        "TENANT",
        "KEY",
        "MODEL",
        "PROVIDER",
        "TOKENS",
        "COST",
        "MS",
        "QUEUE MS",
        "REQUEST ID",
    ]
    .map(String::from)
    .to_vec();
    let mut t = Table::new(head).right(6..10);
    let rows = body["requests"].as_array().map_or(&[][..], Vec::as_slice);
    for r in rows {
        let tokens =
            r["prompt_tokens"].as_u64().unwrap_or(0) + r["completion_tokens"].as_u64().unwrap_or(0);
        let nanos = (r["cost_usd"].as_f64().unwrap_or(0.0) * 1e9).round() as u64;
        let dash = |v: &Value| match text(v) {
            s if s.is_empty() => "-".to_owned(),
            s => s,
        };
        t.row(vec![
            time(&r["at_ms"]),
            text(&r["status"]),
            dash(&r["tenant"]),
            dash(&r["key_id"]),
            dash(&r["model"]),
            dash(&r["provider"]),
            tokens.to_string(),
            Cost::from_nanodollars(nanos).to_string(),
            text(&r["latency_ms"]),
            text(&r["queue_ms"]),
            dash(&r["request_id"]),
        ]);
    }
    let mut out = t.render();
    let next = match body["next_before"].as_i64() {
        Some(id) => format!(" (older: --before {id})"),
        None => String::new(),
    };
    out.push_str(&format!("{} requests{next}\n", rows.len()));
    out
}
