//! A store whose calls run on a runtime of their own, on real time, so
//! that a test can pause tokio's clock without pausing the database
//! driver's timers (sqlx's pool timeouts would fire at once: paused time
//! jumps ahead whenever the test's runtime waits on SQLite's thread).

use std::future::Future;
use std::time::Duration;

use serde_json::Value;
use sluice_jobs::{
    Cleaned, Enqueued, Error, Job, JobId, JobStore, Lease, ListFilter, NewJob, Page, QueueCounts,
    Retention, RetryDecision,
};

/// `S`, called on its own real-time runtime.
#[derive(Debug)]
pub struct Remote<S> {
    store: S,
    rt: tokio::runtime::Runtime,
}

impl<S: JobStore + Clone + 'static> Remote<S> {
    /// Opens a store with `open` on a new two-thread runtime, where all
    /// its calls then run.
    pub async fn open<Fut>(open: impl FnOnce() -> Fut) -> Self
    where
        Fut: Future<Output = S> + Send + 'static,
    {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("a runtime for the store");
        let store = rt.spawn(open()).await.expect("open the store");
        Self { store, rt }
    }

    async fn on<T, F, Fut>(&self, f: F) -> T
    where
        T: Send + 'static,
        F: FnOnce(S) -> Fut,
        Fut: Future<Output = T> + Send + 'static,
    {
        self.rt
            .spawn(f(self.store.clone()))
            .await
            .expect("the store call panicked")
    }
}

impl<S> Drop for Remote<S> {
    fn drop(&mut self) {
        // Dropping a runtime inside another one panics; let it go quietly.
        let rt = std::mem::replace(
            &mut self.rt,
            tokio::runtime::Builder::new_current_thread()
                .build()
                .expect("an empty runtime"),
        );
        rt.shutdown_background();
    }
}

impl<S: JobStore + Clone + 'static> JobStore for Remote<S> {
    async fn enqueue(&self, job: NewJob) -> Result<Enqueued, Error> {
        self.on(|s| async move { s.enqueue(job).await }).await
    }
    async fn enqueue_batch(&self, jobs: Vec<NewJob>) -> Result<Vec<Enqueued>, Error> {
        self.on(|s| async move { s.enqueue_batch(jobs).await })
            .await
    }
    async fn get(&self, id: JobId) -> Result<Option<Job>, Error> {
        self.on(|s| async move { s.get(id).await }).await
    }
    async fn list(&self, filter: &ListFilter) -> Result<Page, Error> {
        let filter = filter.clone();
        self.on(|s| async move { s.list(&filter).await }).await
    }
    async fn claim(
        &self,
        queue: &str,
        worker: &str,
        n: u32,
        lease: Duration,
    ) -> Result<Vec<Job>, Error> {
        let (queue, worker) = (queue.to_owned(), worker.to_owned());
        self.on(|s| async move { s.claim(&queue, &worker, n, lease).await })
            .await
    }
    async fn heartbeat(&self, lease: &Lease, extend: Duration) -> Result<Lease, Error> {
        let lease = lease.clone();
        self.on(|s| async move { s.heartbeat(&lease, extend).await })
            .await
    }
    async fn progress(&self, lease: &Lease, progress: Value) -> Result<Job, Error> {
        let lease = lease.clone();
        self.on(|s| async move { s.progress(&lease, progress).await })
            .await
    }
    async fn children(&self, parent: JobId) -> Result<Vec<Job>, Error> {
        self.on(|s| async move { s.children(parent).await }).await
    }
    async fn complete(&self, lease: &Lease, result: Value) -> Result<Job, Error> {
        let lease = lease.clone();
        self.on(|s| async move { s.complete(&lease, result).await })
            .await
    }
    async fn fail(
        &self,
        lease: &Lease,
        error: &str,
        decision: RetryDecision,
    ) -> Result<Job, Error> {
        let (lease, error) = (lease.clone(), error.to_owned());
        self.on(|s| async move { s.fail(&lease, &error, decision).await })
            .await
    }
    async fn rescue(&self) -> Result<Vec<Job>, Error> {
        self.on(|s| async move { s.rescue().await }).await
    }
    async fn retry(&self, id: JobId) -> Result<Job, Error> {
        self.on(|s| async move { s.retry(id).await }).await
    }
    async fn retry_dead(&self, queue: &str) -> Result<u64, Error> {
        let queue = queue.to_owned();
        self.on(|s| async move { s.retry_dead(&queue).await }).await
    }
    async fn cancel(&self, id: JobId) -> Result<Job, Error> {
        self.on(|s| async move { s.cancel(id).await }).await
    }
    async fn purge_dead(&self, queue: Option<&str>) -> Result<u64, Error> {
        let queue = queue.map(str::to_owned);
        self.on(|s| async move { s.purge_dead(queue.as_deref()).await })
            .await
    }
    async fn pause(&self, queue: &str) -> Result<(), Error> {
        let queue = queue.to_owned();
        self.on(|s| async move { s.pause(&queue).await }).await
    }
    async fn resume(&self, queue: &str) -> Result<(), Error> {
        let queue = queue.to_owned();
        self.on(|s| async move { s.resume(&queue).await }).await
    }
    async fn counts(&self) -> Result<Vec<QueueCounts>, Error> {
        self.on(|s| async move { s.counts().await }).await
    }
    async fn cleanup(&self, retention: &Retention) -> Result<Cleaned, Error> {
        let retention = *retention;
        self.on(|s| async move { s.cleanup(&retention).await })
            .await
    }
}
