//! The `http` kind: a request to an API from a configured registry
//! ([`HttpApis`]), never to a URL taken from the payload.
//!
//! Every call takes one unit of the limiter resource `api:{name}`, the
//! one the gateway's proxy uses, so jobs and interactive calls share the
//! API's bucket. Answers: 2xx → completed with `{"status", "headers",
//! "body"}`; 429 → throttled (with its `Retry-After`, and the shared
//! bucket throttled too); 408, 5xx and connection errors → retry; any
//! other 4xx → dead. The credential sent is the job's tenant's own, or
//! the API's shared one where it is shared ([`Credentials`](crate::Credentials));
//! a job whose tenant may use neither goes dead without calling.

mod apis;
mod handler;
mod payload;

pub use apis::{AuthHeader, HttpApi, HttpApis, InvalidBaseUrl};
pub use handler::HttpHandler;
pub use payload::{HttpPayload, MAX_HEADERS, MAX_PATH_LEN};
