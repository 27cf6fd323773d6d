//! Two of issue 40's timing figures, measured rather than asserted (tests
//! hold no timed assertions): how long after a job completes a client of
//! `GET /v1/jobs/events` sees its `completed` event, and how many times a
//! schedule of `every_ms = 1000` runs in its first 4.5 s. One gateway on
//! SQLite with its workers, `http` jobs against the sim's Slack (limits
//! off).
//!
//! ```sh
//! cargo run --profile bench -p sluice-gateway --example job_latency -- 200
//! ```
//! (jobs, one every 20 ms). A latency is the client's wall clock when the
//! event's bytes arrived minus the event's `at` (the store's wall clock
//! when the job completed), in milliseconds: both clocks are this
//! machine's.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};
use sluice_gateway::Gateway;
use sluice_gateway::config::Config;
use sluice_sim::{Sim, SimConfig};

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

fn slack_job() -> Value {
    json!({
        "queue": "default",
        "kind": "http",
        "payload": {"api": "slack", "method": "POST", "path": "/api/chat.postMessage",
                    "body": {"channel": "C1", "text": "latency"}}
    })
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let jobs: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(200);
    let _ = rustls::crypto::ring::default_provider().install_default();
    let local = "127.0.0.1:0".parse().expect("an address");
    let sim = Sim::start(SimConfig::unlimited(), local)
        .await
        .expect("the sim");
    let dir = std::env::temp_dir().join(format!("sluice-job-latency-{}", std::process::id()));
    let mut config = Config::default();
    config.data_dir.clone_from(&dir);
    config.trace.enabled = false;
    // Only Slack is called: at the sim, with room for every job.
    let slack = config.apis.iter_mut().find(|a| a.name == "slack");
    let slack = slack.expect("the seed's Slack");
    slack.base_url = format!("{}/slack", sim.url());
    (slack.requests_per_second, slack.burst) = (100_000.0, 100_000);
    if let Some(q) = config.jobs.queues.get_mut("default") {
        q.rate = 10_000.0;
        q.concurrency = 50;
    }
    let gateway = Gateway::bind(config, Some(local))
        .await
        .expect("the gateway");
    let base = format!("http://{}", gateway.local_addr());
    tokio::spawn(gateway.serve(std::future::pending::<()>()));
    let http = reqwest::Client::new();

    // Event latency: one stream, jobs enqueued one every 20 ms.
    let mut stream = http
        .get(format!("{base}/v1/jobs/events?queue=default"))
        .header("x-sluice-workspace", "bench")
        .send()
        .await
        .expect("the stream opens");
    let producer = {
        let http = http.clone();
        let base = base.clone();
        tokio::spawn(async move {
            for _ in 0..jobs {
                let res = http
                    .post(format!("{base}/v1/jobs"))
                    .header("x-sluice-workspace", "bench")
                    .json(&slack_job())
                    .send()
                    .await
                    .expect("the gateway answers");
                assert_eq!(res.status(), 201);
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
    };
    let mut buf = String::new();
    let mut latencies = Vec::with_capacity(jobs);
    while latencies.len() < jobs {
        let chunk = stream
            .chunk()
            .await
            .expect("the stream reads")
            .expect("the stream goes on");
        let arrived = now_ms();
        buf.push_str(std::str::from_utf8(&chunk).expect("UTF-8"));
        while let Some(end) = buf.find("\n\n") {
            let block: String = buf.drain(..end + 2).collect();
            if !block.contains("event: completed") {
                continue;
            }
            let data = block
                .lines()
                .find_map(|l| l.strip_prefix("data: "))
                .expect("data");
            let e: Value = serde_json::from_str(data).expect("JSON");
            latencies.push(arrived - e["at"].as_i64().expect("at"));
        }
    }
    producer.await.expect("the producer");
    latencies.sort_unstable();
    let pct = |p: f64| latencies[((latencies.len() - 1) as f64 * p).round() as usize];
    let within = latencies.iter().filter(|l| **l <= 100).count();
    println!(
        "completed → seen on GET /v1/jobs/events, {} jobs: p50 {} ms, p90 {} ms, p99 {} ms, max {} ms; {within} of {} within 100 ms",
        latencies.len(),
        pct(0.50),
        pct(0.90),
        pct(0.99),
        latencies[latencies.len() - 1],
        latencies.len()
    );

    // A schedule every second: its runs in its first 4.5 s.
    let start = now_ms();
    let res = http
        .post(format!("{base}/v1/schedules"))
        .header("x-sluice-workspace", "bench")
        .json(&json!({"name": "every-second", "every_ms": 1000, "job": slack_job()}))
        .send()
        .await
        .expect("the gateway answers");
    assert_eq!(res.status(), 201, "{:?}", res.text().await);
    tokio::time::sleep(Duration::from_millis(4_500)).await;
    let get = |path: String| {
        let http = http.clone();
        let url = format!("{base}{path}");
        async move {
            let res = http.get(url).header("x-sluice-workspace", "bench").send();
            let res = res.await.expect("the gateway answers");
            res.json::<Value>().await.expect("JSON")
        }
    };
    // Few jobs: the events above and this schedule's runs, one page.
    let page = get("/v1/jobs?limit=1000".into()).await;
    let mut runs = 0;
    for j in page["jobs"].as_array().expect("jobs") {
        let full = get(format!("/v1/jobs/{}", j["id"])).await;
        let early = full["created_at"].as_i64() <= Some(start + 4_500);
        if full["schedule"] == "every-second" && early {
            runs += 1;
        }
    }
    println!("a schedule every 1 s: {runs} runs in its first 4.5 s");
    let _ = std::fs::remove_dir_all(&dir);
}
