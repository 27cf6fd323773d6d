//! Hostile job payloads: whatever JSON a client enqueues, for any kind,
//! validation answers (accepts, or names the field it refuses) and never
//! panics. `PROPTEST_CASES` raises the number of cases (the long run by
//! hand is in `docs/reliability.md`).

use proptest::prelude::*;
use serde_json::{Map, Value};
use sluice_jobs_http::{KINDS, validate_payload};

/// The fields the kinds read, so that hostile values land where they are
/// looked at.
const FIELDS: &[&str] = &[
    "api",
    "method",
    "path",
    "body",
    "headers",
    "guild_id",
    "channel_id",
    "role_id",
    "user_id",
    "overwrite_id",
    "parent_id",
    "name",
    "permissions",
    "allow",
    "deny",
    "color",
    "colour",
    "hoist",
    "mentionable",
    "position",
    "topic",
    "nsfw",
    "type",
    "reason",
    "authorization",
    "host",
    "connection",
];

/// Values that are valid somewhere, so that a case gets past the first check.
const NAMES: &[&str] = &[
    "slack",
    "discord",
    "github",
    "POST",
    "GET",
    "DELETE",
    "/",
    "/api/chat.postMessage",
    "../x",
    "//evil.example/x",
    "http://evil.example/",
    "123456789012345678",
    "18446744073709551616",
    "0",
    "-1",
    "",
];

fn json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>().prop_map(Value::from),
        "\\PC{0,40}".prop_map(Value::from),
        "[\\x00-\\x1f\\x7f\r\n:]{0,8}".prop_map(Value::from),
        prop::sample::select(NAMES).prop_map(Value::from),
    ];
    let key = prop_oneof![
        4 => prop::sample::select(FIELDS).prop_map(str::to_owned),
        1 => "\\PC{0,10}",
    ];
    leaf.prop_recursive(4, 64, 8, move |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::btree_map(key.clone(), inner, 0..8)
                .prop_map(|m| Value::Object(m.into_iter().collect::<Map<_, _>>())),
        ]
    })
}

fn kind() -> impl Strategy<Value = String> {
    prop_oneof![
        8 => prop::sample::select(KINDS).prop_map(str::to_owned),
        1 => "\\PC{0,20}",
    ]
}

proptest! {
    #![proptest_config(ProptestConfig {
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn any_payload_is_answered_never_a_panic(kind in kind(), payload in json()) {
        if let Err(e) = validate_payload(&kind, &payload) {
            prop_assert!(
                e.field == "kind" || e.field == "payload" || e.field.starts_with("payload."),
                "an error names the field: {} ({})",
                e.field,
                e
            );
        }
    }
}
