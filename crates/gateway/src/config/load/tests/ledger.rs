//! `[ledger]` and `[prices]`: defaults, what a file sets, and errors that
//! name the key.

use super::{each_names_its_key, file};
use crate::config::{Config, StoreLocation, price_table};

#[test]
fn the_ledger_is_on_by_default_beside_the_jobs() {
    let c = Config::default();
    assert!(c.ledger.enabled);
    assert_eq!(c.ledger.queue, 1_000);
    assert_eq!(
        c.ledger.location(&c.data_dir, &c.jobs),
        StoreLocation::Sqlite(c.data_dir.join("ledger.db"))
    );
    let pg = file("[jobs]\nstore = \"postgres://u@db/sluice\"\n");
    assert_eq!(
        pg.ledger.location(&pg.data_dir, &pg.jobs),
        StoreLocation::Postgres("postgres://u@db/sluice".into())
    );
}

#[test]
fn prices_override_the_shipped_table_exactly() {
    let c = file(
        r#"
[prices."openai/gpt-4o"]
input = "2.00"
output = 8
cached_input = 0.5

[prices."acme/"]
input = "0.000001"
output = "1"
"#,
    );
    let t = price_table(&c.pricing, &c.prices).unwrap();
    let p = t.price("openai/gpt-4o-2024-08-06").unwrap();
    assert_eq!(
        (p.input, p.output, p.cached_input),
        (2_000_000, 8_000_000, 500_000)
    );
    // The shipped price of a longer prefix still wins for its models.
    assert_eq!(t.price("openai/gpt-4o-mini").unwrap().input, 150_000);
    let a = t.price("acme/model").unwrap();
    assert_eq!((a.input, a.cached_input), (1, 1));
    // Written out and read back, the same prices.
    let again = crate::config::load_str(&c.to_toml(), "out.toml", Vec::new()).unwrap();
    assert_eq!(again.prices, c.prices);
}

#[test]
fn the_price_map_prices_what_the_hand_checked_table_does_not() {
    let c = Config::default();
    assert_eq!(c.pricing.catalog, "shipped");
    let t = price_table(&c.pricing, &c.prices).unwrap();
    // Not in prices.json, in the shipped map.
    assert!(t.price("openai/gpt-5").is_some());
    // prices.json over the map: its hand-checked price.
    let hand = sluice_usage::PriceTable::defaults();
    assert_eq!(
        t.price("openai/gpt-4o-mini"),
        hand.price("openai/gpt-4o-mini")
    );
    // Without a map, only the hand-checked table.
    let none = file("[pricing]\ncatalog = \"none\"\n");
    let t = price_table(&none.pricing, &none.prices).unwrap();
    assert!(t.price("openai/gpt-5").is_none());
    assert_eq!(t.len(), hand.len());

    // A file of one's own in LiteLLM's format.
    let dir = std::env::temp_dir().join(format!("sluice-pricing-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let map = dir.join("prices.json");
    std::fs::write(
        &map,
        r#"{"acme-1": {"litellm_provider": "acme", "mode": "chat",
            "input_cost_per_token": 1e-06, "output_cost_per_token": 3e-06}}"#,
    )
    .unwrap();
    let own = file(&format!(
        "[pricing]\ncatalog = {:?}\n",
        map.display().to_string()
    ));
    let t = price_table(&own.pricing, &own.prices).unwrap();
    assert_eq!(t.price("acme/acme-1").unwrap().output, 3_000_000);
    assert!(
        t.price("openai/gpt-5").is_none(),
        "the file replaces the shipped map"
    );
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn ledger_and_price_errors_name_the_key() {
    let cases: &[(&str, &str, &str)] = &[
        ("[ledger]\nqueue = 0", "ledger.queue", "at least 1"),
        ("[ledger]\nbatch = 20000", "ledger.batch", "at most 10000"),
        (
            "[ledger]\nstore = \"mysql://x\"",
            "ledger.store",
            "must be \"jobs\", \"sqlite\" or a postgres:// URL",
        ),
        ("[ledger]\nretention = 5", "ledger.retention", "unknown"),
        (
            "[pricing]\ncatalog = \"/no/such/prices.json\"",
            "pricing.catalog",
            "/no/such/prices.json",
        ),
        ("[pricing]\nurl = \"x\"", "pricing.url", "unknown"),
        (
            "[prices.\"openai/x\"]\ninput = \"0.1.2\"\noutput = \"1\"",
            "prices.\"openai/x\".input",
            "must be a decimal number",
        ),
        (
            "[prices.\"openai/x\"]\ninput = \"1\"\noutput = -1",
            "prices.\"openai/x\".output",
            "must be a decimal number",
        ),
        (
            "[prices.\"openai/x\"]\ninput = \"1\"\noutput = \"1\"\ncached_input = \"0.0000001\"",
            "prices.\"openai/x\".cached_input",
            "at most six decimals",
        ),
        (
            "[prices.\"openai/x\"]\ninput = \"1\"",
            "prices.\"openai/x\".output",
            "missing",
        ),
        (
            "[prices.\"openai/x\"]\ninput = \"1\"\noutput = \"1\"\ncache = \"1\"",
            "prices.\"openai/x\".cache",
            "unknown",
        ),
    ];
    each_names_its_key(cases);
}

#[test]
fn request_log_bodies_are_off_by_default_and_bad_values_named() {
    use crate::config::BodiesKept;
    let d = Config::default().request_log;
    assert_eq!(
        (d.bodies, d.max_body_bytes, d.retention_days),
        (BodiesKept::Off, 16_384, 7)
    );
    let c = file("[request_log]\nbodies = \"errors\"\nmax_body_bytes = 100\nretention_days = 0\n");
    assert_eq!(c.request_log.bodies, BodiesKept::Errors);
    assert_eq!(c.request_log.max_body_bytes, 100);
    each_names_its_key(&[
        (
            "[request_log]\nbodies = \"some\"\n",
            "request_log.bodies",
            "unknown variant",
        ),
        (
            "[request_log]\nmax_body_bytes = 0\n",
            "request_log.max_body_bytes",
            "at least 1",
        ),
        (
            "[request_log]\nmax_body_bytes = 2000000\n",
            "request_log.max_body_bytes",
            "at most 1048576",
        ),
        (
            "[request_log]\nheaders = true\n",
            "request_log.headers",
            "unknown",
        ),
    ]);
}
