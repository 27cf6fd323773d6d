//! `sluice audit`: the audit trail of a running gateway (`GET /v1/audit`,
//! the admin token): who changed what, when, from what to what, newest
//! first, as a table or (`--json`) the gateway's answer.

use std::process::ExitCode;

use reqwest::Method;
use serde_json::{Map, Value};

use crate::admin::{Request, Shape, Target};
use crate::jobs::show::{text, time};
use crate::table::Table;

/// `sluice audit [--from T] [--to T] [--actor A] [--kind K] [--limit N]`
#[derive(Debug, Clone, clap::Args)]
pub struct AuditArgs {
    #[command(flatten)]
    target: Target,
    /// Entries at or after this time: RFC 3339 (`2026-01-31T12:00:00Z`)
    /// or milliseconds since the Unix epoch.
    #[arg(long, value_name = "TIME")]
    from: Option<String>,
    /// Entries before this time (as `--from`).
    #[arg(long, value_name = "TIME")]
    to: Option<String>,
    /// Only this actor: `admin`, `key:<id>`, `tenant:<name>`, `upstream`,
    /// `bus:<replica>`.
    #[arg(long)]
    actor: Option<String>,
    /// Only this kind (`key.revoke`), or every kind under a prefix (`key`).
    #[arg(long)]
    kind: Option<String>,
    /// At most this many (1 to 1000).
    #[arg(long, default_value_t = 50)]
    limit: u32,
    /// Only entries older than this id (the next page: printed at the end
    /// of a full one).
    #[arg(long, value_name = "ID")]
    before: Option<i64>,
}

impl AuditArgs {
    /// `/v1/audit` with the filters given (the gateway checks them and
    /// names a bad one).
    fn path(&self) -> String {
        let mut q = url::form_urlencoded::Serializer::new(String::new());
        for (k, v) in [
            ("from", self.from.clone()),
            ("to", self.to.clone()),
            ("actor", self.actor.clone()),
            ("kind", self.kind.clone()),
            ("limit", Some(self.limit.to_string())),
            ("before", self.before.map(|b| b.to_string())),
        ] {
            if let Some(v) = v {
                q.append_pair(k, &v);
            }
        }
        format!("/v1/audit?{}", q.finish())
    }
}

/// Runs `sluice audit`.
pub async fn run(args: AuditArgs) -> ExitCode {
    let request = Request {
        method: Method::GET,
        path: args.path(),
        body: None,
        shape: Shape::Audit,
    };
    crate::admin::run("audit", &args.target, request).await
}

/// The answer of `GET /v1/audit` as a table, and how to get the next page.
pub(crate) fn show(b: &Value) -> String {
    let entries = b["entries"].as_array().cloned().unwrap_or_default();
    if entries.is_empty() {
        return "no entries\n".into();
    }
    let mut t = Table::new(["TIME (UTC)", "ACTOR", "KIND", "TARGET", "CHANGE"]);
    for e in &entries {
        t.row([
            time(&e["at_ms"]),
            text(&e["actor"]),
            text(&e["kind"]),
            text(&e["target"]),
            change(&e["before"], &e["after"]),
        ]);
    }
    let mut out = t.render();
    if let Some(next) = b["next_before"].as_i64() {
        out.push_str(&format!("more: --before {next}\n"));
    }
    out
}

/// What changed, on one line: the fields whose values differ, as
/// `field: before→after` (a field only on one side shows `-` on the
/// other); a value that is not an object shows whole.
fn change(before: &Value, after: &Value) -> String {
    const WIDTH: usize = 80;
    let empty = Map::new();
    let line = match (before.as_object(), after.as_object()) {
        (b, a) if b.is_some() || a.is_some() => {
            let (b, a) = (b.unwrap_or(&empty), a.unwrap_or(&empty));
            let mut keys: Vec<&String> = b.keys().chain(a.keys()).collect();
            keys.sort();
            keys.dedup();
            keys.iter()
                .filter(|k| b.get(**k) != a.get(**k))
                .map(|k| {
                    let v = |m: &Map<String, Value>| m.get(*k).map_or("-".into(), compact);
                    if b.is_empty() {
                        format!("{k}={}", v(a))
                    } else {
                        format!("{k}: {}→{}", v(b), v(a))
                    }
                })
                .collect::<Vec<_>>()
                .join("  ")
        }
        _ if before.is_null() => compact(after),
        _ => format!("{}→{}", compact(before), compact(after)),
    };
    if line.chars().count() > WIDTH {
        let cut: String = line.chars().take(WIDTH - 1).collect();
        format!("{cut}…")
    } else {
        line
    }
}

/// A value as short text: strings bare, the rest as JSON, `-` for null.
fn compact(v: &Value) -> String {
    match v {
        Value::Null => "-".into(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_change_shows_the_fields_that_differ() {
        let before = json!({"capacity": 1000, "window_ms": 1000});
        let after = json!({"capacity": 500, "window_ms": 1000, "reason": "throttled"});
        assert_eq!(
            change(&before, &after),
            "capacity: 1000→500  reason: -→throttled"
        );
        assert_eq!(
            change(&Value::Null, &json!({"paused": true})),
            "paused=true"
        );
        assert_eq!(change(&Value::Null, &Value::Null), "-");
        let long = json!({"tags": "x".repeat(200)});
        assert!(change(&Value::Null, &long).chars().count() <= 80);
    }

    #[test]
    fn the_table_has_a_row_per_entry_and_the_next_page() {
        let answer = json!({
            "entries": [{
                "id": 7, "at_ms": 1_767_225_600_000i64, "actor": "admin", "kind": "limit.set",
                "target": "api:slack", "before": {"capacity": 10}, "after": {"capacity": 7},
            }],
            "next_before": 7,
        });
        assert_eq!(
            show(&answer),
            "TIME (UTC)           ACTOR  KIND       TARGET     CHANGE\n\
             2026-01-01 00:00:00  admin  limit.set  api:slack  capacity: 10→7\n\
             more: --before 7\n"
        );
        assert_eq!(show(&json!({"entries": []})), "no entries\n");
    }

    #[test]
    fn only_the_filters_given_are_sent() {
        let args = AuditArgs {
            target: Target::default_for_tests(),
            from: Some("2026-01-01T00:00:00Z".into()),
            to: None,
            actor: Some("key:k 1".into()),
            kind: None,
            limit: 50,
            before: None,
        };
        assert_eq!(
            args.path(),
            "/v1/audit?from=2026-01-01T00%3A00%3A00Z&actor=key%3Ak+1&limit=50"
        );
    }
}
