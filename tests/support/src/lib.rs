//! The one test support of the workspace (a dev-dependency of a2a-agent, a2a-client and a2a-tests): a process of one
//! of the workspace's binaries with its log kept and its "serving" line awaited ([`Process`]), free loopback ports,
//! scratch directories ([`TempDir`]), the Python of the a2a-sdk interop tests, the `a2a` CLI run as a subprocess
//! ([`cli`]), headless Chromium's flags ([`browser`]) and, with feature `agent`, the in-process test agent ([`agent`]).
//!
//! [`bin`] finds the binaries of this build: `cargo test --workspace` builds every binary before it runs a test;
//! `cargo test -p a2a-tests` needs `cargo build --bins` first (the test that misses one says so). A crate's own
//! binaries are better named with `env!("CARGO_BIN_EXE_…")`.

#[cfg(feature = "agent")]
pub mod agent;
pub mod browser;
pub mod cli;
mod temp_dir;

pub use temp_dir::TempDir;

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The path of the workspace's binary `name` in this build's target directory (beside the test binary's `deps/`).
pub fn bin(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("the test binary's path");
    let dir = exe.parent().and_then(|d| d.parent()).expect("the target directory");
    let path = dir.join(format!("{name}{}", std::env::consts::EXE_SUFFIX));
    assert!(
        path.exists(),
        "{} is missing: `cargo test --workspace` builds it (or `cargo build --bins`)",
        path.display()
    );
    path
}

/// A free loopback TCP port (bound and released: another process could take it in between, rarely), for processes
/// that must be told their port up front.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map(|a| a.port()).expect("a free port")
}

/// The Python of the a2a-sdk interop tests: `A2A_SDK_PYTHON`, else the venv `bash .ci/run` creates. A test whose
/// tool is missing fails (it never passes having run nothing), saying how to make one.
pub fn sdk_python() -> String {
    const PIN: &str = "1.3.0";
    if let Some(p) = std::env::var("A2A_SDK_PYTHON").ok().filter(|p| !p.is_empty()) {
        return p;
    }
    let default =
        std::env::var("HOME").map(|h| format!("{h}/.cache/a2a-ci-venv/a2a-sdk-{PIN}/bin/python")).unwrap_or_default();
    if !default.is_empty() && std::path::Path::new(&default).exists() {
        return default;
    }
    panic!(
        "the a2a-sdk interop tests need a Python with a2a-sdk {PIN}: set A2A_SDK_PYTHON, or create {default} \
         (`bash .ci/run` does it; by hand: python3 -m venv DIR && DIR/bin/pip install \
         'a2a-sdk[http-server,signing]=={PIN}' uvicorn)"
    )
}

/// The Python that runs the official MCP SDK (`mcp` on PyPI, pinned in `.ci/run`) for the MCP interop tests (§21):
/// `MCP_SDK_PYTHON`, else the venv `.ci/run` creates. Panics with how to make one when there is none, so that an
/// interop test never passes without its peer.
pub fn mcp_python() -> String {
    const PIN: &str = "2.3.0";
    if let Some(p) = std::env::var("MCP_SDK_PYTHON").ok().filter(|p| !p.is_empty()) {
        return p;
    }
    let default =
        std::env::var("HOME").map(|h| format!("{h}/.cache/a2a-ci-venv/mcp-{PIN}/bin/python")).unwrap_or_default();
    if !default.is_empty() && std::path::Path::new(&default).exists() {
        return default;
    }
    panic!(
        "the MCP interop tests need a Python with mcp {PIN}: set MCP_SDK_PYTHON, or create {default} \
         (`bash .ci/run` does it; by hand: python3 -m venv DIR && DIR/bin/pip install 'mcp=={PIN}' uvicorn)"
    )
}

/// A running process of one of the workspace's binaries; its stderr is echoed (prefixed with its name) and kept.
/// Dropping it kills it.
pub struct Process {
    /// The child.
    pub child: Child,
    /// Its stderr so far.
    pub log: Arc<Mutex<String>>,
}

impl Process {
    /// Starts `command` (stdin closed, stdout and stderr piped) and waits (at most 60 s) for a stdout line containing
    /// `ready` (the binaries print ` serving ` once they serve); returns the process and that line.
    pub fn start(name: &str, mut command: Command, ready: &str) -> (Process, String) {
        let mut child = command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("{name} starts: {e}"));
        let log = Arc::new(Mutex::new(String::new()));
        let stderr = child.stderr.take().expect("stderr");
        let kept = log.clone();
        let prefix = name.to_owned();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                eprintln!("[{prefix}] {line}");
                let mut l = kept.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                l.push_str(&line);
                l.push('\n');
            }
        });
        let stdout = child.stdout.take().expect("stdout");
        let (tx, rx) = std::sync::mpsc::channel();
        let ready = ready.to_owned();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if line.contains(&ready) {
                    let _ = tx.send(line);
                }
            }
        });
        let line = rx.recv_timeout(Duration::from_secs(60)).unwrap_or_else(|_| panic!("{name} says it serves"));
        (Process { child, log }, line)
    }

    /// Its stderr so far.
    pub fn log(&self) -> String {
        self.log.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
    }

    /// Waits (at most `within`) until its stderr has `count` lines containing `needle`; the log when it does.
    pub fn wait_log(&self, needle: &str, count: usize, within: Duration) -> Option<String> {
        let until = Instant::now() + within;
        loop {
            let log = self.log();
            if log.lines().filter(|l| l.contains(needle)).count() >= count {
                return Some(log);
            }
            if Instant::now() >= until {
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// [`Process::wait_log`] for at most 30 s, failing the test when the lines do not come.
    pub fn expect_log(&self, needle: &str, count: usize) -> String {
        self.wait_log(needle, count, Duration::from_secs(30))
            .unwrap_or_else(|| panic!("no {count}× {needle:?} in the log:\n{}", self.log()))
    }

    /// Sends it the signal `name` (`HUP`, `USR1`, `TERM`, ...) with kill(1), as an operator would.
    pub fn signal(&self, name: &str) {
        let status =
            Command::new("kill").arg(format!("-{name}")).arg(self.child.id().to_string()).status().expect("kill");
        assert!(status.success(), "kill -{name} failed");
    }

    /// Whether it is still running.
    pub fn alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
