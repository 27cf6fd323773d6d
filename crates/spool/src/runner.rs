//! Where the writer runs: a task on the caller's runtime, or a thread of
//! its own ([`SpoolConfig::thread`](crate::SpoolConfig::thread)) with a
//! one-threaded runtime, so that its batches (building the statements,
//! waiting on the database) never hold a worker thread that requests
//! need.

use std::future::Future;

use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// The running writer.
#[derive(Debug)]
pub(crate) enum Runner {
    Task(JoinHandle<()>),
    /// Says when the thread's writer has ended (dropped unsent if it
    /// panicked).
    Thread(oneshot::Receiver<()>),
}

impl Runner {
    /// Runs `writer` on a thread named `thread`, or as a task of the
    /// current runtime without one (or when no thread can be started).
    ///
    /// # Panics
    /// Outside a tokio runtime, when it must be spawned there.
    pub(crate) fn start<F>(name: &'static str, thread: Option<&str>, writer: F) -> Runner
    where
        F: Future<Output = ()> + Send + 'static,
    {
        let Some(thread) = thread else {
            return Runner::Task(tokio::spawn(writer));
        };
        let runtime = match tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
        {
            Ok(rt) => rt,
            Err(e) => {
                tracing::warn!(spool = name, error = %e, "no runtime for the writer's thread: it runs as a task");
                return Runner::Task(tokio::spawn(writer));
            }
        };
        let (done, ended) = oneshot::channel();
        // The future moves into the thread only if it starts: kept here
        // until then so that a failure to start can still run it.
        let slot = std::sync::Arc::new(std::sync::Mutex::new(Some(writer)));
        let theirs = slot.clone();
        let started = std::thread::Builder::new()
            .name(thread.to_owned())
            .spawn(move || {
                let writer = theirs
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .take();
                if let Some(w) = writer {
                    runtime.block_on(w);
                }
                let _ = done.send(());
            });
        match started {
            Ok(_) => Runner::Thread(ended),
            Err(e) => {
                tracing::warn!(spool = name, error = %e, "no thread for the writer: it runs as a task");
                let writer = slot
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .take();
                Runner::Task(tokio::spawn(async move {
                    if let Some(w) = writer {
                        w.await;
                    }
                }))
            }
        }
    }

    /// Waits for the writer to end; logs it if it failed.
    pub(crate) async fn join(self, name: &'static str) {
        let failed = match self {
            Runner::Task(task) => task.await.err().map(|e| e.to_string()),
            Runner::Thread(ended) => ended.await.err().map(|_| "its thread panicked".to_owned()),
        };
        if let Some(e) = failed {
            tracing::error!(spool = name, error = %e, "writer task failed");
        }
    }
}
