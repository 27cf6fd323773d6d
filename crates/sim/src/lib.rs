//! Simulated upstreams for Sluice: model providers and SaaS APIs that rate limit, stream and fail like the real ones.
//!
//! ```
//! use sluice_sim::{Error, Sim, SimConfig};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Error> {
//! // The seed's providers and APIs, with their limits, on a free port.
//! let sim = Sim::start(SimConfig::default(), "127.0.0.1:0".parse().unwrap()).await?;
//! println!("point OpenAI clients at {}/v1", sim.url());
//! assert_ne!(sim.addr().port(), 0);
//! assert_eq!(sim.stats().model("gpt-4o-mini").requests, 0);
//! sim.shutdown().await;
//! # Ok(())
//! # }
//! ```
//!
//! # What it serves
//! - OpenAI: `POST /v1/chat/completions` (SSE with `stream: true`, usage
//!   chunk with `stream_options.include_usage`), `POST /v1/embeddings`,
//!   `POST /v1/responses`, `GET /v1/models`.
//! - Anthropic: `POST /v1/messages` (SSE with the real event sequence).
//! - Gemini's native API: `POST /v1beta/models/{model}:generateContent`,
//!   `:streamGenerateContent` (SSE with `?alt=sse`, else one JSON array),
//!   `usageMetadata` in every response, `x-goog-api-key`, errors as
//!   `google.rpc.Status`, no rate-limit headers (unlike Google, a 429
//!   still carries `Retry-After`), `GET /v1beta/models`.
//! - Azure OpenAI: `POST /openai/deployments/{deployment}/chat/completions`
//!   and `/embeddings` with the `api-version` query Azure requires (404
//!   without it), OpenAI's bodies with the deployment as the model, the
//!   key in `api-key`, and only `x-ratelimit-remaining-*` headers.
//! - Tool calls in all three: a request that offers tools (`tools`, with
//!   `tool_choice` / `toolConfig`) and ends on the user's turn is answered
//!   with a call to the tool chosen (else the first), its arguments made
//!   from the tool's JSON schema (`finish_reason: "tool_calls"`,
//!   `stop_reason: "tool_use"`, a `functionCall` part), streamed as each
//!   provider streams them; one that ends on the tool's result is
//!   answered with text. Tools are checked as the providers check them,
//!   400 naming the field.
//! - The same under `/{provider}/v1/…` to pick the provider whose limits
//!   apply; otherwise a model's provider comes from the config, a
//!   `provider/` prefix, or the wire format.
//! - SaaS APIs: any method on `/{api}/…`, answered with an echo (the
//!   `Authorization` received included).
//! - Discord: the seven operations of the seed's synthesis engine under
//!   `/discord/api/v10/…` with Discord's global and per-route limits, and
//!   the effects log `GET /_sim/discord/effects` ([`discord`]).
//! - MCP: a Streamable HTTP MCP server at `/mcp` whose tools are named
//!   as the seed's agents name them (`GMAIL_SEND_EMAIL`,
//!   `SLACK_SEND_MESSAGE`, `GITHUB_CREATE_ISSUE`, `LINEAR_CREATE_ISSUE`, …),
//!   each limited and counted as the API of its prefix; over the limit a
//!   call's result is an error saying `429 Too Many Requests`.
//! - Control: `GET /_sim/stats`, `GET /_sim/log?since=N`,
//!   `POST /_sim/faults`, `POST /_sim/limits`, `POST /_sim/reset`.
//!
//! Each model and API has its own token buckets (requests/s with a
//! burst, tokens/min), answers 429 with `Retry-After` (seconds, rounded
//! up), `retry-after-ms` and a provider-style error body, and can be made
//! to fail: 5xx, a dropped connection mid-stream, a hang, or 429 on every
//! request ([`Faults`], also at runtime).
//!
//! # Headers
//! Every model answer carries the provider's rate-limit headers for the
//! buckets it has: `x-ratelimit-{limit,remaining,reset}-{requests,tokens}`
//! (reset as a Go duration, `"1.5s"`) on OpenAI paths,
//! `anthropic-ratelimit-{requests,tokens}-{limit,remaining,reset}` (reset
//! as RFC 3339) on Anthropic's. The limit is the bucket's size (the burst),
//! the reset the time until it is full again. APIs send the IETF
//! `RateLimit` and `RateLimit-Policy` fields.
//!
//! # Tokens
//! Prompt tokens are estimated at four characters each; a completion is
//! `min(max_tokens, output_tokens)` words, one token each, the same for the
//! same prompt. The tokens/min bucket is charged prompt plus completion up
//! front, since the sim knows both.
//!
//! Usage reports their parts as the providers do, in whole answers and in
//! streams' final usage: a prompt of 1,024 tokens or more is reported as
//! read from the prompt cache, all but its last partial 128 tokens (what
//! OpenAI's cache reports for a repeated prompt) — OpenAI's
//! `cached_tokens`, Anthropic's `cache_read_input_tokens` (apart from
//! `input_tokens`), Gemini's `cachedContentTokenCount`; a model whose name
//! starts with `o1`, `o3` or `o4`, or contains `reason` or `think`, spends
//! half its completion (rounded down) on reasoning — OpenAI's
//! `reasoning_tokens`, Gemini's `thoughtsTokenCount` (apart from
//! `candidatesTokenCount`). Totals are the same either way.
//!
//! # OTLP
//! [`otlp::Receiver`]: the collector's side of an OpenTelemetry export
//! (HTTP/protobuf and gRPC), for tests and `sluice bench`.
//!
//! # The swarm
//! [`swarm`] runs simulated agents against the sim, directly or through a
//! Sluice gateway, and scores the run: upstream 429s, goodput as a share
//! of capacity, Jain's fairness across tenants, latency.
#![warn(missing_docs)]

mod admin;
mod config;
pub mod discord;
mod error;
mod faults;
mod log;
mod mcp;
mod model;
pub mod otlp;
mod quota;
mod saas;
mod server;
mod state;
mod stats;
pub mod swarm;
mod wire;

pub use config::{
    ApiConfig, Faults, Latency, Limits, MalformedBody, ModelConfig, ModelDefaults, ProviderConfig,
    SimConfig,
};
pub use error::Error;
pub use log::{LogEntry, LogPage};
pub use server::{Sim, SimHandle};
pub use state::Scope;
pub use stats::{Counters, PerSecond, Stats};
