//! Where a proxied request goes: the API's base URL and the rest of the
//! request's path, which can never climb out of that base.
//!
//! The path is read as the client sent it (percent-encoded) and decoded
//! exactly once, segment by segment. A segment that decodes to `.` or
//! `..`, or holds `/` or `\` (a separator, sent encoded or, for `\`, as
//! is: URL parsers treat it as `/`), is refused. The rest are encoded
//! again, `%` included, and appended to the base as segments of a parsed
//! URL that is handed to the client as it is, never parsed from a string
//! again: `%252e%252e` arrives upstream as the three characters `%2e`
//! twice, not as `..`.

use percent_encoding::percent_decode_str;
use url::Url;

use crate::error::ApiError;

/// The path below `/proxy/`, raw: the API's name and the rest.
///
/// # Errors
/// 400 for a name that is not UTF-8 once decoded.
pub(crate) fn split(raw: &str) -> Result<(String, &str), ApiError> {
    let below = raw.strip_prefix("/proxy/").unwrap_or(raw);
    let (api, rest) = below.split_once('/').unwrap_or((below, ""));
    let api = percent_decode_str(api)
        .decode_utf8()
        .map_err(|_| bad_path("the API name is not UTF-8"))?;
    if api.len() > crate::names::MAX_NAME || !api.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(bad_path(&format!(
            "the API name is not 1 to {} bytes of visible ASCII",
            crate::names::MAX_NAME
        )));
    }
    Ok((api.into_owned(), rest))
}

/// `base` with the segments of `raw_rest` appended and `query` set.
///
/// # Errors
/// 400 naming what is refused: a dot segment, an encoded separator or a
/// backslash, a segment that is not UTF-8.
pub(crate) fn upstream_url(
    base: &str,
    raw_rest: &str,
    query: Option<&str>,
) -> Result<Url, ApiError> {
    let mut url = Url::parse(base)
        .map_err(|e| ApiError::Internal(format!("the API's base_url does not parse: {e}")))?;
    let mut decoded = Vec::new();
    for raw in raw_rest.split('/') {
        let segment = percent_decode_str(raw)
            .decode_utf8()
            .map_err(|_| bad_path("a path segment is not UTF-8 once decoded"))?;
        // `..;x` is `..` to servers that read path parameters (Tomcat,
        // Spring, some proxies in front of the upstream).
        let bare = segment.split(';').next().unwrap_or(&segment);
        if bare == "." || bare == ".." {
            return Err(bad_path(
                "path segments `.` and `..` (with or without `;` parameters) are not allowed",
            ));
        }
        if segment.contains(['/', '\\']) {
            return Err(bad_path(
                "a path segment may not hold `/` or `\\` (encoded or not)",
            ));
        }
        decoded.push(segment);
    }
    url.path_segments_mut()
        .map_err(|()| ApiError::Internal("the API's base_url cannot be a base".into()))?
        .pop_if_empty()
        .extend(decoded.iter().map(|s| s.as_ref()));
    url.set_query(query);
    // What the segments were appended to is still the start of the path:
    // checked on the URL that is sent, not on what was meant to be built.
    let base_path = Url::parse(base).map(|b| b.path().trim_end_matches('/').to_owned());
    if !base_path.is_ok_and(|b| url.path().starts_with(&b)) {
        return Err(bad_path("the path leaves the API's base URL"));
    }
    Ok(url)
}

fn bad_path(why: &str) -> ApiError {
    ApiError::BadRequest {
        message: format!("proxy path: {why}"),
        param: Some("path".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BASE: &str = "http://127.0.0.1:9/slack/api";

    fn url(rest: &str) -> Result<String, ApiError> {
        upstream_url(BASE, rest, None).map(|u| u.to_string())
    }

    #[test]
    fn plain_paths_are_appended() {
        assert_eq!(
            url("chat.postMessage").unwrap(),
            "http://127.0.0.1:9/slack/api/chat.postMessage"
        );
        assert_eq!(url("a/b/").unwrap(), "http://127.0.0.1:9/slack/api/a/b/");
        assert_eq!(
            upstream_url(
                "https://api.github.com",
                "repos/o/r",
                Some("page=2&q=a%20b")
            )
            .unwrap()
            .as_str(),
            "https://api.github.com/repos/o/r?page=2&q=a%20b"
        );
        // Encoded characters other than separators stay encoded, once.
        assert_eq!(
            url("files/100%25%20done").unwrap(),
            "http://127.0.0.1:9/slack/api/files/100%25%20done"
        );
    }

    #[test]
    fn no_way_out_of_the_base() {
        for rest in [
            "..",
            "a/../../_sim/stats",
            "%2e%2e/_sim/stats",
            "%2E%2E/_sim/stats",
            ".%2e/x",
            "..%5C..%5C_sim",
            "..\\..\\_sim",
            "a%2F..%2F..%2F_sim",
            "a%5Cb",
            ".",
            "%2e",
            "..;/_sim/stats",
            "a/..;x/..;/_sim",
            "%2e%2e;/x",
            ".;/x",
        ] {
            assert!(
                matches!(url(rest), Err(ApiError::BadRequest { .. })),
                "{rest}: {:?}",
                url(rest)
            );
        }
    }

    #[test]
    fn double_encoding_is_decoded_once() {
        // `%252e` is `%2e` once decoded: a name of three characters, sent
        // on encoded, never read as a dot.
        let u = url("%252e%252e/%252e%252e/_sim/stats").unwrap();
        assert_eq!(
            u,
            "http://127.0.0.1:9/slack/api/%252e%252e/%252e%252e/_sim/stats"
        );
        assert!(Url::parse(&u).unwrap().path().starts_with("/slack/api/"));
    }

    #[test]
    fn the_api_name_is_decoded_once() {
        assert_eq!(split("/proxy/slack/a/b").unwrap(), ("slack".into(), "a/b"));
        assert_eq!(split("/proxy/sl%61ck/x").unwrap().0, "slack");
        assert_eq!(split("/proxy/slack").unwrap(), ("slack".into(), ""));
        let long = format!("/proxy/{}/x", "a".repeat(crate::names::MAX_NAME + 1));
        assert!(split(&long).is_err());
        assert!(split("/proxy/sl%0Aack/x").is_err());
    }
}
