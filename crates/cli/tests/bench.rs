//! `sluice bench gateway` end to end: the shape of its JSON only. The
//! machine is shared, so no figure is asserted.

mod common;

use common::run_json;

#[test]
fn bench_gateway_reports_every_part() {
    let r = run_json(&[
        "bench",
        "gateway",
        "--duration",
        "1s",
        "--rate",
        "200",
        "--json",
    ]);
    assert!(r["target"].is_null());
    let latency = &r["latency"];
    assert_eq!(latency["rate_per_second"], 200.0);
    for side in ["direct", "bare_hop", "gateway"] {
        for key in ["p50_ms", "p99_ms", "p999_ms", "max_ms"] {
            assert!(latency[side][key].is_number(), "latency.{side}.{key}: {r}");
        }
        assert_eq!(latency[side]["sent"], 200, "{r}");
        assert_eq!(latency[side]["errors"], 0, "latency.{side}: {r}");
        assert!(r["throughput"][side]["requests_per_second"].is_number());
    }
    for key in ["p50_ms", "p99_ms", "p999_ms"] {
        assert!(latency["added"][key].is_number(), "added.{key}");
        assert!(latency["bare_added"][key].is_number(), "bare_added.{key}");
    }
    // The bare hop forwards every request to the sim and back, and its
    // own threads' CPU is read apart from the gateway's.
    assert_eq!(latency["bare_cpu"]["requests"], 200, "{r}");
    assert!(
        latency["bare_cpu"]["us_per_request"]
            .as_f64()
            .is_some_and(|us| us > 0.0),
        "{r}"
    );
    assert_eq!(r["throughput"]["bare_hop"]["errors"], 0, "{r}");
    assert!(r["throughput"]["bare_ratio"].is_number());
    assert_eq!(latency["streamed"]["sent"], 200, "{r}");
    // The in-process gateway's threads are read from /proc: every request
    // cost it some CPU, a streamed one too.
    for kind in ["non_streamed", "streamed"] {
        let cpu = &latency["cpu"][kind];
        assert_eq!(cpu["requests"], 200, "cpu.{kind}: {r}");
        assert!(
            cpu["us_per_request"].as_f64().is_some_and(|us| us > 0.0),
            "cpu.{kind}: {r}"
        );
    }
    let slow = &r["slow"];
    assert_eq!(slow["rate_per_second"], 20.0);
    assert_eq!(slow["upstream_ms"], 20.0);
    for side in ["direct", "bare_hop", "gateway"] {
        assert_eq!(slow[side]["sent"], 20, "slow.{side}: {r}");
        // Every answer took the upstream's 20 ms at least.
        assert!(
            slow[side]["p50_ms"].as_f64().is_some_and(|ms| ms >= 20.0),
            "slow.{side}: {r}"
        );
    }
    assert!(slow["added"]["p50_ms"].is_number());
    assert!(slow["bare_added"]["p50_ms"].is_number());
    for who in ["cpu", "bare_cpu"] {
        assert_eq!(slow[who]["requests"], 20, "slow.{who}: {r}");
    }
    assert!(r["throughput"]["ratio"].is_number());
    // Saturated (b): the gateway answered requests, streamed ones too,
    // and its CPU time is divided by those it answered while counting.
    let t = &r["throughput"];
    for kind in ["non_streamed", "streamed"] {
        let cpu = &t["cpu"][kind];
        let requests = cpu["requests"].as_u64().unwrap_or(0);
        assert!(requests > 0, "throughput.cpu.{kind}: {r}");
        assert!(
            cpu["us_per_request"].as_f64().is_some_and(|us| us > 0.0),
            "throughput.cpu.{kind}: {r}"
        );
        // With the writers' threads: over the same requests.
        let whole = &t["cpu_with_writers"][kind];
        assert_eq!(whole["requests"], cpu["requests"], "{r}");
        assert!(
            whole["us_per_request"].as_f64().is_some_and(|us| us > 0.0),
            "throughput.cpu_with_writers.{kind}: {r}"
        );
    }
    // Not the warm-up's requests: at most those (b) counted.
    let answered = t["gateway"]["answered"].as_u64().unwrap_or(0);
    assert!(
        t["cpu"]["non_streamed"]["requests"].as_u64() <= Some(answered),
        "{r}"
    );
    assert!(
        t["streamed"]["requests_per_second"]
            .as_f64()
            .is_some_and(|v| v > 0.0),
        "{r}"
    );
    let swarm = &r["swarm"];
    for key in [
        "limit_per_second",
        "agents",
        "offered_per_second",
        "upstream_429s",
        "fairness",
    ] {
        assert!(swarm[key].is_number(), "swarm.{key}: {r}");
    }
    assert!(swarm["goodput"]["share"].is_number());
    assert!(swarm["tenants"].as_array().is_some_and(|t| t.len() == 4));
    // (d): every call with a key and budgets was answered (none refused),
    // and cost the gateway some CPU.
    let keys = &r["keys"];
    for side in ["off", "on"] {
        assert_eq!(keys[side]["sent"], 200, "keys.{side}: {r}");
        assert_eq!(keys[side]["errors"], 0, "keys.{side}: {r}");
    }
    assert!(keys["added"]["p50_ms"].is_number());
    for side in ["cpu_off", "cpu_on"] {
        assert!(
            keys[side]["us_per_request"]
                .as_f64()
                .is_some_and(|us| us > 0.0),
            "keys.{side}: {r}"
        );
    }
    // And with the threads that write for it (the ledger's own thread).
    for side in 0..2 {
        assert!(
            keys["with_writers"][side]["us_per_request"]
                .as_f64()
                .is_some_and(|us| us > 0.0),
            "keys.with_writers[{side}]: {r}"
        );
    }
}
