//! `sluice demo` end to end: the built binary, a short run, its JSON.

mod common;

use common::run_json;
use serde_json::Value;

fn assert_run(run: &Value, tenants: usize) {
    for key in ["upstream_429s", "wasted_calls"] {
        assert!(run[key].is_u64(), "{key}: {run}");
    }
    for key in ["admitted", "capacity", "share"] {
        assert!(run["goodput"][key].is_number(), "goodput.{key}: {run}");
    }
    let fairness = run["fairness"].as_f64().unwrap();
    assert!((0.0..=1.0 + 1e-9).contains(&fairness), "{fairness}");
    for key in ["p50_ms", "p99_ms"] {
        assert!(run["latency_ms"][key].is_number(), "latency_ms.{key}");
    }
    for key in ["ok", "failed", "unfinished", "attempts"] {
        assert!(run["calls"][key].is_u64(), "calls.{key}");
    }
    assert_eq!(run["tenants"].as_array().unwrap().len(), tenants);
    assert!(!run["upstreams"].as_array().unwrap().is_empty());
}

#[test]
fn demo_compares_direct_and_through_sluice() {
    let summary = run_json(&[
        "demo",
        "--agents",
        "20",
        "--tenants",
        "2",
        "--duration",
        "3s",
        "--json",
    ]);
    assert_eq!(summary["agents"], 20);
    assert_eq!(summary["tenants"], 2);
    assert_run(&summary["direct"], 2);
    assert_run(&summary["sluice"], 2);
    assert_eq!(summary["direct"]["mode"], "direct");
    assert_eq!(summary["sluice"]["mode"], "gateway");
    // Through Sluice, the providers (almost) never have to say no. One
    // stray 429 is tolerated: on a starved machine the sim's own handling
    // of two calls sent half a second apart can bunch them up, and a
    // 3-second run is too short for the limiter to have read any headers.
    let sluice_429s = summary["sluice"]["upstream_429s"].as_u64().unwrap();
    let attempts = summary["sluice"]["calls"]["attempts"].as_u64().unwrap();
    assert!(sluice_429s <= 1 + attempts / 100, "{summary}");
    assert!(summary["sluice"]["calls"]["ok"].as_u64().unwrap() > 0);
}
