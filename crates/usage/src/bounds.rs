//! The numbers in a model request that decide what it may cost, checked
//! before anything is reserved: a `max_tokens` of `u64::MAX` or an `n` of a
//! million is a mistake or an attack, refused with a 400 naming the field
//! instead of being clamped or saturated into an estimate.

use serde_json::Value;

/// Most output tokens a request may ask for. No model writes a tenth of
/// this today (the largest allow 128k); it keeps every estimate, times
/// [`MAX_CHOICES`], far from `u64` saturation.
pub const MAX_OUTPUT_TOKENS: u64 = 10_000_000;

/// Most choices (`n`) one chat request may ask for: OpenAI's own limit.
pub const MAX_CHOICES: u64 = 128;

/// The fields checked, with their upper bounds.
const FIELDS: &[(&str, u64)] = &[
    ("max_tokens", MAX_OUTPUT_TOKENS),
    ("max_completion_tokens", MAX_OUTPUT_TOKENS),
    ("max_output_tokens", MAX_OUTPUT_TOKENS),
    ("n", MAX_CHOICES),
];

/// Checks the cost-deciding numbers of a request body. Absent or `null`
/// fields are fine (the provider's defaults apply).
///
/// # Errors
/// The name of the first field that is not an integer from 1 to its bound,
/// and what it must be.
pub fn check_bounds(body: &Value) -> Result<(), (&'static str, String)> {
    for &(name, max) in FIELDS {
        match body.get(name) {
            None | Some(Value::Null) => {}
            Some(v) => match v.as_u64() {
                Some(n) if (1..=max).contains(&n) => {}
                _ => return Err((name, format!("must be an integer from 1 to {max}, got {v}"))),
            },
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn hostile_numbers_are_named() {
        for (body, field) in [
            (json!({"max_tokens": u64::MAX}), "max_tokens"),
            (json!({"max_tokens": 0}), "max_tokens"),
            (json!({"max_tokens": -1}), "max_tokens"),
            (json!({"max_tokens": 1.5}), "max_tokens"),
            (json!({"max_tokens": "9"}), "max_tokens"),
            (json!({"max_tokens": 1e300}), "max_tokens"),
            (
                json!({"max_completion_tokens": 10_000_001}),
                "max_completion_tokens",
            ),
            (json!({"max_output_tokens": u64::MAX}), "max_output_tokens"),
            (json!({"n": 1_000_000}), "n"),
            (json!({"n": 0}), "n"),
        ] {
            let (name, message) = check_bounds(&body).unwrap_err();
            assert_eq!(name, field, "{body}");
            assert!(message.contains("from 1 to"), "{message}");
        }
    }

    #[test]
    fn ordinary_requests_pass() {
        for body in [
            json!({}),
            json!({"max_tokens": null, "n": null}),
            json!({"max_tokens": 1, "n": 1}),
            json!({"max_completion_tokens": MAX_OUTPUT_TOKENS, "n": MAX_CHOICES}),
            json!({"max_output_tokens": 128_000}),
        ] {
            assert_eq!(check_bounds(&body), Ok(()), "{body}");
        }
    }
}
