//! `[jobs.callbacks]`: off by default; a secret is required with an
//! allow-list, and every allowed prefix is an http(s) URL.

use super::{each_names_its_key, file};
use crate::config::Config;

#[test]
fn callbacks_are_off_by_default_and_load_from_a_file() {
    let d = Config::default();
    assert!(d.jobs.callbacks.allow.is_empty());
    assert_eq!(
        (d.jobs.callbacks.timeout_ms, d.jobs.callbacks.max_attempts),
        (10_000, 5)
    );
    let c = file(
        "[jobs.callbacks]\nallow = [\"https://hooks.example.com/sluice/\"]\nsecret_env = \"CB_SECRET\"\nmax_attempts = 8\n",
    );
    assert_eq!(
        c.jobs.callbacks.allow,
        ["https://hooks.example.com/sluice/"]
    );
    assert_eq!(c.jobs.callbacks.secret_env.as_deref(), Some("CB_SECRET"));
    assert_eq!(c.jobs.callbacks.max_attempts, 8);
}

#[test]
fn bad_callbacks_name_their_key() {
    let cases: &[(&str, &str, &str)] = &[
        (
            "[jobs.callbacks]\nallow = [\"https://h.example/\"]",
            "jobs.callbacks.secret_env",
            "secret",
        ),
        (
            "[jobs.callbacks]\nallow = [\"ftp://h.example/\"]\nsecret_env = \"S\"",
            "jobs.callbacks.allow",
            "not an http(s) URL",
        ),
        (
            "[jobs.callbacks]\nallow = [\"/relative\"]\nsecret_env = \"S\"",
            "jobs.callbacks.allow",
            "not an http(s) URL",
        ),
        (
            "[jobs.callbacks]\nmax_attempts = 0",
            "jobs.callbacks.max_attempts",
            "",
        ),
        (
            "[jobs.callbacks]\nmax_attempts = 101",
            "jobs.callbacks.max_attempts",
            "at most 100",
        ),
        (
            "[jobs.callbacks]\ntimeout_ms = 0",
            "jobs.callbacks.timeout_ms",
            "",
        ),
        (
            "[jobs.callbacks]\nurl = \"x\"",
            "jobs.callbacks.url",
            "unknown",
        ),
    ];
    each_names_its_key(cases);
}
