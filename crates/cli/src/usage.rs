//! `sluice usage`: calls, tokens and spend from a running gateway's usage
//! ledger (`GET /v1/usage` with a tenant's key, `/v1/usage/all` with the
//! admin token), as a table, JSON or CSV.

use std::fmt::Write;
use std::process::ExitCode;

use reqwest::Method;
use serde_json::Value;
use sluice_ledger::SUMS;
use sluice_usage::Cost;

use crate::client::{Call, Failure};
use crate::jobs::show::{text, time};
use crate::table::Table;

/// What to read and how to print it.
#[derive(Debug, clap::Args)]
pub struct UsageArgs {
    /// The gateway's base URL.
    #[arg(long, env = "SLUICE_TARGET", default_value = "http://127.0.0.1:8080")]
    target: String,
    /// The admin token: every tenant's usage.
    #[arg(long, env = "SLUICE_ADMIN_TOKEN", hide_env_values = true)]
    admin_token: Option<String>,
    /// A tenant's API key: its own usage. Given, it is used even when an
    /// admin token is set too, unless `--all` or `--tenant` asks for more.
    #[arg(long, alias = "key", env = "SLUICE_API_KEY", hide_env_values = true)]
    api_key: Option<String>,
    /// Every tenant's usage (admin token).
    #[arg(long, conflicts_with = "tenant")]
    all: bool,
    /// The tenant of an open gateway (`x-sluice-workspace`).
    #[arg(long)]
    workspace: Option<String>,
    /// Group by these, comma-separated: tenant, key, model, feature.
    #[arg(long, default_value = "model")]
    group_by: String,
    /// From this time (RFC 3339 or milliseconds since the epoch; default:
    /// a day before `--to`).
    #[arg(long)]
    from: Option<String>,
    /// Until this time (default: now).
    #[arg(long)]
    to: Option<String>,
    /// minute, hour, day, or total (one row per group).
    #[arg(long, default_value = "total")]
    granularity: String,
    /// One tenant's usage (with the admin token).
    #[arg(long)]
    tenant: Option<String>,
    /// Print the gateway's JSON answer.
    #[arg(long, conflicts_with = "csv")]
    json: bool,
    /// Print CSV (cost in nanodollars and in dollars).
    #[arg(long)]
    csv: bool,
}

/// Who asks: the admin (every tenant's, or `--tenant`'s) or a tenant
/// (its own).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Asker {
    Admin,
    Tenant,
}

/// `--all` and `--tenant` (`everyone`) ask as the admin; otherwise a
/// tenant's key wins over an admin token (set in the environment, say),
/// so `--api-key K` shows K's tenant, never everyone. `what`: what a
/// tenant sees of its own, for the message.
pub(crate) fn asker(
    everyone: bool,
    admin_token: Option<&str>,
    api_key: Option<&str>,
    what: &str,
) -> Result<Asker, String> {
    let admin = admin_token.is_some_and(|t| !t.is_empty());
    let tenant = api_key.is_some_and(|k| !k.is_empty());
    match (everyone, admin, tenant) {
        (true, true, _) => Ok(Asker::Admin),
        (true, false, _) => Err(format!(
            "--all and --tenant need --admin-token (SLUICE_ADMIN_TOKEN): a tenant sees its own {what}"
        )),
        (false, _, true) => Ok(Asker::Tenant),
        (false, true, false) => Ok(Asker::Admin),
        (false, false, false) => Ok(Asker::Tenant),
    }
}

/// Runs `sluice usage`.
pub async fn run(args: UsageArgs) -> ExitCode {
    let everyone = args.all || args.tenant.is_some();
    let (admin, key) = (args.admin_token.as_deref(), args.api_key.as_deref());
    let asker = match asker(everyone, admin, key, "usage") {
        Ok(a) => a,
        Err(m) => {
            eprintln!("sluice usage: {m}");
            return ExitCode::from(2);
        }
    };
    let path = path(&args, asker);
    let bearer = match asker {
        Asker::Admin => args.admin_token.as_deref(),
        Asker::Tenant => args.api_key.as_deref(),
    };
    let answer = crate::client::send(Call {
        target: &args.target,
        method: Method::GET,
        path: &path,
        bearer,
        workspace: args.workspace.as_deref(),
        body: None,
        auth_hint: |s| match s {
            401 | 403 => " (pass --admin-token, or a tenant's --api-key)",
            _ => "",
        },
    })
    .await;
    if asker == Asker::Admin && !args.all && args.tenant.is_none() {
        eprintln!("sluice usage: every tenant's usage (admin token; --api-key for one tenant's)");
    }
    match answer {
        Ok(body) if args.json => {
            println!(
                "{}",
                serde_json::to_string_pretty(&body).unwrap_or_default()
            );
            ExitCode::SUCCESS
        }
        Ok(body) if args.csv => {
            print!("{}", csv(&body));
            ExitCode::SUCCESS
        }
        Ok(body) => {
            print!("{}", table(&body));
            ExitCode::SUCCESS
        }
        Err(Failure::Usage(m)) => {
            eprintln!("sluice usage: {}", crate::table::printable(&m));
            ExitCode::from(2)
        }
        Err(Failure::Failed(m)) => {
            eprintln!("sluice usage: {}", crate::table::printable(&m));
            ExitCode::FAILURE
        }
    }
}

fn path(args: &UsageArgs, asker: Asker) -> String {
    let route = match asker {
        Asker::Admin => "/v1/usage/all",
        Asker::Tenant => "/v1/usage",
    };
    let mut q = url::form_urlencoded::Serializer::new(String::new());
    q.append_pair("group_by", &args.group_by)
        .append_pair("granularity", &args.granularity);
    for (name, value) in [
        ("from", &args.from),
        ("to", &args.to),
        ("tenant", &args.tenant),
    ] {
        if let Some(v) = value {
            q.append_pair(name, v);
        }
    }
    format!("{route}?{}", q.finish())
}

/// The answer's columns: the bucket (unless total), the grouped
/// dimensions, then the sums.
fn columns(body: &Value) -> (bool, Vec<String>) {
    let bucketed = body["granularity"].as_str() != Some("total");
    let dims = body["group_by"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default();
    (bucketed, dims)
}

/// A row's counts: the ledger's sums but the cost, which is shown in
/// dollars.
fn counts() -> &'static [&'static str] {
    &SUMS[..SUMS.len() - 1]
}

fn dollars(v: &Value) -> String {
    Cost::from_nanodollars(v.as_u64().unwrap_or(0)).to_string()
}

fn rows(body: &Value) -> &[Value] {
    body["rows"].as_array().map_or(&[], Vec::as_slice)
}

fn table(body: &Value) -> String {
    let (bucketed, dims) = columns(body);
    let mut head: Vec<String> = Vec::new();
    if bucketed {
        head.push("BUCKET (UTC)".into());
    }
    head.extend(dims.iter().map(|d| d.to_uppercase()));
    let first_sum = head.len();
    head.extend(
        [
            "CALLS",
            "ERRORS",
            "PROMPT",
            "COMPLETION",
            "CACHED",
            "REASONING",
            "UNPRICED",
            "COST",
        ]
        .map(String::from),
    );
    let width = head.len();
    let mut t = Table::new(head).right(first_sum..width);
    let (mut total, mut unpriced) = (0u64, 0u64);
    for r in rows(body) {
        let mut cells: Vec<String> = Vec::new();
        if bucketed {
            cells.push(time(&r["bucket_ms"]));
        }
        cells.extend(dims.iter().map(|d| match text(&r[d.as_str()]) {
            s if s.is_empty() => "-".to_owned(),
            s => s,
        }));
        cells.extend(counts().iter().map(|s| text(&r[*s])));
        cells.push(dollars(&r["cost_nanos"]));
        total = total.saturating_add(r["cost_nanos"].as_u64().unwrap_or(0));
        unpriced = unpriced.saturating_add(r["unpriced"].as_u64().unwrap_or(0));
        t.row(cells);
    }
    let mut out = t.render();
    let _ = writeln!(
        out,
        "{} rows, {} in all{}{}",
        rows(body).len(),
        Cost::from_nanodollars(total),
        if unpriced > 0 {
            format!(" and {unpriced} calls of models without a price (`sluice prices`)")
        } else {
            String::new()
        },
        if body["truncated"].as_bool() == Some(true) {
            " (truncated: narrow the range or the grouping)"
        } else {
            ""
        }
    );
    out
}

fn csv(body: &Value) -> String {
    let (bucketed, dims) = columns(body);
    let mut head: Vec<String> = Vec::new();
    if bucketed {
        head.push("bucket_ms".into());
    }
    head.extend(dims.iter().cloned());
    head.extend(counts().iter().map(|s| (*s).to_owned()));
    head.extend(["cost_nanodollars".into(), "cost_usd".into()]);
    let mut out = head.join(",");
    out.push('\n');
    for r in rows(body) {
        let mut cells: Vec<String> = Vec::new();
        if bucketed {
            cells.push(text(&r["bucket_ms"]));
        }
        cells.extend(dims.iter().map(|d| field(&text(&r[d.as_str()]))));
        cells.extend(counts().iter().map(|s| text(&r[*s])));
        cells.push(text(&r["cost_nanos"]));
        cells.push(dollars(&r["cost_nanos"]).trim_start_matches('$').to_owned());
        out.push_str(&cells.join(","));
        out.push('\n');
    }
    out
}

/// A CSV field, quoted when it must be (RFC 4180).
fn field(s: &str) -> String {
    // Control characters escaped first: a CSV is read in terminals too.
    let s = crate::table::printable(s);
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn answer() -> Value {
        json!({"granularity": "total", "group_by": ["tenant", "model"], "truncated": false,
        "rows": [
            {"tenant": "acme", "model": "openai/gpt-4o-mini", "requests": 3, "errors": 1,
             "prompt_tokens": 1000, "completion_tokens": 500, "cached_tokens": 0,
             "reasoning_tokens": 0, "unpriced": 1, "cost_nanos": 450000},
            {"tenant": "a,b", "model": "", "requests": 1, "errors": 0,
             "prompt_tokens": 1, "completion_tokens": 0, "cached_tokens": 0,
             "reasoning_tokens": 0, "unpriced": 0, "cost_nanos": 150},
        ]})
    }

    #[test]
    fn a_table_and_csv_show_every_group_and_the_cost() {
        let t = table(&answer());
        let lines: Vec<&str> = t.lines().collect();
        assert!(
            lines[0].starts_with("TENANT") && lines[0].ends_with("COST"),
            "{t}"
        );
        assert!(
            lines[1].contains("openai/gpt-4o-mini") && lines[1].ends_with("$0.000450000"),
            "{t}"
        );
        assert!(
            lines[3].contains("$0.000450150 in all and 1 calls of models without a price"),
            "{t}"
        );
        let c = csv(&answer());
        assert_eq!(
            c.lines().next().unwrap(),
            "tenant,model,requests,errors,prompt_tokens,completion_tokens,cached_tokens,reasoning_tokens,unpriced,cost_nanodollars,cost_usd"
        );
        assert_eq!(
            c.lines().nth(1).unwrap(),
            "acme,openai/gpt-4o-mini,3,1,1000,500,0,0,1,450000,0.000450000"
        );
        assert!(c.lines().nth(2).unwrap().starts_with("\"a,b\","), "{c}");
    }

    #[test]
    fn a_tenants_key_wins_over_an_admin_token_unless_more_is_asked() {
        use clap::Parser;
        #[derive(Parser)]
        struct Cli {
            #[command(flatten)]
            usage: UsageArgs,
        }
        let args = |extra: &[&str]| {
            let mut argv = vec!["usage"];
            argv.extend_from_slice(extra);
            Cli::try_parse_from(argv).expect("parses").usage
        };
        let asker = |a: &UsageArgs| {
            let everyone = a.all || a.tenant.is_some();
            asker(
                everyone,
                a.admin_token.as_deref(),
                a.api_key.as_deref(),
                "usage",
            )
        };
        let both = ["--admin-token", "adm", "--api-key", "k"];
        assert_eq!(asker(&args(&both)), Ok(Asker::Tenant));
        // `--key` is the old name of `--api-key`.
        assert_eq!(
            asker(&args(&["--admin-token", "adm", "--key", "k"])),
            Ok(Asker::Tenant)
        );
        let mut all = both.to_vec();
        all.push("--all");
        assert_eq!(asker(&args(&all)), Ok(Asker::Admin));
        // The rest depends on what the environment holds (clap reads it).
        let env = ["SLUICE_ADMIN_TOKEN", "SLUICE_API_KEY"];
        if env.iter().all(|v| std::env::var_os(v).is_none()) {
            assert_eq!(asker(&args(&["--admin-token", "adm"])), Ok(Asker::Admin));
            assert!(asker(&args(&["--api-key", "k", "--tenant", "acme"])).is_err());
            assert_eq!(asker(&args(&[])), Ok(Asker::Tenant));
        }
    }
}
