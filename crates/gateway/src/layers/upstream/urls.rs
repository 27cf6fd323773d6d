//! Upstream URLs parsed once per serving thread: a provider's URLs are
//! few and the same for every call, and parsing one (as a [`Url`] and
//! again as the client's [`Uri`]) cost more than the rest of building
//! the call. Each serving thread keeps the last [`KEPT`] it parsed (no
//! lock: every thread has its own), so a model routed by URL path
//! (Gemini's) still parses, never grows the list past its bound.

use std::cell::RefCell;

use axum::http::Uri;
use reqwest::Url;

/// URLs kept per thread.
const KEPT: usize = 32;

thread_local! {
    static PARSED: RefCell<Vec<(Box<str>, Url, Uri)>> = const { RefCell::new(Vec::new()) };
}

/// `url` as a [`Url`] and as a [`Uri`].
///
/// # Errors
/// `url` does not parse, or is not one HTTP can send to (an `http::Uri`
/// refuses it).
pub(super) fn parse(url: &str) -> Result<(Url, Uri), String> {
    let kept = PARSED.with_borrow(|kept| {
        kept.iter()
            .find(|(text, ..)| **text == *url)
            .map(|(_, url, uri)| (url.clone(), uri.clone()))
    });
    if let Some(parsed) = kept {
        return Ok(parsed);
    }
    let parsed = Url::parse(url).map_err(|e| e.to_string())?;
    let uri = uri_of(&parsed)?;
    PARSED.with_borrow_mut(|kept| {
        if kept.len() == KEPT {
            kept.remove(0);
        }
        kept.push((url.into(), parsed.clone(), uri.clone()));
    });
    Ok((parsed, uri))
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
        assert_eq!(again.1.path(), "/v1/chat/completions");
        assert_eq!(again.0.port(), Some(9));
        for i in 0..2 * KEPT {
            let (url, uri) = parse(&format!("https://api.example/v1/models/m{i}:go")).unwrap();
            assert_eq!(uri.to_string(), url.as_str());
        }
        assert_eq!(PARSED.with_borrow(Vec::len), KEPT);
        assert!(parse("not a url").unwrap_err().contains("relative URL"));
        assert!(parse("http://").is_err());
    }
}
