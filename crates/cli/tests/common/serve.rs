//! A `sluice serve` (or `sluice sim`) on a port of its own: started with
//! `--listen 127.0.0.1:0`, its address read from its "listening on" line,
//! killed (SIGKILL) on request or on drop.

use std::path::Path;
use std::process::Command;

use super::procs::{Proc, TempDir};

/// A running `sluice serve` or `sluice sim`.
#[derive(Debug)]
pub struct Serve {
    proc: Proc,
    /// `http://127.0.0.1:{port}`.
    pub url: String,
    /// The directory it was given, if it holds it: removed after the
    /// process is killed.
    dir: Option<TempDir>,
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
            .env_remove("SLUICE_CONFIG");
        super::procs::with_provider_keys(&mut command).envs(env.iter().copied());
        Serve::spawn(command)
    }

    /// A `sluice serve` with the operator's token `admin`, no job workers
    /// and no traces, its config and data in a new temporary directory
    /// named after `what`, which it holds.
    pub fn with_admin(what: &str, admin: &str) -> Serve {
        let dir = TempDir::new(what);
        let config = dir.join("sluice.toml");
        let text = format!(
            "data_dir = {:?}\nadmin_token = {admin:?}\n[trace]\nenabled = false\n[jobs]\nworkers = false\n",
            dir.join("data").display().to_string()
        );
        std::fs::write(&config, text).expect("config written");
        Serve {
            dir: Some(dir),
            ..Serve::start(&config)
        }
    }

    /// Starts `sluice sim --listen 127.0.0.1:0`.
    pub fn sim() -> Serve {
        let mut command = Command::new(env!("CARGO_BIN_EXE_sluice"));
        command.args(["sim", "--listen", "127.0.0.1:0"]);
        Serve::spawn(command)
    }

    /// Runs `command` and waits for its "listening on" line.
    fn spawn(command: Command) -> Serve {
        let mut proc = Proc::spawn(command);
        let line = proc.wait_line("listening on ");
        let url = line
            .split("listening on ")
            .nth(1)
            .expect("the line names the address")
            .trim()
            .to_owned();
        Serve {
            proc,
            url,
            dir: None,
        }
    }

    /// Its stderr so far (the last lines).
    pub fn log(&self) -> Vec<String> {
        self.proc.log()
    }

    /// The process's id (to read its memory in /proc).
    pub fn pid(&self) -> u32 {
        self.proc.pid()
    }

    /// Kills the process at once (SIGKILL: no drain, no cleanup) and reaps it.
    pub fn kill(&mut self) {
        self.proc.kill();
    }
}

/// `sluice sim` and a `sluice serve` in front of it, each on a port of
/// its own; the gateway's config and data in a temporary directory. The
/// gateway is killed first, then the sim; the directory goes last.
#[derive(Debug)]
pub struct Stack {
    pub gateway: Serve,
    pub sim: Serve,
    pub dir: TempDir,
}

impl Stack {
    /// Starts `sluice sim`, writes `config(sim's URL, data_dir)` as
    /// `sluice.toml` in a new directory named after `what`, and starts
    /// `sluice serve` on it with `env` set (see [`Serve::start_with_env`]).
    pub fn start(
        what: &str,
        env: &[(&str, &str)],
        config: impl FnOnce(&str, &Path) -> String,
    ) -> Stack {
        let dir = TempDir::new(what);
        let sim = Serve::sim();
        let path = dir.join("sluice.toml");
        std::fs::write(&path, config(&sim.url, &dir.join("data"))).expect("config written");
        Stack {
            gateway: Serve::start_with_env(&path, env),
            sim,
            dir,
        }
    }
}
