//! What goes on the wire: provider formats, error bodies, rate-limit
//! headers and paced (possibly broken) bodies.

pub(crate) mod body;
pub(crate) mod errors;
pub(crate) mod headers;
pub(crate) mod timer;

/// The model wire formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Format {
    /// `/v1/chat/completions`, `/v1/responses`, `/v1/embeddings`.
    OpenAi,
    /// `/v1/messages`.
    Anthropic,
    /// Gemini's native `/v1beta/models/{model}:generateContent`.
    Gemini,
    /// Azure OpenAI: OpenAI's bodies under
    /// `/openai/deployments/{deployment}/…?api-version=…`, the key in
    /// `api-key`.
    Azure,
}

impl Format {
    /// The provider a model is served as when nothing else says.
    pub(crate) fn default_provider(self) -> &'static str {
        match self {
            Format::OpenAi => "openai",
            Format::Anthropic => "anthropic",
            Format::Gemini => "google",
            Format::Azure => "azure",
        }
    }
}
