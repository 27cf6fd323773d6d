//! An OpenAI chat request in the terms every wire format can write.

use serde_json::{Value, json};

/// An OpenAI chat request, in the terms every format can write.
#[derive(Debug, Default, Clone, PartialEq)]
pub(crate) struct Chat {
    /// The text of the `system` and `developer` messages, in order.
    pub system: Vec<String>,
    /// The conversation without them.
    pub turns: Vec<Turn>,
    /// `max_completion_tokens`, else `max_tokens`.
    pub max_tokens: Option<u64>,
    /// `stop`, as a list.
    pub stop: Vec<String>,
    pub temperature: Option<f64>,
    pub top_p: Option<f64>,
    /// `n` (1 when absent).
    pub n: u64,
    pub presence_penalty: Option<f64>,
    pub frequency_penalty: Option<f64>,
    pub seed: Option<i64>,
    /// `response_format: {"type": "json_object"}`, or `json_schema`.
    pub json_mode: bool,
    /// `response_format.json_schema.schema` of a `json_schema` format.
    pub json_schema: Option<Value>,
    pub tools: Vec<Tool>,
    pub tool_choice: Option<ToolChoice>,
    /// `parallel_tool_calls: false`.
    pub no_parallel_tools: bool,
    /// `user`.
    pub user: Option<String>,
    /// `stream`.
    pub stream: bool,
    /// `stream_options.include_usage`.
    pub include_usage: bool,
}

/// One non-system message.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Turn {
    User(Vec<Part>),
    Assistant {
        text: Option<String>,
        tool_calls: Vec<ToolCall>,
    },
    /// A tool's result (`role: tool`).
    Tool {
        call_id: String,
        content: String,
    },
}

/// A part of a user message.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Part {
    Text(String),
    /// An image given inline as a `data:` URL.
    Inline {
        media_type: String,
        data: String,
    },
    /// An image given by URL.
    Url(String),
}

/// A tool call the assistant made.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ToolCall {
    pub id: String,
    pub name: String,
    /// The arguments as JSON (OpenAI sends them as a JSON string).
    pub arguments: Value,
}

impl ToolCall {
    /// OpenAI's `{"id", "type": "function", "function": {"name",
    /// "arguments"}}`, the arguments as a JSON string.
    pub(crate) fn to_openai(&self) -> Value {
        json!({
            "id": self.id,
            "type": "function",
            "function": {"name": self.name, "arguments": self.arguments.to_string()},
        })
    }
}

/// A function the model may call.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Tool {
    pub name: String,
    pub description: Option<String>,
    /// The JSON schema of its arguments.
    pub parameters: Value,
}

/// `tool_choice`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum ToolChoice {
    Auto,
    None,
    Required,
    Function(String),
}
