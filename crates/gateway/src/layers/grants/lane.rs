//! The acquire's place in its resource's lane of the admission queue,
//! held until the limiter has answered: the slot goes to the next in
//! line once the grant is taken (or refused).

use std::time::Duration;

use sluice_admit::Admission;

use super::{Ask, Granted};
use crate::error::ApiError;
use crate::layers::Next;
use crate::layers::step::Step;
use crate::state::AppState;

/// See the module doc.
pub(super) enum Lane {}

impl<S: Next<Ask, Result<Granted, ApiError>>> Step<Ask, S> for Lane {
    type Response = Result<Granted, ApiError>;

    async fn serve(state: AppState, inner: S, mut ask: Ask) -> Result<Granted, ApiError> {
        let queue = &state.admission.queue;
        let ticket = ask
            .ticket
            .take()
            .expect("read gives every acquire a ticket");
        let refused = |e| refusal(e, &ask.resource);
        if !ask.waits {
            // A call that will not wait takes a free slot of the lane
            // (none is free only while others wait for the resource) or
            // is refused at once: no deadline of its own can pass before
            // it gets there. It gives the slot back before asking the
            // limiter, so that calls that will not wait never refuse one
            // another while one of them waits for the limiter's answer (a
            // round trip with `[redis]`).
            let mut permit = queue.try_admit(ticket).map_err(refused)?;
            permit.dispatched();
            drop(permit);
            return inner.call(ask).await;
        }
        let mut permit = match queue.admit(ticket).await {
            Ok(Admission::Run(p)) => p,
            Ok(Admission::Joined(_)) => {
                return Err(ApiError::Internal("joined a flight without a key".into()));
            }
            Err(e) => return Err(refused(e)),
        };
        let granted = inner.call(ask).await;
        // Through the limiter: the lane's slot goes to the next in line.
        permit.dispatched();
        drop(permit);
        granted
    }
}

/// Not admitted in time, or not at once: refused on the resource, as the
/// limiter refuses.
fn refusal(e: sluice_admit::Error, resource: &str) -> ApiError {
    let retry_after = match e {
        sluice_admit::Error::DeadlineExceeded => Duration::from_secs(1),
        sluice_admit::Error::WouldWait { retry_after } => retry_after,
        e => return e.into(),
    };
    ApiError::RateLimited {
        resource: resource.to_owned(),
        retry_after: Some(retry_after),
        policy: None,
    }
}
