//! The IETF RateLimit fields (draft-ietf-httpapi-ratelimit-headers), in the
//! forms servers send today:
//!
//! - newer drafts (08 on), structured-field lists of named items:
//!   `RateLimit-Policy: "default";q=100;w=10` and
//!   `RateLimit: "default";r=50;t=30`;
//! - draft 07: `RateLimit: limit=100, remaining=50, reset=5` and
//!   `RateLimit-Policy: 100;w=60;burst=20, 10;w=1`;
//! - earlier drafts: `RateLimit-Limit` (`10` or `10, 10;w=1`),
//!   `RateLimit-Remaining` and `RateLimit-Reset`.
//!
//! The parse is lenient about structure but never guesses a number: a
//! member it cannot read is skipped, and the rest still count.

use std::cmp::Reverse;
use std::time::{Duration, SystemTime};

use super::time::{parse_reset, seconds};
use super::{Quota, fill, parse_count};

/// The IETF fields of one response, gathered across header lines and
/// combined at the end, since `RateLimit` names policies that
/// `RateLimit-Policy` may list after it.
#[derive(Debug, Default)]
pub(super) struct Ietf<'a> {
    policies: Vec<Policy<'a>>,
    current: Vec<Current<'a>>,
}

/// A quota policy: `q` per `w` seconds, under an optional name.
#[derive(Debug, Clone, Copy)]
struct Policy<'a> {
    name: Option<&'a str>,
    quota: Option<u64>,
    window: Option<Duration>,
}

/// What is left of one policy now.
#[derive(Debug, Clone, Copy)]
struct Current<'a> {
    name: Option<&'a str>,
    quota: Quota,
}

impl<'a> Ietf<'a> {
    /// Adds the members of one `RateLimit-Policy` line.
    pub(super) fn add_policies(&mut self, value: &'a str) {
        self.policies.extend(members(value).filter_map(policy));
    }

    /// Adds one `RateLimit` line, in either form.
    pub(super) fn add_current(&mut self, value: &'a str, now: SystemTime) {
        // Draft 07's dictionary describes one quota across its members.
        let mut dictionary = Quota::default();
        for member in members(value) {
            if let Some((key, value)) = member.bare.split_once('=') {
                match key.trim() {
                    "limit" => fill(&mut dictionary.limit, || parse_count(value)),
                    "remaining" => fill(&mut dictionary.remaining, || parse_count(value)),
                    "reset" => fill(&mut dictionary.reset, || parse_reset(value, now)),
                    _ => {}
                }
                continue;
            }
            let mut quota = Quota::default();
            for (key, value) in member.params() {
                match key {
                    "r" => fill(&mut quota.remaining, || parse_count(value)),
                    "t" => fill(&mut quota.reset, || parse_reset(value, now)),
                    _ => {}
                }
            }
            if quota.known().is_some() {
                self.current.push(Current {
                    name: name(member.bare),
                    quota,
                });
            }
        }
        if dictionary.known().is_some() {
            self.current.push(Current {
                name: None,
                quota: dictionary,
            });
        }
    }

    /// Reads one `RateLimit-Limit` line: its first member is the limit;
    /// members with a window (`10;w=1`, or `window=` in the first drafts)
    /// are policies.
    pub(super) fn add_limit(&mut self, value: &'a str) -> Option<u64> {
        let mut members = members(value).peekable();
        let limit = members.peek().and_then(|m| parse_count(m.bare));
        self.policies
            .extend(members.filter_map(policy).filter(|p| p.window.is_some()));
        limit
    }

    /// The quota the IETF fields describe and its policy's window.
    ///
    /// `fields` holds the separate `RateLimit-Limit`/`-Remaining`/`-Reset`
    /// values, which fill what `RateLimit` left out. Of several quotas the
    /// one with the least remaining is taken (ties: the later reset): it
    /// is the one that throttles next.
    pub(super) fn finish(self, fields: Quota) -> (Option<Quota>, Option<Duration>) {
        let current = self.current.iter().min_by_key(|c| {
            (
                c.quota.remaining.unwrap_or(u64::MAX),
                Reverse(c.quota.reset),
            )
        });
        let mut quota = current.map(|c| c.quota).unwrap_or_default();
        quota.limit = quota.limit.or(fields.limit);
        quota.remaining = quota.remaining.or(fields.remaining);
        quota.reset = quota.reset.or(fields.reset);

        let name = current.and_then(|c| c.name);
        let by_name = name.and_then(|n| self.policies.iter().find(|p| p.name == Some(n)));
        let by_quota = || {
            let limit = quota.limit?;
            self.policies.iter().find(|p| p.quota == Some(limit))
        };
        let policy = by_name.or_else(by_quota).or(self.policies.first());
        quota.limit = quota.limit.or(policy.and_then(|p| p.quota));
        (quota.known(), policy.and_then(|p| p.window))
    }
}

/// A policy member: a bare integer quota (older drafts) or a name with
/// `q=` (newer). Policies counted in other units than requests (`qu`,
/// e.g. `"content-bytes"`) are skipped: they would not fit a request quota.
fn policy(member: Member<'_>) -> Option<Policy<'_>> {
    let mut policy = Policy {
        name: None,
        quota: parse_count(member.bare),
        window: None,
    };
    if policy.quota.is_none() {
        policy.name = name(member.bare);
    }
    for (key, value) in member.params() {
        match key {
            "q" => policy.quota = parse_count(value).or(policy.quota),
            "w" | "window" => fill(&mut policy.window, || seconds(value)),
            "qu" if name(value) != Some("requests") => return None,
            _ => {}
        }
    }
    (policy.quota.is_some() || policy.window.is_some()).then_some(policy)
}

/// A list member: its bare item and its `;`-separated parameters.
#[derive(Debug, Clone, Copy)]
struct Member<'a> {
    bare: &'a str,
    params: &'a str,
}

impl<'a> Member<'a> {
    /// `key=value` pairs; a bare key has an empty value.
    fn params(self) -> impl Iterator<Item = (&'a str, &'a str)> {
        split_unquoted(self.params, b';').filter_map(|p| {
            let (key, value) = p.split_once('=').unwrap_or((p, ""));
            let key = key.trim();
            (!key.is_empty()).then(|| (key, value.trim()))
        })
    }
}

/// The non-empty members of a comma-separated list.
fn members(value: &str) -> impl Iterator<Item = Member<'_>> {
    split_unquoted(value, b',').filter_map(|m| {
        let m = m.trim();
        let (bare, params) = split_unquoted(m, b';')
            .next()
            .map(|bare| (bare, m.get(bare.len() + 1..).unwrap_or("")))?;
        let bare = bare.trim();
        (!bare.is_empty()).then_some(Member { bare, params })
    })
}

/// A policy's name: a quoted string's contents (escapes kept as sent, so
/// both sides compare alike) or a token as it is.
fn name(bare: &str) -> Option<&str> {
    let bare = bare.trim();
    let name = match bare.strip_prefix('"').and_then(|b| b.strip_suffix('"')) {
        Some(inner) => inner,
        None => bare,
    };
    (!name.is_empty()).then_some(name)
}

/// Splits at `sep` except inside double-quoted strings (a policy name may
/// hold a comma or a semicolon).
fn split_unquoted(s: &str, sep: u8) -> impl Iterator<Item = &str> {
    let mut rest = Some(s);
    std::iter::from_fn(move || {
        let s = rest?;
        let (mut quoted, mut escaped) = (false, false);
        for (i, &b) in s.as_bytes().iter().enumerate() {
            if escaped {
                escaped = false;
            } else if quoted && b == b'\\' {
                escaped = true;
            } else if b == b'"' {
                quoted = !quoted;
            } else if !quoted && b == sep {
                // `sep` is ASCII, so `i` and `i + 1` are char boundaries.
                rest = Some(&s[i + 1..]);
                return Some(&s[..i]);
            }
        }
        rest = None;
        Some(s)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::UNIX_EPOCH;

    fn now() -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(1_714_564_800)
    }

    fn quota(limit: Option<u64>, remaining: Option<u64>, reset_secs: Option<u64>) -> Option<Quota> {
        Some(Quota {
            limit,
            remaining,
            reset: reset_secs.map(Duration::from_secs),
        })
    }

    fn finish(
        policies: &[&str],
        current: &[&str],
        fields: Quota,
    ) -> (Option<Quota>, Option<Duration>) {
        let mut ietf = Ietf::default();
        for p in policies {
            ietf.add_policies(p);
        }
        for c in current {
            ietf.add_current(c, now());
        }
        ietf.finish(fields)
    }

    #[test]
    fn quoted_separators_stay_inside_names() {
        let got: Vec<_> = split_unquoted(r#""a,b";q=1, "c\",d";q=2,e"#, b',').collect();
        assert_eq!(got, [r#""a,b";q=1"#, r#" "c\",d";q=2"#, "e"]);
        let (q, w) = finish(
            &[r#""a,b;c";q=7;w=3"#],
            &[r#""a,b;c";r=1"#],
            Quota::default(),
        );
        assert_eq!(
            (q, w),
            (quota(Some(7), Some(1), None), Some(Duration::from_secs(3)))
        );
    }

    #[test]
    fn structured_form_matches_policy_by_name() {
        let (q, w) = finish(
            &[r#""burst";q=100;w=60, "daily";q=1000;w=86400"#],
            &[r#""burst";r=40;t=20, "daily";r=900;t=3600"#],
            Quota::default(),
        );
        assert_eq!(q, quota(Some(100), Some(40), Some(20)));
        assert_eq!(w, Some(Duration::from_secs(60)));

        // The daily quota is the tighter one now.
        let (q, w) = finish(
            &[r#""burst";q=100;w=60"#, r#""daily";q=1000;w=86400"#],
            &[r#""burst";r=40;t=20"#, r#""daily";r=5;t=3600"#],
            Quota::default(),
        );
        assert_eq!(q, quota(Some(1000), Some(5), Some(3600)));
        assert_eq!(w, Some(Duration::from_secs(86_400)));
    }

    #[test]
    fn draft_07_dictionary_and_integer_policies() {
        let (q, w) = finish(
            &["100;w=60;burst=20, 10;w=1"],
            &["limit=10, remaining=3, reset=1"],
            Quota::default(),
        );
        assert_eq!(q, quota(Some(10), Some(3), Some(1)));
        assert_eq!(
            w,
            Some(Duration::from_secs(1)),
            "the policy whose quota is the limit"
        );

        let (q, w) = finish(&["100;w=60;burst=20, 10;w=1"], &[], Quota::default());
        assert_eq!(
            q,
            quota(Some(100), None, None),
            "a policy alone gives the limit"
        );
        assert_eq!(w, Some(Duration::from_secs(60)));
    }

    #[test]
    fn limit_field_lists_policies() {
        let mut ietf = Ietf::default();
        assert_eq!(ietf.add_limit("10, 10;w=1, 1000;w=3600"), Some(10));
        assert_eq!(ietf.add_limit("100, 100;window=60"), Some(100));
        assert_eq!(ietf.add_limit("lots, 5;w=1"), None);
        assert_eq!(ietf.policies.len(), 4);
    }

    #[test]
    fn separate_fields_fill_the_gaps() {
        let fields = Quota {
            limit: Some(50),
            remaining: Some(9),
            reset: None,
        };
        let (q, _) = finish(&[], &[r#""x";t=4"#], fields);
        assert_eq!(q, quota(Some(50), Some(9), Some(4)));
    }

    #[test]
    fn other_units_and_garbage_are_skipped() {
        let (q, w) = finish(
            &[r#""bytes";q=65536;qu="content-bytes";w=1, "default";q=10;qu="requests";w=5"#],
            &[],
            Quota::default(),
        );
        assert_eq!(
            (q, w),
            (quota(Some(10), None, None), Some(Duration::from_secs(5)))
        );

        let (q, w) = finish(
            &[";;,,=, \"\";w=, q=-1", "\"unterminated;q=3"],
            &["limit=x, remaining=-2, =, ;r=1, \"a\";r=99999999999999999999"],
            Quota::default(),
        );
        assert_eq!((q, w), (None, None));
    }
}
