//! MCP tool calls counted for the dashboard's own section: per server
//! and tool since the gateway started, how many calls, how they ended
//! and how long they took (queueing and retries included).

use std::collections::BTreeMap;
use std::sync::{Mutex, PoisonError};

use super::view::McpToolView;

/// Rows kept: a server lists at most `MAX_TOOLS_PER_SERVER` tools, and a
/// gateway has a handful of servers; past it, calls of tools not yet
/// seen are counted under `(other)`.
const MAX_ROWS: usize = 1_024;

/// See the module doc.
#[derive(Debug, Default)]
pub(crate) struct ToolTally {
    rows: Mutex<BTreeMap<(String, String), Row>>,
}

#[derive(Debug, Default)]
struct Row {
    api: String,
    calls: u64,
    throttled: u64,
    failed: u64,
    latency_ms_sum: f64,
}

impl ToolTally {
    /// One call of `tool` on `server` (limited as `api`) ended `status`
    /// after `ms`.
    pub(crate) fn count(&self, server: &str, tool: &str, api: &str, status: u16, ms: f64) {
        let mut rows = self.rows.lock().unwrap_or_else(PoisonError::into_inner);
        let mut key = (server.to_owned(), tool.to_owned());
        if rows.len() >= MAX_ROWS && !rows.contains_key(&key) {
            key.1 = "(other)".to_owned();
        }
        let row = rows.entry(key).or_default();
        if row.api.is_empty() {
            api.clone_into(&mut row.api);
        }
        row.calls += 1;
        match status {
            200 => {}
            429 => row.throttled += 1,
            _ => row.failed += 1,
        }
        row.latency_ms_sum += ms;
    }

    /// Every row, busiest first.
    pub(crate) fn view(&self) -> Vec<McpToolView> {
        let rows = self.rows.lock().unwrap_or_else(PoisonError::into_inner);
        let mut out: Vec<McpToolView> = rows
            .iter()
            .map(|((server, tool), r)| McpToolView {
                server: server.clone(),
                tool: tool.clone(),
                api: r.api.clone(),
                calls: r.calls,
                throttled: r.throttled,
                failed: r.failed,
                mean_ms: r.latency_ms_sum / r.calls.max(1) as f64,
            })
            .collect();
        out.sort_by_key(|r| std::cmp::Reverse(r.calls));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calls_are_counted_per_tool_and_outcome() {
        let t = ToolTally::default();
        t.count("sim", "GMAIL_SEND_EMAIL", "gmail", 200, 10.0);
        t.count("sim", "GMAIL_SEND_EMAIL", "gmail", 429, 30.0);
        t.count("sim", "SLACK_SEND_MESSAGE", "slack", 503, 5.0);
        let v = t.view();
        assert_eq!(v[0].tool, "GMAIL_SEND_EMAIL");
        assert_eq!((v[0].calls, v[0].throttled, v[0].failed), (2, 1, 0));
        assert_eq!(v[0].mean_ms, 20.0);
        assert_eq!(
            (v[1].calls, v[1].failed, v[1].api.as_str()),
            (1, 1, "slack")
        );
    }
}
