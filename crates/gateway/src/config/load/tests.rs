use std::num::NonZeroUsize;
use std::path::PathBuf;

use sluice_admit::{PoolConfig, QueueConfig};

use super::*;
use crate::config::{ModelLimits, TenantConfig, WireFormat};

mod cache;
mod callbacks;
mod credentials;
mod ledger;
mod otel;
mod pools;

fn vars(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

fn with_env(toml: &str, env: &[(&str, &str)]) -> Result<Config, ConfigError> {
    load_str(toml, "sluice.toml", vars(env))
}

fn file(toml: &str) -> Config {
    with_env(toml, &[]).unwrap_or_else(|e| panic!("{e}"))
}

fn error(toml: &str, env: &[(&str, &str)]) -> ConfigError {
    match with_env(toml, env) {
        Ok(_) => panic!("loaded:\n{toml}\n{env:?}"),
        Err(e) => e,
    }
}

/// Each `(toml, key, message)` fails to load with an error naming `key`
/// whose text holds `message`.
fn each_names_its_key(cases: &[(&str, &str, &str)]) {
    for (toml, key, message) in cases {
        let e = error(toml, &[]);
        assert_eq!(e.key(), Some(*key), "{toml}\n{e}");
        let shown = e.to_string();
        assert!(shown.contains(message), "{toml}\n{shown}");
    }
}

fn names<T>(list: &[T], name: impl Fn(&T) -> &str) -> Vec<&str> {
    list.iter().map(name).collect()
}

const MINIMAL: &str = r#"
[[providers]]
name = "openai"
base_url = "http://127.0.0.1:9999/v1"
"#;

#[test]
fn defaults_load_with_no_file_and_an_empty_env() {
    let (c, _) = build(None, vars(&[])).unwrap();
    assert_eq!(c, Config::default());
    assert_eq!(file(""), c);

    assert_eq!(c.listen.to_string(), "127.0.0.1:8080");
    assert_eq!(c.max_body_bytes, 8 * 1024 * 1024);
    assert_eq!(
        names(&c.providers, |p| &p.name),
        [
            "openai",
            "anthropic",
            "google",
            "deepseek",
            "minimax",
            "groq",
            "mistral",
            "together",
            "fireworks",
            "openrouter",
            "ollama",
            "vllm"
        ]
    );
    assert_eq!(c.providers[1].format, WireFormat::Anthropic);
    assert_eq!(
        c.providers[2].api_key_env.as_deref(),
        Some("GEMINI_API_KEY")
    );
    let fallback = c.models.iter().find(|m| m.prefix.is_empty()).unwrap();
    assert_eq!((fallback.requests_per_second, fallback.burst), (2.0, 8));
    let google = c.models.iter().find(|m| m.prefix == "google/").unwrap();
    assert_eq!((google.requests_per_second, google.burst), (5.0, 15));
    assert!(c.models.iter().all(|m| m.tokens_per_minute.is_none()));
    assert_eq!(c.apis.len(), 9);
    let gmail = c.api("gmail").unwrap();
    assert_eq!(gmail.tool_prefixes, ["GOOGLEMAIL_", "GMAIL_"]);
    assert_eq!(gmail.base_url, "https://gmail.googleapis.com");
    let discord = c.api("discord").unwrap();
    assert_eq!((discord.requests_per_second, discord.burst), (50.0, 50));
    assert_eq!((c.sessions.requests, c.sessions.window_seconds), (10, 60));
    assert_eq!(c.queue, QueueConfig::SEED);
    assert_eq!(c.bulkheads["model"], PoolConfig::MODEL);
    assert_eq!(c.bulkheads["api"], PoolConfig::API);
    assert_eq!(c.bulkheads["default"], PoolConfig::DEFAULT);
    assert_eq!(c.retry.max_attempts, 3);
    assert_eq!(c.trace_dir(), PathBuf::from("./sluice-data/traces"));
}

#[test]
fn the_minimal_file_works_and_keeps_every_other_default() {
    let c = file(MINIMAL);
    let openai = &c.providers[0];
    assert_eq!(openai.name, "openai");
    assert_eq!(openai.base_url, "http://127.0.0.1:9999/v1");
    // The fields it omits keep the built-in's (issue 38): its key
    // variable, format and prefixes.
    let builtin = &Config::default().providers[0];
    assert_eq!(openai.api_key_env.as_deref(), Some("OPENAI_API_KEY"));
    assert_eq!(openai.api_key_env, builtin.api_key_env);
    assert_eq!(openai.format, WireFormat::Openai);
    assert!(openai.strip_prefix);
    let mut expected = Config::default();
    expected.providers[0] = openai.clone();
    assert_eq!(c, expected);
}

/// Issue 38: an entry naming a built-in provider overrides only the fields
/// it sets, for every built-in; `check-config` says which came from where.
#[test]
fn an_entry_naming_a_builtin_provider_keeps_what_it_omits() {
    for builtin in Config::default().providers {
        let text = format!(
            "[[providers]]\nname = {:?}\nbase_url = \"http://127.0.0.1:9/{}\"\n",
            builtin.name, builtin.name
        );
        let c = file(&text);
        let p = c.providers.iter().find(|p| p.name == builtin.name).unwrap();
        assert_eq!(p.base_url, format!("http://127.0.0.1:9/{}", builtin.name));
        let mut expected = builtin.clone();
        expected.base_url = p.base_url.clone();
        assert_eq!(p, &expected, "{}: only base_url changed", builtin.name);
        assert_eq!(c.providers.len(), Config::default().providers.len());
    }
}

/// A model entry naming a built-in prefix keeps what it omits; its own
/// rate is no longer a guess, a token limit alone leaves the guess.
#[test]
fn an_entry_naming_a_builtin_model_prefix_keeps_what_it_omits() {
    let d = Config::default();
    let builtin = d.models.iter().find(|m| m.prefix == "openai/").unwrap();
    assert!(builtin.guess);
    let c = file("[[models]]\nprefix = \"openai/\"\nrequests_per_second = 500\n");
    let m = c.models.iter().find(|m| m.prefix == "openai/").unwrap();
    assert_eq!(m.requests_per_second, 500.0);
    assert_eq!(m.burst, builtin.burst, "burst kept");
    assert!(!m.guess, "a rate you configure is a ceiling");
    let c = file("[[models]]\nprefix = \"openai/\"\ntokens_per_minute = 90000\n");
    let m = c.models.iter().find(|m| m.prefix == "openai/").unwrap();
    assert_eq!(m.tokens_per_minute, Some(90_000));
    assert_eq!(m.requests_per_second, builtin.requests_per_second);
    assert!(m.guess, "the built-in rate is still the guess it was");
    let c = file("[[models]]\nprefix = \"openai/\"\nburst = 1\nguess = true\n");
    assert!(
        c.models
            .iter()
            .find(|m| m.prefix == "openai/")
            .unwrap()
            .guess
    );
}

#[test]
fn explain_marks_each_values_origin() {
    let dir = std::env::temp_dir().join(format!("sluice-explain-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("sluice.toml");
    std::fs::write(
        &path,
        "[[providers]]\nname = \"anthropic\"\nbase_url = \"http://127.0.0.1:9/a\"\n\
         [retry]\nmax_attempts = 6\n[redis]\nurl = \"redis://127.0.0.1:1\"\n",
    )
    .unwrap();
    let text = crate::config::explain(Some(&path)).unwrap();
    let line = |start: &str| {
        text.lines()
            .find(|l| l.starts_with(start))
            .unwrap_or_else(|| panic!("no line {start}: {text}"))
            .to_owned()
    };
    let file = format!("# file {}", path.display());
    // 6: no default is (the callbacks' is 5).
    assert!(line("max_attempts = 6").ends_with(&file));
    assert!(line("max_backoff_ms = ").ends_with("# default"));
    assert!(line("base_url = \"http://127.0.0.1:9/a\"").ends_with(&file));
    assert!(line("format = \"anthropic\"").ends_with("# default"));
    assert!(line("url = \"redis://127.0.0.1:1\"").ends_with(&file));
    // Filled in by serde in a table the file created: a default.
    assert!(line("timeout_ms = ").ends_with("# default"));
    // What it prints still loads as the same configuration.
    let again = crate::config::load_str(&text, "out.toml", Vec::new()).unwrap();
    assert_eq!(again.retry.max_attempts, 6);
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn providers_merge_by_name() {
    let c = file(
        r#"
        [[providers]]
        name = "router"
        base_url = "https://openrouter.ai/api/v1"
        strip_prefix = false
        prefixes = ["mistralai/"]

        [[providers]]
        name = "anthropic"
        base_url = "http://127.0.0.1:1/v1"
        format = "anthropic"
        "#,
    );
    assert_eq!(
        names(&c.providers, |p| &p.name),
        [
            "openai",
            "anthropic",
            "google",
            "deepseek",
            "minimax",
            "groq",
            "mistral",
            "together",
            "fireworks",
            "openrouter",
            "ollama",
            "vllm",
            "router"
        ]
    );
    assert_eq!(c.providers[1].base_url, "http://127.0.0.1:1/v1");
    assert_eq!(c.providers[0], Config::default().providers[0]);
    assert_eq!(
        c.provider_for("mistralai/large").map(|p| p.name.as_str()),
        Some("router")
    );
    // A provider's own name matches only up to its slash.
    assert_eq!(
        c.provider_for("openai/gpt-4o").map(|p| p.name.as_str()),
        Some("openai")
    );
    assert!(c.provider_for("openaix/gpt-4o").is_none());
    assert!(c.provider_for("openai").is_none());
}

#[test]
fn apis_merge_by_name() {
    let c = file(
        r#"
        [[apis]]
        name = "slack"
        base_url = "http://127.0.0.1:2/api"
        requests_per_second = 0.5
        burst = 1

        [[apis]]
        name = "notion"
        base_url = "https://api.notion.com/v1"
        requests_per_second = 3
        burst = 3
        tool_prefixes = ["NOTION_"]
        "#,
    );
    let defaults = Config::default();
    assert_eq!(c.apis.len(), defaults.apis.len() + 1);
    let slack = c.api("slack").unwrap();
    assert_eq!((slack.requests_per_second, slack.burst), (0.5, 1));
    // Merged field by field: what the entry omits is the built-in's.
    assert_eq!(
        slack.tool_prefixes,
        Config::default().api("slack").unwrap().tool_prefixes
    );
    assert_eq!(c.api("github"), defaults.api("github"));
    assert_eq!(c.apis.last().unwrap().name, "notion");
    assert_eq!(c.api("notion").unwrap().requests_per_second, 3.0);
}

#[test]
fn models_merge_by_prefix() {
    let c = file(
        r#"
        [[models]]
        prefix = "openai/"
        requests_per_second = 10.0
        burst = 20
        tokens_per_minute = 30000

        [[models]]
        prefix = "openai/gpt-4o"
        requests_per_second = 1.0
        burst = 2
        max_in_flight = 4
        "#,
    );
    let defaults = Config::default();
    assert_eq!(c.models.len(), defaults.models.len() + 1);
    let openai = c.models.iter().find(|m| m.prefix == "openai/").unwrap();
    assert_eq!(openai.tokens_per_minute, Some(30_000));
    assert_eq!(openai.burst, 20);
    assert_eq!(
        c.models.last().unwrap(),
        &ModelLimits {
            prefix: "openai/gpt-4o".into(),
            requests_per_second: 1.0,
            burst: 2,
            tokens_per_minute: None,
            max_in_flight: Some(4),
            guess: false,
        }
    );
    assert_eq!(c.models[0], defaults.models[0]);
}

#[test]
fn tables_override_field_by_field() {
    let c = file(
        r#"
        listen = "0.0.0.0:9000"
        [retry]
        max_attempts = 5
        [bulkheads.model]
        max_concurrent = 8
        [bulkheads.jobs]
        max_concurrent = 2
        max_waiting = 0
        [queue]
        concurrency = 4
        [queue.weights.tenants]
        acme = 3
        "#,
    );
    let d = Config::default();
    assert_eq!(c.listen.to_string(), "0.0.0.0:9000");
    assert_eq!(c.retry.max_attempts, 5);
    assert_eq!(c.retry.max_backoff_ms, d.retry.max_backoff_ms);
    assert_eq!(c.bulkheads["model"], PoolConfig::new(8, 128));
    assert_eq!(c.bulkheads["api"], PoolConfig::API);
    assert_eq!(c.bulkheads["jobs"], PoolConfig::new(2, 0));
    assert_eq!(c.queue.concurrency.get(), 4);
    assert_eq!(c.queue.max_depth_total, QueueConfig::SEED.max_depth_total);
    assert_eq!(c.queue.weights.of("acme").get(), 3);
    assert_eq!(c.data_dir, d.data_dir);
}

#[test]
fn tenants_and_fallbacks_come_from_the_file_alone() {
    let c = file(
        r#"
        [[tenants]]
        name = "acme"
        api_key_env = "ACME_KEY"
        weight = 2
        [[tenants]]
        name = "globex"
        api_key = "sk-globex"
        [fallbacks]
        "openai/gpt-4o" = ["openai/gpt-4o-mini", "google/gemini-2.5-flash"]
        "#,
    );
    assert_eq!(names(&c.tenants, |t| &t.name), ["acme", "globex"]);
    assert_eq!(c.tenants[1].weight, 1);
    assert_eq!(c.tenants[1].api_key.as_deref(), Some("sk-globex"));
    assert_eq!(c.fallbacks["openai/gpt-4o"].len(), 2);
}

#[test]
fn native_gemini_and_translated_fallbacks_load() {
    let c = file(
        r#"
        [[providers]]
        name = "google"
        base_url = "https://generativelanguage.googleapis.com/v1beta"
        format = "gemini"
        [fallbacks]
        "openai/gpt-4o" = ["anthropic/claude-sonnet-4-5", "google/gemini-2.5-flash"]
        "#,
    );
    let google = c.providers.iter().find(|p| p.name == "google").unwrap();
    assert_eq!(google.format, WireFormat::Gemini);
    // An OpenAI model may fall back to models that answer chat by
    // translation.
    assert_eq!(c.fallbacks["openai/gpt-4o"].len(), 2);

    let example = file(include_str!("../../../../../examples/gemini-native.toml"));
    let google = example
        .providers
        .iter()
        .find(|p| p.name == "google")
        .unwrap();
    assert_eq!(google.format, WireFormat::Gemini);
    assert!(!google.base_url.ends_with("/openai"));
}

#[test]
fn env_overrides_nested_keys() {
    let c = with_env(
        "[retry]\nmax_attempts = 4\n",
        &[
            ("SLUICE_RETRY__MAX_ATTEMPTS", "5"),
            ("SLUICE_QUEUE__MAX_DEPTH_TOTAL", "500"),
            ("SLUICE_TRACE__ENABLED", "false"),
            ("SLUICE_TRACE__DIR", "/var/traces"),
            ("SLUICE_TRACE__ROTATE", "hour"),
            ("SLUICE_TRACE__MAX_FILES", "7"),
            ("SLUICE_LISTEN", "0.0.0.0:7000"),
            ("SLUICE_DATA_DIR", "/var/lib/sluice"),
            // Looks like a number; an unset option of type string keeps it.
            ("SLUICE_ADMIN_TOKEN", "12345"),
            ("SLUICE_ADAPTIVE__REDUCE_FACTOR", "0.25"),
            ("SLUICE_BULKHEADS__JOBS__MAX_CONCURRENT", "3"),
            ("SLUICE_BULKHEADS__JOBS__MAX_WAITING", "6"),
            ("SLUICE_QUEUE__WEIGHTS__TENANTS__ACME", "3"),
            ("SLUICE_CONFIG", "/etc/sluice.toml"),
            ("PATH", "/usr/bin"),
        ],
    )
    .unwrap();
    assert_eq!(c.retry.max_attempts, 5, "env wins over the file");
    assert_eq!(c.queue.max_depth_total, NonZeroUsize::new(500).unwrap());
    assert!(!c.trace.enabled);
    assert_eq!(c.trace_dir(), PathBuf::from("/var/traces"));
    assert_eq!(c.trace.rotate, crate::trace::Rotation::Hour);
    assert_eq!(c.trace.max_files, 7);
    assert_eq!(c.listen.to_string(), "0.0.0.0:7000");
    assert_eq!(c.data_dir, PathBuf::from("/var/lib/sluice"));
    assert_eq!(c.admin_token.as_deref(), Some("12345"));
    assert_eq!(c.adaptive.reduce_factor, 0.25);
    assert_eq!(c.bulkheads["jobs"], PoolConfig::new(3, 6));
    assert_eq!(c.queue.weights.of("acme").get(), 3);
}

#[test]
fn env_overrides_list_entries_by_name() {
    let c = with_env(
        "",
        &[
            (
                "SLUICE_PROVIDERS__OPENAI__BASE_URL",
                "http://127.0.0.1:9/v1",
            ),
            ("SLUICE_PROVIDERS__ANTHROPIC__STRIP_PREFIX", "false"),
            ("SLUICE_APIS__SLACK__REQUESTS_PER_SECOND", "1.5"),
            (
                "SLUICE_APIS__GITHUB__TOOL_PREFIXES",
                r#"["GH_", "GITHUB_"]"#,
            ),
            ("SLUICE_APIS__GITHUB__AUTH_ENV", "GITHUB_TOKEN"),
            ("SLUICE_MODELS__OPENAI__TOKENS_PER_MINUTE", "30000"),
        ],
    )
    .unwrap();
    assert_eq!(c.providers[0].base_url, "http://127.0.0.1:9/v1");
    assert!(!c.providers[1].strip_prefix);
    assert_eq!(c.api("slack").unwrap().requests_per_second, 1.5);
    let github = c.api("github").unwrap();
    assert_eq!(github.tool_prefixes, ["GH_", "GITHUB_"]);
    assert_eq!(github.auth_env.as_deref(), Some("GITHUB_TOKEN"));
    let openai = c.models.iter().find(|m| m.prefix == "openai/").unwrap();
    assert_eq!(openai.tokens_per_minute, Some(30_000));
}

#[test]
fn variables_of_the_cli_and_the_test_harness_are_not_settings() {
    let env = [
        ("SLUICE_CONFIG", "x.toml"),
        ("SLUICE_LOG", "debug"),
        ("SLUICE_TEST_POSTGRES_URL", "postgres://127.0.0.1/x"),
    ];
    assert_eq!(with_env("", &env).unwrap(), Config::default());
}

#[test]
fn seed_env_vars_are_honoured_and_sluice_vars_win() {
    let seed = [
        ("AGENT_EXECUTOR_POOL_SIZE", "5"),
        ("IO_EXECUTOR_POOL_SIZE", "6"),
        ("QUERY_EXECUTOR_POOL_SIZE", "7"),
        ("RATE_LIMIT_REQUESTS", "20"),
        ("RATE_LIMIT_WINDOW_SECONDS", "30"),
    ];
    let c = with_env("", &seed).unwrap();
    assert_eq!(c.bulkheads["model"], PoolConfig::new(5, 128));
    assert_eq!(c.bulkheads["api"], PoolConfig::new(6, 64));
    assert_eq!(c.bulkheads["default"], PoolConfig::new(7, 32));
    assert_eq!((c.sessions.requests, c.sessions.window_seconds), (20, 30));

    // Whatever the order the environment lists them in.
    for env in [
        [
            ("SLUICE_BULKHEADS__MODEL__MAX_CONCURRENT", "9"),
            ("AGENT_EXECUTOR_POOL_SIZE", "5"),
        ],
        [
            ("AGENT_EXECUTOR_POOL_SIZE", "5"),
            ("SLUICE_BULKHEADS__MODEL__MAX_CONCURRENT", "9"),
        ],
    ] {
        let c = with_env("[bulkheads.model]\nmax_concurrent = 1\n", &env).unwrap();
        assert_eq!(c.bulkheads["model"].max_concurrent.get(), 9);
    }
    let c = with_env(
        "[sessions]\nrequests = 3\n",
        &[
            ("RATE_LIMIT_REQUESTS", "4"),
            ("SLUICE_SESSIONS__REQUESTS", "8"),
        ],
    )
    .unwrap();
    assert_eq!(c.sessions.requests, 8);
}

#[test]
fn env_errors_name_the_variable() {
    let cases: &[(&str, &str, &str)] = &[
        (
            "SLUICE_RETRY__MAX_ATTEMPTS",
            "five",
            "invalid value for `retry.max_attempts` from environment variable \
             SLUICE_RETRY__MAX_ATTEMPTS: invalid digit found in string",
        ),
        (
            "SLUICE_RETYR",
            "1",
            "unknown key `retyr` from environment variable SLUICE_RETYR; did you mean `retry`?",
        ),
        (
            "SLUICE_RETRY__MAX_ATTEMPS",
            "1",
            "unknown key `retry.max_attemps` from environment variable SLUICE_RETRY__MAX_ATTEMPS",
        ),
        (
            "SLUICE_TRACE__ENABLED",
            "maybe",
            "invalid value for `trace.enabled` from environment variable SLUICE_TRACE__ENABLED",
        ),
        (
            "SLUICE_LISTEN__PORT",
            "1",
            "unknown key `listen.port` from environment variable SLUICE_LISTEN__PORT",
        ),
        (
            "SLUICE_PROVIDERS__NOPE__BASE_URL",
            "http://x",
            "unknown key `providers.nope.base_url` from environment variable",
        ),
        (
            "SLUICE_RETRY",
            "5",
            "invalid value for `retry` from environment variable SLUICE_RETRY: a table",
        ),
        (
            "AGENT_EXECUTOR_POOL_SIZE",
            "0",
            "invalid value for `bulkheads.model.max_concurrent` from environment variable \
             AGENT_EXECUTOR_POOL_SIZE: invalid value: integer `0`, expected a nonzero",
        ),
        (
            "SLUICE_BULKHEADS__JOBS__MAX_CONCURRENT",
            "2",
            "missing key `bulkheads.jobs.max_waiting` from environment variable \
             SLUICE_BULKHEADS__JOBS__MAX_CONCURRENT",
        ),
        (
            "SLUICE_RETRY__MAX_ATTEMPTS",
            "0",
            "invalid value for `retry.max_attempts` from environment variable \
             SLUICE_RETRY__MAX_ATTEMPTS: must be at least 1",
        ),
        (
            "SLUICE_PROVIDERS__OPENAI__BASE_URL",
            "ftp://x",
            "invalid value for `providers[0].base_url` from environment variable",
        ),
    ];
    for (var, value, expected) in cases {
        let e = error("", &[(var, value)]);
        let shown = e.to_string();
        assert!(shown.starts_with(expected), "{var}={value}: {shown}");
        assert_eq!(e.origin(), Some(&Source::Env((*var).to_owned())), "{shown}");
    }
    let e = error("", &[("SLUICE_RETRY__", "1")]);
    assert!(
        matches!(&e, ConfigError::EnvName { var } if var == "SLUICE_RETRY__"),
        "{e}"
    );
}

#[test]
fn unknown_keys_are_named_at_every_level() {
    let e = error("retyr = 1\n", &[]);
    assert_eq!(
        e.to_string(),
        "unknown key `retyr` in sluice.toml; did you mean `retry`?"
    );
    assert_eq!(e.key(), Some("retyr"));

    let e = error("[retry]\nmax_attemps = 5\n", &[]);
    assert_eq!(
        e.to_string(),
        "unknown key `retry.max_attemps` in sluice.toml; did you mean `max_attempts`?"
    );

    let e = error("[queue.weights]\nzzz = 1\n", &[]);
    assert_eq!(
        e.to_string(),
        "unknown key `queue.weights.zzz` in sluice.toml"
    );

    // The file's own index, not the merged list's.
    let e = error(
        "[[providers]]\nname = \"x\"\nbase_url = \"http://x\"\ncolour = 1\n",
        &[],
    );
    assert_eq!(
        e.to_string(),
        "unknown key `providers[0].colour` in sluice.toml"
    );
    assert_eq!(
        e.origin(),
        Some(&Source::File(PathBuf::from("sluice.toml")))
    );
}

#[test]
fn type_errors_name_the_key_and_the_file() {
    let toml = r#"
        [[providers]]
        name = "openai"
        base_url = "http://127.0.0.1:1/v1"
        [[providers]]
        name = "rpc"
        base_url = "http://127.0.0.1:2/v1"
        format = "grpc"
    "#;
    let e = load_str(toml, "cfg.toml", vars(&[])).unwrap_err();
    // The formats known are listed (a new one joins the end of the list).
    assert!(
        e.to_string().starts_with(
            "invalid value for `providers[1].format` in cfg.toml: \
             unknown variant `grpc`, expected one of `openai`, `anthropic`, `gemini`"
        ),
        "{e}"
    );
    for (toml, key, message) in [
        (
            "[retry]\nmax_attempts = \"x\"",
            "retry.max_attempts",
            "invalid type",
        ),
        ("[queue]\nconcurrency = 0", "queue.concurrency", "nonzero"),
        ("listen = \"nowhere\"", "listen", "invalid socket address"),
        ("retry = 5", "retry", "invalid type"),
        (
            "[retry]\nmax_attempts = -1",
            "retry.max_attempts",
            "invalid value",
        ),
        (
            "[fallbacks]\n\"openai/x\" = \"openai/y\"",
            "fallbacks.\"openai/x\"",
            "invalid type",
        ),
    ] {
        let e = error(toml, &[]);
        assert_eq!(e.key(), Some(key), "{e}");
        assert!(e.to_string().contains(message), "{e}");
        assert!(e.to_string().contains("in sluice.toml"), "{e}");
    }
}

#[test]
fn missing_keys_are_named() {
    let e = error("[[providers]]\nname = \"x\"\n", &[]);
    assert_eq!(
        e.to_string(),
        "missing key `providers[0].base_url` in sluice.toml"
    );
    let e = error("[bulkheads.jobs]\nmax_concurrent = 2\n", &[]);
    assert_eq!(
        e.to_string(),
        "missing key `bulkheads.jobs.max_waiting` in sluice.toml"
    );
}

#[test]
fn syntax_errors_give_line_and_column() {
    let e = error(
        "listen = \"127.0.0.1:1\"\n[retry]\nmax_attempts = = 3\n",
        &[],
    );
    let ConfigError::Syntax { line, column, .. } = &e else {
        panic!("{e}");
    };
    assert_eq!((*line, *column), (3, 16), "{e}");
    assert!(
        e.to_string()
            .starts_with("syntax error in sluice.toml at line 3, column 16: "),
        "{e}"
    );
}

#[test]
fn validation_errors_name_the_key() {
    let provider = |extra: &str| format!("[[providers]]\nname = \"p\"\n{extra}\n");
    let api = |extra: &str| format!("[[apis]]\nname = \"a\"\n{extra}\n");
    let url = "base_url = \"http://127.0.0.1:1\"";
    let cases: Vec<(String, &str, &str)> = vec![
        (provider("base_url = \"not a url\""), "providers[0].base_url", "is not a URL"),
        (provider("base_url = \"ftp://x\""), "providers[0].base_url", "http or https URL, not ftp"),
        (provider("base_url = \"http://x/v1?k=1\""), "providers[0].base_url", "query"),
        (provider("base_url = \"https://u:p@x\""), "providers[0].base_url", "credentials"),
        (provider("base_url = \"http://\""), "providers[0].base_url", "is not a URL"),
        (
            format!("[[providers]]\nname = \"a/b\"\n{url}"),
            "providers[0].name",
            "`/`",
        ),
        (
            format!("{}{}", provider(url), provider(url)),
            "providers[1].name",
            "provider `p` is also at `providers[0].name`",
        ),
        (
            provider(&format!("{url}\nprefixes = [\"openai/\"]")),
            "providers[0].prefixes[0]",
            "model prefix `openai/`",
        ),
        (
            "[[models]]\nprefix = \"x/\"\nrequests_per_second = 0.0\nburst = 1".into(),
            "models[0].requests_per_second",
            "above 0",
        ),
        (
            "[[models]]\nprefix = \"x/\"\nrequests_per_second = inf\nburst = 1".into(),
            "models[0].requests_per_second",
            "finite",
        ),
        (
            "[[models]]\nprefix = \"x/\"\nrequests_per_second = 1.0\nburst = 0".into(),
            "models[0].burst",
            "at least 1",
        ),
        (
            "[[models]]\nprefix = \"x/\"\nrequests_per_second = 1.0\nburst = 1\n\
             tokens_per_minute = 0"
                .into(),
            "models[0].tokens_per_minute",
            "at least 1",
        ),
        (
            api(&format!("{url}\nrequests_per_second = -1.0\nburst = 1")),
            "apis[0].requests_per_second",
            "above 0",
        ),
        (
            format!("[[apis]]\nname = \"a/b\"\n{url}\nrequests_per_second = 1.0\nburst = 1"),
            "apis[0].name",
            "URL path segment",
        ),
        (
            api(&format!(
                "{url}\nrequests_per_second = 1.0\nburst = 1\ntool_prefixes = [\"slack_\"]"
            )),
            "apis[0].tool_prefixes[0]",
            "tool prefix `SLACK_` is also at",
        ),
        (
            "[[tenants]]\nname = \"t\"".into(),
            "tenants[0]",
            "exactly one of `api_key` and `api_key_env`",
        ),
        (
            "[[tenants]]\nname = \"t\"\napi_key = \"k\"\napi_key_env = \"K\"".into(),
            "tenants[0]",
            "exactly one",
        ),
        (
            "[[tenants]]\nname = \"t\"\napi_key = \"k\"\n[[tenants]]\nname = \"t\"\napi_key = \"j\""
                .into(),
            "tenants[1].name",
            "tenant `t`",
        ),
        (
            "[[tenants]]\nname = \"t\"\napi_key = \"k1\"\n[[tenants]]\nname = \"u\"\napi_key = \"k1\""
                .into(),
            "tenants[1].api_key",
            "the same key as `tenants[0].api_key`",
        ),
        (
            "[[tenants]]\nname = \"t\"\napi_key = \"k\"\nweight = 0".into(),
            "tenants[0].weight",
            "at least 1",
        ),
        (
            "[fallbacks]\n\"openai/a\" = [\"nobody/b\"]".into(),
            "fallbacks.\"openai/a\"[0]",
            "no provider serves `nobody/b`",
        ),
        (
            "[fallbacks]\n\"anthropic/a\" = [\"openai/b\"]".into(),
            "fallbacks.\"anthropic/a\"[0]",
            "another wire format",
        ),
        (
            "[fallbacks]\n\"openai/a\" = [\"openai/b\"]\n\"openai/b\" = [\"openai/a\"]".into(),
            "fallbacks.\"openai/a\"",
            "cycle: openai/a → openai/b → openai/a",
        ),
        ("[sessions]\nrequests = 0".into(), "sessions.requests", "at least 1"),
        ("[sessions]\nwindow_seconds = 0".into(), "sessions.window_seconds", "at least 1"),
        ("[retry]\nmax_attempts = 0".into(), "retry.max_attempts", "at least 1"),
        // The file set the max; the key it set is the one named.
        ("[retry]\nmax_backoff_ms = 500".into(), "retry.max_backoff_ms", "must not exceed"),
        ("[retry]\nattempt_timeout_ms = 0".into(), "retry.attempt_timeout_ms", "at least 1"),
        (
            "[retry]\nmin_time_left_ms = 120000".into(),
            "retry.min_time_left_ms",
            "no call would ever be sent",
        ),
        (
            "default_timeout_ms = 40".into(),
            "default_timeout_ms",
            "must be less than default_timeout_ms",
        ),
        ("default_timeout_ms = 0".into(), "default_timeout_ms", "at least 1"),
        ("default_timeout_ms = 700000".into(), "default_timeout_ms", "must not exceed"),
        ("[adaptive]\nreduce_factor = 1.0".into(), "adaptive.reduce_factor", "between 0 and 1"),
        ("[adaptive]\nrecovery_factor = 1.0".into(), "adaptive.recovery_factor", "above 1"),
        ("[tokens]\nchars_per_token = 0".into(), "tokens.chars_per_token", "at least 1"),
        ("[trace]\nbuffer = 0".into(), "trace.buffer", "at least 1"),
        ("[http]\nthreads = 5000".into(), "http.threads", "at most 1024"),
        (
            "[metrics]\nrefresh_interval_ms = 0".into(),
            "metrics.refresh_interval_ms",
            "at least 1",
        ),
        ("[ui]\nhistory_seconds = 5".into(), "ui.history_seconds", "at least 10"),
        ("[ui]\nhistory_seconds = 4000".into(), "ui.history_seconds", "at most 3600"),
        ("[ui]\nmax_streams = 0".into(), "ui.max_streams", "at least 1"),
        ("[ui]\ntoken = \"\"".into(), "ui.token", "empty"),
        (
            "[ui]\ntoken = \"a\"\ntoken_env = \"B\"".into(),
            "ui.token_env",
            "not both",
        ),
        ("[trace]\nmax_file_bytes = 0".into(), "trace.max_file_bytes", "at least 1"),
        ("[trace]\nmax_files = 0".into(), "trace.max_files", "at least 1"),
        ("[trace]\nmax_open_files = 0".into(), "trace.max_open_files", "at least 1"),
        (
            "[trace]\nmax_total_bytes = 1000".into(),
            "trace.max_total_bytes",
            "must be at least max_file_bytes",
        ),
        (
            "[trace]\nmax_file_bytes = 2000\nmax_total_bytes = 1000".into(),
            "trace.max_total_bytes",
            "must be at least max_file_bytes",
        ),
        (
            "[trace]\nmax_file_bytes = 2000000000".into(),
            "trace.max_file_bytes",
            "must be at least max_file_bytes",
        ),
        ("[trace]\nrotate = \"week\"".into(), "trace.rotate", "unknown variant `week`"),
        ("[limits_api]\nlease_ttl_ms = 0".into(), "limits_api.lease_ttl_ms", "at least 1"),
        ("admin_token = \"\"".into(), "admin_token", "must not be empty"),
        ("max_body_bytes = 0".into(), "max_body_bytes", "at least 1"),
    ];
    for (toml, key, message) in &cases {
        let e = error(toml, &[]);
        assert_eq!(e.key(), Some(*key), "{toml}\n{e}");
        let shown = e.to_string();
        assert!(shown.contains(message), "{toml}\n{shown}");
        assert!(shown.contains("in sluice.toml"), "{toml}\n{shown}");
    }
}

#[test]
fn errors_never_show_a_secret() {
    let e = error(
        "[[tenants]]\nname = \"t\"\napi_key = \"sk-secret-1\"\n\
         [[tenants]]\nname = \"u\"\napi_key = \"sk-secret-1\"\n",
        &[],
    );
    assert!(!e.to_string().contains("sk-secret"), "{e}");
    for url in [
        "http://x/v1?key=sk-secret",
        "https://me:sk-secret@x/v1",
        "sk-secret",
    ] {
        let e = error(
            &format!("[[providers]]\nname = \"p\"\nbase_url = \"{url}\"\n"),
            &[],
        );
        assert_eq!(e.key(), Some("providers[0].base_url"), "{e}");
        assert!(!e.to_string().contains("sk-secret"), "{e}");
    }
}

fn rich_config() -> Config {
    file(
        r#"
        listen = "0.0.0.0:9000"
        [[providers]]
        name = "openrouter"
        base_url = "https://openrouter.ai/api/v1"
        strip_prefix = false
        prefixes = ["mistralai/"]
        [[models]]
        prefix = "openai/gpt-4o"
        requests_per_second = 0.5
        burst = 2
        tokens_per_minute = 30000
        [[tenants]]
        name = "acme"
        api_key_env = "ACME_KEY"
        weight = 3
        [fallbacks]
        "openai/gpt-4o" = ["mistralai/large"]
        [bulkheads.jobs]
        max_concurrent = 2
        max_waiting = 4
        [trace]
        dir = "/tmp/traces"
        [queue]
        starvation_guard = 3
        [[pools]]
        model = "team/fast"
        strategy = "ordered"
        [[pools.deployments]]
        provider = "openai"
        model = "gpt-4o-mini"
        requests_per_second = 2.5
        burst = 5
        [[pools.deployments]]
        provider = "groq"
        model = "llama-3.1-8b-instant"
        requests_per_second = 30
        burst = 30
        weight = 2
        [aliases]
        fast = "team/fast"
        "#,
    )
}

#[test]
fn to_toml_round_trips() {
    for config in [Config::default(), rich_config()] {
        let shown = config.to_toml();
        let back =
            load_str(&shown, "shown.toml", vars(&[])).unwrap_or_else(|e| panic!("{e}\n{shown}"));
        assert_eq!(back, config, "{shown}");
    }
}

#[test]
fn to_toml_redacts_secrets() {
    let mut config = rich_config();
    config.admin_token = Some("admin-secret".into());
    config
        .tenants
        .push(TenantConfig::new("globex", "sk-tenant-secret"));
    let shown = config.to_toml();
    assert!(!shown.contains("admin-secret"), "{shown}");
    assert!(!shown.contains("sk-tenant-secret"), "{shown}");
    assert_eq!(shown.matches(REDACTED).count(), 2, "{shown}");
    let back = load_str(&shown, "shown.toml", vars(&[])).unwrap();
    config.admin_token = Some(REDACTED.into());
    config.tenants[1].api_key = Some(REDACTED.into());
    assert_eq!(back, config);
}

const EXAMPLE: &str = include_str!(concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../sluice.example.toml"
));

#[test]
fn the_example_file_writes_out_every_default() {
    assert_eq!(
        load_str(EXAMPLE, "sluice.example.toml", vars(&[])).unwrap(),
        Config::default()
    );
    // Every key of the defaults is written out (none is left to the
    // defaults silently); tenants have none to write.
    let mut defaults = Table::try_from(Config::default()).unwrap();
    defaults.remove("tenants");
    assert_eq!(EXAMPLE.parse::<Table>().unwrap(), defaults);
}

#[test]
fn the_example_files_commented_options_load() {
    // `#key = …` and `#[table]` lines are options to switch on.
    let on: String = EXAMPLE
        .lines()
        .map(|line| match line.strip_prefix('#') {
            Some(rest)
                if rest.starts_with(|c: char| c.is_ascii_lowercase() || c == '[' || c == '"') =>
            {
                rest
            }
            _ => line,
        })
        .collect::<Vec<_>>()
        .join("\n");
    // A tenant's own credentials must be set when the file is loaded.
    let env = [("ACME_SLACK_TOKEN", "xoxb-a"), ("ACME_OPENAI_KEY", "sk-a")];
    let c = load_str(&on, "sluice.example.toml", vars(&env)).unwrap_or_else(|e| panic!("{e}"));
    let d = Config::default();
    assert_eq!(c.admin_token.as_deref(), Some("change-me"));
    assert_eq!(names(&c.tenants, |t| &t.name), ["acme", "globex"]);
    assert_eq!(c.tenants[0].apis["slack"].auth_env, "ACME_SLACK_TOKEN");
    assert_eq!(
        c.tenants[0].providers["openai"].api_key_env,
        "ACME_OPENAI_KEY"
    );
    assert!(!c.apis.last().unwrap().shared_auth);
    // The OpenRouter-style passthrough, and a pool's Azure deployment.
    assert_eq!(c.providers.len(), d.providers.len() + 2);
    assert_eq!(c.pools.len(), 1);
    assert_eq!(c.resolve_alias("fast"), "openai/gpt-4o-mini");
    assert_eq!(c.models.len(), d.models.len() + 1);
    assert_eq!(c.apis.len(), d.apis.len() + 1);
    assert_eq!(c.fallbacks.len(), 1);
    assert_eq!(c.queue.weights.of("acme").get(), 2);
    assert!(c.trace.dir.is_some());
    let otel = c.otel.as_ref().expect("[otel] switched on");
    assert_eq!(otel.headers["x-api-key"], "collector-key");
    assert_eq!(
        c.cache.for_api("github"),
        Some(std::time::Duration::from_secs(30))
    );
    assert_eq!(c.cache.idle_seconds, Some(3600));
    assert_eq!(c.cache.namespaces["docs"], ["acme", "globex"]);
}

#[test]
fn load_reads_a_file_and_names_a_missing_one() {
    let dir = std::env::temp_dir().join(format!("sluice-config-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("sluice.toml");
    std::fs::write(&path, "[retry]\nmax_attemps = 1\n").unwrap();
    let e = load(Some(&path)).unwrap_err();
    assert!(
        e.to_string().contains(&format!("in {}", path.display())),
        "{e}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
    let e = load(Some(&path)).unwrap_err();
    assert!(matches!(e, ConfigError::Read { .. }), "{e}");
    assert!(std::error::Error::source(&e).is_some());
}

#[test]
fn redis_passwords_are_never_shown() {
    let config = file("[redis]\nurl = \"redis://:pw-secret@cache:6379/0\"\n");
    let shown = config.to_toml();
    assert!(!shown.contains("pw-secret"), "{shown}");
    assert!(shown.contains("cache:6379"), "{shown}");
    let e = error("[redis]\nurl = \"http://u:pw-secret@cache:6379\"\n", &[]);
    assert_eq!(e.key(), Some("redis.url"), "{e}");
    assert!(!e.to_string().contains("pw-secret"), "{e}");
}

#[test]
fn mcp_servers_load_and_each_mistake_names_its_key() {
    let c = with_env(
        r#"
[[mcp_servers]]
name = "sim"
url = "http://127.0.0.1:9000/mcp"
headers = { Authorization = "Bearer ${SIM_TOKEN}" }
[[mcp_servers]]
name = "local"
command = ["python3", "server.py"]
api = "github"
"#,
        &[("SIM_TOKEN", "t0k3n")],
    )
    .unwrap();
    assert_eq!(names(&c.mcp_servers, |s| &s.name), ["sim", "local"]);
    // The variable a header names is read as a secret, not a setting.
    assert_eq!(c.secrets.get("SIM_TOKEN").map(|v| &**v), Some("t0k3n"));
    for (toml, key, says) in [
        (
            r#"[[mcp_servers]]
name = "x"
url = "http://a/mcp"
command = ["p"]"#,
            "mcp_servers[0]",
            "exactly one of `url` and `command`",
        ),
        (
            r#"[[mcp_servers]]
name = "a.b"
url = "http://a/mcp""#,
            "mcp_servers[0].name",
            "letters, digits",
        ),
        (
            r#"[[mcp_servers]]
name = "x"
url = "http://a/mcp"
api = "nope""#,
            "mcp_servers[0].api",
            "names no `[[apis]]` entry",
        ),
        (
            r#"[[mcp_servers]]
name = "x"
command = []"#,
            "mcp_servers[0].command",
            "must name a program",
        ),
        (
            r#"[[mcp_servers]]
name = "x"
url = "http://a/mcp"
headers = { "bad header" = "v" }"#,
            "mcp_servers[0].headers.\"bad header\"",
            "valid header name",
        ),
        (
            r#"[[mcp_servers]]
name = "x"
url = "http://a/mcp"
[[mcp_servers]]
name = "x"
url = "http://b/mcp""#,
            "mcp_servers[1].name",
            "also at",
        ),
    ] {
        let e = error(toml, &[]).to_string();
        assert!(e.contains(key) && e.contains(says), "{toml}: {e}");
    }
}
