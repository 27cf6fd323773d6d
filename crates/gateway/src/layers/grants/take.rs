//! The bottom of the acquire stack: the limiter's grant of the resource
//! and the caller's own limits, at once (what is free now) or by the
//! acquire's deadline; a refusal names the resource's policy.

use super::{Ask, Granted};
use crate::error::ApiError;
use crate::layers::Next;

/// See the module doc.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Take;

impl Next<Ask, Result<Granted, ApiError>> for Take {
    async fn call(self, ask: Ask) -> Result<Granted, ApiError> {
        let limits = &ask.state.limits.shared;
        let mut needs: Vec<(&str, u64)> = vec![(ask.resource.as_str(), ask.cost)];
        needs.extend(ask.caller.iter().map(|(r, c)| (r.as_str(), *c)));
        let grant = if ask.waits {
            limits.acquire_many(&needs, Some(ask.deadline)).await
        } else {
            limits.try_acquire_many(&needs).await
        };
        match grant {
            Ok(grant) => Ok(Granted { ask, grant }),
            Err(e) => {
                let policy =
                    (limits.get_capacity(&ask.resource).await.ok()).map(|c| (c.total, c.window));
                Err(ApiError::from_limit(e, policy))
            }
        }
    }
}
