use std::num::NonZeroUsize;

use bytes::Bytes;
use sluice_admit::{Admission, Ticket};
use tokio::time::Instant;

use super::*;
use crate::config::Config;
use crate::layers::testing::state_with;

const MODEL: &str = "openai/gpt-4o";

/// An acquire through the limiter API's stack.
async fn acquire_inner(
    state: &AppState,
    tenant: &Tenant,
    headers: &HeaderMap,
    body: &Bytes,
) -> Result<Value, ApiError> {
    let acquire = Acquire {
        state: state.clone(),
        tenant: tenant.clone(),
        headers: headers.clone(),
        body: body.clone(),
    };
    layers::call(grants::stack(), acquire).await
}

#[tokio::test]
async fn a_call_that_will_not_wait_takes_a_free_slot_or_a_429_at_once() {
    let mut config = Config::default();
    config.trace.enabled = false;
    config.queue.concurrency = NonZeroUsize::new(1).unwrap();
    let state = state_with(config);
    let headers = HeaderMap::new();
    let tenant = Tenant::from_headers(&state, &headers).expect("an open gateway");
    let body = Bytes::from(json!({ "model": MODEL }).to_string());

    // A gateway request for the model holds its lane's only slot.
    let ticket = Ticket::new("other", Instant::now() + Duration::from_secs(60)).with_lane(MODEL);
    let Ok(Admission::Run(held)) = state.admission.queue.admit(ticket).await else {
        panic!("an idle lane grants a slot");
    };
    match acquire_inner(&state, &tenant, &headers, &body).await {
        Err(ApiError::RateLimited {
            resource,
            retry_after: Some(after),
            ..
        }) => {
            assert_eq!(resource, MODEL);
            assert!(after >= Duration::from_secs(1), "{after:?}");
        }
        other => panic!("expected a 429 on {MODEL}, got {other:?}"),
    }
    let stats = state.admission.queue.stats();
    assert_eq!((stats.queued(), stats.rejected), (0, 1), "nothing waited");

    drop(held);
    let granted = acquire_inner(&state, &tenant, &headers, &body)
        .await
        .expect("the lane's slot is free");
    assert_eq!(granted["resource"], MODEL);
    assert_eq!(
        state.admission.queue.stats().in_flight,
        0,
        "the slot went back"
    );
}
