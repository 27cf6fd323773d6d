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
//! Each field is parsed as an RFC 9651 structured field ([`fields`], with
//! `sfv`): one that does not parse is not read at all. Within a parsed
//! field, a member whose numbers cannot be read is skipped, and the rest
//! still count.

mod fields;
#[cfg(test)]
mod tests;

use std::cmp::Reverse;
use std::time::{Duration, SystemTime};

use super::time::{parse_reset, seconds};
use super::{Quota, fill, parse_count};
use fields::{Member, Value};

/// The IETF fields of one response, gathered across header lines and
/// combined at the end, since `RateLimit` names policies that
/// `RateLimit-Policy` may list after it.
#[derive(Debug, Default)]
pub(super) struct Ietf<'a> {
    policies: Vec<Policy<'a>>,
    current: Vec<Current<'a>>,
}

/// A quota policy: `q` per `w` seconds, under an optional name.
#[derive(Debug, Clone)]
struct Policy<'a> {
    name: Option<Value<'a>>,
    quota: Option<u64>,
    window: Option<Duration>,
}

/// What is left of one policy now.
#[derive(Debug, Clone)]
struct Current<'a> {
    name: Option<Value<'a>>,
    quota: Quota,
}

impl<'a> Ietf<'a> {
    /// Adds the members of one `RateLimit-Policy` line.
    pub(super) fn add_policies(&mut self, value: &'a str) {
        let members = fields::list(value).unwrap_or_default();
        self.policies.extend(members.into_iter().filter_map(policy));
    }

    /// Adds one `RateLimit` line: a list of named items (newer drafts), or
    /// draft 07's dictionary, which describes one quota across its members.
    pub(super) fn add_current(&mut self, value: &'a str, now: SystemTime) {
        if let Some(members) = fields::list(value) {
            for member in members {
                let mut quota = Quota::default();
                for (key, value) in &member.params {
                    let Some(value) = value.number() else {
                        continue;
                    };
                    match *key {
                        "r" => fill(&mut quota.remaining, || parse_count(value)),
                        "t" => fill(&mut quota.reset, || parse_reset(value, now)),
                        _ => {}
                    }
                }
                if quota.known().is_some() {
                    self.current.push(Current {
                        name: member.bare.text().is_some().then_some(member.bare),
                        quota,
                    });
                }
            }
            return;
        }
        let mut dictionary = Quota::default();
        for member in fields::dictionary(value).unwrap_or_default() {
            let Some(value) = member.bare.number() else {
                continue;
            };
            match member.key {
                Some("limit") => fill(&mut dictionary.limit, || parse_count(value)),
                Some("remaining") => fill(&mut dictionary.remaining, || parse_count(value)),
                Some("reset") => fill(&mut dictionary.reset, || parse_reset(value, now)),
                _ => {}
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
        let members = fields::list(value)?;
        let limit = members
            .first()
            .and_then(|m| m.bare.number())
            .and_then(parse_count);
        self.policies.extend(
            members
                .into_iter()
                .filter_map(policy)
                .filter(|p| p.window.is_some()),
        );
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

        let name = current.and_then(|c| c.name.as_ref());
        let by_name = name.and_then(|n| self.policies.iter().find(|p| p.name.as_ref() == Some(n)));
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
        quota: member.bare.number().and_then(parse_count),
        window: None,
    };
    if policy.quota.is_none() && member.bare.text().is_some() {
        policy.name = Some(member.bare);
    }
    for (key, value) in &member.params {
        match *key {
            "q" => policy.quota = value.number().and_then(parse_count).or(policy.quota),
            "w" | "window" => fill(&mut policy.window, || value.number().and_then(seconds)),
            "qu" if value.text() != Some("requests") => return None,
            _ => {}
        }
    }
    (policy.quota.is_some() || policy.window.is_some()).then_some(policy)
}
