//! Starting, configuring and stopping the sim; slow upstreams.

mod common;

use common::*;
use serde_json::json;
use sluice_sim::{Error, Latency, Limits, ModelConfig, Sim, SimConfig};

#[tokio::test]
async fn bad_config_is_refused_naming_the_key() {
    let mut config = SimConfig::default();
    config.providers.get_mut("openai").unwrap().limits = Limits::per_second(-1.0);
    let err = Sim::start(config, "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap_err();
    assert!(
        matches!(&err, Error::InvalidConfig { key, .. } if key == "providers.openai.limits.requests_per_second"),
        "{err}"
    );

    let mut config = SimConfig::default();
    config.models.insert(
        "m".into(),
        ModelConfig {
            provider: Some("nobody".into()),
            ..Default::default()
        },
    );
    let err = Sim::start(config, "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap_err();
    assert!(err.to_string().contains("models.m.provider"), "{err}");

    let mut config = SimConfig::default();
    config.apis.insert("v1".into(), Default::default());
    assert!(
        Sim::start(config, "127.0.0.1:0".parse().unwrap())
            .await
            .is_err()
    );
}

#[tokio::test]
async fn a_taken_port_is_a_bind_error() {
    let sim = start(SimConfig::default()).await;
    let err = Sim::start(SimConfig::default(), sim.addr())
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Bind { .. }), "{err}");
}

#[tokio::test]
async fn shutdown_closes_the_port() {
    let sim = start(SimConfig::default()).await;
    let addr = sim.addr();
    assert_eq!(
        status_of(&sim, "/v1/chat/completions", &chat("gpt-4o")).await,
        200
    );
    sim.shutdown().await;
    assert!(tokio::net::TcpStream::connect(addr).await.is_err());
}

#[tokio::test]
async fn slow_streams_still_arrive_whole() {
    let mut config = SimConfig::unlimited();
    let latency = Latency {
        base_ms: 5,
        ttft_ms: 20,
        per_token_ms: 2,
        jitter_ms: 0,
    };
    config.defaults.latency = latency;
    let sim = start(config).await;
    let mut req = chat("gpt-4o");
    req["stream"] = json!(true);
    let (text, failed) = read_body(post(&sim, "/v1/chat/completions", &req).await).await;
    assert!(!failed);
    assert_eq!(parse_sse(&text).len(), 1 + 24 + 1 + 1);
    let r = post(&sim, "/v1/messages", &message("c")).await;
    assert_eq!(r.status(), 200);
}
