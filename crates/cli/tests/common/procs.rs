//! The processes the suites start, stop and kill: `sluice serve`,
//! `redis-server`, a PostgreSQL cluster of its own; free ports, waits, a
//! temporary directory.

use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Longest any wait of the suite lasts before it fails the test: a bound
/// against hangs, never a figure that is asserted.
pub const PATIENCE: Duration = Duration::from_secs(60);

/// Lines of a process's stderr kept for assertions (the last ones).
const KEPT_LINES: usize = 5_000;

/// A child process killed (SIGKILL) on drop; its stderr is read on a
/// thread of its own (so the pipe never fills) and its last lines kept.
#[derive(Debug)]
pub struct Proc {
    child: Option<Child>,
    lines: Arc<Mutex<Vec<String>>>,
}

impl Proc {
    /// Starts `command` with stderr piped.
    pub fn spawn(mut command: Command) -> Proc {
        let mut child = command
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("{command:?} starts: {e}"));
        let stderr = child.stderr.take().expect("stderr is piped");
        let lines = Arc::new(Mutex::new(Vec::new()));
        let kept = Arc::clone(&lines);
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                let mut k = kept.lock().unwrap();
                if k.len() == KEPT_LINES {
                    k.remove(0);
                }
                k.push(line);
            }
        });
        Proc {
            child: Some(child),
            lines,
        }
    }

    /// The process's id (to read its memory in /proc).
    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("running").id()
    }

    /// Its stderr so far (the last lines).
    pub fn log(&self) -> Vec<String> {
        self.lines.lock().unwrap().clone()
    }

    /// Waits until a line of stderr contains `what`; returns that line.
    /// Fails at once if the process exits first.
    pub fn wait_line(&mut self, what: &str) -> String {
        let end = Instant::now() + PATIENCE;
        loop {
            if let Some(l) = self.log().into_iter().find(|l| l.contains(what)) {
                return l;
            }
            let exited = self
                .child
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten());
            if let Some(status) = exited {
                // Its last words may still be in the pipe.
                std::thread::sleep(Duration::from_millis(100));
                panic!("exited ({status}) before {what:?}: {:#?}", self.log());
            }
            assert!(
                Instant::now() < end,
                "no line with {what:?} in: {:#?}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Sends SIGTERM.
    pub fn terminate(&self) {
        let pid = self.pid();
        let ok = Command::new("kill")
            .args(["-TERM", &pid.to_string()])
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok, "kill -TERM {pid}");
    }

    /// Stops it as an operator would: SIGTERM, then waits for it to exit
    /// (at most [`PATIENCE`]) and checks that it exited cleanly.
    pub fn stop(&mut self) {
        self.terminate();
        let exit = self.wait_exit();
        assert!(exit.success(), "{exit}: {:#?}", self.log());
    }

    /// Waits for the process to exit (at most [`PATIENCE`]).
    pub fn wait_exit(&mut self) -> ExitStatus {
        let child = self.child.as_mut().expect("running");
        let end = Instant::now() + PATIENCE;
        loop {
            if let Some(s) = child.try_wait().expect("try_wait") {
                self.child = None;
                return s;
            }
            assert!(Instant::now() < end, "the process did not exit");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Kills the process at once (SIGKILL) and reaps it.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A loopback port nobody listens on (now).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

/// Waits until something accepts connections on `port`.
pub fn wait_port(port: u16) {
    let end = Instant::now() + PATIENCE;
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < end, "nothing listens on {port}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A directory of its own under the system's temporary directory,
/// removed on drop.
#[derive(Debug)]
pub struct TempDir(pub PathBuf);

impl TempDir {
    /// A new, empty directory named after `what`.
    pub fn new(what: &str) -> TempDir {
        use std::hash::{BuildHasher, RandomState};
        let random = RandomState::new().hash_one(std::time::SystemTime::now());
        let dir =
            std::env::temp_dir().join(format!("sluice-{what}-{}-{random:x}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("a temporary directory");
        TempDir(dir)
    }

    /// A path inside it.
    pub fn join(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// `sluice serve --config CONFIG`, its config listening on `port`; returns
/// once it says it listens.
pub fn serve(config: &Path) -> Proc {
    let mut p = Proc::spawn(serve_command(config));
    p.wait_line("listening on");
    p
}

/// `sluice serve --config CONFIG`, started: returns at once.
pub fn spawn_serve(config: &Path) -> Proc {
    Proc::spawn(serve_command(config))
}

fn serve_command(config: &Path) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_sluice"));
    command
        .args(["serve", "--config"])
        .arg(config)
        .env("SLUICE_LOG", "info")
        .env_remove("SLUICE_ADMIN_TOKEN")
        .env_remove("SLUICE_CONFIG");
    with_provider_keys(&mut command);
    command
}

/// The built-in providers' key variables, each set to a key for the sim
/// (which wants one, the provider's way, as the providers do): a
/// gateway in front of it sends them. A test of a missing key removes
/// its variable after this.
pub fn with_provider_keys(command: &mut Command) -> &mut Command {
    command
        .env("OPENAI_API_KEY", "sk-test-openai")
        .env("ANTHROPIC_API_KEY", "sk-ant-test")
        .env("GEMINI_API_KEY", "test-gemini-key")
        .env("DEEPSEEK_API_KEY", "sk-test-deepseek")
        .env("MINIMAX_API_KEY", "test-minimax-key")
}

/// `sluice serve --config CONFIG` that must refuse to start: its exit
/// status and what it wrote on stderr. Fails if it listens instead.
pub fn serve_refused(config: &Path) -> (ExitStatus, String) {
    let mut p = Proc::spawn(serve_command(config));
    let end = Instant::now() + PATIENCE;
    loop {
        let exited = p.child.as_mut().and_then(|c| c.try_wait().ok().flatten());
        if let Some(status) = exited {
            p.child = None;
            // Its last words may still be in the pipe.
            std::thread::sleep(Duration::from_millis(100));
            return (status, p.log().join("\n"));
        }
        let log = p.log();
        assert!(
            !log.iter().any(|l| l.contains("listening on")),
            "started instead of refusing: {log:#?}"
        );
        assert!(
            Instant::now() < end,
            "neither refused nor listening: {log:#?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `redis-server` on `port`, without persistence.
pub fn redis_server(bin: &str, port: u16) -> Proc {
    let mut command = Command::new(bin);
    command
        .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
        .args(["--save", "", "--appendonly", "no"]);
    let p = Proc::spawn(command);
    wait_port(port);
    p
}

/// A PostgreSQL cluster of the test's own (initdb in a temporary
/// directory, loopback, trust, no fsync), so that it can be crashed and
/// started again without touching the server other tests share. As root
/// the cluster belongs to `postgres`, as in `scripts/test`.
#[derive(Debug)]
pub struct Postgres {
    bin: PathBuf,
    dir: PathBuf,
    pub port: u16,
    as_postgres: bool,
}

impl Postgres {
    /// Creates and starts one, or `None` (with a note) when PostgreSQL's
    /// binaries are not installed or the suite is not run by
    /// `scripts/test` (which sets `SLUICE_TEST_POSTGRES_URL`).
    pub fn start() -> Option<Postgres> {
        if std::env::var("SLUICE_TEST_POSTGRES_URL").is_err() {
            eprintln!("note: SLUICE_TEST_POSTGRES_URL is not set; skipping (scripts/test sets it)");
            return None;
        }
        let Some(bin) = pg_bindir() else {
            eprintln!("note: no initdb/pg_ctl found; skipping");
            return None;
        };
        let as_postgres = Command::new("id")
            .arg("-u")
            .output()
            .is_ok_and(|o| o.stdout.starts_with(b"0\n"));
        // Under /tmp: the cluster's owner must be able to reach it.
        let dir = PathBuf::from(format!(
            "/tmp/sluice-faults-pg-{}-{}",
            std::process::id(),
            free_port()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let pg = Postgres {
            bin,
            dir,
            port: free_port(),
            as_postgres,
        };
        if as_postgres {
            let _ = Command::new("useradd")
                .args([
                    "--system",
                    "--no-create-home",
                    "--shell",
                    "/usr/sbin/nologin",
                ])
                .arg("postgres")
                .stderr(Stdio::null())
                .status();
            pg.must(Command::new("chown").arg("postgres:").arg(&pg.dir));
        }
        let data = pg.dir.join("data");
        let mut initdb = pg.command("initdb");
        initdb.arg("-D").arg(&data).args([
            "-U",
            "sluice",
            "--auth=trust",
            "-E",
            "UTF8",
            "--no-sync",
        ]);
        pg.must(&mut initdb);
        pg.up();
        pg.must(
            Command::new(pg.bin.join("createdb"))
                .args(["-h", "127.0.0.1", "-p", &pg.port.to_string()])
                .args(["-U", "sluice", "faults"]),
        );
        Some(pg)
    }

    /// `postgres://…/faults`.
    pub fn url(&self) -> String {
        format!("postgres://sluice@127.0.0.1:{}/faults", self.port)
    }

    /// Starts the server (again).
    pub fn up(&self) {
        let mut start = self.command("pg_ctl");
        start
            .arg("-D")
            .arg(self.dir.join("data"))
            .arg("-l")
            .arg(self.dir.join("server.log"))
            .args(["-w", "-t", "60", "-o"])
            .arg(format!(
                "-h 127.0.0.1 -p {} -k {} -c fsync=off -c max_connections=100",
                self.port,
                self.dir.display()
            ))
            .arg("start");
        self.must(&mut start);
    }

    /// Crashes it: `pg_ctl stop -m immediate` ends every backend at once
    /// without a checkpoint, as a power cut would (recovery replays the
    /// WAL at the next start).
    pub fn crash(&self) {
        let mut stop = self.command("pg_ctl");
        stop.arg("-D")
            .arg(self.dir.join("data"))
            .args(["-m", "immediate", "-w", "stop"]);
        self.must(&mut stop);
    }

    fn command(&self, tool: &str) -> Command {
        let mut c = if self.as_postgres {
            let mut c = Command::new("runuser");
            c.args(["-u", "postgres", "--"]).arg(self.bin.join(tool));
            c
        } else {
            Command::new(self.bin.join(tool))
        };
        c.current_dir(&self.dir);
        c
    }

    fn must(&self, c: &mut Command) {
        let out = c.output().unwrap_or_else(|e| panic!("{c:?}: {e}"));
        assert!(
            out.status.success(),
            "{c:?} failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        let mut stop = self.command("pg_ctl");
        stop.arg("-D")
            .arg(self.dir.join("data"))
            .args(["-m", "immediate", "stop"])
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        let _ = stop.status();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The newest PostgreSQL `bin` directory with `initdb` and `pg_ctl`.
fn pg_bindir() -> Option<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path().join("bin"))
        .filter(|d| d.join("initdb").exists() && d.join("pg_ctl").exists())
        .collect();
    dirs.sort_by_key(|d| {
        d.parent()
            .and_then(|v| v.file_name())
            .and_then(|v| v.to_str())
            .and_then(|v| v.parse::<u32>().ok())
            .unwrap_or(0)
    });
    if let Some(d) = dirs.pop() {
        return Some(d);
    }
    // On the PATH (a distribution that installs them there).
    let out = Command::new("sh")
        .args(["-c", "command -v pg_ctl"])
        .output()
        .ok()?;
    let path = String::from_utf8(out.stdout).ok()?;
    let path = std::fs::canonicalize(path.trim()).ok()?;
    let dir = path.parent()?.to_path_buf();
    dir.join("initdb").exists().then_some(dir)
}
