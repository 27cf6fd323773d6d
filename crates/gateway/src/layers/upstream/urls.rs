//! Upstream URLs parsed once per serving thread: a provider's URLs are
//! few and the same for every call, and parsing one (as a [`Url`] and
//! again as the client's [`Uri`]) and making its `Host` header cost more
//! than the rest of building the call. Each serving thread keeps the last [`KEPT`] it parsed (no
//! lock: every thread has its own), so a model routed by URL path
//! (Gemini's) still parses, never grows the list past its bound.

use std::cell::RefCell;

use axum::http::{HeaderValue, Uri};
use reqwest::Url;

/// URLs kept per thread.
const KEPT: usize = 32;

thread_local! {
    static PARSED: RefCell<Vec<(Box<str>, Parsed)>> = const { RefCell::new(Vec::new()) };
}

/// A URL as the upstream call needs it.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Parsed {
    pub url: Url,
    pub uri: Uri,
    /// The `Host` header the client would make for `uri`
    /// ([`crate::client::host_header`]).
    pub host: Option<HeaderValue>,
}

/// `url` as a [`Url`], a [`Uri`] and its `Host` header.
///
/// # Errors
/// `url` does not parse, or is not one HTTP can send to (an `http::Uri`
/// refuses it).
pub(super) fn parse(url: &str) -> Result<Parsed, String> {
    let kept = PARSED.with_borrow(|kept| {
        kept.iter()
            .find(|(text, _)| **text == *url)
            .map(|(_, parsed)| parsed.clone())
    });
    if let Some(parsed) = kept {
        return Ok(parsed);
    }
    let parsed_url = Url::parse(url).map_err(|e| e.to_string())?;
    let uri = uri_of(&parsed_url)?;
    let parsed = Parsed {
        host: crate::client::host_header(&uri),
        url: parsed_url,
        uri,
    };
    PARSED.with_borrow_mut(|kept| {
        if kept.len() == KEPT {
            kept.remove(0);
        }
        kept.push((url.into(), parsed.clone()));
    });
    Ok(parsed)
}

/// `url` as the client sends it.
pub(super) fn uri_of(url: &Url) -> Result<Uri, String> {
    Uri::try_from(url.as_str()).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_url_parsed_again_is_the_same_and_the_list_stays_bounded() {
        let first = parse("http://127.0.0.1:9/v1/chat/completions").unwrap();
        let again = parse("http://127.0.0.1:9/v1/chat/completions").unwrap();
        assert_eq!(first, again);
        assert_eq!(again.uri.path(), "/v1/chat/completions");
        assert_eq!(again.url.port(), Some(9));
        assert_eq!(again.host.unwrap(), "127.0.0.1:9");
        for i in 0..2 * KEPT {
            let p = parse(&format!("https://api.example/v1/models/m{i}:go")).unwrap();
            assert_eq!(p.uri.to_string(), p.url.as_str());
        }
        assert_eq!(PARSED.with_borrow(Vec::len), KEPT);
        assert!(parse("not a url").unwrap_err().contains("relative URL"));
        assert!(parse("http://").is_err());
    }
}
