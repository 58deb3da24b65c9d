//! The `a2a` command-line client run as a subprocess, with its exit code and both outputs.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use serde_json::Value;
use tokio::io::AsyncWriteExt;

/// What one run of the `a2a` binary did.
pub struct Run {
    /// The exit code (-1 when a signal ended it).
    pub code: i32,
    /// Its stdout.
    pub stdout: String,
    /// Its stderr.
    pub stderr: String,
}

impl Run {
    /// Its stdout as JSON (the test fails when it is not).
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.stdout).unwrap_or_else(|e| panic!("stdout is not JSON ({e}): {}", self.stdout))
    }
}

/// Runs the `a2a` binary at `exe` with `args` and `stdin` (closed at once when `None`), without the `A2A_*`
/// identity variables of the caller's environment; it must finish within 120 s.
pub async fn run(exe: &Path, args: &[&str], stdin: Option<&str>) -> Run {
    let mut cmd = tokio::process::Command::new(exe);
    cmd.args(args)
        .env_remove("A2A_DID")
        .env_remove("A2A_KEY_FILE")
        .env_remove("A2A_API_KEY")
        .env_remove("A2A_REGION")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let mut child = cmd.spawn().expect("spawn a2a");
    if let Some(mut si) = child.stdin.take() {
        if let Some(s) = stdin {
            si.write_all(s.as_bytes()).await.expect("stdin");
        }
        drop(si);
    }
    let out = tokio::time::timeout(Duration::from_secs(120), child.wait_with_output())
        .await
        .expect("a2a finished in time")
        .expect("a2a ran");
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}
