//! Names a caller hands us that become state: model names (limiter
//! resources, admission lanes, dashboard entries, ledger records, trace
//! fields), limiter resource names, API names. Each is checked where it is
//! parsed, before anything is created for it, by [`check`]: at most
//! [`MAX_NAME`] bytes of visible ASCII (`!` to `~`), else a 400 naming the
//! field.
//!
//! A model name is also one path segment after its provider's prefix
//! ([`check_model_segments`]): no segment of it may be `.` or `..`, and a
//! provider that puts the model in the URL takes no `/` at all (see
//! `providers::Provider::check_model`).

use crate::error::ApiError;

/// The longest name a caller may give a model, resource or API.
pub(crate) const MAX_NAME: usize = 256;

/// Checks `value` of `field`: 1 to [`MAX_NAME`] bytes, each visible ASCII.
///
/// # Errors
/// 400 naming `field` (the value is not echoed whole: it may be megabytes).
pub(crate) fn check(field: &str, value: &str) -> Result<(), ApiError> {
    if value.is_empty() {
        return Err(ApiError::bad_field(field, "must not be empty"));
    }
    if value.len() > MAX_NAME {
        return Err(ApiError::bad_field(
            field,
            format!(
                "is {} bytes long; at most {MAX_NAME} are allowed",
                value.len()
            ),
        ));
    }
    if let Some(at) = value.bytes().position(|b| !b.is_ascii_graphic()) {
        return Err(ApiError::bad_field(
            field,
            format!("holds a character that is not visible ASCII at byte {at}"),
        ));
    }
    Ok(())
}

/// Checks that no `/`-separated segment of `model` is `.` or `..` (path
/// parameters after `;` ignored, as some servers read them): such a name
/// could climb out of a URL path, or pass an allow-list written for
/// another model. (An empty segment steps nowhere: `anthropic/` is the
/// name of a limit on every Anthropic model.)
///
/// # Errors
/// 400 naming `model`.
pub(crate) fn check_model_segments(model: &str) -> Result<(), ApiError> {
    for segment in model.split('/') {
        let bare = segment.split(';').next().unwrap_or(segment);
        if bare == "." || bare == ".." {
            return Err(ApiError::bad_field(
                "model",
                format!(
                    "{model:?} has a `.` or `..` segment: a model name is one path segment \
                     after its provider's prefix"
                ),
            ));
        }
    }
    Ok(())
}

/// `value` cut to at most [`MAX_NAME`] bytes (on a character boundary), for
/// what is stored from a caller without being checked first.
pub(crate) fn truncated(value: &str) -> &str {
    if value.len() <= MAX_NAME {
        return value;
    }
    let mut end = MAX_NAME;
    while !value.is_char_boundary(end) {
        end -= 1;
    }
    &value[..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_short_visible_ascii() {
        assert!(check("model", "openai/gpt-4o-mini").is_ok());
        assert!(check("model", &"a".repeat(MAX_NAME)).is_ok());
        for bad in [
            String::new(),
            "a".repeat(MAX_NAME + 1),
            "openai/gpt 4o".into(),
            "openai/gpt\u{1b}[2J".into(),
            "openai/gpt-é".into(),
            "openai/\n".into(),
        ] {
            match check("model", &bad) {
                Err(ApiError::BadRequest { param, message }) => {
                    assert_eq!(param.as_deref(), Some("model"));
                    assert!(message.len() < 200, "{message}");
                }
                other => panic!("{bad:?}: {other:?}"),
            }
        }
    }

    #[test]
    fn dot_segments_are_refused() {
        for ok in [
            "gpt-4o",
            "meta-llama/llama-3.1",
            "v1.5",
            "a..b",
            "anthropic/",
            "a//b",
        ] {
            assert!(check_model_segments(ok).is_ok(), "{ok}");
        }
        for bad in [
            "cheap/../pro",
            "..",
            ".",
            "a/./b",
            "../a",
            "a/..",
            "..;x/pro",
            "a/.;b",
        ] {
            assert!(check_model_segments(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn truncation_keeps_a_character_boundary() {
        let long = "é".repeat(MAX_NAME);
        let t = truncated(&long);
        assert!(t.len() <= MAX_NAME && t.chars().all(|c| c == 'é'));
        assert_eq!(truncated("short"), "short");
    }
}
