//! `multipart/form-data` (RFC 7578), bounded: [`Form::parse`] reads a
//! body's parts (each a slice of the body, never a copy) and
//! [`Form::write`] writes a form back, for the routes that take file
//! uploads (OpenAI's `/audio/transcriptions`) in the gateway and in the
//! simulator, which must read them as strictly as the provider does.
//!
//! ```
//! use bytes::Bytes;
//! use sluice_form::{Form, boundary};
//!
//! let body = Bytes::from_static(
//!     b"--XY\r\nContent-Disposition: form-data; name=\"model\"\r\n\r\nwhisper-1\r\n\
//!       --XY\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a.wav\"\r\n\
//!       Content-Type: audio/wav\r\n\r\nRIFF....\r\n--XY--\r\n",
//! );
//! let b = boundary("multipart/form-data; boundary=XY").unwrap();
//! let mut form = Form::parse(body, b).unwrap();
//! assert_eq!(form.text("model").unwrap(), Ok("whisper-1"));
//! assert_eq!(form.part("file").unwrap().filename.as_deref(), Some("a.wav"));
//!
//! form.set_text("model", "whisper-2");
//! let (content_type, again) = form.write();
//! let back = Form::parse(again, boundary(&content_type).unwrap()).unwrap();
//! assert_eq!(back.text("model").unwrap(), Ok("whisper-2"));
//! ```

use bytes::{BufMut, Bytes, BytesMut};
use memchr::memmem;

/// Most parts a form may have.
pub const MAX_PARTS: usize = 64;
/// Most bytes of one part's header block.
pub const MAX_HEADER_BYTES: usize = 8 * 1024;
/// Most bytes of a part's name or file name.
pub const MAX_NAME_BYTES: usize = 256;
/// Most bytes of a boundary (RFC 2046).
pub const MAX_BOUNDARY_BYTES: usize = 70;

/// Why a body is not a form we read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FormError {
    /// The `Content-Type` is not `multipart/form-data` with a boundary.
    #[error("the content type must be multipart/form-data with a boundary")]
    NotMultipart,
    /// The boundary is empty, too long or has characters RFC 2046 forbids.
    #[error("the multipart boundary must be 1 to 70 characters of RFC 2046")]
    BadBoundary,
    /// The body does not start with the boundary.
    #[error("the body does not open with its multipart boundary")]
    NoOpening,
    /// The body ends before the closing boundary.
    #[error("the body ends before its closing multipart boundary")]
    Unterminated,
    /// A part's headers are malformed; the text says how.
    #[error("a multipart part's headers are malformed: {0}")]
    BadHeaders(&'static str),
    /// A part has no `Content-Disposition: form-data; name=…`.
    #[error("a multipart part has no Content-Disposition form-data name")]
    NoName,
    /// More than [`MAX_PARTS`] parts.
    #[error("the form has more than {MAX_PARTS} parts")]
    TooManyParts,
}

/// One part of a form.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Part {
    /// Its field name.
    pub name: String,
    /// The file name, for a file.
    pub filename: Option<String>,
    /// Its `Content-Type`, if it has one.
    pub content_type: Option<String>,
    /// Its bytes: a slice of the body read.
    pub data: Bytes,
}

/// Why a field could not be read as text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TextError {
    /// It is a file.
    File,
    /// It is not UTF-8.
    NotUtf8,
}

/// A form: its parts in order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Form {
    /// The parts, as sent.
    pub parts: Vec<Part>,
}

/// The boundary of a `multipart/form-data` content type.
///
/// # Errors
/// [`FormError::NotMultipart`] for another type or none named,
/// [`FormError::BadBoundary`] for one RFC 2046 forbids.
pub fn boundary(content_type: &str) -> Result<&str, FormError> {
    let mut params = content_type.split(';');
    let kind = params.next().unwrap_or_default().trim();
    if !kind.eq_ignore_ascii_case("multipart/form-data") {
        return Err(FormError::NotMultipart);
    }
    let value = params
        .filter_map(|p| p.split_once('='))
        .find(|(k, _)| k.trim().eq_ignore_ascii_case("boundary"))
        .map(|(_, v)| v.trim())
        .ok_or(FormError::NotMultipart)?;
    let value = value
        .strip_prefix('"')
        .and_then(|v| v.strip_suffix('"'))
        .unwrap_or(value);
    let allowed = |c: char| c.is_ascii_alphanumeric() || "'()+_,-./:=? ".contains(c);
    if value.is_empty()
        || value.len() > MAX_BOUNDARY_BYTES
        || value.ends_with(' ')
        || !value.chars().all(allowed)
    {
        return Err(FormError::BadBoundary);
    }
    Ok(value)
}

impl Form {
    /// Reads `body`, a form whose parts are separated by `boundary`.
    ///
    /// # Errors
    /// A [`FormError`] naming the first thing wrong.
    pub fn parse(body: Bytes, boundary: &str) -> Result<Form, FormError> {
        let dash = format!("--{boundary}");
        let delimiter = format!("\r\n--{boundary}");
        let finder = memmem::Finder::new(delimiter.as_bytes());
        // The first boundary opens the body (a preamble before it is
        // allowed by RFC 2046, but no client sends one).
        if !body.starts_with(dash.as_bytes()) {
            return Err(FormError::NoOpening);
        }
        let mut at = dash.len();
        let mut parts = Vec::new();
        loop {
            let rest = &body[at..];
            if rest.starts_with(b"--") {
                return Ok(Form { parts });
            }
            if !rest.starts_with(b"\r\n") {
                return Err(FormError::Unterminated);
            }
            if parts.len() == MAX_PARTS {
                return Err(FormError::TooManyParts);
            }
            at += 2;
            let head_len = memmem::find(&body[at..], b"\r\n\r\n")
                .filter(|&n| n <= MAX_HEADER_BYTES)
                .ok_or(FormError::BadHeaders("no blank line within 8 KiB"))?;
            let head = &body[at..at + head_len];
            let data_at = at + head_len + 4;
            let data_len = finder
                .find(&body[data_at..])
                .ok_or(FormError::Unterminated)?;
            let mut part = headers(head)?;
            part.data = body.slice(data_at..data_at + data_len);
            parts.push(part);
            at = data_at + data_len + delimiter.len();
        }
    }

    /// The first part named `name`.
    pub fn part(&self, name: &str) -> Option<&Part> {
        self.parts.iter().find(|p| p.name == name)
    }

    /// The first part named `name`, as text; `None` when there is none.
    pub fn text(&self, name: &str) -> Option<Result<&str, TextError>> {
        self.part(name).map(|p| {
            if p.filename.is_some() {
                return Err(TextError::File);
            }
            std::str::from_utf8(&p.data).map_err(|_| TextError::NotUtf8)
        })
    }

    /// Sets the text field `name` (its first part, or a new one at the
    /// end).
    pub fn set_text(&mut self, name: &str, value: &str) {
        let data = Bytes::copy_from_slice(value.as_bytes());
        match self.parts.iter_mut().find(|p| p.name == name) {
            Some(p) => {
                p.data = data;
                p.filename = None;
                p.content_type = None;
            }
            None => self.parts.push(Part {
                name: name.to_owned(),
                filename: None,
                content_type: None,
                data,
            }),
        }
    }

    /// The form as a body, and its content type: a boundary that none of
    /// its parts contains.
    pub fn write(&self) -> (String, Bytes) {
        let mut n: u64 = 0;
        let boundary = loop {
            let b = format!("sluice-form-{n:016x}");
            let delimiter = format!("\r\n--{b}");
            let finder = memmem::Finder::new(delimiter.as_bytes());
            if self.parts.iter().all(|p| finder.find(&p.data).is_none()) {
                break b;
            }
            n += 1;
        };
        let size: usize = self.parts.iter().map(|p| p.data.len() + 160).sum();
        let mut out = BytesMut::with_capacity(size + boundary.len() + 8);
        for p in &self.parts {
            out.put_slice(b"--");
            out.put_slice(boundary.as_bytes());
            out.put_slice(b"\r\nContent-Disposition: form-data; name=\"");
            out.put_slice(escape(&p.name).as_bytes());
            out.put_slice(b"\"");
            if let Some(f) = &p.filename {
                out.put_slice(b"; filename=\"");
                out.put_slice(escape(f).as_bytes());
                out.put_slice(b"\"");
            }
            out.put_slice(b"\r\n");
            if let Some(t) = &p.content_type {
                out.put_slice(b"Content-Type: ");
                out.put_slice(t.as_bytes());
                out.put_slice(b"\r\n");
            }
            out.put_slice(b"\r\n");
            out.put_slice(&p.data);
            out.put_slice(b"\r\n");
        }
        out.put_slice(b"--");
        out.put_slice(boundary.as_bytes());
        out.put_slice(b"--\r\n");
        (
            format!("multipart/form-data; boundary={boundary}"),
            out.freeze(),
        )
    }
}

/// A name as a quoted string may hold it (the WHATWG's escapes).
fn escape(s: &str) -> String {
    s.replace('"', "%22")
        .replace('\r', "%0D")
        .replace('\n', "%0A")
}

/// A part's header block: its name, file name and content type.
fn headers(head: &[u8]) -> Result<Part, FormError> {
    let head = std::str::from_utf8(head).map_err(|_| FormError::BadHeaders("not UTF-8"))?;
    let mut part = Part {
        name: String::new(),
        filename: None,
        content_type: None,
        data: Bytes::new(),
    };
    let mut named = false;
    for line in head.split("\r\n") {
        let (key, value) = line
            .split_once(':')
            .ok_or(FormError::BadHeaders("a line without a colon"))?;
        let key = key.trim();
        let value = value.trim();
        if key.eq_ignore_ascii_case("content-disposition") {
            let (kind, params) = value.split_once(';').unwrap_or((value, ""));
            if !kind.trim().eq_ignore_ascii_case("form-data") {
                return Err(FormError::NoName);
            }
            for (k, v) in disposition(params)? {
                if k.eq_ignore_ascii_case("name") {
                    part.name = v;
                    named = true;
                } else if k.eq_ignore_ascii_case("filename") {
                    part.filename = Some(v);
                }
            }
        } else if key.eq_ignore_ascii_case("content-type") {
            part.content_type = Some(value.to_owned());
        }
    }
    if !named || part.name.is_empty() {
        return Err(FormError::NoName);
    }
    Ok(part)
}

/// The `key=value` parameters of a `Content-Disposition`, values quoted
/// (with `\"` escapes) or bare, each at most [`MAX_NAME_BYTES`].
fn disposition(params: &str) -> Result<Vec<(String, String)>, FormError> {
    let mut out = Vec::new();
    let mut rest = params.trim_start_matches([';', ' ']);
    while !rest.is_empty() {
        let (key, after) = rest
            .split_once('=')
            .ok_or(FormError::BadHeaders("a parameter without a value"))?;
        let key = key.trim().to_owned();
        let after = after.trim_start();
        let (value, tail) = if let Some(quoted) = after.strip_prefix('"') {
            let mut value = String::new();
            let mut chars = quoted.char_indices();
            let mut end = None;
            while let Some((i, c)) = chars.next() {
                match c {
                    '\\' => {
                        if let Some((_, e)) = chars.next() {
                            value.push(e);
                        }
                    }
                    '"' => {
                        end = Some(i + 1);
                        break;
                    }
                    c => value.push(c),
                }
            }
            let end = end.ok_or(FormError::BadHeaders("an unclosed quoted parameter"))?;
            (value, &quoted[end..])
        } else {
            let end = after.find(';').unwrap_or(after.len());
            (after[..end].trim().to_owned(), &after[end..])
        };
        if value.len() > MAX_NAME_BYTES {
            return Err(FormError::BadHeaders("a name longer than 256 bytes"));
        }
        out.push((key, value));
        rest = tail.trim_start_matches([';', ' ']);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn form(body: &'static [u8]) -> Result<Form, FormError> {
        Form::parse(Bytes::from_static(body), "b")
    }

    #[test]
    fn reads_text_and_file_parts_and_refuses_what_is_broken() {
        let f = form(b"--b\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\n1\r\n--b\r\ncontent-disposition: form-data; name=f; filename=\"x \\\"y\\\".wav\"\r\nContent-Type: audio/wav\r\n\r\nx--b\r\n--b--").unwrap();
        assert_eq!(f.parts.len(), 2);
        assert_eq!(f.text("a"), Some(Ok("1")));
        let file = f.part("f").unwrap();
        assert_eq!(file.filename.as_deref(), Some("x \"y\".wav"));
        // The boundary inside a line is data.
        assert_eq!(&file.data[..], b"x--b");
        assert_eq!(f.text("f"), Some(Err(TextError::File)));
        assert_eq!(f.text("missing"), None);

        assert_eq!(form(b"junk"), Err(FormError::NoOpening));
        assert_eq!(
            form(b"--b\r\nContent-Disposition: form-data; name=a\r\n\r\n1"),
            Err(FormError::Unterminated)
        );
        assert_eq!(
            form(b"--b\r\nContent-Type: text/plain\r\n\r\n1\r\n--b--"),
            Err(FormError::NoName)
        );
        assert!(matches!(
            form(b"--b\r\nnonsense\r\n\r\n1\r\n--b--"),
            Err(FormError::BadHeaders(_))
        ));
        let mut many = b"--b".to_vec();
        for _ in 0..=MAX_PARTS {
            many.extend_from_slice(b"\r\nContent-Disposition: form-data; name=a\r\n\r\n1\r\n--b");
        }
        many.extend_from_slice(b"--");
        assert_eq!(
            Form::parse(Bytes::from(many), "b"),
            Err(FormError::TooManyParts)
        );
    }

    #[test]
    fn boundaries_are_checked() {
        assert_eq!(boundary("multipart/form-data; boundary=abc"), Ok("abc"));
        assert_eq!(boundary("Multipart/Form-Data;boundary=\"a b\""), Ok("a b"));
        assert_eq!(boundary("application/json"), Err(FormError::NotMultipart));
        assert_eq!(
            boundary("multipart/form-data"),
            Err(FormError::NotMultipart)
        );
        assert_eq!(
            boundary("multipart/form-data; boundary="),
            Err(FormError::BadBoundary)
        );
        let long = format!("multipart/form-data; boundary={}", "a".repeat(71));
        assert_eq!(boundary(&long), Err(FormError::BadBoundary));
    }

    proptest::proptest! {
        #[test]
        fn a_written_form_reads_back_the_same(
            fields in proptest::collection::vec(
                ("[a-z\"]{1,8}", proptest::option::of("[a-z. ]{1,8}"), proptest::collection::vec(proptest::num::u8::ANY, 0..64)),
                0..6,
            ),
        ) {
            let form = Form { parts: fields.into_iter().map(|(name, filename, data)| Part {
                name: name.clone(),
                content_type: filename.as_ref().map(|_| "application/octet-stream".to_owned()),
                filename,
                data: Bytes::from(data),
            }).collect() };
            let (content_type, body) = form.write();
            let back = Form::parse(body, boundary(&content_type).unwrap()).unwrap();
            proptest::prop_assert_eq!(back.parts.len(), form.parts.len());
            for (a, b) in back.parts.iter().zip(&form.parts) {
                proptest::prop_assert_eq!(&a.name, &escape(&b.name));
                proptest::prop_assert_eq!(&a.data, &b.data);
                proptest::prop_assert_eq!(&a.filename, &b.filename);
            }
        }
    }
}
