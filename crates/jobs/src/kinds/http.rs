//! The `http` kind: a request to an API from a configured registry.

mod payload;

pub use payload::{HttpPayload, MAX_HEADERS, MAX_PATH_LEN};
