//! A `sluice serve` process for end-to-end tests: started on a port of its
//! own with a config file, killed (SIGKILL) on request or on drop.
#![allow(dead_code)] // each test file uses a part

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

/// A directory of its own under the system's temporary directory, removed
/// on drop.
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

/// A running `sluice serve`.
#[derive(Debug)]
pub struct Serve {
    child: Child,
    /// `http://127.0.0.1:{port}`.
    pub url: String,
}

impl Serve {
    /// Starts `sluice serve --config CONFIG --listen 127.0.0.1:0` and waits
    /// for its "listening on" line. `SLUICE_` settings of the test's own
    /// environment are not passed on.
    pub fn start(config: &Path) -> Serve {
        Serve::start_with_env(config, &[])
    }

    /// [`Serve::start`] with these environment variables set for it.
    pub fn start_with_env(config: &Path, env: &[(&str, &str)]) -> Serve {
        let mut command = Command::new(env!("CARGO_BIN_EXE_sluice"));
        command
            .args(["serve", "--listen", "127.0.0.1:0", "--config"])
            .arg(config)
            .env_remove("SLUICE_ADMIN_TOKEN")
            .env_remove("SLUICE_CONFIG")
            .envs(env.iter().copied());
        Serve::spawn(command)
    }

    /// Starts `sluice sim --listen 127.0.0.1:0`.
    pub fn sim() -> Serve {
        let mut command = Command::new(env!("CARGO_BIN_EXE_sluice"));
        command.args(["sim", "--listen", "127.0.0.1:0"]);
        Serve::spawn(command)
    }

    /// Runs `command` and waits for its "listening on" line.
    fn spawn(mut command: Command) -> Serve {
        let mut child = command
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("sluice starts");
        // Read stderr on a thread for as long as the server runs, so that
        // its pipe never fills; hand over the address once it is known.
        let stderr = child.stderr.take().expect("stderr is piped");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if let Some(addr) = line.split("listening on ").nth(1) {
                    let _ = tx.send(addr.trim().to_owned());
                }
            }
        });
        let url = rx
            .recv_timeout(Duration::from_secs(60))
            .expect("sluice says where it listens");
        Serve { child, url }
    }

    /// The process's id (to read its memory in /proc).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Kills the process at once (SIGKILL: no drain, no cleanup) and reaps it.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        self.kill();
    }
}
