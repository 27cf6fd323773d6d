//! `[otel]`: off without the section, its defaults, the environment, and
//! errors that name the key (never a header's value).

use super::{error, file, with_env};
use crate::config::{Config, OtlpProtocol};

#[test]
fn off_unless_configured_and_defaults_when_it_is() {
    assert_eq!(Config::default().otel, None);
    let c = file("[otel]\nendpoint = \"http://127.0.0.1:4318\"\n");
    let o = c.otel.expect("on");
    assert_eq!(o.protocol, OtlpProtocol::HttpProtobuf);
    assert_eq!(o.service_name, "sluice");
    assert_eq!(
        (
            o.sampling_ratio,
            o.batch_size,
            o.batch_interval_ms,
            o.queue_size,
            o.timeout_ms
        ),
        (1.0, 512, 1_000, 2_048, 10_000)
    );
    let export = o.export_config().expect("a usable config");
    assert_eq!(export.endpoint.as_str(), "http://127.0.0.1:4318/");
}

#[test]
fn a_file_and_the_environment_set_every_key() {
    let c = with_env(
        r#"
        [otel]
        endpoint = "https://collector.example:4317"
        protocol = "grpc"
        service_name = "gw-eu"
        sampling_ratio = 0.1
        batch_size = 100
        batch_interval_ms = 250
        queue_size = 1000
        timeout_ms = 3000
        [otel.headers]
        x-api-key = "k-1"
        "#,
        &[("SLUICE_OTEL__SAMPLING_RATIO", "0.5")],
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let o = c.otel.expect("on");
    assert_eq!(o.protocol, OtlpProtocol::Grpc);
    assert_eq!(o.sampling_ratio, 0.5, "the environment wins");
    let export = o.export_config().unwrap();
    assert_eq!(export.headers["x-api-key"], "k-1");
    assert_eq!(export.batch_size, 100);
    assert_eq!(export.interval, std::time::Duration::from_millis(250));
}

#[test]
fn bad_values_name_the_key() {
    let base = "[otel]\nendpoint = \"http://127.0.0.1:4318\"\n";
    let cases = [
        (
            "[otel]\nendpoint = \"collector:4318\"".to_owned(),
            "otel.endpoint",
            "http",
        ),
        ("[otel]\nprotocol = \"grpc\"".to_owned(), "otel", "endpoint"),
        (
            format!("{base}protocol = \"http/json\""),
            "otel.protocol",
            "http/json",
        ),
        (
            format!("{base}sampling_ratio = 1.5"),
            "otel.sampling_ratio",
            "between 0 and 1",
        ),
        (
            format!("{base}sampling_ratio = -0.1"),
            "otel.sampling_ratio",
            "between 0 and 1",
        ),
        (
            format!("{base}batch_size = 0"),
            "otel.batch_size",
            "at least 1",
        ),
        (
            format!("{base}batch_interval_ms = 0"),
            "otel.batch_interval_ms",
            "at least 1",
        ),
        (
            format!("{base}timeout_ms = 0"),
            "otel.timeout_ms",
            "at least 1",
        ),
        (
            format!("{base}queue_size = 10"),
            "otel.queue_size",
            "must be at least batch_size",
        ),
        (
            format!("{base}service_name = \"\""),
            "otel.service_name",
            "must not be empty",
        ),
        (format!("{base}batches = 3"), "otel.batches", "unknown key"),
        (
            format!("{base}[otel.headers]\n\"bad header\" = \"v\""),
            "otel.headers.\"bad header\"",
            "not a valid header name",
        ),
        (
            format!("{base}[otel.headers]\nx-key = \"sk-secret\\n\""),
            "otel.headers.x-key",
            "not a valid header value",
        ),
    ];
    for (toml, key, message) in &cases {
        let e = error(toml, &[]);
        let shown = e.to_string();
        assert!(shown.contains(key), "{toml}\n{shown}");
        assert!(shown.contains(message), "{toml}\n{shown}");
        assert!(!shown.contains("sk-secret"), "{shown}");
    }
}

/// `[audit] retention_days` (beside the OpenTelemetry settings: the
/// other half of what an operator looks back on).
#[test]
fn the_audit_trail_is_kept_a_year_unless_told() {
    assert_eq!(Config::default().audit.retention_days, 365);
    let c = file("[audit]\nretention_days = 30\n");
    assert_eq!(c.audit.retention_days, 30);
    assert_eq!(
        file("[audit]\nretention_days = 0\n").audit.retention_days,
        0
    );
}
