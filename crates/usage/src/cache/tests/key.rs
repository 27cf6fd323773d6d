//! Canonical keys and the cacheability rule.

use proptest::prelude::*;
use serde_json::{Map, Value, json};

use crate::Endpoint;
use crate::cache::{Bypass, CacheKey, Policy, Scope, VOLATILE_FIELDS, is_deterministic};

fn tenant(name: &str) -> Scope {
    Scope::Tenant(name.to_owned())
}

fn key(body: &Value) -> CacheKey {
    CacheKey::for_request(&tenant("a"), "openai", Endpoint::Chat, body)
}

fn parsed(text: &str) -> Value {
    serde_json::from_str(text).expect("test JSON")
}

fn base() -> Value {
    json!({
        "model": "gpt-4o-mini",
        "temperature": 0,
        "messages": [
            {"role": "system", "content": "You are terse."},
            {"role": "user", "content": "Capital of France?"}
        ],
        "tools": [{"type": "function", "function": {"name": "lookup",
            "parameters": {"type": "object", "properties": {"q": {"type": "string"}}}}}],
        "response_format": {"type": "json_object"},
        "max_tokens": 50
    })
}

#[test]
fn reordered_keys_whitespace_and_number_spelling_hit() {
    let a = parsed(
        r#"{"model":"m","temperature":0,"messages":[{"role":"user","content":"hi"}],
            "tools":[{"type":"function","function":{"name":"f","parameters":{"a":1,"b":2}}}]}"#,
    );
    let b = parsed(
        r#"{ "tools" : [ { "function" : { "parameters" : { "b" : 2.0 , "a" : 1 } , "name" : "f" } ,
              "type" : "function" } ] ,
             "messages" : [ { "content" : "hi" , "role" : "user" } ] ,
             "temperature" : 0.0 , "model" : "m" }"#,
    );
    assert_eq!(key(&a), key(&b));
}

#[test]
fn volatile_fields_are_left_out() {
    let mut with = base();
    let fields = with.as_object_mut().expect("object");
    fields.insert("user".into(), json!("alice"));
    fields.insert("stream".into(), json!(true));
    fields.insert("stream_options".into(), json!({"include_usage": true}));
    fields.insert("metadata".into(), json!({"run": "7"}));
    fields.insert("store".into(), json!(false));
    assert_eq!(key(&base()), key(&with));
    assert!(VOLATILE_FIELDS.contains(&"user"));
}

#[test]
fn a_changed_parameter_misses() {
    let original = key(&base());
    let changes: &[(&str, Value)] = &[
        ("model", json!("gpt-4o")),
        ("temperature", json!(0.2)),
        ("max_tokens", json!(51)),
        ("response_format", json!({"type": "text"})),
        ("tools", json!([])),
        ("seed", json!(7)),
        ("top_p", json!(0.5)),
        (
            "messages",
            json!([{"role": "user", "content": "Capital of France?"}]),
        ),
    ];
    for (field, value) in changes {
        let mut changed = base();
        changed[*field] = value.clone();
        assert_ne!(key(&changed), original, "changing {field} must miss");
    }
    // The order of messages is meaning, not formatting.
    let mut swapped = base();
    let messages = swapped["messages"].as_array_mut().expect("array");
    messages.swap(0, 1);
    assert_ne!(key(&swapped), original);
    // A volatile name nested below the top level is content, not noise.
    let mut nested = base();
    nested["messages"][1]["user"] = json!("x");
    assert_ne!(key(&nested), original);
}

#[test]
fn provider_endpoint_and_scope_are_part_of_the_key() {
    let body = base();
    let at = |scope: &Scope, provider: &str, endpoint| {
        CacheKey::for_request(scope, provider, endpoint, &body)
    };
    let a = at(&tenant("a"), "openai", Endpoint::Chat);
    assert_ne!(a, at(&tenant("b"), "openai", Endpoint::Chat));
    assert_ne!(a, at(&tenant("a"), "openrouter", Endpoint::Chat));
    assert_ne!(a, at(&tenant("a"), "openai", Endpoint::Responses));
    // A tenant and a shared namespace of the same name never meet.
    assert_ne!(a, at(&Scope::Shared("a".into()), "openai", Endpoint::Chat));
    // Names cannot run into each other: ("ab", "c") is not ("a", "bc").
    assert_ne!(
        at(&tenant("ab"), "c", Endpoint::Chat),
        at(&tenant("a"), "bc", Endpoint::Chat)
    );
}

#[test]
fn key_shows_as_hex_and_matches_prefixes() {
    let k = key(&base());
    let hex = k.to_hex();
    assert_eq!(hex.len(), 64);
    assert!(
        hex.bytes()
            .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
    );
    assert!(k.has_hex_prefix(&hex[..6]));
    assert!(k.has_hex_prefix(&hex[..6].to_uppercase()));
    assert!(k.has_hex_prefix(""));
    assert!(!k.has_hex_prefix(&format!("{hex}0")));
    let other = if hex.starts_with('0') { "1" } else { "0" };
    assert!(!k.has_hex_prefix(other));
}

#[test]
fn cacheability_by_default_needs_zero_temperature_or_a_seed() {
    let chat = |body: Value| Policy::Deterministic.check(Endpoint::Chat, &body);
    assert_eq!(chat(json!({"temperature": 0})), Ok(()));
    assert_eq!(chat(json!({"temperature": 0.0})), Ok(()));
    assert_eq!(chat(json!({"temperature": 0.7, "seed": 3})), Ok(()));
    assert_eq!(chat(json!({"temperature": 0.7})), Err(Bypass::Sampling));
    assert_eq!(chat(json!({"seed": null})), Err(Bypass::Sampling));
    assert_eq!(
        chat(json!({})),
        Err(Bypass::Sampling),
        "the default temperature samples"
    );
    assert_eq!(chat(json!({"temperature": "0"})), Err(Bypass::Sampling));
    for endpoint in [Endpoint::Responses, Endpoint::Messages] {
        assert!(is_deterministic(endpoint, &json!({"temperature": 0})));
        assert!(!is_deterministic(endpoint, &json!({"temperature": 1})));
    }
    assert!(is_deterministic(
        Endpoint::Embeddings,
        &json!({"input": "x"})
    ));
    assert_eq!(
        Policy::Off.check(Endpoint::Embeddings, &json!({})),
        Err(Bypass::Off)
    );
    assert_eq!(
        Policy::Always.check(Endpoint::Chat, &json!({"temperature": 1.5})),
        Ok(())
    );
    assert_eq!(Bypass::Sampling.as_str(), "sampling");
}

#[test]
fn policy_reads_from_config_words() {
    let p: Policy = serde_json::from_value(json!("deterministic")).expect("known word");
    assert_eq!(p, Policy::Deterministic);
    assert!(serde_json::from_value::<Policy>(json!("sometimes")).is_err());
}

/// Rebuilds a value with every object's keys in the order `rotate` picks,
/// through text, so the parsed map sees another order.
fn reordered_text(value: &Value, rotate: usize) -> String {
    match value {
        Value::Object(map) => {
            let mut entries: Vec<_> = map.iter().collect();
            let n = entries.len().max(1);
            entries.rotate_left(rotate % n);
            let inner: Vec<String> = entries
                .into_iter()
                .map(|(k, v)| format!("{} : {}", json!(k), reordered_text(v, rotate + 1)))
                .collect();
            format!("{{ {} }}", inner.join(" , "))
        }
        Value::Array(items) => {
            let inner: Vec<String> = items
                .iter()
                .map(|v| reordered_text(v, rotate + 1))
                .collect();
            format!("[{}]", inner.join(","))
        }
        other => other.to_string(),
    }
}

fn arb_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i32>().prop_map(|i| json!(i)),
        "[a-z]{0,6}".prop_map(Value::String),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map("[a-z]{1,3}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect::<Map<_, _>>())),
        ]
    })
}

proptest! {
    #[test]
    fn any_key_order_gives_the_same_key(body in arb_json(), rotate in 0usize..5) {
        let again = parsed(&reordered_text(&body, rotate));
        prop_assert_eq!(key(&body), key(&again));
    }
}

#[test]
fn api_keys_differ_by_scope_url_and_every_varying_header() {
    let url = "https://api.github.com/repos/o/r/issues?page=2";
    let base = CacheKey::for_api_get(
        &tenant("a"),
        "github",
        url,
        &[
            ("accept", b"application/json"),
            ("authorization", b"Bearer t1"),
        ],
    );
    let same = CacheKey::for_api_get(
        &tenant("a"),
        "github",
        url,
        &[
            ("accept", b"application/json"),
            ("authorization", b"Bearer t1"),
        ],
    );
    assert_eq!(base, same);
    let others = [
        CacheKey::for_api_get(
            &tenant("b"),
            "github",
            url,
            &[
                ("accept", b"application/json"),
                ("authorization", b"Bearer t1"),
            ],
        ),
        CacheKey::for_api_get(
            &Scope::Shared("a".into()),
            "github",
            url,
            &[
                ("accept", b"application/json"),
                ("authorization", b"Bearer t1"),
            ],
        ),
        CacheKey::for_api_get(
            &tenant("a"),
            "gitlab",
            url,
            &[
                ("accept", b"application/json"),
                ("authorization", b"Bearer t1"),
            ],
        ),
        CacheKey::for_api_get(
            &tenant("a"),
            "github",
            "https://api.github.com/repos/o/r/issues?page=3",
            &[
                ("accept", b"application/json"),
                ("authorization", b"Bearer t1"),
            ],
        ),
        CacheKey::for_api_get(
            &tenant("a"),
            "github",
            url,
            &[("accept", b"text/html"), ("authorization", b"Bearer t1")],
        ),
        CacheKey::for_api_get(
            &tenant("a"),
            "github",
            url,
            &[
                ("accept", b"application/json"),
                ("authorization", b"Bearer t2"),
            ],
        ),
        CacheKey::for_api_get(
            &tenant("a"),
            "github",
            url,
            &[("accept", b"application/json")],
        ),
        // A header's value cannot slide into the next header's name.
        CacheKey::for_api_get(
            &tenant("a"),
            "github",
            url,
            &[
                ("accept", b"application/jsonauthorization"),
                ("", b"Bearer t1"),
            ],
        ),
    ];
    for (i, other) in others.iter().enumerate() {
        assert_ne!(base, *other, "variant {i} must miss");
    }
    // Never the key of a model request with the same parts.
    assert_ne!(
        base,
        CacheKey::for_request(&tenant("a"), "github", Endpoint::Chat, &json!({}))
    );
}
