//! `[[pools]]` and `[aliases]`: the issue's shape loads, with its
//! defaults, and every mistake is an error naming its key.

use super::{error, file};
use crate::config::Strategy;

const PROVIDERS: &str = r#"
[[providers]]
name = "openai-a"
base_url = "https://api.openai.com/v1"
api_key_env = "OPENAI_A_KEY"

[[providers]]
name = "openai-b"
base_url = "https://api.openai.com/v1"
api_key_env = "OPENAI_B_KEY"
"#;

const POOL: &str = r#"
[[pools]]
model = "openai/gpt-4o-mini"
strategy = "fill"
[[pools.deployments]]
provider = "openai-a"
model = "gpt-4o-mini"
requests_per_second = 25
burst = 5
tokens_per_minute = 200000
weight = 1
[[pools.deployments]]
provider = "openai-b"
requests_per_second = 25
burst = 5
"#;

#[test]
fn the_issues_shape_loads_with_its_defaults() {
    let c = file(&format!(
        "{PROVIDERS}{POOL}\n[aliases]\nfast = \"openai/gpt-4o-mini\"\n"
    ));
    let p = &c.pools[0];
    assert_eq!(p.model, "openai/gpt-4o-mini");
    assert_eq!(p.strategy, Strategy::Fill);
    assert_eq!((p.failures_to_open, p.open_ms), (3, 1_000));
    assert_eq!(p.deployments.len(), 2);
    let b = &p.deployments[1];
    assert_eq!(b.upstream_model(&p.model), "gpt-4o-mini");
    assert_eq!((b.weight, b.tokens_per_minute), (1, None));
    assert_eq!(p.deployments[0].tokens_per_minute, Some(200_000));
    assert_eq!(c.resolve_alias("fast"), "openai/gpt-4o-mini");
    assert_eq!(c.resolve_alias("openai/gpt-4o"), "openai/gpt-4o");
    // The pool takes precedence over the provider's prefix; other
    // `openai/…` models still go to `openai`.
    assert_eq!(c.pool_index("openai/gpt-4o-mini"), Some(0));
    assert_eq!(c.pool_index("openai/gpt-4o"), None);
    // A pool without a provider's prefix may be a fallback.
    let team = POOL.replace("model = \"openai/gpt-4o-mini\"", "model = \"team/mini\"");
    let c = file(&format!(
        "{PROVIDERS}{team}\n[fallbacks]\n\"openai/gpt-4o\" = [\"team/mini\"]\n"
    ));
    assert_eq!(c.fallbacks["openai/gpt-4o"], ["team/mini"]);
    // `ordered` is spelled as the issue spells it.
    let ordered = file(&format!(
        "{PROVIDERS}{}",
        POOL.replace("\"fill\"", "\"ordered\"")
    ));
    assert_eq!(ordered.pools[0].strategy, Strategy::Ordered);
}

#[test]
fn mistakes_name_the_key() {
    let with = |from: &str, to: &str| format!("{PROVIDERS}{}", POOL.replacen(from, to, 1));
    let second = |from: &str, to: &str| {
        let at = POOL.rfind(from).expect("in the second deployment");
        let mut pool = POOL.to_owned();
        pool.replace_range(at..at + from.len(), to);
        format!("{PROVIDERS}{pool}")
    };
    let cases: Vec<(String, &str, &str)> = vec![
        (
            with("provider = \"openai-a\"", "provider = \"nobody\""),
            "pools[0].deployments[0].provider",
            "no provider is named `nobody`",
        ),
        (
            second("provider = \"openai-b\"", "provider = \"openai-a\""),
            "pools[0].deployments[1]",
            "deployment `deployment:openai-a/gpt-4o-mini` is also at",
        ),
        (
            with("requests_per_second = 25", "requests_per_second = 0"),
            "pools[0].deployments[0].requests_per_second",
            "above 0",
        ),
        (
            with("burst = 5", "burst = 0"),
            "pools[0].deployments[0].burst",
            "at least 1",
        ),
        (
            with("tokens_per_minute = 200000", "tokens_per_minute = 0"),
            "pools[0].deployments[0].tokens_per_minute",
            "at least 1",
        ),
        (
            with("weight = 1", "weight = 0"),
            "pools[0].deployments[0].weight",
            "at least 1",
        ),
        (
            with("weight = 1", "weight = 5000"),
            "pools[0].deployments[0].weight",
            "at most 1000",
        ),
        (
            with("model = \"gpt-4o-mini\"", "model = \"\""),
            "pools[0].deployments[0].model",
            "must not be empty",
        ),
        (
            with("model = \"openai/gpt-4o-mini\"", "model = \"has space\""),
            "pools[0].model",
            "visible ASCII",
        ),
        (
            with("strategy = \"fill\"", "strategy = \"random\""),
            "pools[0].strategy",
            "unknown variant",
        ),
        (
            with("weight = 1", "weight = 1\nregion = \"eu\""),
            "pools[0].deployments[0].region",
            "unknown key",
        ),
        (
            format!("{PROVIDERS}{POOL}{POOL}"),
            "pools[1].model",
            "pool `openai/gpt-4o-mini` is also at `pools[0].model`",
        ),
        (
            format!("{PROVIDERS}[[pools]]\nmodel = \"x/y\"\ndeployments = []\n"),
            "pools[0].deployments",
            "at least one deployment",
        ),
        (
            with("strategy = \"fill\"", "strategy = \"fill\"\nopen_ms = 0"),
            "pools[0].open_ms",
            "at least 10",
        ),
        (
            format!("{PROVIDERS}{POOL}\n[aliases]\nfast = \"nobody/x\"\n"),
            "aliases.fast",
            "no pool or provider serves `nobody/x`",
        ),
        (
            format!("{PROVIDERS}{POOL}\n[aliases]\nfast = \"quick\"\nquick = \"openai/gpt-4o\"\n"),
            "aliases.fast",
            "is an alias itself",
        ),
        (
            format!("{PROVIDERS}{POOL}\n[aliases]\n\"openai/gpt-4o-mini\" = \"openai/gpt-4o\"\n"),
            "pools[0].model",
            "also an alias",
        ),
    ];
    for (toml, key, message) in cases {
        let shown = error(&toml, &[]).to_string();
        assert!(shown.contains(key), "{toml}\n{shown}");
        assert!(shown.contains(message), "{toml}\n{shown}");
    }
}
