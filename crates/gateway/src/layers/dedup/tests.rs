use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::sync::Semaphore;
use tower::{Layer, ServiceBuilder};

use super::*;
use crate::layers::admission::AdmissionLayer;
use crate::layers::testing::{Later, Probe, body_of, buffered, model_call, state};

const MODEL: &str = "openai/gpt-4o-mini";

/// The key dedup chose for a call with `headers`.
async fn key_for(stream: bool, headers: &[(&'static str, &'static str)]) -> Option<String> {
    // The id, without the body's hash after it.
    key_with_hash(stream, headers)
        .await
        .map(|k| k.split('#').next().unwrap_or_default().to_owned())
}

async fn key_with_hash(stream: bool, headers: &[(&'static str, &'static str)]) -> Option<String> {
    let state = state();
    let seen = Arc::new(Mutex::new(None));
    let probe = {
        let seen = seen.clone();
        Probe::new(move |req: Req<Box<Call>>| {
            *seen.lock().unwrap() = Some(req.call.share.clone());
            Served::ok(buffered("{}"), req.notes)
        })
    };
    let served = call(
        DedupLayer::new().layer(probe),
        model_call(&state, MODEL, stream, headers),
    )
    .await;
    assert!(served.result.is_ok());
    seen.lock().unwrap().take().expect("the call went down")
}

#[tokio::test]
async fn only_whole_answers_with_a_client_id_are_shared() {
    assert_eq!(
        key_for(false, &[("x-request-id", "r-1")]).await.as_deref(),
        Some("r-1")
    );
    assert_eq!(
        key_for(false, &[("idempotency-key", "k-1")])
            .await
            .as_deref(),
        Some("k-1")
    );
    assert_eq!(key_for(true, &[("x-request-id", "r-1")]).await, None);
    assert_eq!(key_for(false, &[]).await, None);
}

#[tokio::test(start_paused = true)]
async fn a_request_with_the_same_id_joins_the_one_in_flight() {
    let state = state();
    let calls = Arc::new(AtomicUsize::new(0));
    let gate = Arc::new(Semaphore::new(0));
    let probe = {
        let (calls, gate) = (calls.clone(), gate.clone());
        Later::new(move |req: Req<Box<Call>>| {
            calls.fetch_add(1, Ordering::SeqCst);
            let gate = gate.clone();
            async move {
                let _open = gate.acquire().await.unwrap();
                Served::ok(buffered("the answer"), req.notes)
            }
        })
    };
    let svc = ServiceBuilder::new()
        .layer(DedupLayer::new())
        .layer(AdmissionLayer::new())
        .service(probe);
    let same = [("x-request-id", "same")];
    let first = tokio::spawn(call(svc.clone(), model_call(&state, MODEL, false, &same)));
    while calls.load(Ordering::SeqCst) == 0 {
        tokio::task::yield_now().await;
    }
    let second = tokio::spawn(call(svc.clone(), model_call(&state, MODEL, false, &same)));
    // The second waits on the first's flight (paused time: it cannot run
    // ahead of this task unless it is ready).
    for _ in 0..20 {
        tokio::task::yield_now().await;
    }
    gate.add_permits(1);
    let (first, second) = (first.await.unwrap(), second.await.unwrap());
    assert_eq!(calls.load(Ordering::SeqCst), 1, "one upstream call");
    let first = first.result.expect("answered");
    let second = second.result.expect("answered");
    assert!(matches!(first, Reply::Buffered(_)));
    assert!(matches!(second, Reply::Joined(_)));
    assert_eq!(body_of(&second), body_of(&first));
    // The flight has ended: the same id runs again.
    gate.add_permits(1);
    let again = call(svc, model_call(&state, MODEL, false, &same)).await;
    assert!(matches!(again.result, Ok(Reply::Buffered(_))));
    assert_eq!(calls.load(Ordering::SeqCst), 2);
}

#[tokio::test(start_paused = true)]
async fn the_same_id_with_another_body_is_a_409_while_the_first_runs() {
    let state = state();
    let gate = Arc::new(Semaphore::new(0));
    let probe = {
        let gate = gate.clone();
        Later::new(move |req: Req<Box<Call>>| {
            let gate = gate.clone();
            async move {
                let _open = gate.acquire().await.unwrap();
                Served::ok(buffered("the answer"), req.notes)
            }
        })
    };
    let svc = ServiceBuilder::new()
        .layer(DedupLayer::new())
        .layer(AdmissionLayer::new())
        .service(probe);
    let same = [("x-request-id", "same")];
    let first = tokio::spawn(call(svc.clone(), model_call(&state, MODEL, false, &same)));
    for _ in 0..20 {
        tokio::task::yield_now().await;
    }
    // Same id, another model: another body.
    let other = call(
        svc.clone(),
        model_call(&state, "openai/gpt-4o", false, &same),
    )
    .await;
    match other.result {
        Err(crate::error::ApiError::Conflict(m)) => assert!(m.contains("x-request-id"), "{m}"),
        Err(e) => panic!("expected a 409, got {e:?}"),
        Ok(_) => panic!("expected a 409, got an answer"),
    }
    gate.add_permits(2);
    assert!(first.await.unwrap().result.is_ok());
    // The id is free again once the first is done.
    let again = call(svc, model_call(&state, "openai/gpt-4o", false, &same)).await;
    assert!(again.result.is_ok());
    assert!(
        state.admission.dedup.lock().is_empty(),
        "nothing left in the table"
    );
}

#[tokio::test]
async fn the_share_key_carries_the_bodys_hash() {
    let k = key_with_hash(false, &[("x-request-id", "r-1")])
        .await
        .unwrap();
    assert!(k.starts_with("r-1#") && k.len() == "r-1#".len() + 16, "{k}");
}
