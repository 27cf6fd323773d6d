//! What the sim's MCP server offers besides tools: one resource per API
//! it has tools for (`sim://apis/{api}`: the API's limits and its tools,
//! as JSON), the template of those URIs, and a prompt
//! (`compose_email`) that asks for an email and names the tool to send
//! it with. Reading them spends no API's quota (they are the server's
//! own content), as with a real MCP server in front of an API.

use rmcp::ErrorData;
use rmcp::model::{
    GetPromptResult, JsonObject, Prompt, PromptArgument, PromptMessage, ReadResourceResult,
    Resource, ResourceContents, ResourceTemplate, Role,
};
use serde_json::{Value, json};

use super::tools::{self, MAX_ARGUMENT_BYTES};
use crate::config::ApiConfig;

/// The scheme and path before an API's name.
const PREFIX: &str = "sim://apis/";

/// The prompt's name.
pub(crate) const COMPOSE_EMAIL: &str = "compose_email";

/// The resource of `api`.
pub(crate) fn resource(api: &str) -> Resource {
    Resource::new(format!("{PREFIX}{api}"), api)
        .with_description(format!(
            "The {api} API's limits and tools, as the simulator has them."
        ))
        .with_mime_type("application/json")
}

/// The template of every API's resource.
pub(crate) fn template() -> ResourceTemplate {
    ResourceTemplate::new(format!("{PREFIX}{{api}}"), "api")
        .with_description("An API's limits and tools, by the API's name.")
        .with_mime_type("application/json")
}

/// The API `uri` names, if it is one of the resources' URIs.
pub(crate) fn api_of(uri: &str) -> Option<&str> {
    uri.strip_prefix(PREFIX)
        .filter(|a| !a.is_empty() && !a.contains('/'))
}

/// The content of the resource `uri` of `api`.
pub(crate) fn read(uri: &str, api: &str, config: &ApiConfig) -> ReadResourceResult {
    let tools: Vec<&str> = (tools::TOOLS.iter())
        .filter(|t| t.api == api)
        .map(|t| t.name)
        .collect();
    let body = json!({
        "api": api,
        "requests_per_second": config.limits.requests_per_second,
        "burst": config.limits.burst,
        "tools": tools,
    });
    let mut contents = ResourceContents::text(body.to_string(), uri);
    if let ResourceContents::TextResourceContents { mime_type, .. } = &mut contents {
        *mime_type = Some("application/json".into());
    }
    ReadResourceResult::new(vec![contents])
}

/// The prompt as `prompts/list` describes it.
pub(crate) fn prompt() -> Prompt {
    Prompt::new(
        COMPOSE_EMAIL,
        Some("Write an email about a topic and send it with GMAIL_SEND_EMAIL."),
        Some(vec![
            PromptArgument::new("recipient")
                .with_description("Who the email is for.")
                .with_required(true),
            PromptArgument::new("topic")
                .with_description("What it is about.")
                .with_required(true),
        ]),
    )
}

/// The prompt for `arguments`.
///
/// # Errors
/// A missing, non-string or too long argument, named.
pub(crate) fn compose(arguments: Option<&JsonObject>) -> Result<GetPromptResult, ErrorData> {
    let arg = |name: &str| match arguments.and_then(|a| a.get(name)) {
        Some(Value::String(s)) if s.len() <= MAX_ARGUMENT_BYTES => Ok(s.clone()),
        Some(Value::String(_)) => Err(format!(
            "argument `{name}` is longer than {MAX_ARGUMENT_BYTES} bytes"
        )),
        Some(_) => Err(format!("argument `{name}` must be a string")),
        None => Err(format!("missing required argument `{name}`")),
    };
    let invalid = |m: String| ErrorData::invalid_params(format!("{COMPOSE_EMAIL}: {m}"), None);
    let recipient = arg("recipient").map_err(invalid)?;
    let topic = arg("topic").map_err(invalid)?;
    let text = format!(
        "Write a short email to {recipient} about {topic}, then send it with the \
         GMAIL_SEND_EMAIL tool (recipient_email, subject, body)."
    );
    Ok(
        GetPromptResult::new(vec![PromptMessage::new_text(Role::User, text)])
            .with_description(format!("An email to {recipient} about {topic}")),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uris_name_their_api() {
        assert_eq!(api_of(&resource("gmail").uri), Some("gmail"));
        assert_eq!(api_of("sim://apis/"), None);
        assert_eq!(api_of("sim://apis/gmail/x"), None);
        assert_eq!(api_of("file:///gmail"), None);
    }

    #[test]
    fn the_prompt_checks_its_arguments() {
        let args: JsonObject = json!({"recipient": "a@example.com", "topic": "lunch"})
            .as_object()
            .cloned()
            .unwrap();
        let r = compose(Some(&args)).unwrap();
        assert_eq!(r.messages.len(), 1);
        let err = compose(None).unwrap_err();
        assert!(err.message.contains("recipient"), "{err:?}");
    }
}
