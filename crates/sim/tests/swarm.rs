//! The swarm against the sim directly: the retry loop meets the sim's
//! 429s, and the score adds up with the sim's own counts.

mod common;

use std::time::Duration;

use common::*;
use sluice_sim::swarm::{Mode, RetryPolicy, Swarm, SwarmConfig, Workload, goodput};
use sluice_sim::{Limits, SimConfig};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_swarm_over_the_limit_meets_429s_and_uses_the_capacity() {
    let config = limited_model("gpt-4o-mini", Limits::per_second(20.0).burst(5));
    let sim = start(config.clone()).await;
    let think = (Duration::from_millis(10), Duration::from_millis(30));
    let mut swarm = SwarmConfig::new(
        sim.url(),
        Mode::Direct,
        Workload::single_model("openai", "gpt-4o-mini", think),
    )
    .agents(12)
    .tenants(3)
    .noisy_factor(2)
    .duration(Duration::from_millis(1_500));
    swarm.retry = RetryPolicy {
        max_retries: 1,
        ..RetryPolicy::default()
    };
    let started = tokio::time::Instant::now();
    let report = Swarm::start(swarm).unwrap().finish().await;
    let stats = sim.stats();
    let elapsed = started.elapsed();

    let names: Vec<(&str, usize)> = report
        .tenants
        .iter()
        .map(|t| (t.name.as_str(), t.agents))
        .collect();
    assert_eq!(names, [("tenant-1", 6), ("tenant-2", 3), ("tenant-3", 3)]);
    // Twelve agents calling every ~20 ms want ~600 a second of 20.
    let c = stats.model("gpt-4o-mini");
    assert!(c.rate_limited > 0, "{c:?}");
    // The agents count only calls that finished; the sim counts every
    // request.
    assert!(report.upstream_429s_seen > 0 && report.upstream_429s_seen <= c.rate_limited);
    assert!(report.wasted_calls >= report.upstream_429s_seen);
    assert!(report.attempts <= c.requests);
    assert!(report.ok > 0 && report.ok <= c.ok);
    assert!(report.failed > 0, "one retry cannot get past such a limit");
    assert!((0.0..=1.0).contains(&report.fairness));
    assert_eq!(report.latency.count, report.ok);

    let (total, each) = goodput(&stats, &config, elapsed);
    assert_eq!(each.len(), 1);
    assert_eq!(total.admitted, c.admitted);
    assert_eq!(total.rate_limited, c.rate_limited);
    // Never more than the limit allows (rate × time + burst).
    assert!(total.share() <= 1.0 + 1e-9, "{total:?}");
    sim.shutdown().await;
}

#[tokio::test]
async fn unlimited_upstreams_have_no_capacity_to_score() {
    let sim = start(SimConfig::unlimited()).await;
    let swarm = SwarmConfig::new(
        sim.url(),
        Mode::Direct,
        Workload::single_model(
            "openai",
            "gpt-4o",
            (Duration::ZERO, Duration::from_millis(5)),
        ),
    )
    .agents(2)
    .tenants(1)
    .duration(Duration::from_millis(300));
    let report = Swarm::start(swarm).unwrap().finish().await;
    assert!(report.ok > 0);
    assert_eq!((report.failed, report.wasted_calls), (0, 0));
    let (total, each) = goodput(
        &sim.stats(),
        &SimConfig::unlimited(),
        Duration::from_secs(1),
    );
    assert!(each.is_empty());
    assert_eq!(total.share(), 0.0);
    sim.shutdown().await;
}
