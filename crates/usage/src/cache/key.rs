//! The cache key: a SHA-256 of the request in a canonical form, so that
//! two requests that mean the same thing share an entry whatever their key
//! order, whitespace or number spelling, and two that differ in anything
//! that can change the answer never do.

use std::fmt;
use std::io::Write as _;

use serde_json::{Map, Number, Value};
use sha2::{Digest, Sha256};

use crate::Endpoint;

/// Top-level request fields that never change the answer and so are left
/// out of the key: who asks (`user`, `safety_identifier`, `metadata`),
/// how the answer travels (`stream`, `stream_options`), and the
/// provider's own bookkeeping (`store`, `prompt_cache_key`,
/// `prompt_cache_retention`, `service_tier`). Everything else is in the
/// key, so a parameter a provider adds later misses rather than hits a
/// wrong answer.
pub const VOLATILE_FIELDS: &[&str] = &[
    "user",
    "stream",
    "stream_options",
    "metadata",
    "store",
    "safety_identifier",
    "prompt_cache_key",
    "prompt_cache_retention",
    "service_tier",
];

/// Whose entries a request may see.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Scope {
    /// One tenant's own entries (the default): tenant B never sees an
    /// answer tenant A paid for.
    Tenant(String),
    /// A namespace shared on purpose by the tenants configured into it.
    Shared(String),
}

impl Scope {
    /// The scope's kind and name, written into the key so that a tenant
    /// and a namespace of the same name never meet.
    fn tag(&self) -> (&'static str, &str) {
        match self {
            Scope::Tenant(name) => ("tenant", name),
            Scope::Shared(name) => ("shared", name),
        }
    }
}

impl fmt::Display for Scope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (kind, name) = self.tag();
        write!(f, "{kind}:{name}")
    }
}

/// A request's cache key: SHA-256 of its scope, provider, endpoint and
/// canonical body. Shown as 64 lowercase hex digits.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct CacheKey([u8; 32]);

impl CacheKey {
    /// The key of a model request. `provider` is the upstream's name (the
    /// same model name at two providers is two answers); `body` is the
    /// request as the client sent it, parsed.
    pub fn for_request(scope: &Scope, provider: &str, endpoint: Endpoint, body: &Value) -> Self {
        let mut hasher = Sha256::new();
        let (kind, name) = scope.tag();
        // Length-prefixed parts: no choice of names can make two different
        // (scope, provider, endpoint) triples write the same bytes.
        for part in [
            "sluice-cache/1",
            kind,
            name,
            provider,
            endpoint_name(endpoint),
        ] {
            hasher.update((part.len() as u64).to_le_bytes());
            hasher.update(part.as_bytes());
        }
        let mut canonical = Vec::with_capacity(256);
        match body {
            Value::Object(map) => write_object(&mut canonical, map, true),
            other => write_value(&mut canonical, other),
        }
        hasher.update(&canonical);
        CacheKey(hasher.finalize().into())
    }

    /// The key of a proxied `GET` to a SaaS API: `url` is the full
    /// upstream URL (base, path and query as sent), `vary` the request
    /// headers sent upstream that can change the answer (`accept`, the
    /// API's version header, the credential), as (lowercase name, value)
    /// in a fixed order. Two callers with different credentials never
    /// share an entry, even in a shared namespace.
    pub fn for_api_get(scope: &Scope, api: &str, url: &str, vary: &[(&str, &[u8])]) -> Self {
        let mut hasher = Sha256::new();
        let (kind, name) = scope.tag();
        let mut part = |bytes: &[u8]| {
            hasher.update((bytes.len() as u64).to_le_bytes());
            hasher.update(bytes);
        };
        for p in ["sluice-cache/api/1", kind, name, api, "GET", url] {
            part(p.as_bytes());
        }
        for (header, value) in vary {
            part(header.as_bytes());
            part(value);
        }
        CacheKey(hasher.finalize().into())
    }

    /// The key's lowercase hex digits.
    pub fn to_hex(&self) -> String {
        self.to_string()
    }

    /// Whether the key's hex form starts with `prefix` (case-insensitive),
    /// for invalidation by prefix.
    pub fn has_hex_prefix(&self, prefix: &str) -> bool {
        let hex = self.to_hex();
        prefix.len() <= hex.len() && hex[..prefix.len()].eq_ignore_ascii_case(prefix)
    }
}

impl fmt::Display for CacheKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for byte in self.0 {
            write!(f, "{byte:02x}")?;
        }
        Ok(())
    }
}

impl fmt::Debug for CacheKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "CacheKey({self})")
    }
}

pub(crate) fn endpoint_name(endpoint: Endpoint) -> &'static str {
    match endpoint {
        Endpoint::Chat => "chat",
        Endpoint::Embeddings => "embeddings",
        Endpoint::Responses => "responses",
        Endpoint::Messages => "messages",
        Endpoint::Generate => "generate",
        Endpoint::Completions => "completions",
        Endpoint::Transcriptions => "transcriptions",
        Endpoint::Images => "images",
        Endpoint::Moderations => "moderations",
    }
}

/// Canonical JSON: object keys sorted by their bytes, no whitespace,
/// strings escaped by serde_json, integral numbers written as integers
/// (`0`, `0.0` and `-0.0` are one temperature).
fn write_value(out: &mut Vec<u8>, value: &Value) {
    match value {
        Value::Null => out.extend_from_slice(b"null"),
        Value::Bool(b) => out.extend_from_slice(if *b { b"true" } else { b"false" }),
        Value::Number(n) => write_number(out, n),
        Value::String(s) => {
            // Writing a string into a Vec cannot fail.
            let _ = serde_json::to_writer(&mut *out, s);
        }
        Value::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_value(out, item);
            }
            out.push(b']');
        }
        Value::Object(map) => write_object(out, map, false),
    }
}

fn write_object(out: &mut Vec<u8>, map: &Map<String, Value>, top: bool) {
    let mut entries: Vec<(&String, &Value)> = map
        .iter()
        .filter(|(k, _)| !(top && VOLATILE_FIELDS.contains(&k.as_str())))
        .collect();
    // serde_json keeps insertion order when its `preserve_order` feature is
    // on anywhere in the build, so sort here rather than trust the map.
    entries.sort_unstable_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
    out.push(b'{');
    for (i, (k, v)) in entries.into_iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        let _ = serde_json::to_writer(&mut *out, k);
        out.push(b':');
        write_value(out, v);
    }
    out.push(b'}');
}

fn write_number(out: &mut Vec<u8>, n: &Number) {
    if let Some(i) = n.as_i64() {
        let _ = write!(out, "{i}");
    } else if let Some(u) = n.as_u64() {
        let _ = write!(out, "{u}");
    } else if let Some(f) = n.as_f64() {
        // Integral floats within f64's exact range are written as integers.
        const EXACT: f64 = 9_007_199_254_740_992.0; // 2^53
        if f.fract() == 0.0 && f.abs() <= EXACT {
            let _ = write!(out, "{}", f as i64);
        } else {
            let _ = write!(out, "{f:e}");
        }
    } else {
        // Arbitrary precision numbers: their own spelling.
        let _ = write!(out, "{n}");
    }
}
