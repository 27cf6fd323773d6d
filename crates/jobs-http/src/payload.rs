//! Decoding a JSON payload into a kind's typed arguments, with errors that
//! name the field.

use serde::de::DeserializeOwned;
use serde_json::Value;

pub use sluice_jobs::PayloadError;

/// Decodes `payload` into `T`, naming the field that does not fit.
pub(crate) fn decode<T: DeserializeOwned>(payload: &Value) -> Result<T, PayloadError> {
    if !payload.is_object() {
        return Err(PayloadError::new("payload", "must be a JSON object"));
    }
    serde_path_to_error::deserialize(payload).map_err(|e| {
        let path = e.path().to_string();
        let message = e.inner().to_string();
        // serde_path_to_error's path already ends in an unknown field, but
        // a missing one is reported by the struct around it: its name is
        // only in the message, between backticks.
        let missing = message
            .strip_prefix("missing field `")
            .and_then(|rest| rest.split('`').next());
        let field = match (path.as_str(), missing) {
            (".", Some(name)) => format!("payload.{name}"),
            (".", None) => "payload".to_owned(),
            (path, Some(name)) => format!("payload.{path}.{name}"),
            (path, None) => format!("payload.{path}"),
        };
        PayloadError::new(field, message)
    })
}
