//! The accept loop and the connections it serves.
//!
//! At most `http.max_connections` connections are served at once (by all
//! the serving threads together, which share `cap`): the loop takes a
//! permit before it accepts, so past the cap new connections wait
//! in the kernel's listen backlog (bounded; beyond it the kernel refuses
//! them) instead of costing a task and buffers each. Every connection has
//! hyper's header-read timer, so one that trickles a request head (or sits
//! idle between requests) is closed after `http.header_read_timeout_ms`
//! and gives its permit back. Bodies are read by the handlers, after
//! authentication, within `http.body_read_timeout_ms` (see
//! [`crate::body`]). A connection whose client takes none of an answer's
//! bytes for `http.write_timeout_ms` is closed ([`WriteTimeout`]).

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::ConnectInfo;
use axum::http::Request;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio::task::JoinSet;
use tokio::time::Instant;
use tokio_util::task::AbortOnDropHandle;
use tower::ServiceExt;

use super::write_timeout::WriteTimeout;
use crate::config::HttpConfig;
use crate::routes::Edge;

/// How long the loop rests after an accept error that is not about one
/// connection (out of file descriptors, say) before it tries again.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

/// The connections being served.
#[derive(Debug)]
pub(super) struct Connections {
    /// One task per connection; aborted when dropped, so no connection
    /// outlives its gateway.
    tasks: JoinSet<()>,
    /// Tells every connection to finish the request in flight and close.
    graceful: GracefulShutdown,
}

/// Serves `app` on `listener` until `stop` resolves, then stops accepting
/// and returns the connections still open.
pub(super) async fn serve_until(
    listener: TcpListener,
    app: Edge,
    http: &HttpConfig,
    cap: Arc<Semaphore>,
    stop: impl Future<Output = ()>,
) -> Connections {
    let header_read_timeout = Duration::from_millis(http.header_read_timeout_ms);
    let write_timeout = Duration::from_millis(http.write_timeout_ms);
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(header_read_timeout);
    let floor = AbortOnDropHandle::new(tokio::spawn(timer_floor(header_read_timeout)));
    let mut conns = Connections {
        tasks: JoinSet::new(),
        graceful: GracefulShutdown::new(),
    };
    let mut stop = std::pin::pin!(stop);
    loop {
        // Finished connections leave the set here: it holds at most the
        // cap's worth of live ones and those that ended since the last turn.
        while conns.tasks.try_join_next().is_some() {}
        let permit = tokio::select! {
            biased;
            () = &mut stop => break,
            p = Arc::clone(&cap).acquire_owned() => p.expect("the cap is never closed"),
        };
        let (stream, peer) = tokio::select! {
            biased;
            () = &mut stop => break,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(e) if is_connection_error(&e) => continue,
                Err(e) => {
                    tracing::warn!(error = %e, "accepting a connection");
                    tokio::time::sleep(ACCEPT_BACKOFF).await;
                    continue;
                }
            },
        };
        // Answers (SSE events above all) go out as written, not when
        // Nagle's algorithm has gathered enough of them.
        let _ = stream.set_nodelay(true);
        let service =
            TowerToHyperService::new(app.clone().map_request(move |req| with_peer(req, peer)));
        let io = TokioIo::new(WriteTimeout::new(stream, write_timeout));
        let conn = builder.serve_connection(io, service);
        let conn = conns.graceful.watch(conn);
        conns.tasks.spawn(async move {
            // Held until the connection ends, whichever way it ends.
            let _permit = permit;
            if let Err(e) = conn.await {
                tracing::debug!(error = %e, "connection closed");
            }
        });
    }
    drop(floor);
    conns
}

/// The period of [`timer_floor`] when the header-read timeout is shorter.
const FLOOR_MIN: Duration = Duration::from_secs(1);

/// Keeps a timer pending on this thread's runtime at most
/// `header_read_timeout` (or [`FLOOR_MIN`]) ahead, for as long as it runs.
///
/// Every request arms its connection's header-read timer for the next
/// head, `header_read_timeout` from now. Tokio's time driver wakes its
/// own thread (an eventfd write, and one more return from `epoll_wait`)
/// whenever a timer is armed earlier than the wake-up it planned when
/// it last parked, and when it planned none: with only longer timers
/// pending (the upstream call's, the pool's idle check) that was every
/// request on a lone connection and one in two to four at saturation
/// (docs/gateway.md, "System calls per request at saturation"). With this
/// timer always due within `header_read_timeout`, a header-read timer is
/// never the earliest and the driver is left alone; the cost is one
/// wake-up per period on an idle thread.
async fn timer_floor(header_read_timeout: Duration) {
    let mut tick = tokio::time::interval(header_read_timeout.max(FLOOR_MIN));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
    }
}

/// `req` with its connection's peer address as axum's [`ConnectInfo`],
/// for the routes that read it: the dashboard's login and every route that
/// takes an operator's token count wrong tokens per address. The model
/// routes and `/proxy` (tenants' hot paths, which take no operator token)
/// do not pay for the extension.
fn with_peer<B>(mut req: Request<B>, peer: SocketAddr) -> Request<B> {
    const HOT: [&str; 5] = [
        "/v1/chat/",
        "/v1/embeddings",
        "/v1/responses",
        "/v1/messages",
        "/proxy/",
    ];
    let path = req.uri().path();
    if !HOT.iter().any(|p| path.starts_with(p)) {
        req.extensions_mut().insert(ConnectInfo(peer));
    }
    req
}

impl Connections {
    /// Tells every connection to finish the request in flight and close,
    /// waits for them until `deadline`, then closes those still open.
    /// `last_word` before the deadline, if connections are still open,
    /// calls `grace_ending` (which answers what still waits). Returns how
    /// many it had to close.
    pub(super) async fn drain(
        mut self,
        deadline: Instant,
        last_word: Duration,
        grace_ending: impl FnOnce(),
    ) -> usize {
        let mut shutdown = std::pin::pin!(self.graceful.shutdown());
        let warn_at = deadline.checked_sub(last_word).unwrap_or(deadline);
        let mut finished = tokio::time::timeout_at(warn_at, &mut shutdown)
            .await
            .is_ok();
        if !finished {
            grace_ending();
            finished = tokio::time::timeout_at(deadline, &mut shutdown)
                .await
                .is_ok();
        }
        while self.tasks.try_join_next().is_some() {}
        let cut = if finished { 0 } else { self.tasks.len() };
        self.tasks.shutdown().await;
        cut
    }
}

/// Errors that concern one connection (the peer gave up during the
/// handshake), after which the next accept may well succeed.
fn is_connection_error(e: &std::io::Error) -> bool {
    use std::io::ErrorKind::{ConnectionAborted, ConnectionRefused, ConnectionReset};
    matches!(
        e.kind(),
        ConnectionRefused | ConnectionAborted | ConnectionReset
    )
}
