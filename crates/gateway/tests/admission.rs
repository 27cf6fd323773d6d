//! The admission queue as clients meet it: deadlines that pass in the
//! queue, depth limits, the busy signal, and fairness between tenants.
//!
//! Every test here runs the queue with one dispatch slot and blocks it the
//! same way: the limiter API takes the only in-flight slot of
//! `openai/held`, a request for that model takes the dispatch slot and
//! waits in the limiter, and whatever comes next waits in the queue until
//! the test gives the in-flight slot back. No sleeps decide the order.

mod common;

use std::num::NonZeroUsize;
use std::sync::{Arc, Mutex};

use common::{Harness, ModelLimits, chat, expect_error, header, model_limits, sim_config};
use reqwest::StatusCode;
use serde_json::Value;
use sluice_gateway::config::Config;
use tokio::task::JoinHandle;

const HELD: &str = "openai/held";
const INFLIGHT: &str = "inflight:openai/held";

/// The sim with `held` taking 20 ms a call: with one call in flight, a
/// completion comes at least 20 ms after the one before, so the order in
/// which clients see them is the order they were dispatched in.
fn held_sim() -> sluice_sim::SimConfig {
    let mut sim = sim_config();
    let latency = sluice_sim::Latency {
        base_ms: 20,
        ..sluice_sim::Latency::default()
    };
    sim.models
        .insert("held".into(), common::sim_model(latency, None));
    sim
}

fn one_slot(c: &mut Config) {
    c.queue.concurrency = NonZeroUsize::new(1).unwrap();
    c.models.push(ModelLimits {
        max_in_flight: Some(1),
        ..model_limits(HELD)
    });
}

/// Blocks the queue; returns the grant to release and the request that
/// holds the dispatch slot.
async fn block(h: &Arc<Harness>) -> (String, JoinHandle<StatusCode>) {
    let grant = h.hold(INFLIGHT).await;
    let holder = spawn_chat(h, HELD, ("x-sluice-workspace", "holder"), None);
    common::wait_until("a request waits in the limiter", || async {
        h.resource(INFLIGHT)
            .await
            .is_some_and(|r| r["waiting"].as_u64() >= Some(1))
    })
    .await;
    (grant, holder)
}

/// The order in which answers arrived, by label.
type Arrivals = Arc<Mutex<Vec<&'static str>>>;

/// Sends a chat for `model` with one extra header in a task of its own;
/// when the answer's headers arrive, pushes the header's value to `order`.
fn spawn_chat(
    h: &Arc<Harness>,
    model: &str,
    (name, value): (&'static str, &'static str),
    order: Option<&Arrivals>,
) -> JoinHandle<StatusCode> {
    let (h, body, order) = (Arc::clone(h), chat(model), order.cloned());
    tokio::spawn(async move {
        let res = h
            .post("/v1/chat/completions", &body)
            .header(name, value)
            .send()
            .await
            .unwrap();
        if let Some(order) = order {
            order.lock().unwrap().push(value);
        }
        let status = res.status();
        res.bytes().await.unwrap();
        status
    })
}

async fn wait_queued(h: &Harness, n: u64) {
    common::wait_until(&format!("{n} requests are queued"), || async {
        h.queued().await == n
    })
    .await;
}

fn unwrap(h: Arc<Harness>) -> Harness {
    Arc::try_unwrap(h).expect("no task holds the harness any more")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deadline_that_passes_in_the_queue_is_a_504_that_consumed_nothing() {
    let h = Arc::new(Harness::with(held_sim(), one_slot).await);
    let (grant, holder) = block(&h).await;

    let res = h
        .post("/v1/chat/completions", &chat(HELD))
        .header("x-sluice-timeout-ms", "150")
        .send()
        .await
        .unwrap();
    let e = expect_error(res, 504, "deadline_exceeded").await;
    assert!(e["message"].as_str().unwrap().contains("queue"), "{e}");
    // Nothing of it reached the limiter or the sim: only the holder waits
    // there, and the sim has seen nothing yet.
    assert_eq!(h.sim.stats().model("held").requests, 0);
    let r = h.resource(INFLIGHT).await.unwrap();
    assert_eq!(r["waiting"], 1, "{r}");
    assert_eq!(h.queued().await, 0, "it left the queue");

    h.release(&grant).await;
    assert_eq!(holder.await.unwrap(), StatusCode::OK);
    let res = h.send("/v1/chat/completions", &chat(HELD)).await;
    assert_eq!(res.status(), StatusCode::OK, "the queue moves again");
    unwrap(h).stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn depth_limits_refuse_with_queue_full_and_retry_after() {
    let h = Arc::new(
        Harness::with(held_sim(), |c| {
            one_slot(c);
            c.queue.max_depth_per_tenant = NonZeroUsize::new(1).unwrap();
            c.queue.max_depth_total = NonZeroUsize::new(2).unwrap();
        })
        .await,
    );
    let (grant, holder) = block(&h).await;

    let a = spawn_chat(&h, HELD, ("x-sluice-workspace", "a"), None);
    wait_queued(&h, 1).await;
    let res = h
        .post("/v1/chat/completions", &chat(HELD))
        .header("x-sluice-workspace", "a")
        .send()
        .await
        .unwrap();
    assert!(header(&res, "retry-after").parse::<u64>().unwrap() >= 1);
    let e = expect_error(res, 429, "queue_full").await;
    assert!(e["message"].as_str().unwrap().contains("tenant"), "{e}");

    let b = spawn_chat(&h, HELD, ("x-sluice-workspace", "b"), None);
    wait_queued(&h, 2).await;
    let res = h
        .post("/v1/chat/completions", &chat(HELD))
        .header("x-sluice-workspace", "c")
        .send()
        .await
        .unwrap();
    assert!(header(&res, "retry-after").parse::<u64>().unwrap() >= 1);
    let e = expect_error(res, 429, "queue_full").await;
    assert!(e["message"].as_str().unwrap().contains("total"), "{e}");

    h.release(&grant).await;
    for task in [holder, a, b] {
        assert_eq!(task.await.unwrap(), StatusCode::OK);
    }
    // Only the admitted three went upstream.
    let stats = h.sim.stats();
    assert_eq!(stats.model("held").requests, 3);
    unwrap(h).stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readyz_stays_ready_and_says_busy_while_the_backlog_is_over_twice_the_concurrency() {
    let h = Arc::new(Harness::with(held_sim(), one_slot).await);
    let res = h.get("/readyz").send().await.unwrap();
    assert_eq!(res.status(), StatusCode::OK);

    let (grant, holder) = block(&h).await;
    let waiting: Vec<_> = (0..3)
        .map(|_| spawn_chat(&h, HELD, ("x-sluice-workspace", "w"), None))
        .collect();
    wait_queued(&h, 3).await;
    // Busy is said, but a busy replica stays in its balancer.
    let res = h.get("/readyz").send().await.unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    let body: Value = res.json().await.unwrap();
    assert_eq!(body["ready"], true, "{body}");
    assert_eq!(body["busy"], true, "{body}");

    h.release(&grant).await;
    assert_eq!(holder.await.unwrap(), StatusCode::OK);
    for task in waiting {
        assert_eq!(task.await.unwrap(), StatusCode::OK);
    }
    let body: Value = h.get("/readyz").send().await.unwrap().json().await.unwrap();
    assert_eq!(
        body["busy"], false,
        "not busy once the backlog is served: {body}"
    );
    unwrap(h).stop().await;
}

/// Requests for another model have lanes of their own: a model blocked at
/// its limit, with requests queued behind it, does not hold them up.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_blocked_model_does_not_hold_up_another() {
    let h = Arc::new(Harness::with(held_sim(), one_slot).await);
    let (grant, holder) = block(&h).await;
    let behind = spawn_chat(&h, HELD, ("x-sluice-workspace", "w"), None);
    wait_queued(&h, 1).await;
    let res = h
        .send("/v1/chat/completions", &chat("openai/gpt-4o-mini"))
        .await;
    assert_eq!(res.status(), StatusCode::OK);
    assert_eq!(h.queued().await, 1, "the held model's request still waits");
    assert_eq!(h.sim.stats().model("held").requests, 0);
    h.release(&grant).await;
    for task in [holder, behind] {
        assert_eq!(task.await.unwrap(), StatusCode::OK);
    }
    unwrap(h).stop().await;
}

/// Tenant `a` queues twelve requests, then `b` twelve, all for one model
/// that allows one call in flight. First come first served would give `a`
/// all of the first twelve completions; equal weights must give each about
/// half.
///
/// Tolerance ±1: start-time fair queuing with unit costs and equal weights
/// alternates the two backlogged tenants exactly (a tenant's count never
/// differs from its share by a whole weight). The one-in-flight limit makes
/// the upstream calls strictly sequential, 20 ms each, and completions are
/// recorded when their headers arrive, so they keep the dispatch order
/// unless a client task is scheduled over 20 ms late; such a swap of two
/// neighbours moves a share by at most one. First come first served would
/// give `a` all twelve.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_tenants_share_a_contended_model_fairly() {
    const EACH: usize = 12;
    let h = Arc::new(Harness::with(held_sim(), one_slot).await);
    let (grant, holder) = block(&h).await;

    let done = Arrivals::default();
    let mut tasks = Vec::new();
    for (tenant, queued_after) in [("a", EACH), ("b", 2 * EACH)] {
        for _ in 0..EACH {
            let header = ("x-sluice-workspace", tenant);
            tasks.push(spawn_chat(&h, HELD, header, Some(&done)));
        }
        wait_queued(&h, queued_after as u64).await;
    }

    h.release(&grant).await;
    assert_eq!(holder.await.unwrap(), StatusCode::OK);
    for t in tasks {
        assert_eq!(t.await.unwrap(), StatusCode::OK);
    }
    let order = done.lock().unwrap().clone();
    assert_eq!(order.len(), 2 * EACH);
    let a_share = order[..EACH].iter().filter(|t| **t == "a").count();
    assert!(
        a_share.abs_diff(EACH / 2) <= 1,
        "a got {a_share} of the first {EACH}: {order:?}"
    );
    unwrap(h).stop().await;
}

/// Two normal requests queue, then one high: once the queue moves, the
/// high one is served first. (The model allows one call in flight, so
/// completions keep the dispatch order.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn high_priority_overtakes_queued_normal_requests() {
    let h = Arc::new(Harness::with(held_sim(), one_slot).await);
    let (grant, holder) = block(&h).await;
    let done = Arrivals::default();
    let mut tasks = Vec::new();
    for (i, priority) in ["normal", "normal", "high"].into_iter().enumerate() {
        let header = ("x-sluice-priority", priority);
        tasks.push(spawn_chat(&h, HELD, header, Some(&done)));
        wait_queued(&h, i as u64 + 1).await;
    }
    h.release(&grant).await;
    assert_eq!(holder.await.unwrap(), StatusCode::OK);
    for t in tasks {
        assert_eq!(t.await.unwrap(), StatusCode::OK);
    }
    let order = done.lock().unwrap().clone();
    assert_eq!(order, ["high", "normal", "normal"]);
    unwrap(h).stop().await;
}

/// The per-session limit (`x-sluice-thread`): two requests a minute here;
/// the third is refused by the gateway with a Retry-After, not sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_over_its_limit_is_refused_with_retry_after() {
    let h = Harness::with(sim_config(), |c| {
        c.sessions.requests = 2;
        c.sessions.window_seconds = 60;
    })
    .await;
    let send = |thread: &'static str| {
        h.post("/v1/chat/completions", &chat("openai/gpt-4o"))
            .header("x-sluice-thread", thread)
            .send()
    };
    for _ in 0..2 {
        assert_eq!(send("s-1").await.unwrap().status(), StatusCode::OK);
    }
    let res = send("s-1").await.unwrap();
    let wait: u64 = header(&res, "retry-after").parse().unwrap();
    assert!((1..=60).contains(&wait), "{wait}");
    let e = expect_error(res, 429, "rate_limited").await;
    assert!(e["message"].as_str().unwrap().contains("session"), "{e}");
    // Another thread has its own window.
    assert_eq!(send("s-2").await.unwrap().status(), StatusCode::OK);
    assert_eq!(h.sim.stats().model("gpt-4o").requests, 3);
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_leaves_the_queue_is_counted_traced_and_recorded_as_499() {
    let h = Arc::new(Harness::with(held_sim(), one_slot).await);
    let (grant, holder) = block(&h).await;

    // A request waits in the queue; its client goes before its turn (the
    // task's end drops the request and closes its connection).
    let leaver = spawn_chat(&h, HELD, ("x-sluice-workspace", "leaver"), None);
    wait_queued(&h, 1).await;
    leaver.abort();
    assert!(leaver.await.unwrap_err().is_cancelled());
    common::wait_until("the gateway sees the client go", || async {
        h.queued().await == 0
    })
    .await;
    common::wait_until("its request is counted as a 499", || async {
        h.metrics().await.lines().any(|l| {
            l.starts_with("sluice_requests_total{")
                && l.contains(r#"status="499""#)
                && l.contains(r#"model="openai/held""#)
                && l.ends_with(" 1")
        })
    })
    .await;

    // The queue moves on, and the sim never saw the request that left.
    h.release(&grant).await;
    assert_eq!(holder.await.unwrap(), StatusCode::OK);
    assert_eq!(
        h.sim.stats().model("held").requests,
        1,
        "the holder's alone"
    );
    let mut h = unwrap(h);
    h.shutdown().await;

    let lines = sluice_gateway::trace::workspace_files(&h.trace_dir, "leaver")
        .unwrap()
        .iter()
        .flat_map(|f| {
            let text = std::fs::read_to_string(f).unwrap();
            text.lines()
                .map(|l| serde_json::from_str::<Value>(l).unwrap())
                .collect::<Vec<_>>()
        })
        .collect::<Vec<_>>();
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert_eq!(lines[0]["status"], 499, "{}", lines[0]);
    assert_eq!(lines[0]["model"], HELD, "{}", lines[0]);
    assert!(
        lines[0]["error"].as_str().unwrap().contains("closed"),
        "{}",
        lines[0]
    );

    let store = sluice_ledger::LedgerStore::open(h.data_dir.join("ledger.db"))
        .await
        .expect("the ledger file");
    let records = store.records("leaver", 0, 100).await.unwrap();
    assert_eq!(records.len(), 1, "{records:?}");
    let r = &records[0].1;
    assert_eq!((r.status, r.model.as_str()), (499, HELD), "{r:?}");
    assert_eq!(r.prompt_tokens + r.completion_tokens, 0, "{r:?}");
    h.stop().await;
}
