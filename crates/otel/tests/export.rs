//! The exporter against a real OTLP receiver (sluice-sim's), over both
//! protocols, and what it counts when it cannot send.

use std::time::Duration;

use sluice_otel::{ExportConfig, Exporter, Kind, Protocol, Source, Span};
use sluice_sim::otlp::{AttributeValue, Receiver};

fn config(endpoint: &str, protocol: Protocol) -> ExportConfig {
    // In a workspace build reqwest may carry the gateway's
    // `rustls-no-provider` feature, which needs a provider installed.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut headers = reqwest::header::HeaderMap::new();
    headers.insert("x-collector-key", "k".parse().unwrap());
    ExportConfig {
        endpoint: endpoint.parse().expect("a URL"),
        protocol,
        headers,
        source: Source::new("sluice-test"),
        sampling_ratio: 1.0,
        batch_size: 2,
        interval: Duration::from_millis(20),
        queue_size: 100,
        timeout: Duration::from_secs(5),
    }
}

fn span(name: &'static str, n: u64) -> Span {
    let mut s = Span::new([9; 16], None, name, Kind::Server, 1_000 + n, 2_000 + n);
    s.set("n", n).set("gen_ai.request.model", "gpt-4o-mini");
    s
}

async fn round_trip(protocol: Protocol) {
    let receiver = Receiver::start(true).await.expect("a receiver");
    let (exporter, task) = Exporter::spawn(config(&receiver.url(), protocol)).expect("an exporter");
    // Three spans with batches of two: one full batch, one sent by the
    // interval (or at shutdown).
    exporter.submit(vec![span("a", 1), span("b", 2)]);
    exporter.submit(vec![span("c", 3)]);
    task.shutdown().await;
    let spans = receiver.wait_for(3, Duration::from_secs(10)).await;
    let names: Vec<&str> = spans.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["a", "b", "c"]);
    assert_eq!(spans[2].trace_id, vec![9; 16]);
    assert_eq!(
        (spans[2].start_time_unix_nano, spans[2].end_time_unix_nano),
        (1_003, 2_003)
    );
    let model = spans[0]
        .attributes
        .iter()
        .find(|kv| kv.key == "gen_ai.request.model")
        .and_then(|kv| kv.value.as_ref())
        .and_then(|v| v.value.clone());
    assert_eq!(
        model,
        Some(AttributeValue::StringValue("gpt-4o-mini".into()))
    );
    let (http, grpc) = receiver.exports();
    match protocol {
        Protocol::HttpProtobuf => assert_eq!((http, grpc), (2, 0)),
        Protocol::Grpc => assert_eq!((http, grpc), (0, 2)),
    }
    let stats = exporter.stats();
    assert_eq!(
        (stats.exported, stats.queue_full, stats.export_failed),
        (3, 0, 0)
    );
}

#[tokio::test]
async fn spans_reach_a_receiver_over_http() {
    round_trip(Protocol::HttpProtobuf).await;
}

#[tokio::test]
async fn spans_reach_a_receiver_over_grpc() {
    round_trip(Protocol::Grpc).await;
}

#[tokio::test(flavor = "current_thread")]
async fn a_full_queue_drops_and_counts_rather_than_wait() {
    let receiver = Receiver::start(true).await.expect("a receiver");
    let mut cfg = config(&receiver.url(), Protocol::HttpProtobuf);
    cfg.queue_size = 2;
    let (exporter, task) = Exporter::spawn(cfg).expect("an exporter");
    // The task has not run yet (one thread, no await since the spawn):
    // the queue holds two spans, the third does not fit.
    exporter.submit(vec![span("a", 1), span("b", 2)]);
    exporter.submit(vec![span("c", 3)]);
    assert_eq!(exporter.stats().queue_full, 1);
    task.shutdown().await;
    assert_eq!(exporter.stats().exported, 2);
    assert_eq!(receiver.count(), 2);
    // After the task stopped, spans have nowhere to go: counted too.
    exporter.submit(vec![span("d", 4)]);
    assert_eq!(exporter.stats().queue_full, 2);
}

#[tokio::test]
async fn a_collector_that_is_away_costs_the_batch_not_the_caller() {
    // A port that was free a moment ago: nothing listens there.
    let free = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", free.local_addr().unwrap());
    drop(free);
    for protocol in [Protocol::HttpProtobuf, Protocol::Grpc] {
        let (exporter, task) = Exporter::spawn(config(&url, protocol)).expect("an exporter");
        exporter.submit(vec![span("a", 1)]);
        task.shutdown().await;
        let stats = exporter.stats();
        assert_eq!(
            (stats.exported, stats.export_failed),
            (0, 1),
            "{protocol:?}"
        );
    }
}

#[tokio::test]
async fn an_answer_that_is_not_a_success_is_a_failed_export() {
    // The gRPC path does not take HTTP/protobuf (415): an endpoint with
    // the wrong protocol fails visibly instead of counting spans as sent.
    let receiver = Receiver::start(true).await.expect("a receiver");
    let mut cfg = config(&receiver.url(), Protocol::HttpProtobuf);
    cfg.endpoint = format!(
        "{}/opentelemetry.proto.collector.trace.v1.TraceService/Export",
        receiver.url()
    )
    .parse()
    .unwrap();
    let (exporter, task) = Exporter::spawn(cfg).expect("an exporter");
    exporter.submit(vec![span("a", 1)]);
    task.shutdown().await;
    assert_eq!(exporter.stats().export_failed, 1);
    assert_eq!(receiver.count(), 0);
}

#[test]
fn sampling_follows_the_parent_else_the_ratio() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let mut cfg = config("http://127.0.0.1:9", Protocol::HttpProtobuf);
        cfg.sampling_ratio = 0.25;
        let (exporter, _task) = Exporter::spawn(cfg).expect("an exporter");
        assert!(exporter.sampled(&[0xff; 16], Some(true)));
        assert!(!exporter.sampled(&[0; 16], Some(false)));
        let mut low = [0u8; 16];
        low[8] = 0x3f; // 0x3f.. / 2^64 < 0.25
        assert!(exporter.sampled(&low, None));
        low[8] = 0x41;
        assert!(!exporter.sampled(&low, None));
        let sampled = (0..4_000u32)
            .filter(|_| exporter.sampled(&fastrand::u128(..).to_be_bytes(), None))
            .count();
        // 1,000 expected; six standard deviations (27 each) either side.
        assert!((838..=1_162).contains(&sampled), "{sampled}");
    });
}
