//! The bench's floor for a proxy: a bare HTTP hop in front of the sim.
//!
//! It forwards each request to the sim as it came (path, headers, body)
//! and the answer back as it came, with the gateway's thread layout (one
//! current-thread runtime per CPU, each accepting on its own copy of the
//! listener, with its own upstream connection pool, `TCP_NODELAY` both
//! ways) and nothing else: no routing, limits, usage, traces or metrics.
//! What it adds over going direct is what any hop costs on this machine
//! (two more sockets, two more wake-ups per request); what the gateway
//! adds over it is the gateway's own work.

use std::convert::Infallible;
use std::net::{SocketAddr, TcpListener as StdListener};

use bytes::Bytes;
use http_body_util::{Either, Empty};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode, Uri};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::sync::watch;

/// The name of the hop's threads, by which [`crate::stack::bare_cpu`]
/// finds them.
pub const THREAD_NAME: &str = "sluice-bare";

type Upstream = Client<HttpConnector, Incoming>;
type Answer = Response<Either<Incoming, Empty<Bytes>>>;

/// A running hop; dropping it stops its threads.
#[derive(Debug)]
pub struct BareHop {
    addr: SocketAddr,
    stop: watch::Sender<bool>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl BareHop {
    /// Starts the hop on a free port of 127.0.0.1 in front of `upstream`
    /// (`http://host:port`).
    ///
    /// # Errors
    /// The listener or a thread could not be made.
    pub fn start(upstream: &str) -> Result<BareHop, String> {
        let authority = upstream
            .strip_prefix("http://")
            .unwrap_or(upstream)
            .trim_end_matches('/')
            .to_owned();
        let listener = StdListener::bind(SocketAddr::from(([127, 0, 0, 1], 0)))
            .and_then(|l| l.set_nonblocking(true).map(|()| l))
            .map_err(|e| format!("bare hop: listen: {e}"))?;
        let addr = listener
            .local_addr()
            .map_err(|e| format!("bare hop: {e}"))?;
        let (stop, stopped) = watch::channel(false);
        let mut hop = BareHop {
            addr,
            stop,
            threads: Vec::new(),
        };
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
        for _ in 0..threads {
            let copy = listener
                .try_clone()
                .map_err(|e| format!("bare hop: listener copy: {e}"))?;
            let (stopped, authority) = (stopped.clone(), authority.clone());
            let thread = std::thread::Builder::new()
                .name(THREAD_NAME.into())
                .spawn(move || serve(copy, authority, stopped))
                .map_err(|e| format!("bare hop: thread: {e}"))?;
            hop.threads.push(thread);
        }
        Ok(hop)
    }

    /// `http://{addr}`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }
}

impl Drop for BareHop {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// One thread of the hop: accepts on `listener` until told to stop.
fn serve(listener: StdListener, authority: String, mut stopped: watch::Receiver<bool>) {
    let Ok(runtime) = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    else {
        eprintln!("sluice bench: bare hop: no runtime");
        return;
    };
    runtime.block_on(async move {
        let Ok(listener) = tokio::net::TcpListener::from_std(listener) else {
            eprintln!("sluice bench: bare hop: listener");
            return;
        };
        let mut http = HttpConnector::new();
        http.set_nodelay(true);
        let client: Upstream = Client::builder(TokioExecutor::new()).build(http);
        let authority: std::sync::Arc<str> = authority.into();
        loop {
            let (tcp, _) = tokio::select! {
                _ = stopped.changed() => return,
                accepted = listener.accept() => match accepted {
                    Ok(accepted) => accepted,
                    Err(_) => continue,
                },
            };
            let _ = tcp.set_nodelay(true);
            let (client, authority) = (client.clone(), authority.clone());
            tokio::spawn(async move {
                let service =
                    service_fn(move |req| forward(client.clone(), authority.clone(), req));
                let _ = http1::Builder::new()
                    .serve_connection(TokioIo::new(tcp), service)
                    .await;
            });
        }
    });
}

/// Sends `req` on to the sim; a 502 with no body when that fails.
async fn forward(
    client: Upstream,
    authority: std::sync::Arc<str>,
    mut req: Request<Incoming>,
) -> Result<Answer, Infallible> {
    let path = req
        .uri()
        .path_and_query()
        .map_or("/", |p| p.as_str())
        .to_owned();
    let uri = Uri::builder()
        .scheme("http")
        .authority(&*authority)
        .path_and_query(path)
        .build();
    let Ok(uri) = uri else {
        return Ok(failed(StatusCode::BAD_REQUEST));
    };
    *req.uri_mut() = uri;
    Ok(match client.request(req).await {
        Ok(answer) => answer.map(Either::Left),
        Err(_) => failed(StatusCode::BAD_GATEWAY),
    })
}

fn failed(status: StatusCode) -> Answer {
    let mut answer = Response::new(Either::Right(Empty::new()));
    *answer.status_mut() = status;
    answer
}
