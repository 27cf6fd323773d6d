//! `sluice keys`, `sluice tenants`, `sluice tiers`: tenants, API keys and
//! tiers of a running gateway's key store, through its admin API
//! (`/v1/keys`, `/v1/tenants`, `/v1/tiers`; the admin token).

use std::fmt::Write;
use std::process::ExitCode;

use reqwest::Method;
use serde_json::{Map, Value, json};

use crate::client::{Call, Failure, segment};
use crate::jobs::show::{text, time};
use crate::table::plain;

/// Where the gateway is and the operator's token.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct Target {
    /// The gateway's base URL.
    #[arg(
        long,
        global = true,
        env = "SLUICE_TARGET",
        default_value = "http://127.0.0.1:8080"
    )]
    target: String,
    /// The admin token (`admin_token` in the gateway's config).
    #[arg(
        long,
        global = true,
        env = "SLUICE_ADMIN_TOKEN",
        hide_env_values = true
    )]
    admin_token: Option<String>,
    /// Print the gateway's JSON answer instead of a table.
    #[arg(long, global = true)]
    json: bool,
}

#[cfg(test)]
impl Target {
    /// The defaults, for tests of what a command sends.
    pub(crate) fn default_for_tests() -> Target {
        Target {
            target: "http://127.0.0.1:8080".into(),
            admin_token: None,
            json: false,
        }
    }
}

/// Limits given on the command line; only those given are sent.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct LimitArgs {
    /// Requests per second (fractions allowed).
    #[arg(long, value_name = "N")]
    rps: Option<f64>,
    /// Requests per minute.
    #[arg(long, value_name = "N")]
    rpm: Option<u64>,
    /// Tokens per minute.
    #[arg(long, value_name = "N")]
    tpm: Option<u64>,
    /// Requests in flight at once.
    #[arg(long, value_name = "N")]
    max_concurrent: Option<u64>,
    /// A model that may be called, as a glob (`openai/*`); repeat for more.
    #[arg(long = "model", value_name = "GLOB")]
    models: Vec<String>,
    /// An API that may be called (`slack`, a glob); repeat for more.
    #[arg(long = "api", value_name = "GLOB")]
    apis: Vec<String>,
    /// The priority of requests that name none (high, normal, low).
    #[arg(long)]
    priority: Option<String>,
    /// The weight in fair queuing.
    #[arg(long)]
    weight: Option<u32>,
    /// A budget, as `name=monthly,money=25,period=month,time_zone=Europe/Paris`
    /// (fields: name, money in dollars, tokens, requests, period day|week|month,
    /// time_zone, or window_seconds for a rolling window); repeat for more.
    /// The budgets given replace its own.
    #[arg(long = "budget", value_name = "SPEC", value_parser = budget_spec)]
    budgets: Vec<Value>,
}

/// A `--budget` as the JSON object the API reads; the gateway checks
/// the fields and names the bad one.
fn budget_spec(spec: &str) -> Result<Value, String> {
    let mut m = Map::new();
    for part in spec.split(',').filter(|p| !p.trim().is_empty()) {
        let (k, v) = part
            .split_once('=')
            .ok_or_else(|| format!("{part:?}: expected field=value"))?;
        let (k, v) = (k.trim(), v.trim());
        let value = match k {
            "tokens" | "requests" | "window_seconds" => match v.parse::<u64>() {
                Ok(n) => json!(n),
                Err(_) => return Err(format!("{k}: must be a whole number, not {v:?}")),
            },
            _ => json!(v),
        };
        if m.insert(k.to_owned(), value).is_some() {
            return Err(format!("{k}: given twice"));
        }
    }
    Ok(Value::Object(m))
}

impl LimitArgs {
    /// The `limits` object, or `None` when no limit was given.
    fn json(&self) -> Option<Value> {
        let mut m = Map::new();
        let mut put = |k: &str, v: Value| {
            m.insert(k.to_owned(), v);
        };
        if let Some(v) = self.rps {
            put("requests_per_second", json!(v));
        }
        if let Some(v) = self.rpm {
            put("requests_per_minute", json!(v));
        }
        if let Some(v) = self.tpm {
            put("tokens_per_minute", json!(v));
        }
        if let Some(v) = self.max_concurrent {
            put("max_concurrent", json!(v));
        }
        if !self.models.is_empty() {
            put("models", json!(self.models));
        }
        if !self.apis.is_empty() {
            put("apis", json!(self.apis));
        }
        if let Some(v) = &self.priority {
            put("priority", json!(v));
        }
        if let Some(v) = self.weight {
            put("weight", json!(v));
        }
        (!m.is_empty()).then_some(Value::Object(m))
    }

    /// The `budgets` list, or `None` when no budget was given.
    fn budgets(&self) -> Option<Value> {
        (!self.budgets.is_empty()).then(|| json!(self.budgets))
    }
}

/// `sluice keys …`
#[derive(Debug, Clone, clap::Args)]
pub struct KeysArgs {
    #[command(flatten)]
    target: Target,
    #[command(subcommand)]
    command: KeysCommand,
}

#[derive(Debug, Clone, clap::Subcommand)]
enum KeysCommand {
    /// Issue a key to a tenant; the key is printed this once.
    Issue {
        /// The tenant.
        #[arg(long)]
        tenant: String,
        /// A label for the key.
        #[arg(long)]
        name: Option<String>,
        /// A tier of its own (else only its tenant's limits apply).
        #[arg(long)]
        tier: Option<String>,
        /// A tag; repeat for more.
        #[arg(long = "tag")]
        tags: Vec<String>,
        #[command(flatten)]
        limits: LimitArgs,
    },
    /// List keys (without secrets).
    List {
        /// Only this tenant's.
        #[arg(long)]
        tenant: Option<String>,
    },
    /// Show one key.
    Show {
        /// The key's id.
        id: String,
    },
    /// Change a key's tier or limits (the limits given replace its own).
    Update {
        /// The key's id.
        id: String,
        /// Its new tier.
        #[arg(long, conflicts_with = "no_tier")]
        tier: Option<String>,
        /// Take it out of its tier.
        #[arg(long)]
        no_tier: bool,
        #[command(flatten)]
        limits: LimitArgs,
    },
    /// Replace a key; the old one works for the grace period.
    Rotate {
        /// The key's id.
        id: String,
        /// How long the old key keeps working, in seconds (default 3600).
        #[arg(long, value_name = "SECONDS")]
        grace: Option<u64>,
    },
    /// Refuse a key for good.
    Revoke {
        /// The key's id.
        id: String,
    },
    /// Refuse a key until unblocked.
    Block {
        /// The key's id.
        id: String,
    },
    /// Delete a key for good, whatever its state (audited).
    Delete {
        /// The key's id.
        id: String,
    },
    /// Let a blocked key work again.
    Unblock {
        /// The key's id.
        id: String,
    },
}

/// `sluice tenants …`
#[derive(Debug, Clone, clap::Args)]
pub struct TenantsArgs {
    #[command(flatten)]
    target: Target,
    #[command(subcommand)]
    command: TenantsCommand,
}

#[derive(Debug, Clone, clap::Subcommand)]
enum TenantsCommand {
    /// Create a tenant.
    Create {
        /// Its name (A-Z a-z 0-9 . _ -).
        name: String,
        /// Its tier.
        #[arg(long)]
        tier: Option<String>,
        /// A tag; repeat for more.
        #[arg(long = "tag")]
        tags: Vec<String>,
        #[command(flatten)]
        limits: LimitArgs,
    },
    /// List the key store's tenants.
    List,
    /// Show one tenant.
    Show {
        /// Its name.
        name: String,
    },
    /// Change a tenant's tier or limits (the limits given replace its own).
    Update {
        /// Its name.
        name: String,
        /// Its new tier.
        #[arg(long, conflicts_with = "no_tier")]
        tier: Option<String>,
        /// Take it out of its tier.
        #[arg(long)]
        no_tier: bool,
        #[command(flatten)]
        limits: LimitArgs,
    },
    /// Refuse every key of a tenant until unblocked.
    Block {
        /// Its name.
        name: String,
    },
    /// Let a blocked tenant's keys work again.
    Unblock {
        /// Its name.
        name: String,
    },
    /// Delete a tenant and every key of it, for good (audited; its usage
    /// history stays).
    Delete {
        /// Its name.
        name: String,
    },
}

/// `sluice tiers …`
#[derive(Debug, Clone, clap::Args)]
pub struct TiersArgs {
    #[command(flatten)]
    target: Target,
    #[command(subcommand)]
    command: TiersCommand,
}

#[derive(Debug, Clone, clap::Subcommand)]
enum TiersCommand {
    /// Create a tier.
    Create {
        /// Its name.
        name: String,
        #[command(flatten)]
        limits: LimitArgs,
    },
    /// Replace a tier's limits; every member follows at once.
    Update {
        /// Its name.
        name: String,
        #[command(flatten)]
        limits: LimitArgs,
    },
    /// List the tiers.
    List,
}

/// How an answer is shown.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Shape {
    Audit,
    Deleted,
    Key,
    Keys,
    Tenant,
    Tenants,
    Tier,
    Tiers,
}

pub(crate) struct Request {
    pub(crate) method: Method,
    pub(crate) path: String,
    pub(crate) body: Option<Value>,
    pub(crate) shape: Shape,
}

fn req(method: Method, path: String, body: Option<Value>, shape: Shape) -> Request {
    Request {
        method,
        path,
        body,
        shape,
    }
}

/// The body of an update: the tier (or `null`) and limits when given.
fn update_body(tier: Option<&String>, no_tier: bool, limits: &LimitArgs) -> Value {
    let mut m = Map::new();
    if no_tier {
        m.insert("tier".into(), Value::Null);
    } else if let Some(t) = tier {
        m.insert("tier".into(), json!(t));
    }
    if let Some(l) = limits.json() {
        m.insert("limits".into(), l);
    }
    if let Some(b) = limits.budgets() {
        m.insert("budgets".into(), b);
    }
    Value::Object(m)
}

fn with(mut body: Value, key: &str, v: Option<Value>) -> Value {
    if let Some(v) = v.filter(|v| !v.is_null()) {
        body[key] = v;
    }
    body
}

fn keys_request(c: &KeysCommand) -> Request {
    use KeysCommand as C;
    let key = |id: &str, action: &str| format!("/v1/keys/{}{action}", segment(id));
    match c {
        C::Issue {
            tenant,
            name,
            tier,
            tags,
            limits,
        } => {
            let mut b = json!({"tenant": tenant, "tags": tags});
            b = with(b, "name", name.as_ref().map(|n| json!(n)));
            b = with(b, "tier", tier.as_ref().map(|t| json!(t)));
            b = with(b, "limits", limits.json());
            b = with(b, "budgets", limits.budgets());
            req(Method::POST, "/v1/keys".into(), Some(b), Shape::Key)
        }
        C::List { tenant } => {
            let q = tenant
                .as_ref()
                .map(|t| format!("?tenant={}", segment(t)))
                .unwrap_or_default();
            req(Method::GET, format!("/v1/keys{q}"), None, Shape::Keys)
        }
        C::Show { id } => req(Method::GET, key(id, ""), None, Shape::Key),
        C::Update {
            id,
            tier,
            no_tier,
            limits,
        } => req(
            Method::PATCH,
            key(id, ""),
            Some(update_body(tier.as_ref(), *no_tier, limits)),
            Shape::Key,
        ),
        C::Rotate { id, grace } => {
            let b = with(json!({}), "grace_seconds", grace.map(|g| json!(g)));
            req(Method::POST, key(id, "/rotate"), Some(b), Shape::Key)
        }
        C::Revoke { id } => req(Method::POST, key(id, "/revoke"), None, Shape::Key),
        C::Block { id } => req(Method::POST, key(id, "/block"), None, Shape::Key),
        C::Delete { id } => req(Method::DELETE, key(id, ""), None, Shape::Deleted),
        C::Unblock { id } => req(Method::POST, key(id, "/unblock"), None, Shape::Key),
    }
}

fn tenants_request(c: &TenantsCommand) -> Request {
    use TenantsCommand as C;
    let at = |n: &str, action: &str| format!("/v1/tenants/{}{action}", segment(n));
    match c {
        C::Create {
            name,
            tier,
            tags,
            limits,
        } => {
            let mut b = json!({"name": name, "tags": tags});
            b = with(b, "tier", tier.as_ref().map(|t| json!(t)));
            b = with(b, "limits", limits.json());
            b = with(b, "budgets", limits.budgets());
            req(Method::POST, "/v1/tenants".into(), Some(b), Shape::Tenant)
        }
        C::List => req(Method::GET, "/v1/tenants".into(), None, Shape::Tenants),
        C::Show { name } => req(Method::GET, at(name, ""), None, Shape::Tenant),
        C::Update {
            name,
            tier,
            no_tier,
            limits,
        } => req(
            Method::PATCH,
            at(name, ""),
            Some(update_body(tier.as_ref(), *no_tier, limits)),
            Shape::Tenant,
        ),
        C::Block { name } => req(Method::POST, at(name, "/block"), None, Shape::Tenant),
        C::Unblock { name } => req(Method::POST, at(name, "/unblock"), None, Shape::Tenant),
        C::Delete { name } => req(Method::DELETE, at(name, ""), None, Shape::Deleted),
    }
}

fn tiers_request(c: &TiersCommand) -> Request {
    match c {
        TiersCommand::Create { name, limits } => {
            let b = json!({"name": name, "limits": limits.json().unwrap_or(json!({}))});
            let b = with(b, "budgets", limits.budgets());
            req(Method::POST, "/v1/tiers".into(), Some(b), Shape::Tier)
        }
        TiersCommand::Update { name, limits } => {
            // Budgets alone leave the limits as they are.
            let b = match (limits.json(), limits.budgets()) {
                (l, Some(b)) => with(json!({"budgets": b}), "limits", l),
                (l, None) => json!({"limits": l.unwrap_or(json!({}))}),
            };
            let path = format!("/v1/tiers/{}", segment(name));
            req(Method::PUT, path, Some(b), Shape::Tier)
        }
        TiersCommand::List => req(Method::GET, "/v1/tiers".into(), None, Shape::Tiers),
    }
}

/// Runs `sluice keys`.
pub async fn keys(args: KeysArgs) -> ExitCode {
    run("keys", &args.target, keys_request(&args.command)).await
}

/// Runs `sluice tenants`.
pub async fn tenants(args: TenantsArgs) -> ExitCode {
    run("tenants", &args.target, tenants_request(&args.command)).await
}

/// Runs `sluice tiers`.
pub async fn tiers(args: TiersArgs) -> ExitCode {
    run("tiers", &args.target, tiers_request(&args.command)).await
}

/// Sends `r` to the gateway `target` names and prints the answer (a
/// table, or JSON with `--json`); `command` names the failure.
pub(crate) async fn run(command: &str, target: &Target, r: Request) -> ExitCode {
    let answer = crate::client::send(Call {
        target: &target.target,
        method: r.method,
        path: &r.path,
        bearer: target.admin_token.as_deref(),
        workspace: None,
        body: r.body.as_ref(),
        auth_hint: |s| match s {
            401 | 403 => " (pass --admin-token or set SLUICE_ADMIN_TOKEN)",
            _ => "",
        },
    })
    .await;
    match answer {
        Ok(body) if target.json => {
            println!(
                "{}",
                serde_json::to_string_pretty(&body).unwrap_or_default()
            );
            ExitCode::SUCCESS
        }
        Ok(body) => {
            print!("{}", show(r.shape, &body));
            ExitCode::SUCCESS
        }
        Err(Failure::Usage(e)) => {
            eprintln!(
                "sluice {command}: {}",
                crate::table::printable(&e.to_string())
            );
            ExitCode::from(2)
        }
        Err(Failure::Failed(e)) => {
            eprintln!(
                "sluice {command}: {}",
                crate::table::printable(&e.to_string())
            );
            ExitCode::from(1)
        }
    }
}

/// Limits on one line: `requests_per_minute=60 models=openai/*`.
fn limits(v: &Value) -> String {
    let Some(m) = v.as_object().filter(|m| !m.is_empty()) else {
        return "-".into();
    };
    m.iter()
        .map(|(k, v)| match v {
            Value::Array(a) => {
                let items: Vec<String> = a.iter().map(text).collect();
                format!("{k}={}", items.join(","))
            }
            other => format!("{k}={}", text(other)),
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// Budgets on one line: `monthly(money=25 period=month); daily(…)`.
fn budgets(v: &Value) -> String {
    let Some(list) = v.as_array().filter(|l| !l.is_empty()) else {
        return "-".into();
    };
    list.iter()
        .map(|b| {
            let mut rest = b.clone();
            let name = rest
                .as_object_mut()
                .and_then(|m| m.remove("name"))
                .unwrap_or(Value::Null);
            format!("{}({})", text(&name), limits(&rest))
        })
        .collect::<Vec<_>>()
        .join("; ")
}

fn show(shape: Shape, b: &Value) -> String {
    let list = |k: &str| b[k].as_array().cloned().unwrap_or_default();
    match shape {
        Shape::Audit => crate::audit::show(b),
        Shape::Deleted => {
            let d = &b["deleted"];
            match b["keys_deleted"].as_array() {
                Some(keys) => format!(
                    "deleted tenant {} and its {} key(s){}\n",
                    text(&d["name"]),
                    keys.len(),
                    if keys.is_empty() {
                        String::new()
                    } else {
                        format!(": {}", keys.iter().map(text).collect::<Vec<_>>().join(", "))
                    }
                ),
                None => format!(
                    "deleted key {} of tenant {}\n",
                    text(&d["id"]),
                    text(&d["tenant"])
                ),
            }
        }
        Shape::Key => {
            let mut out = String::new();
            if let Some(k) = b["key"].as_str() {
                let _ = writeln!(out, "key: {k}");
                let _ = writeln!(out, "     (shown this once: only its hash is kept)");
            }
            for (label, v) in [
                ("id", text(&b["id"])),
                ("tenant", text(&b["tenant"])),
                ("name", text(&b["name"])),
                ("state", text(&b["state"])),
                ("tier", text(&b["tier"])),
                ("limits", limits(&b["limits"])),
                ("budgets", budgets(&b["budgets"])),
                ("created", time(&b["created_at"])),
                ("grace until", time(&b["grace_until"])),
                ("replaced by", text(&b["replaced_by"])),
            ] {
                let _ = writeln!(out, "{label:>12}  {v}");
            }
            if let Some(p) = b.get("previous") {
                let _ = writeln!(
                    out,
                    "previous key {} works until {} (UTC)",
                    text(&p["id"]),
                    time(&p["grace_until"])
                );
            }
            out
        }
        Shape::Keys => {
            let rows: Vec<[String; 6]> = list("keys")
                .iter()
                .map(|k| {
                    [
                        text(&k["id"]),
                        text(&k["tenant"]),
                        text(&k["name"]),
                        text(&k["state"]),
                        text(&k["tier"]),
                        limits(&k["limits"]),
                    ]
                })
                .collect();
            plain(["ID", "TENANT", "NAME", "STATE", "TIER", "LIMITS"], &rows)
        }
        Shape::Tenant => format!(
            "{}  {}  tier {}  {}  budgets {}\n",
            text(&b["name"]),
            text(&b["state"]),
            text(&b["tier"]),
            limits(&b["limits"]),
            budgets(&b["budgets"])
        ),
        Shape::Tenants => {
            let rows: Vec<[String; 4]> = list("tenants")
                .iter()
                .map(|t| {
                    [
                        text(&t["name"]),
                        text(&t["state"]),
                        text(&t["tier"]),
                        limits(&t["limits"]),
                    ]
                })
                .collect();
            plain(["NAME", "STATE", "TIER", "LIMITS"], &rows)
        }
        Shape::Tier => format!(
            "{}  {}  budgets {}\n",
            text(&b["name"]),
            limits(&b["limits"]),
            budgets(&b["budgets"])
        ),
        Shape::Tiers => {
            let rows: Vec<[String; 3]> = list("tiers")
                .iter()
                .map(|t| {
                    [
                        text(&t["name"]),
                        limits(&t["limits"]),
                        budgets(&t["budgets"]),
                    ]
                })
                .collect();
            plain(["NAME", "LIMITS", "BUDGETS"], &rows)
        }
    }
}
