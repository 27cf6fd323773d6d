//! `sluice top`: the live dashboard in a terminal, for a gateway reached
//! over SSH. It reads the same stream the page does
//! (`GET /v1/dashboard/stream`, with the dashboard's or the admin token)
//! and draws it with ratatui; `--once` prints one frame as text.

mod draw;
mod sse;

use std::collections::VecDeque;
use std::io::IsTerminal;
use std::process::ExitCode;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures_util::StreamExt;
use ratatui::crossterm::event::{self, Event, KeyCode, KeyEventKind, KeyModifiers};
use sluice_gateway::dashboard::view::{Point, Snapshot};

pub use draw::{View, draw};

/// Points kept for the sparklines.
const HISTORY: usize = 300;

/// `sluice top`'s arguments.
#[derive(Debug, Clone, clap::Args)]
pub struct TopArgs {
    /// The gateway's base URL.
    #[arg(long, env = "SLUICE_TARGET", default_value = "http://127.0.0.1:8080")]
    target: String,
    /// The dashboard's read-only token (`ui.token_env`).
    #[arg(long, env = "SLUICE_UI_TOKEN", hide_env_values = true)]
    token: Option<String>,
    /// The admin token, used when no dashboard token is given.
    #[arg(long, env = "SLUICE_ADMIN_TOKEN", hide_env_values = true)]
    admin_token: Option<String>,
    /// Print one frame as text and exit: no terminal needed.
    #[arg(long)]
    once: bool,
    /// Print the dashboard's snapshots as JSON, one per line (with
    /// `--once`, one snapshot and its history), instead of drawing.
    #[arg(long)]
    json: bool,
    /// Columns of `--once`'s frame.
    #[arg(long, default_value_t = 140)]
    width: u16,
    /// Rows of `--once`'s frame.
    #[arg(long, default_value_t = 42)]
    height: u16,
}

impl TopArgs {
    fn token(&self) -> Option<String> {
        self.token
            .clone()
            .filter(|t| !t.is_empty())
            .or_else(|| self.admin_token.clone())
            .filter(|t| !t.is_empty())
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.target.trim_end_matches('/'))
    }
}

/// What the stream has said so far.
#[derive(Debug, Default)]
struct Seen {
    snapshot: Option<Snapshot>,
    history: VecDeque<Point>,
    status: String,
}

pub async fn run(args: TopArgs) -> ExitCode {
    let result = match (args.once, args.json) {
        (true, true) => once_json(&args).await,
        (true, false) => once(&args).await,
        (false, true) => json_lines(&args).await,
        (false, false) => live(&args).await,
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("sluice top: {e}");
            ExitCode::from(1)
        }
    }
}

fn client() -> Result<reqwest::Client, String> {
    reqwest::Client::builder()
        .connect_timeout(Duration::from_secs(5))
        .build()
        .map_err(|e| e.to_string())
}

/// GET `path` with the token; the gateway's own message when it refuses.
async fn get(
    http: &reqwest::Client,
    args: &TopArgs,
    path: &str,
) -> Result<reqwest::Response, String> {
    let mut req = http.get(args.url(path));
    if let Some(t) = args.token() {
        req = req.bearer_auth(t);
    }
    let res = req
        .send()
        .await
        .map_err(|e| format!("{}: {e}", args.url(path)))?;
    if res.status().is_success() {
        return Ok(res);
    }
    let status = res.status();
    let body: serde_json::Value = res.json().await.unwrap_or_default();
    let message = body["error"]["message"].as_str().unwrap_or("no message");
    let hint = if status.as_u16() == 401 {
        " (give --token / SLUICE_UI_TOKEN, or --admin-token / SLUICE_ADMIN_TOKEN)"
    } else {
        ""
    };
    Err(format!("{path}: {status}: {message}{hint}"))
}

/// One frame, from `/v1/dashboard` and `/history`, printed as text.
async fn once(args: &TopArgs) -> Result<(), String> {
    let http = client()?;
    let timeout = Duration::from_secs(10);
    let snapshot: Snapshot = tokio::time::timeout(timeout, async {
        get(&http, args, "/v1/dashboard")
            .await?
            .json()
            .await
            .map_err(|e| e.to_string())
    })
    .await
    .map_err(|_| "the gateway did not answer in 10 s".to_owned())??;
    let history: serde_json::Value = get(&http, args, "/v1/dashboard/history")
        .await?
        .json()
        .await
        .map_err(|e| e.to_string())?;
    let points: Vec<Point> =
        serde_json::from_value(history["points"].clone()).map_err(|e| e.to_string())?;
    let view = View {
        target: args.target.clone(),
        status: "snapshot".into(),
        snapshot: Some(snapshot),
        history: points,
    };
    print!("{}", draw::to_text(&view, args.width, args.height));
    Ok(())
}

/// `--once --json`: the snapshot and its history, as the gateway gives them.
async fn once_json(args: &TopArgs) -> Result<(), String> {
    let http = client()?;
    let read = |path: &'static str| {
        let http = http.clone();
        async move {
            let answer = tokio::time::timeout(Duration::from_secs(10), get(&http, args, path))
                .await
                .map_err(|_| format!("{path}: the gateway did not answer in 10 s"))??;
            answer
                .json::<serde_json::Value>()
                .await
                .map_err(|e| format!("{path}: {e}"))
        }
    };
    let snapshot = read("/v1/dashboard").await?;
    let history = read("/v1/dashboard/history").await?;
    println!(
        "{}",
        serde_json::json!({"snapshot": snapshot, "history": history["points"]})
    );
    Ok(())
}

/// `--json`: every snapshot the stream sends, one JSON line each, until
/// the stream ends (no reconnecting: a pipe's reader sees the end).
async fn json_lines(args: &TopArgs) -> Result<(), String> {
    use std::io::Write as _;
    let http = client()?;
    let res = get(&http, args, "/v1/dashboard/stream").await?;
    let mut body = res.bytes_stream();
    let mut parser = sse::Parser::default();
    let mut out = std::io::stdout().lock();
    while let Some(chunk) = body.next().await {
        let chunk = chunk.map_err(|e| e.to_string())?;
        for ev in parser.push(&chunk) {
            if ev.name == "snapshot" {
                // A reader that went away ends the command.
                if writeln!(out, "{}", ev.data)
                    .and_then(|()| out.flush())
                    .is_err()
                {
                    return Ok(());
                }
            }
        }
    }
    Err("the stream ended".into())
}

/// Reads the stream into `seen` until it ends; the caller reconnects.
async fn follow(http: &reqwest::Client, args: &TopArgs, seen: &Mutex<Seen>) -> Result<(), String> {
    let res = get(http, args, "/v1/dashboard/stream").await?;
    let set = |f: &dyn Fn(&mut Seen)| f(&mut seen.lock().unwrap_or_else(PoisonError::into_inner));
    set(&|s| s.status = "live".into());
    let mut body = res.bytes_stream();
    let mut parser = sse::Parser::default();
    while let Some(chunk) = body.next().await {
        let chunk = chunk.map_err(|e| e.to_string())?;
        for ev in parser.push(&chunk) {
            match ev.name.as_str() {
                "history" => {
                    let h: serde_json::Value =
                        serde_json::from_str(&ev.data).map_err(|e| e.to_string())?;
                    let points: Vec<Point> =
                        serde_json::from_value(h["points"].clone()).map_err(|e| e.to_string())?;
                    set(&|s| s.history = points.iter().cloned().collect());
                }
                "snapshot" => {
                    let snap: Snapshot =
                        serde_json::from_str(&ev.data).map_err(|e| e.to_string())?;
                    set(&|s| {
                        if s.history.back().is_none_or(|p| p.at_ms < snap.at_ms) {
                            s.history.push_back(Point::of(&snap));
                        }
                        while s.history.len() > HISTORY {
                            s.history.pop_front();
                        }
                        s.snapshot = Some(snap.clone());
                    });
                }
                _ => {}
            }
        }
    }
    Err("the stream ended".into())
}

async fn live(args: &TopArgs) -> Result<(), String> {
    if !std::io::stdout().is_terminal() {
        return Err("stdout is not a terminal: use --once to print one frame".into());
    }
    let http = client()?;
    // Fail before taking the screen: a wrong token or address says so.
    get(&http, args, "/v1/dashboard").await?;
    let seen = Arc::new(Mutex::new(Seen {
        status: "connecting".into(),
        ..Seen::default()
    }));
    let reader = {
        let (seen, args, http) = (seen.clone(), args.clone(), http.clone());
        tokio::spawn(async move {
            loop {
                let why = follow(&http, &args, &seen).await.err().unwrap_or_default();
                seen.lock().unwrap_or_else(PoisonError::into_inner).status =
                    format!("reconnecting ({why})");
                tokio::time::sleep(Duration::from_secs(2)).await;
            }
        })
    };
    let mut terminal = ratatui::init();
    let drawn = (|| -> Result<(), String> {
        loop {
            let view = {
                let s = seen.lock().unwrap_or_else(PoisonError::into_inner);
                View {
                    target: args.target.clone(),
                    status: s.status.clone(),
                    snapshot: s.snapshot.clone(),
                    history: s.history.iter().cloned().collect(),
                }
            };
            terminal
                .draw(|f| draw(f, &view))
                .map_err(|e| e.to_string())?;
            // Redrawn four times a second; keys end it.
            if event::poll(Duration::from_millis(250)).map_err(|e| e.to_string())?
                && let Event::Key(k) = event::read().map_err(|e| e.to_string())?
                && k.kind == KeyEventKind::Press
                && (matches!(k.code, KeyCode::Char('q') | KeyCode::Esc)
                    || (k.code == KeyCode::Char('c')
                        && k.modifiers.contains(KeyModifiers::CONTROL)))
            {
                return Ok(());
            }
        }
    })();
    ratatui::restore();
    reader.abort();
    drawn
}
