//! How an execution is laid out in its Redis hash: each stage writes only its own small fields, once, so that a
//! warm transition is a handful of native commands (no read, no compare-and-set of the whole record, no script).
//!
//! | field | written by | holds |
//! |---|---|---|
//! | `c` | EXECUTE (`HSET`) | the fields fixed at creation, JSON ([`Fixed`]) |
//! | `a` | CONFIRM (`HSETNX`) | `<token> <at_ms> <verified 0/1> <traceparent>`; or `-` when closed unconfirmed |
//! | `n` | a worker's start (`HINCRBY`, in a script) | how many starts were recorded |
//! | `s` | a worker's start | the time of the last recorded start |
//! | `t` | the first terminal write (`HSETNX`) | status, time, result or error, and whether it also ran (JSON) |
//! | `w:<token>` | a worker's check of claimed work (`HSETNX`) | the id of the first work entry with that token checked |
//!
//! The status, deadline, timestamps, retention, attempts and revision are derived from these fields
//! ([`assemble`]); they are what [`ExecutionRecord::apply`] computes for the same transitions (tested below).
//!
//! `w:<token>` is not part of the record: it decides which of several work entries queued with one CONFIRM's token
//! runs (a CONFIRM transaction that ran twice queues two, see "Requests sent again" in [`super`]). Only the field of
//! the accepting token counts ([`Stored::work`]); entries with another token are dropped before it matters, and the
//! fields they leave are a few bytes that expire with the execution.

use a2a_core::error::ErrorObject;
use a2a_core::wire::ExecutionStatus;
use serde::{Deserialize, Serialize};
use serde_json::Value as Json;

use crate::store::{ExecutionRecord, StoreError};

/// The hash field of the fields fixed at creation.
pub(super) const FIXED: &str = "c";
/// The hash field of the acceptance (or [`CLOSED`]).
pub(super) const ACCEPT: &str = "a";
/// The hash field counting the recorded starts.
pub(super) const STARTS: &str = "n";
/// The hash field of the terminal state.
pub(super) const TERMINAL: &str = "t";
/// The prefix of the hash fields that name the work entry that runs for a CONFIRM's token ([`work_field`]).
const WORK_PREFIX: &[u8] = b"w:";
/// The value of [`ACCEPT`] that closes an execution that never was accepted (canceled while `received`): a CONFIRM's
/// `HSETNX` then fails.
pub(super) const CLOSED: &str = "-";

/// The fields of an execution fixed at creation, as written (borrowed from the record).
#[derive(Serialize)]
struct FixedRef<'a> {
    id: &'a str,
    negotiation_id: &'a str,
    sender: &'a str,
    capability: &'a str,
    payload: &'a Json,
    timeout_ms: u64,
    created_at_ms: u64,
    confirm_by_ms: u64,
    retain_until_ms: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    idempotency_key: Option<&'a str>,
}

/// The fields of an execution fixed at creation, as read.
#[derive(Deserialize)]
struct Fixed {
    id: String,
    negotiation_id: String,
    sender: String,
    capability: String,
    payload: Json,
    timeout_ms: u64,
    created_at_ms: u64,
    confirm_by_ms: u64,
    retain_until_ms: u64,
    #[serde(default)]
    idempotency_key: Option<String>,
}

/// A terminal state, as written.
#[derive(Serialize)]
struct TerminalRef<'a> {
    st: ExecutionStatus,
    at: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    result: Option<&'a Json>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<&'a ErrorObject>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    ran: bool,
}

/// A terminal state, as read.
#[derive(Deserialize)]
struct Terminal {
    st: ExecutionStatus,
    at: u64,
    #[serde(default)]
    result: Option<Json>,
    #[serde(default)]
    error: Option<ErrorObject>,
    #[serde(default)]
    ran: bool,
}

/// The value of [`FIXED`] for a new execution.
pub(super) fn fixed_value(rec: &ExecutionRecord) -> Result<String, StoreError> {
    serde_json::to_string(&FixedRef {
        id: &rec.id,
        negotiation_id: &rec.negotiation_id,
        sender: &rec.sender,
        capability: &rec.capability,
        payload: &rec.payload,
        timeout_ms: rec.timeout_ms,
        created_at_ms: rec.created_at_ms,
        confirm_by_ms: rec.confirm_by_ms,
        retain_until_ms: rec.retain_until_ms,
        idempotency_key: rec.idempotency_key.as_deref(),
    })
    .map_err(|e| StoreError(e.to_string()))
}

/// The value of [`ACCEPT`] written by a CONFIRM: `token` marks the work it queues as the execution's own.
pub(super) fn accept_value(token: &str, at_ms: u64, sender_verified: bool, traceparent: Option<&str>) -> String {
    format!("{token} {at_ms} {} {}", u8::from(sender_verified), traceparent.unwrap_or(""))
}

/// The hash field naming the work entry of `token` that runs: the first one a worker checked (`HSETNX`).
pub(super) fn work_field(token: &str) -> String {
    format!("w:{token}")
}

/// The value of [`TERMINAL`] for `next`, a record in its terminal state; `ran` when the write also records the start
/// ([`crate::store::Transition::Ran`]: one more attempt).
pub(super) fn terminal_value(next: &ExecutionRecord, ran: bool) -> Result<String, StoreError> {
    serde_json::to_string(&TerminalRef {
        st: next.status,
        at: next.updated_at_ms,
        result: next.result.as_ref(),
        error: next.error.as_ref(),
        ran,
    })
    .map_err(|e| StoreError(e.to_string()))
}

/// The revision the fields stand for: one per applied transition (creation 1, acceptance, each start, the end), as
/// [`ExecutionRecord::apply`] counts them.
pub(super) fn revision(rec: &ExecutionRecord) -> u64 {
    1 + u64::from(rec.confirmed) + u64::from(rec.attempts) + u64::from(rec.status.is_terminal())
}

/// An execution as read from its hash.
pub(super) struct Stored {
    /// The record.
    pub(super) rec: ExecutionRecord,
    /// The token of the CONFIRM that accepted it: the work queued with another token is not its own.
    pub(super) token: Option<String>,
    /// The work entry of that token that runs, once a worker checked one ([`work_field`]): another entry with the
    /// same token (queued by the same CONFIRM transaction run twice) is not the execution's own either.
    pub(super) work: Option<String>,
}

/// The raw fields of an execution's hash.
#[derive(Default)]
pub(super) struct Fields<'a> {
    pub(super) fixed: Option<&'a [u8]>,
    pub(super) accept: Option<&'a [u8]>,
    pub(super) starts: Option<&'a [u8]>,
    pub(super) started: Option<&'a [u8]>,
    pub(super) terminal: Option<&'a [u8]>,
    /// The `w:<token>` fields: (token, entry id).
    pub(super) work: Vec<(&'a [u8], &'a [u8])>,
}

impl<'a> Fields<'a> {
    /// Sets a field by its name (others are ignored).
    pub(super) fn set(&mut self, name: &'a [u8], value: &'a [u8]) {
        match name {
            b"c" => self.fixed = Some(value),
            b"a" => self.accept = Some(value),
            b"n" => self.starts = Some(value),
            b"s" => self.started = Some(value),
            b"t" => self.terminal = Some(value),
            _ => {
                if let Some(token) = name.strip_prefix(WORK_PREFIX) {
                    self.work.push((token, value));
                }
            }
        }
    }
}

fn unreadable(what: &str, e: impl std::fmt::Display) -> StoreError {
    StoreError(format!("a stored execution is not readable ({what}): {e}"))
}

fn number<T: std::str::FromStr>(what: &str, v: &[u8]) -> Result<T, StoreError> {
    std::str::from_utf8(v).ok().and_then(|s| s.parse().ok()).ok_or_else(|| unreadable(what, "not a number"))
}

/// An acceptance, as [`ACCEPT`] holds it.
struct Acceptance {
    token: String,
    at: u64,
    sender_verified: bool,
    traceparent: Option<String>,
}

/// The acceptance an [`ACCEPT`] value stands for; `None` when absent or [`CLOSED`].
fn acceptance(a: Option<&[u8]>) -> Result<Option<Acceptance>, StoreError> {
    let Some(a) = a.filter(|a| *a != CLOSED.as_bytes()) else { return Ok(None) };
    let a = std::str::from_utf8(a).map_err(|e| unreadable("a", e))?;
    let mut parts = a.splitn(4, ' ');
    let token = parts.next().unwrap_or_default().to_owned();
    let at: u64 = number("a", parts.next().unwrap_or_default().as_bytes())?;
    let sender_verified = parts.next() == Some("1");
    let traceparent = parts.next().filter(|t| !t.is_empty()).map(str::to_owned);
    Ok(Some(Acceptance { token, at, sender_verified, traceparent }))
}

/// The fields of a terminal record that the hash holds beside the terminal state: see [`Settled::apply`].
pub(super) struct Settled {
    confirmed: bool,
    accepted_at_ms: Option<u64>,
    sender_verified: bool,
    traceparent: Option<String>,
    attempts: u32,
}

impl Settled {
    /// What the hash holds beside the terminal state: its acceptance and starts (`accept`, `starts`, read in the
    /// same transaction as the terminal write); `ran` when that write also recorded a start.
    pub(super) fn read(accept: Option<&[u8]>, starts: Option<&[u8]>, ran: bool) -> Result<Self, StoreError> {
        let starts: u32 = starts.map(|v| number("n", v)).transpose()?.unwrap_or(0);
        let accept = acceptance(accept)?;
        Ok(Settled {
            confirmed: accept.is_some(),
            accepted_at_ms: accept.as_ref().map(|a| a.at),
            sender_verified: accept.as_ref().is_some_and(|a| a.sender_verified),
            traceparent: accept.and_then(|a| a.traceparent),
            attempts: starts.saturating_add(u32::from(ran)),
        })
    }

    /// Makes `next`, a terminal record this process computed from the record it had (which may be stale: accepted
    /// or started elsewhere since) and wrote first, the stored one. The terminal fields are the ones written.
    pub(super) fn apply(self, next: &mut ExecutionRecord) {
        next.confirmed = self.confirmed;
        next.deadline_ms = self.accepted_at_ms.map(|at| at.saturating_add(next.timeout_ms));
        next.sender_verified = self.sender_verified;
        next.traceparent = self.traceparent;
        next.attempts = self.attempts;
        next.rev = revision(next);
    }
}

/// The record the fields stand for; `None` without [`FIXED`] (no such execution: a hash holding only later fields is
/// what a write to an expired execution leaves behind). `retention_ms` is how long a terminal record is kept.
pub(super) fn assemble(f: &Fields<'_>, retention_ms: u64) -> Result<Option<Stored>, StoreError> {
    let Some(fixed) = f.fixed else { return Ok(None) };
    let fixed: Fixed = serde_json::from_slice(fixed).map_err(|e| unreadable("c", e))?;
    let accept = acceptance(f.accept)?;
    let starts: u32 = f.starts.map(|v| number("n", v)).transpose()?.unwrap_or(0);
    let started: Option<u64> = f.started.map(|v| number("s", v)).transpose()?;
    let terminal: Option<Terminal> =
        f.terminal.map(|t| serde_json::from_slice(t).map_err(|e| unreadable("t", e))).transpose()?;
    let confirmed = accept.is_some();
    let attempts = starts.saturating_add(u32::from(terminal.as_ref().is_some_and(|t| t.ran)));
    let status = match (&terminal, &accept) {
        (Some(t), _) => t.st,
        (None, Some(_)) if starts > 0 => ExecutionStatus::Running,
        (None, Some(_)) => ExecutionStatus::Accepted,
        (None, None) => ExecutionStatus::Received,
    };
    let accepted_at = accept.as_ref().map(|a| a.at);
    let deadline_ms = accepted_at.map(|at| at.saturating_add(fixed.timeout_ms));
    let updated_at_ms = match (&terminal, started.filter(|_| starts > 0), accepted_at) {
        (Some(t), _, _) => t.at,
        (None, Some(s), _) => s,
        (None, None, Some(a)) => a,
        (None, None, None) => fixed.created_at_ms,
    };
    let retain_until_ms = match (&terminal, deadline_ms) {
        (Some(t), _) => t.at.saturating_add(retention_ms),
        (None, Some(d)) => d.saturating_add(retention_ms),
        (None, None) => fixed.retain_until_ms,
    };
    let work = accept.as_ref().and_then(|a| {
        let (_, entry) = f.work.iter().find(|(token, _)| *token == a.token.as_bytes())?;
        Some(String::from_utf8_lossy(entry).into_owned())
    });
    let (token, sender_verified, traceparent) = match accept {
        Some(a) => (Some(a.token), a.sender_verified, a.traceparent),
        None => (None, false, None),
    };
    let (result, error) = match terminal {
        Some(t) => (t.result, t.error),
        None => (None, None),
    };
    let mut rec = ExecutionRecord {
        id: fixed.id,
        negotiation_id: fixed.negotiation_id,
        sender: fixed.sender,
        capability: fixed.capability,
        payload: fixed.payload,
        status,
        timeout_ms: fixed.timeout_ms,
        created_at_ms: fixed.created_at_ms,
        updated_at_ms,
        confirm_by_ms: fixed.confirm_by_ms,
        deadline_ms,
        confirmed,
        attempts,
        result,
        error,
        retain_until_ms,
        idempotency_key: fixed.idempotency_key,
        sender_verified,
        traceparent,
        rev: 0,
    };
    rec.rev = revision(&rec);
    Ok(Some(Stored { rec, token, work }))
}

/// A rough size of a record in memory, in bytes (the weight of the in-process caches): its strings and JSON values.
pub(super) fn weight(rec: &ExecutionRecord) -> u32 {
    fn json(v: &Json) -> usize {
        match v {
            Json::String(s) => s.len() + 8,
            Json::Array(a) => 16 + a.iter().map(json).sum::<usize>(),
            Json::Object(o) => 16 + o.iter().map(|(k, v)| k.len() + 8 + json(v)).sum::<usize>(),
            _ => 8,
        }
    }
    let strings = rec.id.len() + rec.negotiation_id.len() + rec.sender.len() + rec.capability.len();
    let error = rec.error.as_ref().map_or(0, |e| e.message.len() + e.details.as_ref().map_or(0, json));
    let total = 256 + strings + json(&rec.payload) + rec.result.as_ref().map_or(0, json) + error;
    u32::try_from(total).unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests {
    use a2a_core::error::ErrorCode;
    use serde_json::json;

    use super::*;
    use crate::store::Transition;

    const RETENTION: u64 = 3_600_000;

    /// The hash of an execution, as the Redis store's writes leave it.
    #[derive(Default, Clone)]
    struct Hash {
        c: Option<String>,
        a: Option<String>,
        n: u32,
        s: Option<String>,
        t: Option<String>,
    }

    impl Hash {
        fn read(&self) -> ExecutionRecord {
            let n = self.n.to_string();
            let f = Fields {
                fixed: self.c.as_deref().map(str::as_bytes),
                accept: self.a.as_deref().map(str::as_bytes),
                starts: (self.n > 0).then_some(n.as_bytes()),
                started: self.s.as_deref().map(str::as_bytes),
                terminal: self.t.as_deref().map(str::as_bytes),
                work: Vec::new(),
            };
            assemble(&f, RETENTION).expect("readable").expect("present").rec
        }

        /// What the store writes for `t` applied to `cur` (giving `next`); false when a guard (`HSETNX`, the start
        /// script) refuses it.
        fn write(&mut self, cur: &ExecutionRecord, next: &ExecutionRecord, t: &Transition) -> bool {
            match t {
                Transition::Accept { now_ms, sender_verified, traceparent } => {
                    if self.a.is_some() {
                        return false;
                    }
                    self.a = Some(accept_value("tok1", *now_ms, *sender_verified, traceparent.as_deref()));
                }
                Transition::Start { now_ms, rerun } => {
                    if self.t.is_some() || self.a.as_deref().is_none_or(|a| a == CLOSED) || (!rerun && self.n > 0) {
                        return false;
                    }
                    self.n += 1;
                    self.s = Some(now_ms.to_string());
                }
                Transition::Finish { .. } | Transition::Ran { .. } => {
                    if self.t.is_some() {
                        return false;
                    }
                    if cur.status == ExecutionStatus::Received && self.a.is_none() {
                        self.a = Some(CLOSED.into());
                    }
                    self.t = Some(terminal_value(next, matches!(t, Transition::Ran { .. })).expect("json"));
                }
            }
            true
        }
    }

    fn created() -> ExecutionRecord {
        ExecutionRecord {
            id: "did:web:c.example.com_1_x".into(),
            negotiation_id: "n_1".into(),
            sender: "did:web:c.example.com".into(),
            capability: "echo_message".into(),
            payload: json!({"message": "hello", "big": 12345678901234567890u64, "f": 0.1}),
            status: ExecutionStatus::Received,
            timeout_ms: 30_000,
            created_at_ms: 1_000,
            updated_at_ms: 1_000,
            confirm_by_ms: 61_000,
            deadline_ms: None,
            confirmed: false,
            attempts: 0,
            result: None,
            error: None,
            retain_until_ms: 61_000 + RETENTION,
            idempotency_key: Some("key-1".into()),
            sender_verified: false,
            traceparent: None,
            rev: 1,
        }
    }

    fn accept(at: u64, tp: Option<&str>) -> Transition {
        Transition::Accept { now_ms: at, sender_verified: true, traceparent: tp.map(str::to_owned) }
    }

    fn finish(at: u64, status: ExecutionStatus) -> Transition {
        let ok = status == ExecutionStatus::Succeeded;
        Transition::Finish {
            now_ms: at,
            status,
            result: ok.then(|| json!({"echo": "hello"})),
            error: (!ok).then(|| ErrorObject { code: ErrorCode::CANCELED, message: "m".into(), details: None }),
        }
    }

    fn ran(at: u64, rerun: bool) -> Transition {
        Transition::Ran {
            now_ms: at,
            rerun,
            status: ExecutionStatus::Succeeded,
            result: Some(json!({"echo": "hello"})),
            error: None,
        }
    }

    /// Runs `steps` through [`ExecutionRecord::apply`] and through the fields the store writes; after every step the
    /// record read back from the fields equals the one `apply` computed, and the guards refuse what `apply` refuses.
    fn check(steps: &[Transition]) {
        let mut rec = created();
        let mut hash = Hash { c: Some(fixed_value(&rec).expect("json")), ..Hash::default() };
        assert_eq!(hash.read(), rec, "as created");
        for t in steps {
            let mut next = rec.clone();
            let applied = next.apply(t, RETENTION);
            if applied {
                assert!(hash.write(&rec, &next, t), "the store's guard refused {t:?} from {:?}", rec.status);
                rec = next;
            }
            assert_eq!(hash.read(), rec, "after {t:?} (applied: {applied})");
        }
    }

    #[test]
    fn the_fields_read_back_as_the_record_apply_computes_on_every_path() {
        use ExecutionStatus::*;
        let tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        check(&[accept(2_000, Some(tp)), ran(2_005, false)]);
        check(&[accept(2_000, None), Transition::Start { now_ms: 2_010, rerun: false }, finish(2_500, Succeeded)]);
        check(&[
            accept(2_000, None),
            Transition::Start { now_ms: 2_010, rerun: false },
            Transition::Start { now_ms: 9_000, rerun: true },
            ran(9_001, true),
            finish(9_500, Failed),
        ]);
        check(&[finish(1_500, Canceled), accept(2_000, None)]);
        check(&[accept(2_000, None), finish(40_000, TimedOut), finish(40_001, Canceled)]);
        check(&[accept(2_000, None), accept(2_001, None), Transition::Start { now_ms: 2_010, rerun: false }]);
    }

    #[test]
    fn the_guards_refuse_what_the_state_machine_refuses_from_the_stored_state() {
        let rec = created();
        let mut hash = Hash { c: Some(fixed_value(&rec).expect("json")), ..Hash::default() };
        let mut canceled = rec.clone();
        assert!(canceled.apply(&finish(1_500, ExecutionStatus::Canceled), RETENTION));
        assert!(hash.write(&rec, &canceled, &finish(1_500, ExecutionStatus::Canceled)));
        // A CONFIRM that computed its acceptance from the stale `received` record loses its HSETNX.
        let mut accepted = rec.clone();
        assert!(accepted.apply(&accept(1_600, None), RETENTION));
        assert!(!hash.write(&rec, &accepted, &accept(1_600, None)), "accepted after it was closed");
        assert_eq!(hash.read(), canceled);
    }

    #[test]
    fn a_terminal_record_computed_from_a_stale_record_is_settled_to_the_stored_one() {
        let rec = created();
        let mut hash = Hash { c: Some(fixed_value(&rec).expect("json")), ..Hash::default() };
        let tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        let mut accepted = rec.clone();
        assert!(accepted.apply(&accept(1_600, Some(tp)), RETENTION));
        assert!(hash.write(&rec, &accepted, &accept(1_600, Some(tp))));
        let mut running = accepted.clone();
        assert!(running.apply(&Transition::Start { now_ms: 1_700, rerun: false }, RETENTION));
        assert!(hash.write(&accepted, &running, &Transition::Start { now_ms: 1_700, rerun: false }));
        // A cancel computed from the `received` record (another process accepted and started it meanwhile).
        let t = finish(1_800, ExecutionStatus::Canceled);
        let mut canceled = rec.clone();
        assert!(canceled.apply(&t, RETENTION));
        assert!(hash.write(&rec, &canceled, &t));
        assert_ne!(canceled, hash.read(), "computed from a stale record");
        Settled::read(hash.a.as_deref().map(str::as_bytes), Some(b"1"), false).expect("settle").apply(&mut canceled);
        assert_eq!(canceled, hash.read());
    }

    #[test]
    fn the_work_entry_that_runs_is_the_one_named_under_the_accepting_token() {
        let rec = created();
        let fixed = fixed_value(&rec).expect("json");
        let accepted = accept_value("tok1", 2_000, false, None);
        let read = |work: Vec<(&'static [u8], &'static [u8])>| {
            let f =
                Fields { fixed: Some(fixed.as_bytes()), accept: Some(accepted.as_bytes()), work, ..Fields::default() };
            assert_eq!(work_field("tok1").as_bytes(), b"w:tok1");
            assemble(&f, RETENTION).expect("readable").expect("present").work
        };
        assert_eq!(read(vec![]), None, "no entry checked yet");
        // A field of another token (work of a CONFIRM that lost, checked before it was deleted) does not count.
        assert_eq!(read(vec![(b"tok0", b"1-0"), (b"tok1", b"2-0")]), Some("2-0".to_owned()));
        assert_eq!(read(vec![(b"tok0", b"1-0")]), None);
        let mut f = Fields::default();
        f.set(b"w:tok1", b"3-0");
        f.set(b"a", b"-");
        assert_eq!(f.work, vec![(&b"tok1"[..], &b"3-0"[..])]);
    }

    #[test]
    fn a_hash_without_the_fixed_fields_is_no_execution() {
        let f = Fields { terminal: Some(br#"{"st":"canceled","at":1}"#), ..Fields::default() };
        assert!(assemble(&f, RETENTION).expect("readable").is_none());
    }
}
