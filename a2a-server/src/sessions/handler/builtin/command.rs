//! The `command` session handler (SES-9, HDL-1, HDL-3): a program per delivery — e.g. a wrapper around an existing CLI agent.
//!
//! The program is started from an argv array (no shell), in its own process group, with a cleared environment
//! (only the allow-listed variables of the agent's, the configured ones and the `A2A_*` ones below), under
//! `a2a-supervise` as a capability's program is, so that it dies with the agent (HDL-4). It reads the
//! delivery as JSON on stdin (or, with `stdin = "prompt"`, the plain-text prompt of POL-3) and writes
//! `{"reply": "..."}`, `{"error": "..."}` or plain text — the whole of stdout, trimmed — and exits 0.
//!
//! Environment set for each delivery: `A2A_RUN_ID`, `A2A_SESSION` (the receiving session's address), `A2A_STEP`
//! (`message`, `reply`, `announce`, `spawn`), `A2A_HOP` (the provenance hop, POL-4: a send the program makes
//! carries `A2A-Hop: A2A_HOP + 1`), `A2A_SOURCE_AGENT`, `A2A_SOURCE_SESSION` and `A2A_TRACE_ID` when known,
//! `A2A_TURN` (`N/M`) on reply steps, `A2A_WAIT_CHAIN` when the requester is waiting (POL-5: a send the program
//! makes carries it in `A2A-Wait-Chain`, so that a cycle back to a waiting session is refused at once), and
//! `A2A_TIMEOUT_MS`.
//!
//! Limits: `timeout_ms` (past it the whole process group is killed and the delivery is `TimedOut`), `max_output_bytes`
//! of stdout (more kills the program and fails the delivery), `max_concurrency` programs at once (a delivery waits
//! for a slot within its time). A non-zero exit fails the delivery with the end of stderr.

use std::sync::Arc;
use std::time::{Duration, Instant};

use a2a_core::sessions::Delivery;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::sync::Semaphore;

use super::{EXCERPT_CHARS, reply_from_stdout, step_name, tail};
use crate::handler::builtin::GroupGuard;
use crate::sessions::config::{CommandConfig, StdinFormat};
use crate::sessions::{HandlerFailure, SessionHandler};

/// How much of stderr is kept (the end of it) for a failure's message.
const STDERR_KEEP_BYTES: usize = 16 * 1024;

/// Runs a program per delivery (see the module documentation).
#[derive(Debug, Clone)]
pub struct CommandHandler {
    config: Arc<CommandConfig>,
    slots: Arc<Semaphore>,
    /// The supervisor that ends the program with the agent (`a2a-supervise`, HDL-4).
    supervisor: Option<std::path::PathBuf>,
}

impl CommandHandler {
    /// A handler for `config` (checked when the configuration was read). Its programs run under `a2a-supervise`
    /// when it is found ([`crate::handler::builtin::supervisor`]), so that they die with the agent (HDL-4).
    pub fn new(config: CommandConfig) -> Self {
        let slots = Arc::new(Semaphore::new(config.max_concurrency.max(1)));
        CommandHandler { config: Arc::new(config), slots, supervisor: crate::handler::builtin::supervisor() }
    }

    fn program(&self) -> &str {
        self.config.argv.first().map_or("", String::as_str)
    }

    fn command(&self, delivery: &Delivery, remaining: Duration) -> tokio::process::Command {
        let c = &self.config;
        let mut cmd =
            crate::handler::builtin::program_command(self.program(), self.supervisor.as_deref(), &c.env_allow);
        cmd.args(&c.argv[1..])
            .envs(&c.env)
            .env("A2A_RUN_ID", &delivery.run_id)
            .env("A2A_SESSION", &delivery.session)
            .env("A2A_STEP", step_name(delivery.step))
            .env("A2A_HOP", delivery.provenance.hop.to_string())
            .env("A2A_SOURCE_AGENT", &delivery.provenance.source_agent)
            .env("A2A_TIMEOUT_MS", remaining.as_millis().to_string());
        if let Some(s) = &delivery.provenance.source_session {
            cmd.env("A2A_SOURCE_SESSION", s);
        }
        if let Some(t) = &delivery.provenance.trace_id {
            cmd.env("A2A_TRACE_ID", t);
        }
        if let Some(t) = &delivery.turn {
            cmd.env("A2A_TURN", format!("{}/{}", t.n, t.of));
        }
        if let Some(chain) = crate::sessions::current_wait_chain() {
            cmd.env("A2A_WAIT_CHAIN", chain);
        }
        if let Some(cwd) = &c.cwd {
            cmd.current_dir(cwd);
        }
        cmd
    }

    async fn run(&self, delivery: Delivery) -> Result<String, HandlerFailure> {
        let started = Instant::now();
        let limit = Duration::from_millis(self.config.timeout_ms);
        let program = self.program().to_owned();
        let timed_out = |what: &str| {
            HandlerFailure::TimedOut(format!("`{program}` {what} within {} ms (handler timeout_ms)", limit.as_millis()))
        };
        // Bounded concurrency: the wait for a slot counts against the delivery's time.
        let _slot = match tokio::time::timeout(limit, self.slots.acquire()).await {
            Ok(Ok(permit)) => permit,
            Ok(Err(_)) => return Err(HandlerFailure::Failed("the command handler is shutting down".into())),
            Err(_) => {
                return Err(timed_out(&format!(
                    "found no free slot (max_concurrency = {}) and was not started",
                    self.config.max_concurrency
                )));
            }
        };
        let remaining = limit.saturating_sub(started.elapsed());
        let input = match self.config.stdin {
            StdinFormat::Delivery => serde_json::to_vec(&delivery)
                .map_err(|e| HandlerFailure::Failed(format!("cannot encode the delivery: {e}")))?,
            StdinFormat::Prompt => delivery.as_prompt().into_bytes(),
        };
        let mut child = self.command(&delivery, remaining).spawn().map_err(|e| {
            HandlerFailure::Failed(format!("cannot start `{program}`: {e}; check handler.argv and cwd"))
        })?;
        // Kills the whole group on every way out, including the runtime dropping this future at a run's deadline.
        let group = GroupGuard(child.id());
        let (Some(mut stdin), Some(stdout), Some(stderr)) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            return Err(HandlerFailure::Failed("cannot attach to the program's standard streams".into()));
        };
        let max = self.config.max_output_bytes;
        let io = async {
            // Write stdin while reading the outputs, so that a program that writes before reading cannot deadlock.
            let write = async move {
                // A program may exit without reading its input: that is its choice, not an error.
                let _ = stdin.write_all(&input).await;
            };
            let out = async {
                let r = read_capped(stdout, max).await;
                if matches!(r, Ok(Capped::Over)) {
                    // Stop it now: the reply is lost anyway, and a program that ignores EPIPE would run on.
                    group.kill();
                }
                r
            };
            let ((), out, err) = tokio::join!(write, out, read_tail(stderr, STDERR_KEEP_BYTES));
            let status = child.wait().await;
            (out, err, status)
        };
        let (out, err, status) = match tokio::time::timeout(remaining, io).await {
            Ok(r) => r,
            Err(_) => return Err(timed_out("did not finish and was killed")),
        };
        let stderr = err.unwrap_or_default();
        let out = out.map_err(|e| HandlerFailure::Failed(format!("cannot read the output of `{program}`: {e}")))?;
        let stdout = match out {
            Capped::Within(bytes) => bytes,
            Capped::Over => {
                return Err(HandlerFailure::Failed(format!(
                    "`{program}` printed more than {max} bytes and was killed; raise handler.max_output_bytes or \
                     print less"
                )));
            }
        };
        let status = status.map_err(|e| HandlerFailure::Failed(format!("cannot wait for `{program}`: {e}")))?;
        if self.supervisor.is_some()
            && let Some(why) = crate::handler::builtin::supervisor_refusal(status, &stderr)
        {
            return Err(HandlerFailure::Failed(format!("{why}; check handler.argv and cwd")));
        }
        if !status.success() {
            let how = match status.code() {
                Some(code) => format!("exited with status {code}"),
                None => format!("was stopped by a signal ({status})"),
            };
            let said = tail(&stderr, EXCERPT_CHARS);
            let said = if said.is_empty() { "nothing on stderr".to_owned() } else { format!("stderr: {said}") };
            return Err(HandlerFailure::Failed(format!("`{program}` {how}; {said}")));
        }
        let stdout = String::from_utf8(stdout)
            .map_err(|_| HandlerFailure::Failed(format!("`{program}` printed bytes that are not UTF-8 on stdout")))?;
        reply_from_stdout(&stdout, &format!("`{program}`"))
    }
}

#[async_trait::async_trait]
impl SessionHandler for CommandHandler {
    async fn handle(&self, delivery: Delivery) -> Result<String, HandlerFailure> {
        self.run(delivery).await
    }
}

/// What [`read_capped`] read.
enum Capped {
    /// Everything, within the cap.
    Within(Vec<u8>),
    /// More than the cap (the reading stopped there).
    Over,
}

/// Reads `r` to its end, or until more than `max` bytes came.
async fn read_capped(mut r: impl AsyncRead + Unpin, max: usize) -> std::io::Result<Capped> {
    let mut out = Vec::new();
    let mut buf = [0u8; 8192];
    loop {
        let n = r.read(&mut buf).await?;
        if n == 0 {
            return Ok(Capped::Within(out));
        }
        if out.len() + n > max {
            return Ok(Capped::Over);
        }
        out.extend_from_slice(&buf[..n]);
    }
}

/// Reads `r` to its end, keeping the last `keep` bytes (memory stays bounded however much a program writes).
async fn read_tail(mut r: impl AsyncRead + Unpin, keep: usize) -> std::io::Result<Vec<u8>> {
    let mut out = Vec::new();
    let mut buf = [0u8; 8192];
    loop {
        let n = r.read(&mut buf).await?;
        if n == 0 {
            return Ok(out);
        }
        out.extend_from_slice(&buf[..n]);
        if out.len() > 2 * keep {
            out.drain(..out.len() - keep);
        }
    }
}
