//! A real `a2a-server` process started from a configuration file, for the tests that run several of them on one
//! Redis (`multiprocess`, `sessions_multiprocess`). It listens on a free loopback port; its base URL is read from
//! the line it prints once it serves. Dropping it kills it (SIGKILL).

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// An `a2a-server --config FILE --listen 127.0.0.1:0` process.
pub struct ServerProcess {
    child: Child,
    /// `http://127.0.0.1:PORT`, without `/a2a`.
    pub base: String,
}

impl ServerProcess {
    /// Starts the server on `config` and waits (at most 60 s) until it serves.
    pub fn start(config: &Path) -> ServerProcess {
        Self::start_with_env(config, &[])
    }

    /// [`ServerProcess::start`] with these variables added to the server's environment.
    pub fn start_with_env(config: &Path, env: &[(&str, &str)]) -> ServerProcess {
        let mut child = Command::new(env!("CARGO_BIN_EXE_a2a-server"))
            .envs(env.iter().copied())
            .arg("--config")
            .arg(config)
            .arg("--listen")
            .arg("127.0.0.1:0")
            .env("RUST_LOG", "warn")
            .env_remove("REDIS_URL")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start a2a-server");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut lines = BufReader::new(stdout).lines();
            while let Some(Ok(line)) = lines.next() {
                if let Some(url) = line.split(" serving ").nth(1) {
                    let _ = tx.send(url.trim_end_matches("/a2a").to_owned());
                }
            }
        });
        let base = rx.recv_timeout(Duration::from_secs(60)).expect("the server printed its address");
        ServerProcess { child, base }
    }

    /// Kills the process (SIGKILL) and reaps it.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Sends the process its shutdown signal (SIGTERM), as a service manager would.
    pub fn terminate(&self) {
        let status = Command::new("kill").arg("-TERM").arg(self.child.id().to_string()).status().expect("run kill");
        assert!(status.success(), "kill -TERM {} failed", self.child.id());
    }

    /// Waits at most `patience` for the process to exit; its status when it did.
    pub fn wait_exit(&mut self, patience: Duration) -> Option<ExitStatus> {
        let until = Instant::now() + patience;
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Some(status);
            }
            if Instant::now() >= until {
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        self.kill();
    }
}
