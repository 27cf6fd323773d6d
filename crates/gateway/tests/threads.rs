//! The gateway's threads: requests are served on serving threads only,
//! never on the thread that carries the background tasks and the
//! shutdown (`Gateway::spawn`), so a busy background thread never holds
//! a request back.

mod common;

use std::net::SocketAddr;
use std::time::Duration;

use common::{TempDir, base_config, sim_config};
use reqwest::StatusCode;
use serde_json::json;
use sluice_gateway::Gateway;
use sluice_sim::Sim;
use tokio::sync::oneshot;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_is_answered_while_the_background_thread_is_held() {
    let local: SocketAddr = "127.0.0.1:0".parse().expect("an address");
    let sim = Sim::start(sim_config(), local)
        .await
        .expect("the sim starts");
    let dir = TempDir::new();
    let mut config = base_config(&sim.url(), dir.path());
    // One serving thread: were it the background thread too, the request
    // below could only be answered once that thread is let go.
    config.http.threads = 1;
    let (held, hold) = std::sync::mpsc::channel::<()>();
    let (holding, is_holding) = oneshot::channel();
    let (stop, stopped) = oneshot::channel::<()>();
    // The shutdown future runs on the background thread (`serve` awaits
    // it there once the serving threads have started): it keeps that
    // thread from running anything else until the test lets it go.
    let serving = Gateway::spawn(config, Some(local), async move {
        let _ = holding.send(());
        let _ = hold.recv();
        let _ = stopped.await;
    })
    .await
    .expect("the gateway starts");
    is_holding
        .await
        .expect("the background thread reaches the shutdown future");

    let http = reqwest::Client::new();
    let answered = tokio::time::timeout(
        Duration::from_secs(10),
        http.post(format!("http://{}/v1/chat/completions", serving.local_addr()))
            .json(&json!({"model": "openai/gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]}))
            .send(),
    )
    .await;
    // Let the background thread go before any assertion, so that a
    // failure still shuts the gateway down.
    let _ = held.send(());
    let _ = stop.send(());
    let res = answered
        .expect("answered while the background thread is held")
        .expect("the gateway answers");
    assert_eq!(res.status(), StatusCode::OK);
    tokio::time::timeout(Duration::from_secs(10), serving.stopped())
        .await
        .expect("the gateway stops within its drain timeout")
        .expect("serve ends cleanly");
    sim.shutdown().await;
}
