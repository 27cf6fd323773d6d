//! A job runs only while its tenant may: every attempt of a tenant the key
//! store has blocked ends at once, as a fatal error naming why, before it
//! takes any limit or calls anything. Jobs are checked when a worker has
//! claimed them, not only when they were enqueued: a tenant blocked since
//! keeps none of its queued work running. A tenant the store does not
//! know (a `[[tenants]]` one, or an open gateway's workspace) is not
//! refused; a store that cannot be read retries the attempt later.

use std::sync::Arc;

use sluice_jobs::Job;
use sluice_jobs::worker::{BoxFuture, Handlers, JobHandler, Outcome};
use sluice_keys::{KeyStore, TenantState};

/// `handlers` with each kind's attempts checked against `keys` first.
pub(super) fn admitted(handlers: Handlers, keys: KeyStore) -> Handlers {
    let mut out = Handlers::new();
    for kind in handlers.kinds() {
        if let Some(inner) = handlers.get(kind) {
            out = out.on(
                kind,
                Admitted {
                    inner,
                    keys: keys.clone(),
                },
            );
        }
    }
    out
}

struct Admitted {
    inner: Arc<dyn JobHandler>,
    keys: KeyStore,
}

impl JobHandler for Admitted {
    fn run<'a>(&'a self, job: &'a Job) -> BoxFuture<'a, Outcome> {
        Box::pin(async move {
            match self.keys.tenant(&job.tenant).await {
                Ok(Some(t)) if t.state == TenantState::Blocked => Outcome::Fatal(format!(
                    "tenant {:?} is blocked: its jobs do not run",
                    job.tenant
                )),
                Ok(_) => self.inner.run(job).await,
                Err(e) => Outcome::retry(format!(
                    "the key store cannot say whether tenant {:?} may run jobs: {}",
                    job.tenant,
                    crate::error::chain(&e)
                )),
            }
        })
    }
}
