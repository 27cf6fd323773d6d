//! The tools the sim's MCP server offers, named as the seed's agents name
//! them (`GMAIL_SEND_EMAIL`, `SLACK_SEND_MESSAGE`, …), each the SaaS API
//! whose limit it spends, and the arguments it requires.

use std::sync::Arc;

use rmcp::model::{JsonObject, Tool, ToolAnnotations};
use serde_json::{Value, json};

/// One tool: its name, the sim's API it is limited as, what it does, its
/// required string arguments and whether it only reads.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Spec {
    pub name: &'static str,
    pub api: &'static str,
    pub description: &'static str,
    pub required: &'static [&'static str],
    pub read_only: bool,
}

/// Longest string argument a tool takes, in bytes (a Gmail body is
/// limited by the message size; 64 KiB is enough for a test double).
pub(crate) const MAX_ARGUMENT_BYTES: usize = 64 * 1024;

/// Every tool, in the order `tools/list` answers them.
pub(crate) const TOOLS: &[Spec] = &[
    Spec {
        name: "GMAIL_SEND_EMAIL",
        api: "gmail",
        description: "Send an email from the connected Gmail account.",
        required: &["recipient_email", "subject", "body"],
        read_only: false,
    },
    Spec {
        name: "GMAIL_FETCH_EMAILS",
        api: "gmail",
        description: "List recent emails of the connected Gmail account matching a query.",
        required: &["query"],
        read_only: true,
    },
    Spec {
        name: "SLACK_SEND_MESSAGE",
        api: "slack",
        description: "Post a message to a Slack channel.",
        required: &["channel", "text"],
        read_only: false,
    },
    Spec {
        name: "SLACK_LIST_CHANNELS",
        api: "slack",
        description: "List the Slack channels the bot can see.",
        required: &[],
        read_only: true,
    },
    Spec {
        name: "GITHUB_CREATE_ISSUE",
        api: "github",
        description: "Open an issue in a GitHub repository.",
        required: &["owner", "repo", "title"],
        read_only: false,
    },
    Spec {
        name: "GITHUB_GET_REPOSITORY",
        api: "github",
        description: "Read a GitHub repository's metadata.",
        required: &["owner", "repo"],
        read_only: true,
    },
    Spec {
        name: "LINEAR_CREATE_ISSUE",
        api: "linear",
        description: "Create an issue in a Linear team.",
        required: &["team_id", "title"],
        read_only: false,
    },
    Spec {
        name: "GOOGLECALENDAR_CREATE_EVENT",
        api: "google_calendar",
        description: "Create an event in a Google Calendar.",
        required: &["summary", "start_datetime"],
        read_only: false,
    },
    Spec {
        name: "GOOGLESHEETS_BATCH_UPDATE",
        api: "google_sheets",
        description: "Write values into a Google Sheets range.",
        required: &["spreadsheet_id", "range"],
        read_only: false,
    },
    Spec {
        name: "GOOGLEDRIVE_FIND_FILE",
        api: "google_drive",
        description: "Find files in Google Drive by name.",
        required: &["query"],
        read_only: true,
    },
    Spec {
        name: "CLICKUP_CREATE_TASK",
        api: "clickup",
        description: "Create a task in a ClickUp list.",
        required: &["list_id", "name"],
        read_only: false,
    },
];

impl Spec {
    /// The tool as `tools/list` describes it: an object schema whose
    /// required properties are strings.
    pub(crate) fn tool(&self) -> Tool {
        let properties: serde_json::Map<String, Value> = self
            .required
            .iter()
            .map(|p| ((*p).to_owned(), json!({"type": "string"})))
            .collect();
        let schema = json!({
            "type": "object",
            "properties": properties,
            "required": self.required,
        });
        let Value::Object(schema) = schema else {
            unreachable!("a JSON object literal")
        };
        let schema: Arc<JsonObject> = Arc::new(schema);
        let mut tool = Tool::new(self.name, self.description, schema);
        tool.annotations = Some(
            ToolAnnotations::new()
                .read_only(self.read_only)
                .destructive(false),
        );
        tool
    }

    /// Checks `arguments` as the real API would: every required argument
    /// present, a string, and within [`MAX_ARGUMENT_BYTES`].
    ///
    /// # Errors
    /// A message naming the argument.
    pub(crate) fn check(&self, arguments: Option<&JsonObject>) -> Result<(), String> {
        for name in self.required {
            match arguments.and_then(|a| a.get(*name)) {
                None => return Err(format!("missing required argument `{name}`")),
                Some(Value::String(s)) if s.len() > MAX_ARGUMENT_BYTES => {
                    return Err(format!(
                        "argument `{name}` is longer than {MAX_ARGUMENT_BYTES} bytes"
                    ));
                }
                Some(Value::String(_)) => {}
                Some(_) => return Err(format!("argument `{name}` must be a string")),
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn find(name: &str) -> Option<&'static Spec> {
        TOOLS.iter().find(|t| t.name == name)
    }

    #[test]
    fn every_tool_is_named_for_its_api_and_checks_its_arguments() {
        for t in TOOLS {
            assert!(!t.api.is_empty());
            let tool = t.tool();
            assert_eq!(tool.name, t.name);
            let args: JsonObject = t
                .required
                .iter()
                .map(|p| ((*p).to_owned(), json!("x")))
                .collect();
            assert_eq!(t.check(Some(&args)), Ok(()));
        }
        let gmail = find("GMAIL_SEND_EMAIL").unwrap();
        let err = gmail.check(None).unwrap_err();
        assert!(err.contains("recipient_email"), "{err}");
        let mut args: JsonObject = JsonObject::new();
        args.insert("recipient_email".into(), json!(5));
        let err = gmail.check(Some(&args)).unwrap_err();
        assert!(err.contains("must be a string"), "{err}");
        assert!(find("WEB_SEARCH").is_none());
    }
}
