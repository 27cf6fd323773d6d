//! Tables and summaries of the jobs API's answers, for people.

use std::fmt::Write;

use serde_json::Value;

use crate::table::plain;

/// The jobs of a list, one line each, and the cursor of the next page.
pub fn list(body: &Value) -> String {
    let jobs = body["jobs"].as_array().cloned().unwrap_or_default();
    let rows: Vec<[String; 7]> = jobs
        .iter()
        .map(|j| {
            [
                j["id"].to_string(),
                text(&j["state"]),
                text(&j["queue"]),
                text(&j["kind"]),
                format!("{}/{}", j["attempts"], j["max_attempts"]),
                time(&j["run_at"]),
                short(&j["last_error"], 60),
            ]
        })
        .collect();
    let mut out = plain(
        [
            "ID",
            "STATE",
            "QUEUE",
            "KIND",
            "ATTEMPTS",
            "RUN AT (UTC)",
            "LAST ERROR",
        ],
        &rows,
    );
    if jobs.is_empty() {
        out = "no jobs\n".to_owned();
    }
    if let Some(next) = body["next_cursor"].as_str() {
        let _ = writeln!(out, "more: --cursor {next}");
    }
    out
}

/// One job, field by field, with its payload and result as JSON.
pub fn job(j: &Value) -> String {
    let mut out = String::new();
    for (label, value) in [
        ("id", j["id"].to_string()),
        ("state", text(&j["state"])),
        ("queue", text(&j["queue"])),
        ("kind", text(&j["kind"])),
        ("tenant", text(&j["tenant"])),
        ("group", text(&j["group"])),
        ("priority", j["priority"].to_string()),
        (
            "attempts",
            format!("{} of {}", j["attempts"], j["max_attempts"]),
        ),
        ("run at", time(&j["run_at"])),
        ("created", time(&j["created_at"])),
        ("finished", time(&j["finished_at"])),
        ("idempotency key", text(&j["idempotency_key"])),
        ("last error", text(&j["last_error"])),
    ] {
        let _ = writeln!(out, "{label:>16}  {value}");
    }
    for (label, value) in [("payload", &j["payload"]), ("result", &j["result"])] {
        if !value.is_null() {
            let pretty = serde_json::to_string_pretty(value).unwrap_or_default();
            let _ = writeln!(out, "{label}:\n{pretty}");
        }
    }
    out
}

/// Every queue with its counts by state.
pub fn queues(body: &Value) -> String {
    const STATES: [&str; 7] = [
        "available",
        "scheduled",
        "running",
        "retryable",
        "completed",
        "dead",
        "cancelled",
    ];
    let rows: Vec<[String; 9]> = body["queues"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .map(|q| {
            let mut row: [String; 9] = Default::default();
            row[0] = text(&q["queue"]);
            row[1] = if q["paused"].as_bool() == Some(true) {
                "paused".into()
            } else {
                "running".into()
            };
            for (i, s) in STATES.iter().enumerate() {
                row[i + 2] = q["counts"][s].to_string();
            }
            row
        })
        .collect();
    plain(
        [
            "QUEUE",
            "STATUS",
            "AVAILABLE",
            "SCHEDULED",
            "RUNNING",
            "RETRYABLE",
            "COMPLETED",
            "DEAD",
            "CANCELLED",
        ],
        &rows,
    )
}

/// Schedules, one line each.
pub fn schedules(body: &Value) -> String {
    let rows: Vec<[String; 6]> = body["schedules"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .map(|s| {
            [
                text(&s["name"]),
                cadence(s),
                format!("{}/{}", text(&s["job"]["queue"]), text(&s["job"]["kind"])),
                s["runs"].to_string(),
                time(&s["next_run_at"]),
                time(&s["last_run_at"]),
            ]
        })
        .collect();
    plain(
        ["NAME", "WHEN", "QUEUE/KIND", "RUNS", "NEXT RUN", "LAST RUN"],
        &rows,
    )
}

/// One schedule whole.
pub fn schedule(s: &Value) -> String {
    let mut out = String::new();
    for (label, value) in [
        ("name", text(&s["name"])),
        ("tenant", text(&s["tenant"])),
        ("when", cadence(s)),
        ("runs", s["runs"].to_string()),
        ("limit", text(&s["limit"])),
        ("start at", time(&s["start_at"])),
        ("end at", time(&s["end_at"])),
        ("next run", time(&s["next_run_at"])),
        ("last run", time(&s["last_run_at"])),
    ] {
        let _ = writeln!(out, "{label:>10}  {value}");
    }
    let pretty = serde_json::to_string_pretty(&s["job"]).unwrap_or_default();
    let _ = writeln!(out, "job:\n{pretty}");
    out
}

/// `every 1000 ms` or `cron 0 9 * * * (Europe/Paris)`.
fn cadence(s: &Value) -> String {
    match (s["every_ms"].as_u64(), s["cron"].as_str()) {
        (Some(ms), _) => format!("every {ms} ms"),
        (None, Some(cron)) => format!("cron {cron} ({})", text(&s["tz"])),
        (None, None) => "-".into(),
    }
}

/// A string value as is, `-` for null.
pub(crate) fn text(v: &Value) -> String {
    match v {
        Value::Null => "-".into(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// At most `n` characters of a string value, on one line.
fn short(v: &Value, n: usize) -> String {
    let s = text(v).replace(['\n', '\r'], " ");
    if s.chars().count() > n {
        let cut: String = s.chars().take(n - 1).collect();
        format!("{cut}…")
    } else {
        s
    }
}

/// Milliseconds since the Unix epoch as `YYYY-MM-DD HH:MM:SS`, `-` for null.
pub(crate) fn time(v: &Value) -> String {
    let Some(ms) = v.as_i64() else {
        return text(v);
    };
    // `YYYY-MM-DD HH:MM:SS`: the RFC 3339 form, to the second, T as a space.
    let stamp = sluice_limit::headers::format_rfc3339(ms.div_euclid(1_000), 0);
    stamp[..19].replace('T', " ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn times_are_utc_dates() {
        assert_eq!(time(&json!(0)), "1970-01-01 00:00:00");
        assert_eq!(time(&json!(1_700_000_000_123i64)), "2023-11-14 22:13:20");
        assert_eq!(time(&json!(951_782_400_000i64)), "2000-02-29 00:00:00");
        assert_eq!(time(&Value::Null), "-");
    }

    #[test]
    fn a_list_is_a_table_with_the_next_cursor() {
        let body = json!({
            "jobs": [{"id": 7, "state": "dead", "queue": "default", "kind": "http",
                      "attempts": 3, "max_attempts": 3, "run_at": 0, "last_error": "boom"}],
            "next_cursor": "7"
        });
        let out = list(&body);
        let lines: Vec<&str> = out.lines().collect();
        assert!(lines[0].starts_with("ID  STATE"), "{out}");
        assert!(lines[1].starts_with("7   dead"), "{out}");
        assert!(lines[1].ends_with("boom"), "{out}");
        assert_eq!(lines[2], "more: --cursor 7");
        assert_eq!(list(&json!({"jobs": [], "next_cursor": null})), "no jobs\n");
    }
}
