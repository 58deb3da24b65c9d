//! Ready-made handlers that expose existing programs and services as capabilities without writing Rust:
//! [`CommandHandler`] (a program per execution: JSON on stdin, JSON on stdout), [`HttpHandler`] (forwards the payload
//! to a URL) and [`echo`].

use std::collections::BTreeMap;
use std::process::Stdio;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::handler::{ExecutionContext, Handler, HandlerError, HandlerFuture};

/// Returns `{"echo": payload}`.
pub fn echo() -> impl Handler {
    |_ctx: ExecutionContext, payload: Value| async move { Ok(json!({ "echo": payload })) }
}

/// Runs a program per execution.
///
/// The program gets the payload as JSON on stdin; its environment holds only the allow-listed variables of the
/// agent's ([`CommandHandler::env_allow`], default [`DEFAULT_ENV_ALLOW`]), the configured ones and `A2A_EXECUTION_ID`,
/// `A2A_NEGOTIATION_ID`, `A2A_SENDER_ID`, `A2A_CAPABILITY`, `A2A_DEADLINE_MS` (ms left) and `TRACEPARENT` (HDL-5:
/// the agent's secrets, such as its `key_env` variables, are not the program's). It prints its result as one JSON
/// value on stdout and exits 0. A non-zero exit, a timeout, or output that is not JSON makes the execution `failed`;
/// the program's stderr goes to the agent's log, never to the caller (it names server paths). The program is killed
/// when the execution times out or is canceled, and — run under `a2a-supervise` — when the agent dies.
#[derive(Debug, Clone)]
pub struct CommandHandler {
    /// The program (looked up on `PATH` when it has no `/`).
    pub program: String,
    /// Its arguments.
    pub args: Vec<String>,
    /// Extra environment variables.
    pub env: BTreeMap<String, String>,
    /// Working directory.
    pub cwd: Option<std::path::PathBuf>,
    /// A time limit of its own (the execution's deadline applies anyway).
    pub timeout: Option<Duration>,
    /// Largest stdout accepted.
    pub max_output_bytes: usize,
    /// The agent's environment variables the program gets (HDL-5); every other one is withheld.
    pub env_allow: Vec<String>,
    /// The supervisor that ends the program with the agent (`a2a-supervise`, HDL-5); `None`: the program is started
    /// directly (it then outlives an agent killed with `kill -9`). Default: [`supervisor`].
    pub supervisor: Option<std::path::PathBuf>,
}

/// The agent's environment variables a `command` handler's program gets by default (HDL-1, HDL-5).
pub const DEFAULT_ENV_ALLOW: [&str; 6] = ["PATH", "HOME", "LANG", "LC_ALL", "TZ", "TMPDIR"];

/// Where `a2a-supervise` is (HDL-5): `A2A_SUPERVISOR` when set, else beside the running program (or one directory
/// up, for test binaries under `target/*/deps`); `None` (and a warning, once) when it cannot be found.
pub fn supervisor() -> Option<std::path::PathBuf> {
    static FOUND: std::sync::OnceLock<Option<std::path::PathBuf>> = std::sync::OnceLock::new();
    FOUND
        .get_or_init(|| {
            if let Some(p) = std::env::var_os("A2A_SUPERVISOR").filter(|p| !p.is_empty()) {
                return Some(p.into());
            }
            let exe = std::env::current_exe().ok()?;
            let name = format!("a2a-supervise{}", std::env::consts::EXE_SUFFIX);
            let found = exe.ancestors().skip(1).take(2).map(|d| d.join(&name)).find(|p| p.is_file());
            if found.is_none() {
                tracing::warn!(
                    "a2a-supervise was not found beside {} (nor A2A_SUPERVISOR): command handlers' programs will not \
                     be stopped if the agent is killed",
                    exe.display()
                );
            }
            found
        })
        .clone()
}

impl CommandHandler {
    /// Runs `program` with `args`.
    pub fn new(program: impl Into<String>, args: Vec<String>) -> Self {
        CommandHandler {
            program: program.into(),
            args,
            env: BTreeMap::new(),
            cwd: None,
            timeout: None,
            max_output_bytes: 16 * 1024 * 1024,
            env_allow: DEFAULT_ENV_ALLOW.map(String::from).to_vec(),
            supervisor: supervisor(),
        }
    }
}

const STDERR_KEEP: usize = 4096;

async fn read_bounded(mut r: impl tokio::io::AsyncRead + Unpin, max: usize) -> std::io::Result<(Vec<u8>, bool)> {
    let mut out = Vec::new();
    let mut buf = [0u8; 8192];
    let mut truncated = false;
    loop {
        let n = r.read(&mut buf).await?;
        if n == 0 {
            return Ok((out, truncated));
        }
        let room = max.saturating_sub(out.len());
        if room < n {
            truncated = true;
        }
        out.extend_from_slice(&buf[..n.min(room)]);
    }
}

/// The handler's own time limit when it ends before the execution's deadline (which the engine enforces).
fn own_limit(timeout: Option<Duration>, ctx: &ExecutionContext) -> Option<Duration> {
    timeout.filter(|t| *t < ctx.remaining())
}

fn tail(bytes: &[u8]) -> String {
    let s = String::from_utf8_lossy(bytes);
    let s = s.trim();
    if s.len() <= STDERR_KEEP {
        return s.to_owned();
    }
    let mut start = s.len() - STDERR_KEEP;
    while !s.is_char_boundary(start) {
        start += 1;
    }
    format!("...{}", &s[start..])
}

/// Kills a program's whole process group when dropped (or asked): whatever it left running dies with the execution
/// or the delivery.
pub(crate) struct GroupGuard(pub(crate) Option<u32>);

impl GroupGuard {
    /// Kills the group now.
    pub(crate) fn kill(&self) {
        #[cfg(unix)]
        if let Some(pid) = self.0.and_then(|p| i32::try_from(p).ok()).and_then(rustix::process::Pid::from_raw) {
            // ESRCH (nothing left) is the usual case and not an error.
            let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
        }
    }
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        self.kill();
    }
}

/// The command that starts a handler's `program`, for capability handlers (HDL-5) and session handlers (HDL-1)
/// alike: under `supervisor` when there is one (`a2a-supervise`, which ends it within 100 ms of the agent's death,
/// HDL-4), with an environment of only the `env_allow` variables of the agent's, piped standard streams, killed when
/// dropped, in a process group of its own (so that a timeout or a cancel stops what it started too, `sh -c 'sleep
/// 100 &'`; [`GroupGuard`]). The caller adds the program's arguments and its own variables.
pub(crate) fn program_command(
    program: &str,
    supervisor: Option<&std::path::Path>,
    env_allow: &[String],
) -> tokio::process::Command {
    let mut cmd = match supervisor {
        Some(sup) => {
            let mut c = tokio::process::Command::new(sup);
            c.arg(program).env_clear().env("A2A_SUPERVISOR_PARENT", std::process::id().to_string());
            c
        }
        None => {
            let mut c = tokio::process::Command::new(program);
            c.env_clear();
            c
        }
    };
    for name in env_allow {
        if let Some(v) = std::env::var_os(name) {
            cmd.env(name, v);
        }
    }
    cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).kill_on_drop(true);
    #[cfg(unix)]
    cmd.process_group(0);
    cmd
}

/// Why the supervisor could not start the program (it exits 127 and says so on stderr), when that is what `status`
/// and `stderr` tell; `None` for the program's own exit.
pub(crate) fn supervisor_refusal(status: std::process::ExitStatus, stderr: &[u8]) -> Option<String> {
    if status.code() != Some(127) {
        return None;
    }
    String::from_utf8_lossy(stderr).lines().find_map(|l| l.strip_prefix("a2a-supervise: ")).map(str::to_owned)
}

impl CommandHandler {
    async fn run(&self, ctx: ExecutionContext, payload: Value) -> Result<Value, HandlerError> {
        // HDL-5: only the allow-listed variables of the agent's environment.
        let mut cmd = program_command(&self.program, self.supervisor.as_deref(), &self.env_allow);
        cmd.args(&self.args)
            .envs(&self.env)
            .env("A2A_EXECUTION_ID", &ctx.execution_id)
            .env("A2A_NEGOTIATION_ID", &ctx.negotiation_id)
            .env("A2A_SENDER_ID", &ctx.sender)
            .env("A2A_CAPABILITY", &ctx.capability)
            .env("A2A_DEADLINE_MS", ctx.remaining().as_millis().to_string());
        if let Some(tp) = &ctx.traceparent {
            cmd.env("TRACEPARENT", tp);
        }
        if let Some(cwd) = &self.cwd {
            cmd.current_dir(cwd);
        }
        let mut child = cmd.spawn().map_err(|e| HandlerError::new(format!("cannot start `{}`: {e}", self.program)))?;
        // Dropped on every way out of this function, including the engine dropping it at the deadline.
        let _group = GroupGuard(child.id());
        let input = serde_json::to_vec(&payload).map_err(|e| HandlerError::new(e.to_string()))?;
        let (Some(mut stdin), Some(stdout), Some(stderr)) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            return Err(HandlerError::new("cannot attach to the program's standard streams"));
        };
        let max = self.max_output_bytes;
        let io = async move {
            // Write stdin while reading the outputs, so that a program that writes before reading cannot deadlock.
            let write = async move {
                let r = stdin.write_all(&input).await;
                drop(stdin);
                r
            };
            let (w, out, err) = tokio::join!(write, read_bounded(stdout, max), read_bounded(stderr, 64 * 1024));
            (w, out, err)
        };
        // The execution's deadline is the engine's to enforce: it drops this future (which kills the program) and
        // records `timed_out`. A timer here for the same deadline would race it and, winning, turn the timeout into
        // a failure; only a time limit of the handler's own that ends earlier is enforced here.
        let limit = own_limit(self.timeout, &ctx);
        let own_timeout = async {
            match limit {
                Some(t) => tokio::time::sleep(t).await,
                None => std::future::pending().await,
            }
        };
        let outcome = tokio::select! {
            r = async { let io = io.await; let status = child.wait().await; (io, status) } => Some(r),
            () = own_timeout => None,
            () = ctx.cancel.cancelled() => None,
        };
        let Some(((write, out, err), status)) = outcome else {
            let _ = child.start_kill();
            let _ = child.wait().await;
            return Err(if ctx.cancel.is_cancelled() {
                HandlerError::new(format!("`{}` was stopped: the execution was canceled or timed out", self.program))
            } else {
                HandlerError::new(format!(
                    "`{}` did not finish within {} ms and was killed",
                    self.program,
                    limit.unwrap_or_default().as_millis()
                ))
            });
        };
        let status = status.map_err(|e| HandlerError::new(format!("cannot wait for `{}`: {e}", self.program)))?;
        let (stderr, _) = err.unwrap_or_default();
        let (stdout, truncated) =
            out.map_err(|e| HandlerError::new(format!("cannot read the output of `{}`: {e}", self.program)))?;
        if self.supervisor.is_some()
            && let Some(why) = supervisor_refusal(status, &stderr)
        {
            return Err(HandlerError::new(why));
        }
        if !stderr.is_empty() {
            // HDL-5: stderr is the operator's (it names paths and internals), not the caller's.
            tracing::warn!(
                program = %self.program,
                execution_id = %ctx.execution_id,
                stderr = %tail(&stderr),
                "command handler wrote to stderr"
            );
        }
        if !status.success() {
            return Err(HandlerError::new(format!(
                "`{}` failed ({status}); its stderr is in the agent's log (execution {})",
                self.program, ctx.execution_id
            ))
            .with_details(json!({"exit_code": status.code()})));
        }
        if let Err(e) = write {
            // The program exited successfully without reading all of its input: that is its choice.
            tracing::debug!(error = %e, "program did not read all of stdin");
        }
        if truncated {
            return Err(HandlerError::new(format!("`{}` printed more than {max} bytes", self.program)));
        }
        serde_json::from_slice(&stdout).map_err(|e| {
            HandlerError::new(format!(
                "`{}` did not print one JSON value on stdout ({e}); stdout began with {:?}",
                self.program,
                String::from_utf8_lossy(&stdout[..stdout.len().min(200)])
            ))
        })
    }
}

impl Handler for CommandHandler {
    fn call(&self, ctx: ExecutionContext, payload: Value) -> HandlerFuture {
        let this = self.clone();
        Box::pin(async move { this.run(ctx, payload).await })
    }
}

/// Forwards the payload as a JSON `POST` to a URL; a `2xx` JSON answer is the result.
///
/// The request carries `A2A-Execution-ID`, `A2A-Sender-ID`, `A2A-Capability` and `traceparent`; the configured
/// headers are added (e.g. an API key of the backend).
#[derive(Debug, Clone)]
pub struct HttpHandler {
    client: reqwest::Client,
    url: String,
    headers: Vec<(String, String)>,
    timeout: Option<Duration>,
}

impl HttpHandler {
    /// Forwards to `url`.
    pub fn new(
        url: impl Into<String>,
        headers: Vec<(String, String)>,
        timeout: Option<Duration>,
    ) -> Result<Self, String> {
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| format!("cannot build the HTTP client: {e}"))?;
        Ok(HttpHandler { client, url: url.into(), headers, timeout })
    }

    async fn run(&self, ctx: ExecutionContext, payload: Value) -> Result<Value, HandlerError> {
        // As for commands: the execution's deadline is the engine's; only an earlier limit of our own applies here.
        let limit = own_limit(self.timeout, &ctx);
        let mut req = self
            .client
            .post(&self.url)
            .header("A2A-Execution-ID", &ctx.execution_id)
            .header("A2A-Sender-ID", &ctx.sender)
            .header("A2A-Capability", &ctx.capability)
            .json(&payload);
        if let Some(tp) = &ctx.traceparent {
            req = req.header("traceparent", tp);
        }
        if let Some(t) = limit {
            req = req.timeout(t);
        }
        for (k, v) in &self.headers {
            req = req.header(k, v);
        }
        let failed = |e: reqwest::Error| match limit {
            Some(t) if e.is_timeout() => {
                HandlerError::new(format!("POST {} did not answer within {} ms", self.url, t.as_millis()))
            }
            _ => HandlerError::new(format!("POST {}: {}", self.url, a2a_core::error::with_causes(&e))),
        };
        let send = async {
            let resp = req.send().await.map_err(failed)?;
            let status = resp.status();
            let body = resp.bytes().await.map_err(failed)?;
            if !status.is_success() {
                return Err(HandlerError::new(format!("POST {} answered {status}: {}", self.url, tail(&body)))
                    .with_details(json!({"status": status.as_u16()})));
            }
            serde_json::from_slice::<Value>(&body)
                .map_err(|e| HandlerError::new(format!("POST {} did not answer JSON ({e}): {}", self.url, tail(&body))))
        };
        tokio::select! {
            r = send => r,
            () = ctx.cancel.cancelled() => Err(HandlerError::new("the execution was canceled or timed out")),
        }
    }
}

impl Handler for HttpHandler {
    fn call(&self, ctx: ExecutionContext, payload: Value) -> HandlerFuture {
        let this = self.clone();
        Box::pin(async move { this.run(ctx, payload).await })
    }
}
