use super::*;

/// Records one sample in every family, with label values unique to
/// this test (the recorder is shared by every test in the process).
fn record_everything(m: &Metrics) {
    m.request("/v1/chat/completions", "fam-model", 200, None);
    request_duration("/v1/chat/completions", 0.2);
    upstream_429("fam-resource");
    retry_after(1.5);
    tokens_acquired("fam-resource", 7);
    limiter_wait("fam-resource", 0.03);
    limiter_refusal("fam-resource", "timeout");
    available_tokens("fam-resource", 3.0);
    capacity_change("fam-resource", "upstream_429", 5.0);
    queue_depth("high", 4);
    queue_wait("high", 0.002);
    queue_rejected("queue_full");
    busy(true);
    bulkhead("fam-pool", 2, 1);
    budget_refused("tenant", "exceeded");
    budget_warned("tenant");
    usage_clamped("fam-provider", "prompt_tokens");
    redis_degraded(false);
    upstream_latency("fam-provider", 2.0);
    upstream_attempt("fam-provider", "ok");
    retry("fam-provider", "5xx");
    fallback("fam-model", "fam-fallback");
    stream_disconnect("/v1/chat/completions");
    trace_dropped("buffer_full", 1);
    trace_file_removed();
    metrics_refreshed();
    trace_disk(10, 1);
    job_enqueued("fam-queue", "http");
    job_idempotency(true);
    jobs("fam-queue", "dead", 2);
    redis_degraded(false);
    cache_lookup("miss", "fam-model");
    cache_hit(
        "fam-model",
        Some(sluice_usage::Usage {
            prompt_tokens: 3,
            completion_tokens: 4,
            total_tokens: 7,
        }),
    );
    cache_stats(&sluice_usage::cache::CacheStats::default());
    // Counted by sluice-otel's exporter, described here.
    counter!("sluice_otel_spans_exported_total").increment(1);
    counter!("sluice_otel_spans_dropped_total", "reason" => "queue_full").increment(1);
    let mut r = sluice_ledger::Record::new("r", "fam-tenant", "model", "openai", "fam-model", "/");
    (r.prompt_tokens, r.completion_tokens, r.cached_tokens) = (10, 5, 2);
    (r.reasoning_tokens, r.cost_nanos) = (1, 3_000);
    usage_spent("fam-tenant", "fam-model", &r);
    ledger_writer(1, 0, 3);
    mcp_tool_call("fam-server", "gmail", 200, 0.01);
    pool_attempt("fam-pool", "fam-deployment", "ok");
    pool_circuit("fam-pool", "fam-deployment", true);
}

#[test]
fn every_family_has_help_and_type() {
    let m = Metrics::install(false).unwrap();
    record_everything(&m);
    let text = m.render();
    for &(name, kind, _, help) in FAMILIES {
        assert!(
            text.contains(&format!("# HELP {name} {help}\n")),
            "no HELP for {name}:\n{text}"
        );
        let ty = match kind {
            Kind::Counter => "counter",
            Kind::Gauge => "gauge",
            Kind::Histogram => "histogram",
        };
        assert!(
            text.contains(&format!("# TYPE {name} {ty}\n")),
            "no TYPE for {name}:\n{text}"
        );
    }
    assert!(text.contains(r#"sluice_limiter_tokens_acquired_total{resource="fam-resource"} 7"#));
    assert!(text.contains(
        r#"sluice_usage_tokens_total{tenant="fam-tenant",model="fam-model",kind="cached"} 2"#
    ));
    assert!(text.contains(
        r#"sluice_usage_cost_nanodollars_total{tenant="fam-tenant",model="fam-model"} 3000"#
    ));
    assert!(text.contains(r#"sluice_limiter_capacity{resource="fam-resource"} 5"#));
    assert!(text.contains(r#"sluice_fallbacks_total{from="fam-model",to="fam-fallback"} 1"#));
    assert!(text.contains(r#"sluice_jobs{queue="fam-queue",state="dead"} 2"#));
    assert!(
        text.contains(r#"sluice_cache_saved_tokens_total{model="fam-model",kind="completion"} 4"#)
    );
}

#[test]
fn histograms_use_their_buckets() {
    let m = Metrics::install(false).unwrap();
    upstream_latency("bucket-provider", 0.3);
    queue_wait("low", 0.3);
    retry_after(0.3);
    let text = m.render();
    let buckets = |name: &str, label: &str| -> Vec<String> {
        let prefix = format!("{name}_bucket{{{label}");
        text.lines()
            .filter(|l| l.starts_with(&prefix))
            .filter_map(|l| {
                l.split("le=\"")
                    .nth(1)?
                    .split('"')
                    .next()
                    .map(str::to_owned)
            })
            .collect()
    };
    let expect = |b: &[f64]| -> Vec<String> {
        b.iter()
            .map(f64::to_string)
            .chain(["+Inf".to_owned()])
            .collect()
    };
    assert_eq!(
        buckets(
            "sluice_upstream_latency_seconds",
            r#"provider="bucket-provider","#
        ),
        expect(LATENCY_BUCKETS)
    );
    assert_eq!(
        buckets("sluice_queue_wait_seconds", r#"priority="low","#),
        expect(WAIT_BUCKETS)
    );
    assert_eq!(
        buckets("sluice_retry_after_seconds", ""),
        expect(RETRY_AFTER_BUCKETS)
    );
    assert!(text.contains(
        r#"sluice_upstream_latency_seconds_bucket{provider="bucket-provider",le="0.25"} 0"#
    ));
    assert!(text.contains(
        r#"sluice_upstream_latency_seconds_bucket{provider="bucket-provider",le="0.5"} 1"#
    ));
}

#[test]
fn installing_twice_shares_one_recorder() {
    let a = Metrics::install(false).unwrap();
    let b = Metrics::install(true).unwrap();
    upstream_429("twice-resource");
    assert!(
        a.render()
            .contains(r#"sluice_upstream_429_total{resource="twice-resource"} 1"#)
    );
    assert!(
        b.render()
            .contains(r#"sluice_upstream_429_total{resource="twice-resource"} 1"#)
    );
}

#[test]
fn tenant_label_only_when_enabled() {
    let off = Metrics::install(false).unwrap();
    off.request("/v1/embeddings", "tenant-model-off", 429, Some("acme-off"));
    let on = Metrics::install(true).unwrap();
    on.request("/v1/embeddings", "tenant-model-on", 200, Some("acme-on"));
    on.request("/v1/embeddings", "tenant-model-none", 200, None);
    let text = on.render();
    assert!(!text.contains("acme-off"), "{text}");
    assert!(
        text.contains(r#"{route="/v1/embeddings",model="tenant-model-off",status="429"} 1"#),
        "{text}"
    );
    assert!(text.contains(r#"tenant="acme-on""#), "{text}");
    let none = text
        .lines()
        .find(|l| l.contains("tenant-model-none"))
        .unwrap();
    assert!(!none.contains("tenant="), "{none}");
}
