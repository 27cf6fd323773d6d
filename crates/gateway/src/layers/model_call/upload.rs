//! A multipart upload (`/v1/audio/transcriptions`) read into what the
//! layers read of every call: a JSON object of its text fields, with the
//! file's name and size in place of its bytes. The form itself goes
//! upstream, its `model` rewritten (`providers/openai.rs`).

use axum::http::{HeaderMap, header};
use serde_json::{Map, Value};
use sluice_form::{Form, boundary};

use crate::error::ApiError;

/// The fields whose text is a number or a flag in the JSON view, so that
/// the bounds and the stream check read them as they read JSON bodies.
const TYPED: &[&str] = &["stream", "temperature"];

/// The form of an upload and its JSON view.
///
/// # Errors
/// 400 naming the header or field: a content type that is not
/// `multipart/form-data` with a boundary, a malformed body, no `file`
/// part with a file name, a text field that is not UTF-8 (or is a file),
/// or a `stream` that is not `true`/`false`.
pub(crate) fn read(headers: &HeaderMap, body: bytes::Bytes) -> Result<(Value, Form), ApiError> {
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    let boundary = boundary(content_type).map_err(|e| ApiError::BadRequest {
        message: format!("content-type: {e}"),
        param: Some("content-type".into()),
    })?;
    let form = Form::parse(body, boundary).map_err(|e| ApiError::BadRequest {
        message: format!("malformed multipart body: {e}"),
        param: None,
    })?;
    let mut view = Map::new();
    for part in &form.parts {
        let value = if let Some(name) = &part.filename {
            serde_json::json!({"filename": name, "bytes": part.data.len()})
        } else {
            let text = std::str::from_utf8(&part.data)
                .map_err(|_| ApiError::bad_field(&part.name, "must be UTF-8 text"))?;
            typed(&part.name, text)?
        };
        match (view.get_mut(&part.name), value) {
            (None, value) => {
                view.insert(part.name.clone(), value);
            }
            // OpenAI's array fields (`timestamp_granularities[]`,
            // `include[]`) repeat: all kept, so none is lost in the view.
            (Some(Value::Array(items)), Value::Array(more)) => items.extend(more),
            (Some(_), _) => {
                return Err(ApiError::bad_field(&part.name, "is given more than once"));
            }
        }
    }
    match form.part("file") {
        Some(p) if p.filename.is_some() => {}
        Some(_) => {
            return Err(ApiError::bad_field(
                "file",
                "must be a file (with a filename)",
            ));
        }
        None => return Err(ApiError::bad_field("file", "is required")),
    }
    Ok((Value::Object(view), form))
}

/// A text field as the JSON view holds it.
fn typed(name: &str, text: &str) -> Result<Value, ApiError> {
    if name.ends_with("[]") {
        return Ok(Value::Array(vec![Value::String(text.to_owned())]));
    }
    if !TYPED.contains(&name) {
        return Ok(Value::String(text.to_owned()));
    }
    match name {
        "stream" => match text {
            "true" => Ok(Value::Bool(true)),
            "false" => Ok(Value::Bool(false)),
            _ => Err(ApiError::bad_field("stream", "must be true or false")),
        },
        _ => text
            .trim()
            .parse::<f64>()
            .ok()
            .and_then(serde_json::Number::from_f64)
            .map(Value::Number)
            .ok_or_else(|| ApiError::bad_field(name, "must be a number")),
    }
}

#[cfg(test)]
mod tests {
    use axum::http::HeaderValue;
    use bytes::Bytes;

    use super::*;

    fn headers(ct: &'static str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(header::CONTENT_TYPE, HeaderValue::from_static(ct));
        h
    }

    const MP: &str = "multipart/form-data; boundary=b";

    fn param(e: ApiError) -> Option<String> {
        match e {
            ApiError::BadRequest { param, .. } => param,
            other => panic!("not a 400: {other:?}"),
        }
    }

    #[test]
    fn the_view_holds_text_fields_and_the_files_size() {
        let body = Bytes::from_static(b"--b\r\nContent-Disposition: form-data; name=\"model\"\r\n\r\nopenai/whisper-1\r\n--b\r\nContent-Disposition: form-data; name=\"temperature\"\r\n\r\n0.5\r\n--b\r\nContent-Disposition: form-data; name=\"timestamp_granularities[]\"\r\n\r\nword\r\n--b\r\nContent-Disposition: form-data; name=\"timestamp_granularities[]\"\r\n\r\nsegment\r\n--b\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a.wav\"\r\n\r\nRIFF\r\n--b--\r\n");
        let (view, form) = read(&headers(MP), body).unwrap();
        assert_eq!(view["model"], "openai/whisper-1");
        assert_eq!(view["temperature"], 0.5);
        assert_eq!(
            view["timestamp_granularities[]"],
            serde_json::json!(["word", "segment"])
        );
        assert_eq!(
            view["file"],
            serde_json::json!({"filename": "a.wav", "bytes": 4})
        );
        assert_eq!(form.parts.len(), 5);
    }

    #[test]
    fn what_is_wrong_is_named() {
        let e = read(&headers("application/json"), Bytes::new()).unwrap_err();
        assert_eq!(param(e).as_deref(), Some("content-type"));
        let no_file = Bytes::from_static(
            b"--b\r\nContent-Disposition: form-data; name=\"model\"\r\n\r\nm\r\n--b--",
        );
        assert_eq!(
            param(read(&headers(MP), no_file).unwrap_err()).as_deref(),
            Some("file")
        );
        let text_file = Bytes::from_static(
            b"--b\r\nContent-Disposition: form-data; name=\"file\"\r\n\r\nm\r\n--b--",
        );
        assert_eq!(
            param(read(&headers(MP), text_file).unwrap_err()).as_deref(),
            Some("file")
        );
        let twice = Bytes::from_static(b"--b\r\nContent-Disposition: form-data; name=\"model\"\r\n\r\nm\r\n--b\r\nContent-Disposition: form-data; name=\"model\"\r\n\r\nn\r\n--b--");
        assert_eq!(
            param(read(&headers(MP), twice).unwrap_err()).as_deref(),
            Some("model")
        );
        let stream = Bytes::from_static(
            b"--b\r\nContent-Disposition: form-data; name=\"stream\"\r\n\r\nyes\r\n--b--",
        );
        assert_eq!(
            param(read(&headers(MP), stream).unwrap_err()).as_deref(),
            Some("stream")
        );
        let cut =
            Bytes::from_static(b"--b\r\nContent-Disposition: form-data; name=\"model\"\r\n\r\nm");
        assert!(matches!(
            read(&headers(MP), cut),
            Err(ApiError::BadRequest { .. })
        ));
    }
}
