//! What the command line prints: results on stdout, errors and notes on stderr, progress on a terminal.

use std::io::{IsTerminal, Write};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use serde_json::{Value, json};

use crate::error::ClientError;

/// The exit code when stdout or stderr is a pipe whose reader has gone (`a2a ... | head`): 128 + SIGPIPE, what a
/// shell reports for a program ended by that signal. The command stops there, quietly, instead of panicking.
pub(crate) const BROKEN_PIPE_EXIT: i32 = 141;

/// Writes one line to `w`; a reader that has gone ends the process quietly with [`BROKEN_PIPE_EXIT`] (any other
/// write error is ignored: there is nowhere left to report it).
pub(crate) fn write_line(mut w: impl Write, line: std::fmt::Arguments<'_>) {
    let written = w.write_fmt(format_args!("{line}\n")).and_then(|()| w.flush());
    if written.is_err_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe) {
        std::process::exit(BROKEN_PIPE_EXIT);
    }
}

macro_rules! outln {
    ($($t:tt)*) => { write_line(std::io::stdout().lock(), format_args!($($t)*)) };
}
macro_rules! errln {
    ($($t:tt)*) => { write_line(std::io::stderr().lock(), format_args!($($t)*)) };
}

/// Where and how to print.
pub(crate) struct Output {
    pub(crate) json: bool,
    pub(crate) quiet: bool,
}

impl Output {
    pub(crate) fn new(json: bool, quiet: bool) -> Self {
        Output { json, quiet }
    }

    /// A result document on stdout.
    pub(crate) fn json_doc(&self, v: &Value) {
        let text = serde_json::to_string_pretty(v).unwrap_or_else(|_| v.to_string());
        outln!("{text}");
    }

    /// A line of human output on stdout.
    pub(crate) fn line(&self, s: impl AsRef<str>) {
        outln!("{}", s.as_ref());
    }

    /// A note for people on stderr (not with --quiet or --json).
    pub(crate) fn note(&self, s: impl AsRef<str>) {
        if !self.quiet && !self.json {
            errln!("{}", s.as_ref());
        }
    }

    /// A failure of a local tool: a message (and lines of detail) on stderr, or a JSON error.
    pub(crate) fn failure(&self, code: &str, message: &str, details: &[String]) {
        if self.json {
            let doc = json!({"error": {"code": code, "message": message, "details": details}});
            errln!("{}", serde_json::to_string_pretty(&doc).unwrap_or_default());
        } else {
            errln!("a2a: error: {message}");
            for d in details {
                errln!("  {d}");
            }
        }
    }

    /// A client error: what happened, the details that help, the fallback options, what to try.
    pub(crate) fn error(&self, e: &ClientError) {
        if self.json {
            let agent = e.agent_error();
            let doc = json!({"error": {
                "code": e.code(),
                "message": e.to_string(),
                "hint": e.hint(),
                "step": e.step().map(|s| s.as_str()),
                "details": agent.and_then(|a| a.details.clone()).or_else(|| execution_details(e)),
                "fallback_options": e.fallback_options(),
            }});
            errln!("{}", serde_json::to_string_pretty(&doc).unwrap_or_default());
            return;
        }
        errln!("a2a: error: {e}");
        for line in detail_lines(e) {
            errln!("  {line}");
        }
        let options = e.fallback_options();
        if !options.is_empty() {
            errln!("  fallback options:");
            for o in options {
                let mut s = format!("    {}", o.capability);
                if let Some(r) = o.relation {
                    s.push_str(&format!(
                        " ({})",
                        serde_json::to_value(r).ok().and_then(|v| v.as_str().map(str::to_owned)).unwrap_or_default()
                    ));
                }
                if let Some(ep) = &o.endpoint {
                    s.push_str(&format!(" at {ep}"));
                } else if let Some(a) = &o.agent {
                    s.push_str(&format!(" at {a}"));
                }
                if let Some(c) = o.estimated_cost {
                    s.push_str(&format!(", cost {c}"));
                }
                if let Some(l) = o.estimated_latency_ms {
                    s.push_str(&format!(", ~{l} ms"));
                }
                errln!("{s}");
            }
        }
        errln!("  hint: {}", e.hint());
    }
}

fn execution_details(e: &ClientError) -> Option<Value> {
    match e {
        ClientError::ExecutionFailed { error, .. } => error.details.clone(),
        _ => None,
    }
}

/// The lines of an agent's `details` worth showing: schema violations, payload errors, conflicts, changes.
fn detail_lines(e: &ClientError) -> Vec<String> {
    let details = e.agent_error().and_then(|a| a.details.clone()).or_else(|| execution_details(e));
    let Some(d) = details else { return Vec::new() };
    let mut out = Vec::new();
    for key in ["violations", "errors", "conflicts", "changes"] {
        if let Some(items) = d.get(key).and_then(Value::as_array) {
            for i in items.iter().take(32) {
                let path = i.get("path").and_then(Value::as_str).unwrap_or("");
                let msg = i.get("message").and_then(Value::as_str).unwrap_or("");
                let path = if path.is_empty() { "(root)" } else { path };
                out.push(format!("{path}: {msg}"));
            }
        }
    }
    if let Some(r) = d.get("allowed_regions") {
        out.push(format!("allowed regions: {r}"));
    }
    out
}

/// A one-line progress display on stderr, redrawn ten times a second while a call runs; only on a terminal.
pub(crate) struct Spinner {
    state: Arc<Mutex<String>>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl Spinner {
    /// Starts a spinner when stderr is a terminal and output is for people; otherwise a no-op.
    pub(crate) fn start(out: &Output) -> Spinner {
        let state = Arc::new(Mutex::new(String::new()));
        if out.quiet || out.json || !std::io::stderr().is_terminal() {
            return Spinner { state, stop: None, task: None };
        }
        let (tx, mut rx) = tokio::sync::oneshot::channel::<()>();
        let s = state.clone();
        let task = tokio::spawn(async move {
            const FRAMES: [char; 10] = ['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏'];
            let started = Instant::now();
            let mut i = 0usize;
            loop {
                let text = s.lock().map(|g| g.clone()).unwrap_or_default();
                if !text.is_empty() {
                    let mut err = std::io::stderr();
                    let _ = write!(
                        err,
                        "\r\x1b[2K{} {text} ({:.1} s)",
                        FRAMES[i % FRAMES.len()],
                        started.elapsed().as_secs_f64()
                    );
                    let _ = err.flush();
                }
                i += 1;
                tokio::select! {
                    _ = &mut rx => break,
                    () = tokio::time::sleep(std::time::Duration::from_millis(100)) => {}
                }
            }
            let mut err = std::io::stderr();
            let _ = write!(err, "\r\x1b[2K");
            let _ = err.flush();
        });
        Spinner { state, stop: Some(tx), task: Some(task) }
    }

    /// The text shown.
    pub(crate) fn set(&self, text: String) {
        if let Ok(mut g) = self.state.lock() {
            *g = text;
        }
    }

    /// A handle to update the text from a progress callback.
    pub(crate) fn handle(&self) -> Arc<Mutex<String>> {
        self.state.clone()
    }

    /// Stops and clears the line.
    pub(crate) async fn finish(mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        if let Some(t) = self.task.take() {
            let _ = t.await;
        }
    }
}
