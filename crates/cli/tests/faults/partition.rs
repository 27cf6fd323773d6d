//! One replica partitioned from Redis, and so from the other replicas
//! (they only meet in Redis: shared state, heartbeats and the capacity
//! bus), for `fail_open` and `fail_closed`. Replica 1 reaches Redis
//! through a TCP link in the test process ([`Link`]) that the test cuts
//! as a partition would, and restores; replica 0 keeps its own
//! connection. A swarm runs against both the whole time; the sim counts
//! what reached the upstream, each replica's metrics what it served:
//!
//! - shared (before and after): within `burst + rate·t`;
//! - partitioned, `fail_open`: replica 0 still takes from the shared
//!   limit, alone now, and replica 1 limits alone on its share (1/N), so
//!   together within `(burst + rate·t) + (burst/N + rate/N·t)`;
//!   `fail_closed`: replica 1 sends nothing, within `burst + rate·t`.
//!
//! The time from the cut to replica 1 degraded and from the restore to it
//! shared again is printed, not asserted.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

use crate::procs::{self, TempDir};
use crate::redis::{
    BURST, RATE, REPLICAS, SLACK, Statuses, all_ready, replicas, sim_of_m, stop_swarm, swarm,
    window,
};
use crate::{client, span};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_partitioned_from_redis_fail_open() {
    partition("fail_open").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_partitioned_from_redis_fail_closed() {
    partition("fail_closed").await;
}

async fn partition(failure: &str) {
    let Ok(redis_bin) = std::env::var("SLUICE_TEST_REDIS_SERVER") else {
        eprintln!("note: SLUICE_TEST_REDIS_SERVER is not set; skipping (scripts/test sets it)");
        return;
    };
    let sim = sim_of_m().await;
    let dir = TempDir::new(&format!("partition-{failure}"));
    let redis_port = procs::free_port();
    let redis = procs::redis_server(&redis_bin, redis_port);
    let link = Link::start(redis_port).await;
    let http = client();
    // Replica 0 straight to Redis; the others through the link.
    let (replicas, urls) = replicas(&http, &dir, &sim, "partition", failure, |i| {
        if i == 0 { redis_port } else { link.port }
    })
    .await;
    let (inside, outside) = (&urls[..1], &urls[1..]);

    let stop = Arc::new(AtomicBool::new(false));
    let statuses: Statuses = Arc::default();
    let swarm = swarm(&http, &urls, &stop, &statuses);

    // 1. Shared.
    let (shared, secs) = window(&sim, span(Duration::from_secs(2))).await;
    let bound = BURST + RATE * secs;
    eprintln!(
        "figure partition {failure}: shared: {shared} admitted in {secs:.2} s (bound {bound:.1})"
    );
    assert!(shared as f64 <= bound + SLACK, "{shared} > {bound}");

    // 2. Replica 1 is cut off; replica 0 is not.
    let t_cut = Instant::now();
    link.cut();
    all_ready(&http, outside, "the partitioned replica degraded", |r| {
        r["redis"]["degraded"] == true
    })
    .await;
    let detected = t_cut.elapsed();
    let served_before = served_by(&http, &urls).await;
    let (apart, secs) = window(&sim, span(Duration::from_secs(3))).await;
    let served = served_by(&http, &urls)
        .await
        .iter()
        .zip(&served_before)
        .map(|(a, b)| a - b)
        .collect::<Vec<_>>();
    all_ready(&http, inside, "the other replica still shared", |r| {
        r["redis"]["degraded"] == false
    })
    .await;
    let n = REPLICAS as f64;
    let shared_part = BURST + RATE * secs;
    let alone = (outside.len() as f64)
        * ((BURST / n).floor().max(1.0) + (RATE / n).floor().max(1.0) * secs);
    let bound = match failure {
        "fail_open" => shared_part + alone,
        _ => shared_part,
    };
    eprintln!(
        "figure partition {failure}: replica 1 degraded {:.0} ms after the cut; \
         apart: {apart} admitted in {secs:.2} s (bound {bound:.1}; limit {shared_part:.1}), \
         served by replica 0 (shared) {}, by replica 1 (cut off) {}",
        detected.as_secs_f64() * 1e3,
        served[0],
        served[1],
    );
    assert!(apart as f64 <= bound + SLACK, "{apart} > {bound}");
    assert!(
        served[0] > 0,
        "the replica that reaches Redis keeps serving"
    );
    if failure == "fail_open" && served[1] == 0 {
        // What the cut-off replica answered meanwhile, to tell a refusal
        // from a hang when this fails.
        let log = replicas[1].log();
        let tail = &log[log.len().saturating_sub(40)..];
        eprintln!("replica 1's last lines:\n{}", tail.join("\n"));
    }
    match failure {
        "fail_open" => assert!(served[1] > 0, "fail_open keeps serving"),
        _ => assert_eq!(served[1], 0, "fail_closed sends nothing while cut off"),
    }

    // 3. The partition heals.
    let t_back = Instant::now();
    link.restore();
    all_ready(&http, &urls, "every replica shared again", |r| {
        r["redis"]["degraded"] == false
    })
    .await;
    let recovered = t_back.elapsed();
    let (back, secs) = window(&sim, span(Duration::from_secs(2))).await;
    let bound = BURST + RATE * secs;
    eprintln!(
        "figure partition {failure}: replica 1 shared again {:.0} ms after the restore; \
         back: {back} admitted in {secs:.2} s (bound {bound:.1})",
        recovered.as_secs_f64() * 1e3
    );
    assert!(back as f64 <= bound + SLACK, "{back} > {bound}");
    assert!(back > 0, "shared limits serve again");

    stop_swarm(&stop, swarm, &statuses, &format!("partition {failure}")).await;
    drop(redis);
    drop(replicas);
    sim.shutdown().await;
}

/// Calls each replica answered 200, from its `sluice_requests_total`.
async fn served_by(http: &reqwest::Client, urls: &[String]) -> Vec<u64> {
    let mut out = Vec::new();
    for u in urls {
        let text = http
            .get(format!("{u}/metrics"))
            .send()
            .await
            .unwrap_or_else(|e| panic!("GET {u}/metrics: {e}"))
            .text()
            .await
            .unwrap_or_default();
        let served = text
            .lines()
            .filter(|l| l.starts_with("sluice_requests_total{") && l.contains("status=\"200\""))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum::<f64>();
        out.push(served as u64);
    }
    out
}

/// A TCP link to Redis through the test process. Cut, it stops carrying
/// bytes both ways and its connections stay open, as when a partition
/// drops packets (not a refusal: the replica finds out by its own
/// timeout); restored, what waited goes through, as TCP's retransmissions
/// would deliver it.
struct Link {
    port: u16,
    cut: watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

impl Link {
    async fn start(to: u16) -> Link {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("a port");
        let port = listener.local_addr().expect("an address").port();
        let (cut, _) = watch::channel(false);
        let state = cut.clone();
        let task = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let state = state.clone();
                tokio::spawn(async move {
                    let Ok(server) = TcpStream::connect(("127.0.0.1", to)).await else {
                        return;
                    };
                    let (cr, cw) = client.into_split();
                    let (sr, sw) = server.into_split();
                    tokio::join!(
                        pump(cr, sw, state.subscribe()),
                        pump(sr, cw, state.subscribe())
                    );
                });
            }
        });
        Link { port, cut, task }
    }

    fn cut(&self) {
        self.cut.send_replace(true);
    }

    fn restore(&self) {
        self.cut.send_replace(false);
    }
}

impl Drop for Link {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Copies `from` to `to`, holding the bytes while the link is cut.
async fn pump(mut from: OwnedReadHalf, mut to: OwnedWriteHalf, mut cut: watch::Receiver<bool>) {
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        if cut.wait_for(|c| !*c).await.is_err() {
            return;
        }
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        // Read just as the link was cut: these bytes wait too.
        if cut.wait_for(|c| !*c).await.is_err() || to.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
}
