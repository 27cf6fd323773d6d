//! `sluice bench redis`: decisions a second and p99 decision latency per
//! replica for the shared limiter, side by side in one run:
//!
//! - **naive**: the seed's script, one `EVAL` per decision with the
//!   client's clock, as a baseline;
//! - **exact**: [`sluice_redis::Mode::Exact`], decisions batched into
//!   script calls and pipelined;
//! - **leased**: [`sluice_redis::Mode::Leased`], blocks spent locally;
//! - **redis-benchmark**'s own `EVALSHA` rate of a trivial script with the
//!   same client count: the ceiling of one call per decision.
//!
//! The limit is far above the load for the rates (every decision is a
//! grant); a second, binding run per mode counts what was admitted against
//! `rate · t + burst`: the over-admission; a third has every decider wait
//! (`acquire`) for a limit of `--deliver-rate` (2,000/s) burst
//! `--deliver-burst` (10) shared by the replicas: what they were let go
//! against `rate · t`, the delivered share (issue 41 asks ≥ 99 %).
//! `--delivered-only` runs the third alone, in both modes, and says what
//! each replica was let go.

use super::note;
use crate::table::Table;
use std::process::{Child, Command, ExitCode, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use serde_json::{Value, json};
use sluice_limit::{AdaptiveConfig, Limit, Rules};
use sluice_redis::{Mode, RedisConfig, RedisLimiter};

/// What `sluice bench redis` measures and how hard.
#[derive(Debug, Clone, clap::Args)]
pub struct RedisArgs {
    /// Print the results as JSON.
    #[arg(long)]
    pub json: bool,
    /// A running Redis; without one, a throwaway `redis-server` from PATH.
    #[arg(long)]
    pub url: Option<String>,
    /// Replicas (limiters with a connection each) in this process.
    #[arg(long, default_value_t = 2)]
    pub replicas: usize,
    /// Concurrent deciders per replica (and redis-benchmark's clients in
    /// all).
    #[arg(long, default_value_t = 50)]
    pub clients: usize,
    /// Script calls in flight per replica (exact mode's pipelining; the
    /// library's default is 2).
    #[arg(long, default_value_t = 2)]
    pub pipeline: usize,
    /// Length of each measured run.
    #[arg(long, default_value = "3s", value_parser = crate::args::duration)]
    pub duration: Duration,
    /// The delivered run's limit, per second: every replica's deciders
    /// wait for it (`acquire`) in a closed loop.
    #[arg(long, default_value_t = 2_000)]
    pub deliver_rate: u64,
    /// The delivered run's burst.
    #[arg(long, default_value_t = 10)]
    pub deliver_burst: u64,
    /// Runs only the delivered runs (exact and leased), not the rates.
    #[arg(long)]
    pub delivered_only: bool,
}

/// The seed's token bucket script: client time, one EVAL per decision.
const SEED_SCRIPT: &str = r"
local key = KEYS[1]
local maxTokens = tonumber(ARGV[1])
local refillRate = tonumber(ARGV[2])
local now = tonumber(ARGV[3])
local data = redis.call('HMGET', key, 'tokens', 'lastRefill')
local tokens = tonumber(data[1]) or maxTokens
local lastRefill = tonumber(data[2]) or now
local elapsed = (now - lastRefill) / 1000
local tokensToAdd = elapsed * refillRate
tokens = math.min(maxTokens, tokens + tokensToAdd)
if tokens >= 1 then
  tokens = tokens - 1
  redis.call('HMSET', key, 'tokens', tokens, 'lastRefill', now)
  return 1
else
  redis.call('HSET', key, 'lastRefill', now)
  return 0
end
";

/// A rate no run reaches: every decision is a grant.
const OPEN: u64 = 1_000_000_000;
/// The binding limit of the over-admission runs.
const BINDING_RATE: u64 = 20_000;
const BINDING_BURST: u64 = 1_000;

pub async fn redis(args: RedisArgs) -> ExitCode {
    if !(1..=64).contains(&args.replicas) || !(1..=4_096).contains(&args.clients) {
        eprintln!("sluice bench: --replicas must be 1 to 64 and --clients 1 to 4096");
        return ExitCode::from(2);
    }
    if !(1..=1_000_000).contains(&args.deliver_rate) || !(1..=100_000).contains(&args.deliver_burst)
    {
        eprintln!(
            "sluice bench: --deliver-rate must be 1 to 1000000 and --deliver-burst 1 to 100000"
        );
        return ExitCode::from(2);
    }
    let mut own = None;
    let url = match &args.url {
        Some(u) => u.clone(),
        None => match OwnRedis::start() {
            Ok(r) => {
                let u = r.url();
                own = Some(r);
                u
            }
            Err(e) => {
                eprintln!("sluice bench: {e}; pass --url redis://…");
                return ExitCode::from(2);
            }
        },
    };
    let out = run(&args, &url).await;
    drop(own);
    super::finish(args.json, out, table)
}

/// Per replica: decisions and latency histogram (µs).
struct Side {
    decisions: u64,
    hist: Histogram<u64>,
}

fn side_json(sides: &[Side], secs: f64) -> Value {
    let per: Vec<Value> = sides
        .iter()
        .map(|s| {
            json!({
                "decisions_per_second": (s.decisions as f64 / secs).round(),
                "p99_ms": s.hist.value_at_quantile(0.99) as f64 / 1e3,
            })
        })
        .collect();
    let total: u64 = sides.iter().map(|s| s.decisions).sum();
    let mut all = Histogram::<u64>::new(3).expect("histogram");
    for s in sides {
        let _ = all.add(&s.hist);
    }
    json!({
        "per_replica_decisions_per_second": (total as f64 / secs / sides.len() as f64).round(),
        "total_decisions_per_second": (total as f64 / secs).round(),
        "p99_ms": all.value_at_quantile(0.99) as f64 / 1e3,
        "replicas": per,
    })
}

async fn run(args: &RedisArgs, url: &str) -> Result<Value, String> {
    let client = redis::Client::open(url).map_err(|e| format!("{url}: {e}"))?;
    let prefix = format!("bench{}:", std::process::id());
    let secs = args.duration.as_secs_f64();

    if args.delivered_only {
        let mut modes = serde_json::Map::new();
        for (name, mode) in [("exact", Mode::Exact), ("leased", Mode::Leased)] {
            let delivered = delivered(args, url, &prefix, mode).await?;
            modes.insert(name.into(), json!({ "delivered": delivered }));
        }
        return Ok(json!({
            "url": url,
            "replicas": args.replicas,
            "clients_per_replica": args.clients,
            "duration_s": secs,
            "exact": modes["exact"],
            "leased": modes["leased"],
        }));
    }
    note(args.json, "naive: one EVAL per decision, client time");
    let naive = naive(&client, args, &prefix).await?;

    let mut modes = serde_json::Map::new();
    for (name, mode) in [("exact", Mode::Exact), ("leased", Mode::Leased)] {
        note(args.json, &format!("{name}: decisions at an open limit"));
        let rules = Rules::new().exact("open", Limit::per_second(OPEN));
        let sides = limited(args, url, &prefix, mode, rules, "open").await?;
        let mut v = side_json(&sides, secs);
        note(
            args.json,
            &format!("{name}: over-admission at {BINDING_RATE}/s"),
        );
        v["over_admission"] = over_admission(args, url, &prefix, mode).await?;
        note(
            args.json,
            &format!(
                "{name}: delivered at {}/s burst {}",
                args.deliver_rate, args.deliver_burst
            ),
        );
        v["delivered"] = delivered(args, url, &prefix, mode).await?;
        modes.insert(name.into(), v);
    }

    note(args.json, "redis-benchmark EVALSHA");
    // As many calls as about one run's worth at 100k/s.
    let calls = ((secs * 100_000.0) as u64).clamp(20_000, 1_000_000);
    let ceiling = redis_benchmark(&client, url, args.clients * args.replicas, calls).await;
    let exact = modes["exact"]["total_decisions_per_second"]
        .as_f64()
        .unwrap_or(0.0);
    let leased = modes["leased"]["total_decisions_per_second"]
        .as_f64()
        .unwrap_or(0.0);
    let naive_rate = naive["total_decisions_per_second"].as_f64().unwrap_or(0.0);
    Ok(json!({
        "url": url,
        "replicas": args.replicas,
        "clients_per_replica": args.clients,
        "pipeline": args.pipeline,
        "duration_s": secs,
        "naive": naive,
        "exact": modes["exact"],
        "leased": modes["leased"],
        "redis_benchmark": ceiling,
        "ratios": {
            "exact_to_evalsha": ceiling["requests_per_second"].as_f64().map(|c| exact / c),
            "leased_to_naive": if naive_rate > 0.0 { Some(leased / naive_rate) } else { None },
        },
    }))
}

async fn naive(client: &redis::Client, args: &RedisArgs, prefix: &str) -> Result<Value, String> {
    let key = format!("{prefix}naive");
    let mut sides = Vec::new();
    let mut tasks = Vec::new();
    for _ in 0..args.replicas {
        let conn = client
            .get_multiplexed_async_connection()
            .await
            .map_err(|e| format!("connect: {e}"))?;
        let decisions = Arc::new(AtomicU64::new(0));
        let mut handles = Vec::new();
        for _ in 0..args.clients {
            let (mut conn, key, decisions) = (conn.clone(), key.clone(), decisions.clone());
            let dur = args.duration;
            handles.push(tokio::spawn(async move {
                let mut hist = Histogram::<u64>::new(3).expect("histogram");
                let t0 = Instant::now();
                while t0.elapsed() < dur {
                    let now = std::time::SystemTime::now()
                        .duration_since(std::time::UNIX_EPOCH)
                        .map(|d| d.as_millis() as u64)
                        .unwrap_or(0);
                    let s = Instant::now();
                    let r: redis::RedisResult<i64> = redis::cmd("EVAL")
                        .arg(SEED_SCRIPT)
                        .arg(1)
                        .arg(&key)
                        .arg(OPEN)
                        .arg(OPEN)
                        .arg(now)
                        .query_async(&mut conn)
                        .await;
                    if r.is_err() {
                        break;
                    }
                    let _ = hist.record(s.elapsed().as_micros() as u64);
                    decisions.fetch_add(1, Ordering::Relaxed);
                }
                hist
            }));
        }
        tasks.push((decisions, handles));
    }
    for (decisions, handles) in tasks {
        let mut hist = Histogram::<u64>::new(3).expect("histogram");
        for h in handles {
            if let Ok(h) = h.await {
                let _ = hist.add(&h);
            }
        }
        sides.push(Side {
            decisions: decisions.load(Ordering::Relaxed),
            hist,
        });
    }
    Ok(side_json(&sides, args.duration.as_secs_f64()))
}

async fn replicas(
    args: &RedisArgs,
    url: &str,
    prefix: &str,
    mode: Mode,
    rules: &Rules,
) -> Result<Vec<RedisLimiter>, String> {
    let mut out = Vec::new();
    for i in 0..args.replicas {
        let mut cfg = RedisConfig::new(url);
        cfg.prefix = format!("{prefix}{}:", mode.as_str());
        cfg.replica_id = format!("bench-{i}");
        cfg.mode = mode;
        cfg.timeout = Duration::from_secs(2);
        cfg.max_in_flight_calls = args.pipeline.max(1);
        let l = RedisLimiter::connect(cfg, rules.clone(), AdaptiveConfig::default())
            .await
            .map_err(|e| e.to_string())?;
        if l.is_degraded() {
            return Err(format!("cannot reach redis at {url}"));
        }
        out.push(l);
    }
    Ok(out)
}

/// Every replica's deciders take 1 from `resource` as fast as they can.
async fn limited(
    args: &RedisArgs,
    url: &str,
    prefix: &str,
    mode: Mode,
    rules: Rules,
    resource: &'static str,
) -> Result<Vec<Side>, String> {
    let ls = replicas(args, url, prefix, mode, &rules).await?;
    let mut tasks = Vec::new();
    for l in &ls {
        let granted = Arc::new(AtomicU64::new(0));
        let mut handles = Vec::new();
        for _ in 0..args.clients {
            let (l, granted) = (l.clone(), granted.clone());
            let dur = args.duration;
            handles.push(tokio::spawn(async move {
                let mut hist = Histogram::<u64>::new(3).expect("histogram");
                let t0 = Instant::now();
                let mut n = 0u32;
                while t0.elapsed() < dur {
                    let s = Instant::now();
                    let r = l.try_acquire(resource, 1).await;
                    let _ = hist.record(s.elapsed().as_micros() as u64);
                    if r.is_ok() {
                        granted.fetch_add(1, Ordering::Relaxed);
                    }
                    n = n.wrapping_add(1);
                    // Local decisions never yield by themselves.
                    if n.is_multiple_of(64) {
                        tokio::task::yield_now().await;
                    }
                }
                hist
            }));
        }
        tasks.push((granted, handles));
    }
    let mut sides = Vec::new();
    for (granted, handles) in tasks {
        let mut hist = Histogram::<u64>::new(3).expect("histogram");
        for h in handles {
            if let Ok(h) = h.await {
                let _ = hist.add(&h);
            }
        }
        sides.push(Side {
            decisions: granted.load(Ordering::Relaxed),
            hist,
        });
    }
    for l in ls {
        l.close();
    }
    Ok(sides)
}

/// A binding limit: admitted against `rate · t + burst`, `t` from before
/// the first decision to after the last (an upper bound on the window).
async fn over_admission(
    args: &RedisArgs,
    url: &str,
    prefix: &str,
    mode: Mode,
) -> Result<Value, String> {
    let p = format!("{prefix}bind{}:", mode.as_str());
    let rules = Rules::new().exact("bind", Limit::per_second(BINDING_RATE).burst(BINDING_BURST));
    let t0 = Instant::now();
    let sides = limited(args, url, &p, mode, rules, "bind").await?;
    let secs = t0.elapsed().as_secs_f64();
    let admitted: u64 = sides.iter().map(|s| s.decisions).sum();
    let bound = BINDING_RATE as f64 * secs + BINDING_BURST as f64;
    let over = (admitted as f64 - bound).max(0.0) / bound;
    Ok(json!({
        "rate_per_second": BINDING_RATE,
        "burst": BINDING_BURST,
        "admitted": admitted,
        "bound": bound.floor(),
        "over_admission_percent": over * 100.0,
    }))
}

/// A binding limit that every replica's deciders wait for (`acquire`,
/// FIFO per replica, no polling) in a closed loop: what the replicas
/// together were let go, against `rate · t` (issue 41: at least 99 %).
async fn delivered(args: &RedisArgs, url: &str, prefix: &str, mode: Mode) -> Result<Value, String> {
    let p = format!("{prefix}deliver{}:", mode.as_str());
    let (rate, burst) = (args.deliver_rate, args.deliver_burst);
    let rules = Rules::new().exact("deliver", Limit::per_second(rate).burst(burst));
    let ls = replicas(args, url, &p, mode, &rules).await?;
    // Warm: each replica's first call opens its lane and connection.
    for l in &ls {
        drop(
            l.acquire("deliver", 1, None)
                .await
                .map_err(|e| e.to_string())?,
        );
    }
    let t0 = Instant::now();
    let end = tokio::time::Instant::now() + args.duration;
    let mut handles = Vec::new();
    for (i, l) in ls.iter().enumerate() {
        for _ in 0..args.clients {
            let l = l.clone();
            handles.push((
                i,
                tokio::spawn(async move {
                    let mut n = 0u64;
                    // Past `end` a wait fails at once, and a grant made at
                    // once (a block, a bucket that holds one) is neither
                    // counted nor asked for again: with a round trip
                    // longer than the deciders' share of the refill, the
                    // last ones were never refused, and never stopped.
                    while let Ok(g) = l.acquire("deliver", 1, Some(end)).await {
                        drop(g);
                        if tokio::time::Instant::now() > end {
                            break;
                        }
                        n += 1;
                    }
                    n
                }),
            ));
        }
    }
    let mut per_replica = vec![0u64; ls.len()];
    for (i, h) in handles {
        per_replica[i] += h.await.unwrap_or(0);
    }
    let admitted: u64 = per_replica.iter().sum();
    let secs = t0.elapsed().as_secs_f64().min(args.duration.as_secs_f64());
    for l in ls {
        l.close();
    }
    let allowed = rate as f64 * secs;
    Ok(json!({
        "rate_per_second": rate,
        "burst": burst,
        "admitted": admitted,
        "delivered_per_second": admitted as f64 / secs,
        "delivered_percent": admitted as f64 / allowed * 100.0,
        "per_replica_admitted": per_replica,
    }))
}

/// redis-benchmark's EVALSHA of a trivial script, `clients` connections.
async fn redis_benchmark(client: &redis::Client, url: &str, clients: usize, calls: u64) -> Value {
    let Some(bin) = which("redis-benchmark") else {
        return json!({"installed": false, "note": "redis-benchmark is not installed"});
    };
    let Ok(mut c) = client.get_multiplexed_async_connection().await else {
        return json!({"installed": true, "note": "cannot connect"});
    };
    let sha: String = match redis::cmd("SCRIPT")
        .arg("LOAD")
        .arg("return 1")
        .query_async(&mut c)
        .await
    {
        Ok(s) => s,
        Err(e) => return json!({"installed": true, "note": e.to_string()}),
    };
    let u = url::Url::parse(url).ok();
    let host = u
        .as_ref()
        .and_then(|u| u.host_str().map(str::to_owned))
        .unwrap_or_else(|| "127.0.0.1".into());
    let port = u.as_ref().and_then(|u| u.port()).unwrap_or(6379);
    let out = Command::new(bin)
        .args([
            "-h",
            &host,
            "-p",
            &port.to_string(),
            "-c",
            &clients.to_string(),
        ])
        .args(["-n", &calls.to_string(), "--csv", "EVALSHA", &sha, "0"])
        .stderr(Stdio::null())
        .output();
    let text = match out {
        Ok(o) => String::from_utf8_lossy(&o.stdout).into_owned(),
        Err(e) => return json!({"installed": true, "note": e.to_string()}),
    };
    // `"test","rps",…` then `"EVALSHA …","123456.78",…`.
    let row: Vec<String> = text
        .lines()
        .nth(1)
        .unwrap_or_default()
        .split(',')
        .map(|f| f.trim_matches('"').to_owned())
        .collect();
    let rps = row.get(1).and_then(|v| v.parse::<f64>().ok());
    let p99 = row.get(6).and_then(|v| v.parse::<f64>().ok());
    json!({"installed": true, "clients": clients, "requests_per_second": rps, "p99_ms": p99,
        "command": "EVALSHA <return 1> 0"})
}

fn which(name: &str) -> Option<std::path::PathBuf> {
    std::env::var_os("PATH")?
        .to_str()?
        .split(':')
        .map(|d| std::path::Path::new(d).join(name))
        .find(|p| p.is_file())
}

fn table(r: &Value) -> String {
    let mut s = format!(
        "sluice bench redis: {} replicas × {} deciders, {} s per run, {}\n\n",
        r["replicas"],
        r["clients_per_replica"],
        r["duration_s"],
        r["url"].as_str().unwrap_or("")
    );
    let mut t = Table::new([
        "mode",
        "decisions/s",
        "per replica",
        "p99 ms",
        "over-admission",
        "delivered",
    ])
    .right(1..6);
    for m in ["naive", "exact", "leased"] {
        let v = &r[m];
        if v.is_null() {
            // `--delivered-only` runs no naive baseline.
            continue;
        }
        let over = v["over_admission"]["over_admission_percent"]
            .as_f64()
            .map_or("-".to_owned(), |o| format!("{o:.3} %"));
        let delivered = v["delivered"]["delivered_percent"]
            .as_f64()
            .map_or("-".to_owned(), |d| format!("{d:.1} %"));
        t.row([
            m.to_owned(),
            format!(
                "{:.0}",
                v["total_decisions_per_second"].as_f64().unwrap_or(0.0)
            ),
            format!(
                "{:.0}",
                v["per_replica_decisions_per_second"]
                    .as_f64()
                    .unwrap_or(0.0)
            ),
            format!("{:.3}", v["p99_ms"].as_f64().unwrap_or(0.0)),
            over,
            delivered,
        ]);
    }
    let b = &r["redis_benchmark"];
    let note = match b["requests_per_second"].as_f64() {
        Some(rps) => {
            t.row([
                "redis-benchmark".to_owned(),
                format!("{rps:.0}"),
                "-".to_owned(),
                format!("{:.3}", b["p99_ms"].as_f64().unwrap_or(0.0)),
                "-".to_owned(),
                "-".to_owned(),
            ]);
            String::new()
        }
        None if b.is_null() => String::new(),
        None => format!(
            "redis-benchmark: {}\n",
            b["note"].as_str().unwrap_or("not run")
        ),
    };
    s.push_str(&t.render());
    s.push_str(&note);
    for m in ["exact", "leased"] {
        let d = &r[m]["delivered"];
        if let Some(per) = d["per_replica_admitted"].as_array() {
            let per: Vec<String> = per.iter().map(ToString::to_string).collect();
            s.push_str(&format!(
                "{m}: delivered {:.1}/s of {}/s burst {}, per replica {}\n",
                d["delivered_per_second"].as_f64().unwrap_or(0.0),
                d["rate_per_second"],
                d["burst"],
                per.join(" + ")
            ));
        }
    }
    let ratios = &r["ratios"];
    if ratios.is_null() {
        return s;
    }
    s.push_str(&format!(
        "\nexact / EVALSHA ceiling: {}   leased / naive: {}\n",
        ratios["exact_to_evalsha"]
            .as_f64()
            .map_or("-".into(), |x| format!("{x:.2}")),
        ratios["leased_to_naive"]
            .as_f64()
            .map_or("-".into(), |x| format!("{x:.1}×")),
    ));
    s
}

/// A throwaway redis-server from PATH on a free loopback port.
pub(crate) struct OwnRedis {
    port: u16,
    child: Child,
}

impl OwnRedis {
    pub(crate) fn start() -> Result<OwnRedis, String> {
        let bin = which("redis-server").ok_or("redis-server is not installed")?;
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map_err(|e| e.to_string())?
            .port();
        let child = Command::new(bin)
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("redis-server: {e}"))?;
        for _ in 0..250 {
            if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                return Ok(OwnRedis { port, child });
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Err("redis-server did not start".into())
    }

    pub(crate) fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }
}

impl Drop for OwnRedis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
