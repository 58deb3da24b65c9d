//! What a check is, and the [`Trial`] a check runs in: it sends requests, records every exchange, and records each
//! expectation with what was observed, so that the report shows what was sent, expected and got.

use std::time::Instant;

use futures_util::future::BoxFuture;

use crate::ctx::CapPlan;
use crate::ctx::Ctx;
use crate::http::{Req, Resp};
use crate::report::{Assertion, CapabilityUse, CheckReport, Level, Status, Step};

/// How a check ends early.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stop {
    /// An expectation failed (it is recorded in the trial).
    Failed,
    /// The check does not apply to this agent or run.
    Skip(String),
    /// A step the check depends on did not behave; another check reports that.
    Blocked(String),
}

/// What a check function returns.
pub type Outcome = Result<(), Stop>;

/// A check function.
pub type RunFn = for<'a, 'b> fn(&'a mut Trial<'b>) -> BoxFuture<'a, Outcome>;

/// A check: its identity, the requirements it verifies, and the function that runs it.
pub struct Check {
    /// Stable id, `<area>/<what>`, e.g. `discover/status-204`.
    pub id: &'static str,
    /// The requirement ids of `spec/PROTOCOL.md` it verifies.
    pub requirements: &'static [&'static str],
    /// Its level (the strongest of its requirements).
    pub level: Level,
    /// What it verifies.
    pub title: &'static str,
    /// When it applies.
    pub applies: &'static str,
    /// Whether it reads the transcript of the whole run (it then runs after every other check).
    pub after_all: bool,
    /// The function.
    pub run: RunFn,
}

/// Builds a [`RunFn`] from an `async fn(&mut Trial<'_>) -> Outcome`.
#[macro_export]
#[doc(hidden)]
macro_rules! run_fn {
    ($f:path) => {{
        fn __run_check<'a, 'b>(
            t: &'a mut $crate::check::Trial<'b>,
        ) -> futures_util::future::BoxFuture<'a, $crate::check::Outcome> {
            Box::pin($f(t))
        }
        __run_check as $crate::check::RunFn
    }};
}

/// Declares a [`Check`]: `check!(id, [requirements], LEVEL, applies, title, function)`.
#[macro_export]
#[doc(hidden)]
macro_rules! check {
    ($id:literal, [$($req:literal),+ $(,)?], $level:ident, $applies:expr, $title:literal, $f:path) => {
        $crate::check::Check {
            id: $id,
            requirements: &[$($req),+],
            level: $crate::report::Level::$level,
            title: $title,
            applies: $applies,
            after_all: false,
            run: $crate::run_fn!($f),
        }
    };
}

/// A stream opened by [`Trial::open_stream`].
pub struct OpenStream {
    /// The stream, to read.
    pub stream: crate::sse::Stream,
    step: usize,
    logged: usize,
}

/// The state of one running check.
pub struct Trial<'c> {
    /// The run's context.
    pub ctx: &'c Ctx,
    /// The check's id (exchanges are recorded under it).
    pub check_id: &'static str,
    steps: Vec<Step>,
    first_failure: Option<String>,
    used: std::sync::Mutex<Vec<CapabilityUse>>,
}

impl<'c> Trial<'c> {
    /// A trial for `check_id`.
    pub fn new(ctx: &'c Ctx, check_id: &'static str) -> Trial<'c> {
        Trial { ctx, check_id, steps: Vec::new(), first_failure: None, used: std::sync::Mutex::new(Vec::new()) }
    }

    fn push_exchange(&mut self, title: String, setup: bool, req: &Req, res: &Result<Resp, String>) {
        let (response, transport_error) = match res {
            Ok(r) => (Some(r.record()), None),
            Err(e) => (None, Some(e.clone())),
        };
        self.steps.push(Step {
            title,
            setup,
            request: Some(req.record()),
            response,
            transport_error,
            assertions: Vec::new(),
        });
    }

    /// Records that the check drives `plan`'s capability (named in the report with the reason it was chosen).
    pub fn uses(&self, plan: &CapPlan) {
        let mut used = self.used.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if !used.iter().any(|u| u.name == plan.decl.name) {
            used.push(CapabilityUse { name: plan.decl.name.clone(), why: plan.why.clone() });
        }
    }

    /// Records an exchange made outside [`Trial::send`] (e.g. requests sent concurrently).
    pub fn record(&mut self, title: impl Into<String>, req: &Req, res: &Result<Resp, String>) {
        self.push_exchange(title.into(), false, req, res);
    }

    /// Sends a request the agent must answer: no answer (connection refused, reset, timeout) fails the check.
    pub async fn send(&mut self, title: impl Into<String>, req: Req) -> Result<Resp, Stop> {
        match self.try_send(title, req).await {
            Ok(r) => Ok(r),
            Err(e) => {
                self.check(false, "an HTTP response", format!("no response: {e}"));
                Err(Stop::Failed)
            }
        }
    }

    /// Sends a request whose lack of answer is not by itself a failure (e.g. an oversize request the agent may
    /// close the connection on).
    pub async fn try_send(&mut self, title: impl Into<String>, mut req: Req) -> Result<Resp, String> {
        let res = self.ctx.send(self.check_id, &mut req).await;
        self.push_exchange(title.into(), false, &req, &res);
        res
    }

    /// Sends a preparatory request: no answer blocks the check.
    pub async fn setup(&mut self, title: impl Into<String>, mut req: Req) -> Result<Resp, Stop> {
        let title = title.into();
        let res = self.ctx.send(self.check_id, &mut req).await;
        self.push_exchange(title.clone(), true, &req, &res);
        res.map_err(|e| Stop::Blocked(format!("{title}: no response: {e}")))
    }

    /// Opens a stream (§18, §17.6): signs and sends `req`, and records the step with the response head; the agent
    /// not answering fails the check. Read it through [`OpenStream::stream`], then [`Trial::close_stream`] adds what
    /// was read to the step.
    pub async fn open_stream(&mut self, title: impl Into<String>, mut req: Req) -> Result<OpenStream, Stop> {
        let title = title.into();
        match self.ctx.open_stream(self.check_id, &mut req).await {
            Ok((stream, logged)) => {
                self.push_exchange(title, false, &req, &Ok(stream.head().clone()));
                Ok(OpenStream { stream, step: self.steps.len() - 1, logged })
            }
            Err(e) => {
                self.push_exchange(title, false, &req, &Err(e.clone()));
                self.check(false, "an HTTP response", format!("no response: {e}"));
                Err(Stop::Failed)
            }
        }
    }

    /// Records what was read of a stream in its step (the connection is closed when `open` is dropped) and returns
    /// the response as read.
    pub fn close_stream(&mut self, open: OpenStream) -> Resp {
        let resp = open.stream.resp();
        if let Some(step) = self.steps.get_mut(open.step) {
            step.response = Some(resp.record());
        }
        self.ctx.update_response(open.logged, resp.clone());
        resp
    }

    /// Starts a step that sends nothing (a comparison of what earlier steps observed).
    pub fn step(&mut self, title: impl Into<String>) {
        self.steps.push(Step {
            title: title.into(),
            setup: false,
            request: None,
            response: None,
            transport_error: None,
            assertions: Vec::new(),
        });
    }

    fn last(&mut self) -> &mut Step {
        if self.steps.is_empty() {
            self.step("check");
        }
        let n = self.steps.len() - 1;
        &mut self.steps[n]
    }

    /// Records an expectation; a false one fails the check (which goes on, to record more).
    pub fn check(&mut self, ok: bool, expected: impl Into<String>, observed: impl Into<String>) -> bool {
        let (expected, observed) = (expected.into(), observed.into());
        if !ok && self.first_failure.is_none() {
            self.first_failure = Some(format!("expected {expected}; observed {observed}"));
        }
        self.last().assertions.push(Assertion { expected, observed, ok });
        ok
    }

    /// Records an expectation and stops the check when it is false.
    pub fn ensure(&mut self, ok: bool, expected: impl Into<String>, observed: impl Into<String>) -> Outcome {
        if self.check(ok, expected, observed) { Ok(()) } else { Err(Stop::Failed) }
    }

    /// Records an expectation on a preparatory step; a false one blocks the check (another check reports it).
    pub fn require(&mut self, ok: bool, expected: impl Into<String>, observed: impl Into<String>) -> Outcome {
        let (expected, observed) = (expected.into(), observed.into());
        let title = self.last().title.clone();
        self.last().assertions.push(Assertion { expected: expected.clone(), observed: observed.clone(), ok });
        if ok { Ok(()) } else { Err(Stop::Blocked(format!("{title}: expected {expected}; observed {observed}"))) }
    }

    /// Expects a status code.
    pub fn expect_status(&mut self, r: &Resp, status: u16) -> bool {
        self.check(r.status == status, format!("status {status}"), r.summary())
    }

    /// Expects an error response: the status and `error.code` of the error table.
    pub fn expect_error(&mut self, r: &Resp, status: u16, code: &str) -> bool {
        let ok = r.status == status && r.error_code().as_deref() == Some(code);
        self.check(ok, format!("{status} with error.code \"{code}\""), r.summary())
    }

    /// Whether an expectation has failed so far.
    pub fn failed(&self) -> bool {
        self.first_failure.is_some()
    }

    /// The check's report.
    pub fn finish(self, check: &Check, outcome: Outcome, started: Instant) -> CheckReport {
        let (status, message) = match (outcome, self.first_failure) {
            (_, Some(f)) => (Status::Fail, Some(f)),
            (Ok(()), None) => (Status::Pass, None),
            (Err(Stop::Failed), None) => (Status::Fail, Some("the check failed".to_owned())),
            (Err(Stop::Skip(m)), None) => (Status::Skip, Some(m)),
            (Err(Stop::Blocked(m)), None) => (Status::Blocked, Some(m)),
        };
        CheckReport {
            id: check.id.to_owned(),
            requirements: check.requirements.iter().map(|r| (*r).to_owned()).collect(),
            level: check.level,
            title: check.title.to_owned(),
            applies: check.applies.to_owned(),
            status,
            message,
            capabilities: self.used.into_inner().unwrap_or_else(std::sync::PoisonError::into_inner),
            steps: self.steps,
            duration_ms: started.elapsed().as_millis() as u64,
        }
    }
}

/// Whether `text` matches a glob `pattern` (`*` any run of characters, `?` one character; ASCII case-insensitive).
pub fn glob_match(pattern: &str, text: &str) -> bool {
    let p: Vec<char> = pattern.to_ascii_lowercase().chars().collect();
    let t: Vec<char> = text.to_ascii_lowercase().chars().collect();
    let (mut pi, mut ti) = (0, 0);
    let (mut star, mut mark) = (None, 0);
    while ti < t.len() {
        if pi < p.len() && (p[pi] == '?' || p[pi] == t[ti]) {
            pi += 1;
            ti += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some(pi);
            mark = ti;
            pi += 1;
        } else if let Some(s) = star {
            pi = s + 1;
            mark += 1;
            ti = mark;
        } else {
            return false;
        }
    }
    while pi < p.len() && p[pi] == '*' {
        pi += 1;
    }
    pi == p.len()
}

/// Whether one `--only` pattern selects a check. A pattern ending with `/` is an area (a section of the suite:
/// `negotiate/` selects every check whose id starts with it); any other is a glob over the check id and its
/// requirement ids (`EXE-4` selects the checks citing EXE-4, `INT-*` those citing any INT requirement,
/// `signature/replay` one check).
pub fn pattern_selects(pattern: &str, check: &Check) -> bool {
    if pattern.ends_with('/') && !pattern.contains(['*', '?']) {
        return check.id.get(..pattern.len()).is_some_and(|head| head.eq_ignore_ascii_case(pattern));
    }
    glob_match(pattern, check.id) || check.requirements.iter().any(|r| glob_match(pattern, r))
}

/// Whether a check is selected by `--only` (comma-separated patterns, see [`pattern_selects`]; none selects all).
pub fn selected(check: &Check, only: Option<&str>) -> bool {
    let Some(only) = only else { return true };
    only.split(',').map(str::trim).filter(|p| !p.is_empty()).any(|p| pattern_selects(p, check))
}

#[cfg(test)]
mod tests {
    use super::{Check, glob_match, selected};

    fn check(id: &'static str, requirements: &'static [&'static str]) -> Check {
        Check {
            id,
            requirements,
            level: crate::report::Level::Must,
            title: "",
            applies: "",
            after_all: false,
            run: crate::run_fn!(nothing),
        }
    }

    async fn nothing(_: &mut super::Trial<'_>) -> super::Outcome {
        Ok(())
    }

    #[test]
    fn only_selects_areas_by_prefix_and_checks_by_requirement() {
        let happy = check("execute/happy-path", &["EXE-4", "EID-1"]);
        let tight = check("negotiate/tightening", &["NEG-10"]);
        let exec_ids = check("executions/ids", &["EID-5"]);
        let only = Some("negotiate/,execute/");
        assert!(selected(&happy, only) && selected(&tight, only));
        assert!(!selected(&exec_ids, only), "an area is the id up to its slash, not a prefix of the area's name");
        assert!(selected(&happy, Some("EXE-4")) && !selected(&tight, Some("EXE-4")));
        assert!(selected(&happy, Some(" NEGOTIATE/ , EID-*")) && selected(&exec_ids, Some("EID-*")));
        assert!(selected(&happy, None) && !selected(&happy, Some("execute")));
        assert!(!selected(&happy, Some("")) && !selected(&happy, Some(",")));
    }

    #[test]
    fn globs_match_ids_and_requirements() {
        assert!(glob_match("INT-*", "INT-9"));
        assert!(glob_match("int-*", "INT-9"));
        assert!(glob_match("signature/*", "signature/replay"));
        assert!(glob_match("*replay*", "signature/replay"));
        assert!(glob_match("DISC-?", "DISC-5"));
        assert!(!glob_match("DISC-?", "DISC-10"));
        assert!(!glob_match("negotiate/*", "signature/replay"));
        assert!(glob_match("discover/status-204", "discover/status-204"));
    }
}
