//! The dashboard in a real browser: Debian's Chromium, driven through
//! ChromeDriver's WebDriver API (plain HTTP and JSON, so no browser
//! library and no download). A gateway and a sim carry a little traffic;
//! the page is loaded, logged into through its form, and must show live
//! figures that agree with `GET /v1/limits` and `/metrics` and that fall
//! when the traffic stops. A screenshot is saved as an artifact.
//!
//! Skipped, with the reason printed, only when ChromeDriver or Chromium
//! is missing and `SLUICE_TEST_REQUIRE_BROWSER` is unset (`scripts/test`
//! installs both and sets it).

mod common;
#[path = "browser/jobs.rs"]
mod jobs;
#[path = "browser/requests.rs"]
mod requests;

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use common::{ACME, GLOBEX, Harness, chat, sim_config, two_tenants};
use serde_json::{Value, json};
use sluice_sim::{Faults, Scope};

const VIEWER: &str = "the-viewer";
const BUSY: &str = "openai/gpt-4o-mini";
const THROTTLED: &str = "openai/m429";

fn find(candidates: &[&str]) -> Option<PathBuf> {
    candidates.iter().map(PathBuf::from).find(|p| p.is_file())
}

/// ChromeDriver and Chromium, or why the test cannot run.
fn browser() -> Result<(PathBuf, PathBuf), String> {
    let driver = std::env::var_os("SLUICE_TEST_CHROMEDRIVER")
        .map(PathBuf::from)
        .or_else(|| find(&["/usr/bin/chromedriver", "/usr/lib/chromium/chromedriver"]))
        .ok_or("no chromedriver (apt-get install chromium-driver)")?;
    let chromium = std::env::var_os("SLUICE_TEST_CHROMIUM")
        .map(PathBuf::from)
        .or_else(|| find(&["/usr/bin/chromium", "/usr/lib/chromium/chromium"]))
        .ok_or("no chromium (apt-get install chromium)")?;
    Ok((driver, chromium))
}

/// A ChromeDriver process in a process group of its own, which Chromium
/// joins: the whole group is killed on drop, so a failed test leaves no
/// browser behind.
struct Driver {
    child: Child,
    base: String,
    http: reqwest::Client,
    session: String,
}

impl Drop for Driver {
    fn drop(&mut self) {
        let group = format!("-{}", self.child.id());
        let killed = Command::new("kill")
            .args(["-KILL", "--", &group])
            .status()
            .is_ok_and(|s| s.success());
        if !killed {
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
    }
}

/// A free loopback port: bound to 0, read, let go (ChromeDriver takes a
/// port number, not a socket).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

impl Driver {
    async fn start(driver: &Path, chromium: &Path, profile: &Path) -> Driver {
        let port = free_port();
        let child = Command::new(driver)
            .arg(format!("--port={port}"))
            .process_group(0)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("chromedriver starts");
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(60))
            .build()
            .unwrap();
        let base = format!("http://127.0.0.1:{port}");
        let mut driver = Driver {
            child,
            base,
            http,
            session: String::new(),
        };
        let mut up = false;
        for _ in 0..100 {
            if let Ok(r) = driver
                .http
                .get(format!("{}/status", driver.base))
                .send()
                .await
                && r.status().is_success()
            {
                up = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert!(up, "chromedriver answers on {}", driver.base);
        let caps = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {
                "binary": chromium,
                "args": [
                    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                    "--no-first-run", "--disable-background-networking",
                    "--disable-component-update", "--disable-sync",
                    "--disable-dev-shm-usage", "--window-size=1440,1200",
                    format!("--user-data-dir={}", profile.display()),
                ],
            },
        }}});
        let res = driver.call("POST", "/session", Some(caps)).await;
        driver.session = res["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("a WebDriver session: {res}"))
            .to_owned();
        driver
    }

    async fn call(&self, method: &str, path: &str, body: Option<Value>) -> Value {
        let url = format!("{}{path}", self.base);
        let req = match method {
            "POST" => self.http.post(url).json(&body.unwrap_or(json!({}))),
            "DELETE" => self.http.delete(url),
            _ => self.http.get(url),
        };
        let res = req.send().await.expect("chromedriver answers");
        let v: Value = res.json().await.expect("WebDriver JSON");
        v["value"].clone()
    }

    async fn session(&self, method: &str, path: &str, body: Option<Value>) -> Value {
        let path = format!("/session/{}{path}", self.session);
        self.call(method, &path, body).await
    }

    async fn go(&self, url: &str) {
        self.session("POST", "/url", Some(json!({"url": url})))
            .await;
    }

    async fn element(&self, css: &str) -> String {
        let v = self
            .session(
                "POST",
                "/element",
                Some(json!({"using": "css selector", "value": css})),
            )
            .await;
        v.as_object()
            .and_then(|o| o.values().next())
            .and_then(Value::as_str)
            .unwrap_or_else(|| panic!("no element {css}: {v}"))
            .to_owned()
    }

    async fn script(&self, js: &str) -> Value {
        self.session(
            "POST",
            "/execute/sync",
            Some(json!({"script": js, "args": []})),
        )
        .await
    }

    /// Polls `js` until it returns something other than null.
    async fn until(&self, what: &str, js: &str) -> Value {
        for _ in 0..300 {
            let v = self.script(js).await;
            if !v.is_null() {
                return v;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let page = self.script("return document.body.innerText").await;
        panic!(
            "gave up waiting until {what}; the page says:\n{}",
            page.as_str().unwrap_or("")
        );
    }

    async fn screenshot(&self) -> Vec<u8> {
        let v = self.session("GET", "/screenshot", None).await;
        base64(v.as_str().expect("a base64 PNG"))
    }
}

fn base64(s: &str) -> Vec<u8> {
    let value = |c: u8| -> u32 {
        match c {
            b'A'..=b'Z' => u32::from(c - b'A'),
            b'a'..=b'z' => u32::from(c - b'a') + 26,
            b'0'..=b'9' => u32::from(c - b'0') + 52,
            b'+' => 62,
            b'/' => 63,
            _ => panic!("not base64: {c}"),
        }
    };
    let clean: Vec<u8> = s
        .bytes()
        .filter(|c| !c.is_ascii_whitespace() && *c != b'=')
        .collect();
    let mut out = Vec::with_capacity(clean.len() * 3 / 4);
    for chunk in clean.chunks(4) {
        let mut acc = 0u32;
        for (i, &c) in chunk.iter().enumerate() {
            acc |= value(c) << (18 - 6 * i);
        }
        let bytes = acc.to_be_bytes();
        out.extend_from_slice(&bytes[1..chunk.len()]);
    }
    out
}

/// The text of one cell of a row of the resources table, or null.
fn cell_js(resource: &str, field: &str) -> String {
    format!(
        "const c = document.querySelector('#resources tr[data-resource=\"{resource}\"] td[data-field=\"{field}\"]'); return c ? c.textContent : null;"
    )
}

/// Sends calls for `model` with `key` until `stop`.
fn load(
    h: &Harness,
    model: &'static str,
    key: &'static str,
    stop: Arc<AtomicBool>,
) -> tokio::task::JoinHandle<u64> {
    let http = h.http.clone();
    let url = h.url("/v1/chat/completions");
    tokio::spawn(async move {
        let mut sent = 0;
        while !stop.load(Ordering::SeqCst) {
            let _ = http
                .post(&url)
                .bearer_auth(key)
                .header("x-sluice-timeout-ms", "2000")
                .json(&chat(model))
                .send()
                .await;
            sent += 1;
            tokio::time::sleep(Duration::from_millis(40)).await;
        }
        sent
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_shows_live_figures_that_agree_with_the_api() {
    let (driver, chromium) = match browser() {
        Ok(found) => found,
        Err(why) if std::env::var_os("SLUICE_TEST_REQUIRE_BROWSER").is_none() => {
            eprintln!("skipped: {why} (SLUICE_TEST_REQUIRE_BROWSER is unset)");
            return;
        }
        Err(why) => panic!("{why}, and SLUICE_TEST_REQUIRE_BROWSER is set"),
    };
    let h = Harness::with(sim_config(), |c| {
        two_tenants(c);
        c.admin_token = Some("the-operator".into());
        c.ui.token = Some(VIEWER.into());
    })
    .await;
    h.sim
        .set_faults(
            Scope::Model("m429".into()),
            Faults {
                force_429: true,
                force_429_retry_after_ms: 200,
                ..Faults::none()
            },
        )
        .unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let loads = [
        load(&h, BUSY, ACME, stop.clone()),
        load(&h, BUSY, ACME, stop.clone()),
        load(&h, BUSY, GLOBEX, stop.clone()),
        load(&h, THROTTLED, GLOBEX, stop.clone()),
    ];

    let profile = tempdir();
    let d = Driver::start(&driver, &chromium, &profile).await;
    d.go(&h.url("/ui")).await;
    // Not logged in: the form, and no figures.
    d.until(
        "the login form shows",
        "return document.getElementById('login').hidden ? null : true",
    )
    .await;
    let token = d.element("#token").await;
    d.session(
        "POST",
        &format!("/element/{token}/value"),
        Some(json!({"text": VIEWER})),
    )
    .await;
    let submit = d.element("#login-form button[type=submit]").await;
    d.session("POST", &format!("/element/{submit}/click"), Some(json!({})))
        .await;
    d.until(
        "the stream is live",
        "return document.getElementById('status').textContent === 'live' ? true : null",
    )
    .await;
    // Live figures for the busy model.
    let rps = d
        .until(
            "the busy model's rate shows",
            &format!(
                "{} ",
                cell_js(BUSY, "requests_per_second").replace(
                    "return c ? c.textContent : null;",
                    "return c && parseFloat(c.textContent) > 0 ? c.textContent : null;"
                )
            ),
        )
        .await;
    assert!(rps.as_str().unwrap().parse::<f64>().unwrap() > 0.0, "{rps}");
    // The limit shown is the limiter's, as GET /v1/limits says it.
    let limits = h.get_json("/v1/limits", ACME).await;
    let listed = limits["resources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["resource"] == BUSY)
        .cloned()
        .expect("the busy model in /v1/limits");
    let shown = d
        .script(&format!(
            "const r = document.querySelector('#resources tr[data-resource=\"{BUSY}\"]'); return r ? r.children[1].textContent : null;"
        ))
        .await;
    let configured = listed["configured_per_second"].as_f64().unwrap();
    assert!(
        shown
            .as_str()
            .unwrap()
            .ends_with(&format!("{configured:.0}")),
        "page {shown}, /v1/limits {listed}"
    );

    // The throttled model: its cut and its 429s, as /metrics counts them.
    d.until(
        "the throttled model's 429s show",
        &cell_js(THROTTLED, "upstream_429").replace(
            "return c ? c.textContent : null;",
            "return c && !c.textContent.endsWith('(0)') ? c.textContent : null;",
        ),
    )
    .await;
    d.until(
        "the cut's reason shows",
        &format!("const r = document.querySelector('#resources tr[data-resource=\"{THROTTLED}\"] td.reason'); return r && r.textContent ? r.textContent : null;"),
    )
    .await;
    // Charts have points, the tenants their shares.
    let shares = d
        .until(
            "both tenants show",
            "const rows = document.querySelectorAll('#tenants tbody tr'); return rows.length >= 2 ? Array.from(rows).map(r => r.dataset.tenant) : null;",
        )
        .await;
    assert!(
        shares.as_array().unwrap().iter().any(|t| t == "acme"),
        "{shares}"
    );
    tokio::time::sleep(Duration::from_secs(3)).await;
    let png = d.screenshot().await;
    assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"), "a PNG");
    let artifact = Path::new(env!("CARGO_TARGET_TMPDIR")).join("dashboard.png");
    std::fs::write(&artifact, &png).unwrap();
    eprintln!("screenshot: {}", artifact.display());

    // Load stops: the page follows.
    stop.store(true, Ordering::SeqCst);
    for l in loads {
        assert!(l.await.unwrap() > 0);
    }
    d.until(
        "the busy model's rate falls to zero",
        &cell_js(BUSY, "requests_per_second").replace(
            "return c ? c.textContent : null;",
            "return c && parseFloat(c.textContent) === 0 ? true : null;",
        ),
    )
    .await;
    // Now still, the page's 429 total is the one /metrics counts.
    let metrics = h
        .get("/metrics")
        .bearer_auth("the-operator")
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let counted: u64 = metrics
        .lines()
        .find(|l| {
            l.starts_with("sluice_upstream_429_total")
                && l.contains(&format!("resource=\"{THROTTLED}\""))
        })
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
        .expect("the throttled model's 429s in /metrics");
    let shown = d.script(&cell_js(THROTTLED, "upstream_429")).await;
    assert!(
        shown.as_str().unwrap().ends_with(&format!("({counted})")),
        "page {shown}, /metrics {counted}"
    );
    d.session("DELETE", "", None).await;
    drop(d);
    let _ = std::fs::remove_dir_all(&profile);
    h.stop().await;
}

/// An empty directory for the browser's profile.
fn tempdir() -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "sluice-browser-{}-{}",
        std::process::id(),
        fastrand_suffix()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn fastrand_suffix() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}
