//! Azure OpenAI's dialect: OpenAI's bodies, streams and errors, so every
//! reading is OpenAI's. (Azure's streams open with a chunk of
//! `prompt_filter_results` and no `choices`, and may carry
//! `content_filter_results`; OpenAI's reading passes both by.) What
//! differs — the deployment in the path, `api-version`, the `api-key`
//! header — is the gateway adapter's (`providers/azure.rs`).

use bytes::Bytes;
use serde_json::Value;

use super::{Dialect, Openai};
use crate::stream::Tally;
use crate::{BodyFacts, Details, Endpoint, WireFormat};

/// The Azure OpenAI dialect.
#[derive(Debug)]
pub(crate) struct Azure;

impl Dialect for Azure {
    fn format(&self) -> WireFormat {
        WireFormat::Azure
    }

    fn chat_limit(&self, body: &Value, default: u64) -> u64 {
        Openai.chat_limit(body, default)
    }

    fn read_body(&self, endpoint: Endpoint, body: &[u8]) -> BodyFacts {
        Openai.read_body(endpoint, body)
    }

    fn details(&self, body: &[u8]) -> Details {
        Openai.details(body)
    }

    fn has_usage_chunk(&self, endpoint: Endpoint) -> bool {
        Openai.has_usage_chunk(endpoint)
    }

    fn scan_event(&self, endpoint: Endpoint, tally: &mut Tally, data: &[u8]) -> bool {
        Openai.scan_event(endpoint, tally, data)
    }

    fn error_event(&self, endpoint: Endpoint, code: &str, message: &str) -> Bytes {
        Openai.error_event(endpoint, code, message)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::StreamScanner;

    #[test]
    fn azures_filter_chunks_pass_and_its_usage_reads() {
        // An Azure chat stream as it comes: the filter chunk first, then
        // OpenAI's chunks, the usage last when asked for.
        let events = [
            r#"{"choices":[],"prompt_filter_results":[{"prompt_index":0,"content_filter_results":{}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"content":"hi"},"content_filter_results":{}}]}"#,
            r#"{"choices":[],"usage":{"prompt_tokens":9,"completion_tokens":1,"total_tokens":10}}"#,
        ];
        let mut text = String::new();
        for e in events {
            text.push_str(&format!("data: {e}\n\n"));
        }
        text.push_str("data: [DONE]\n\n");
        let mut scanner = StreamScanner::new(WireFormat::Azure, Endpoint::Chat, false);
        // The stream passes through whole.
        let passed = scanner.feed(bytes::Bytes::from(text.clone()));
        assert_eq!(passed, text.as_bytes());
        let usage = scanner.usage().expect("the usage chunk read");
        assert_eq!((usage.prompt_tokens, usage.completion_tokens), (9, 1));
    }
}
