//! Send and runs (§17.3, §17.4): checking a send, storing its run before anything is answered (SND-6), driving it —
//! round one, then ping-pong ([`super::pingpong`]) and announce ([`super::events`]) — and answering exactly what
//! happened: `accepted`, `ok`, `no_reply`, `timeout`, `error` (SND-7, SND-8), now or later (`GET /a2a/runs/{id}`).

use std::sync::Arc;
use std::time::Duration;

use a2a_core::did::Did;
use a2a_core::error::{A2aError, ErrorCode, ErrorObject};
use a2a_core::execution_id::ExecutionId;
use a2a_core::sessions::{
    self as s, AnnounceOutcome, AnnounceStatus, ContextMessage, ContextMode, Delivery, HandlerKind, Provenance, Role,
    Run, RunReply, RunState, SendRequest, SendResponse, SendStatus, SourceTool, Step, TurnRef, WaitChain,
};
use base64::Engine as _;
use serde_json::json;

use super::handler::HandlerFailure;
use super::policy::Requester;
use super::registry::{invalid, unknown};
use super::store::{InboxItem, RunRecord, SessionRecord, StoredMessage};
use super::{Sessions, error, store_error, with_wait_chain};
use crate::store::{now_ms, timestamp};

/// The most context messages a `full` send carries to the handler (SND-11).
pub const MAX_CONTEXT_MESSAGES: usize = 50;
/// The most bytes of context a `full` send carries to the handler (SND-11).
pub const MAX_CONTEXT_BYTES: usize = 80 * 1024;

/// Who sent a send, and under which chain (from the request headers).
#[derive(Debug, Clone)]
pub struct Incoming {
    /// The sender and its session.
    pub requester: Requester,
    /// `A2A-Hop` (POL-4).
    pub hop: u32,
    /// `A2A-Wait-Chain` (POL-5).
    pub chain: WaitChain,
    /// The trace of `traceparent`, when the send names none.
    pub trace_id: Option<String>,
}

/// Until when `GET /a2a/runs/{id}` holds (SND-10).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Until {
    /// The round-one outcome is known.
    Reply,
    /// The whole run is done.
    Done,
}

/// Why a delivery got no reply.
pub(crate) enum Undelivered {
    /// The handler failed or timed out.
    Handler(HandlerFailure),
    /// The session ended under the delivery.
    Ended,
}

impl Sessions {
    /// SND-1, SND-2: checks a send's members; lowers `wait_ms` and `run_timeout_ms` to the agent's maxima (SND-3,
    /// SND-13).
    pub(crate) fn validate(&self, req: &mut SendRequest) -> Result<(), A2aError> {
        match (&req.target, &req.target_label) {
            (None, None) => {
                return Err(invalid("target", "name the target session: `target` or `target_label`".into()));
            }
            (Some(_), Some(_)) => {
                return Err(invalid("target_label", "give `target` or `target_label`, not both".into()));
            }
            _ => {}
        }
        if let Some(t) = &req.target {
            s::validate_session_key(t).map_err(|e| invalid("target", e.to_string()))?;
        }
        let n = req.text.chars().count();
        if n == 0 || n > s::MAX_TEXT_CHARS {
            return Err(invalid("text", format!("text is 1 to {} characters (got {n})", s::MAX_TEXT_CHARS)));
        }
        if let Some(f) = &req.from {
            s::validate_session_key(f).map_err(|e| invalid("from", e.to_string()))?;
        }
        if let Some(e) = &req.from_endpoint {
            let ok = url::Url::parse(e).is_ok_and(|u| matches!(u.scheme(), "http" | "https") && u.host().is_some());
            if !ok {
                return Err(invalid("from_endpoint", format!("from_endpoint {e:?} is not an http(s) URL")));
            }
        }
        if req.run_timeout_ms == Some(0) {
            return Err(invalid("run_timeout_ms", "run_timeout_ms must be greater than 0".into()));
        }
        req.run_timeout_ms = Some(
            req.run_timeout_ms
                .unwrap_or(self.settings.limits.default_run_timeout_ms)
                .min(self.settings.limits.max_run_timeout_ms),
        );
        req.wait_ms = Some(req.wait_ms.unwrap_or(0).min(self.settings.limits.max_wait_ms));
        if let Some(m) = req.max_turns
            && m > s::MAX_TURNS_CAP
        {
            return Err(invalid("max_turns", format!("max_turns is 0 to {} (got {m})", s::MAX_TURNS_CAP)));
        }
        let max_attachments = self.settings.limits.max_attachments.min(s::MAX_ATTACHMENTS);
        if req.attachments.len() > max_attachments {
            return Err(error(
                ErrorCode::PAYLOAD_TOO_LARGE,
                format!("a send carries at most {max_attachments} attachments (got {})", req.attachments.len()),
            )
            .details(json!({"member": "attachments", "limit": "max_attachments", "max": max_attachments,
                            "limit_bytes": self.settings.limits.max_attachment_bytes})));
        }
        for (i, a) in req.attachments.iter().enumerate() {
            let member = format!("attachments[{i}]");
            if a.name.is_empty() || a.name.len() > 255 {
                return Err(invalid(&format!("{member}.name"), "an attachment name is 1 to 255 bytes".into()));
            }
            let mt = a.media_type.split_once('/');
            if !mt.is_some_and(|(t, st)| is_token(t) && is_token(st)) {
                return Err(invalid(
                    &format!("{member}.media_type"),
                    format!("media_type {:?} is not type/subtype", a.media_type),
                ));
            }
            let bytes = base64::engine::general_purpose::STANDARD.decode(a.data.as_bytes()).map_err(|e| {
                invalid(&format!("{member}.data"), format!("attachment {:?}: data is not valid base64: {e}", a.name))
            })?;
            if bytes.len() > self.settings.limits.max_attachment_bytes {
                return Err(error(
                    ErrorCode::PAYLOAD_TOO_LARGE,
                    format!(
                        "attachment {:?} is {} bytes; the limit is {} bytes each",
                        a.name,
                        bytes.len(),
                        self.settings.limits.max_attachment_bytes
                    ),
                )
                .details(
                    json!({"member": format!("{member}.data"), "limit_bytes": self.settings.limits.max_attachment_bytes}),
                ));
            }
        }
        if let Some(p) = req.priority
            && p > 9
        {
            return Err(invalid("priority", format!("priority is 0 to 9 (got {p})")));
        }
        if let Some(t) = &req.trace_id
            && (t.is_empty() || t.len() > 128)
        {
            return Err(invalid("trace_id", "trace_id is 1 to 128 characters".into()));
        }
        if req.max_tokens == Some(0) {
            return Err(invalid("max_tokens", "max_tokens must be greater than 0".into()));
        }
        if let Some(t) = &req.turn
            && (t.n == 0 || t.n > t.of || t.of > s::MAX_TURNS_CAP)
        {
            return Err(invalid(
                "turn",
                format!("turn {} of {} is not 1 <= n <= of <= {}", t.n, t.of, s::MAX_TURNS_CAP),
            ));
        }
        if !req.context.is_empty() && req.context_mode != Some(ContextMode::Full) {
            return Err(invalid("context", "context is given only with context_mode `full`".into()));
        }
        bound_context(&mut req.context);
        Ok(())
    }

    /// The target of a send: by key, or by the label of exactly one visible session here (SND-5).
    async fn target_of(&self, requester: &Requester, req: &SendRequest) -> Result<SessionRecord, A2aError> {
        if let Some(key) = &req.target {
            return self.live_session(key).await;
        }
        let label = req.target_label.clone().unwrap_or_default();
        let all = self.store.list_sessions(self.settings.limits.max_sessions * 2).await.map_err(store_error)?;
        let mut found = Vec::new();
        for rec in all.into_iter().chain(self.hosted_declared()) {
            if rec.session.agent == self.did
                && rec.session.label.as_deref() == Some(label.as_str())
                && self.is_live(&rec)
                && self.visible(requester, &rec).await
                && !found.iter().any(|r: &SessionRecord| r.session.address == rec.session.address)
            {
                found.push(rec);
            }
        }
        match found.len() {
            0 => Err(unknown(&label)),
            1 => Ok(found.remove(0)),
            _ => Err(error(
                ErrorCode::AMBIGUOUS_LABEL,
                format!("label {label:?} names {} sessions here; send to one of them by `target`", found.len()),
            )
            .details(json!({"candidates": found.iter().map(|r| r.session.address.to_string()).collect::<Vec<_>>()}))),
        }
    }

    fn hosted_declared(&self) -> Vec<SessionRecord> {
        self.hosted.iter().filter_map(|h| self.declared(&h.session.session_key)).collect()
    }

    /// `POST /a2a/sessions/send`: checks, stores the run, starts it, and answers per SND-7.
    pub async fn send(self: &Arc<Self>, inc: Incoming, mut req: SendRequest) -> Result<SendResponse, A2aError> {
        self.validate(&mut req)?;
        let target = self.target_of(&inc.requester, &req).await?;
        let address = target.session.address.clone();
        self.check_allowed(&inc.requester, &address.to_string())?;
        let wait_ms = req.wait_ms.unwrap_or(0);
        let wants_reply = req.reply.unwrap_or(true);
        let waits = wants_reply && wait_ms > 0;
        let requester = inc.requester.address();
        if waits && requester == address.to_string() {
            return Err(error(
                ErrorCode::WAIT_CYCLE,
                format!("{address} cannot wait on itself; send with wait_ms 0 (SND-4)"),
            )
            .details(json!({"cycle": [requester, address.to_string()]})));
        }
        // Turns are waited on by the driving agent, not by a session: no cycle through them (POL-6).
        let edge = waits && req.turn.is_none() && inc.requester.session.is_some();
        if waits {
            if req.turn.is_none() {
                self.check_cycle(&inc.chain, &requester, &address).await?;
            } else if let Some(path) = inc.chain.cycle_to(&address) {
                return Err(error(ErrorCode::WAIT_CYCLE, format!("{address} is already waiting on this chain"))
                    .details(json!({"cycle": path})));
            }
        }
        let rec = self.create_run(&inc, req, &target, waits).await?;
        let run_id = rec.run.run_id.clone();
        let token = run_id.clone();
        if edge {
            let until = now_ms().saturating_add(wait_ms);
            self.store.add_wait_edge(&requester, &address.to_string(), &token, until).await.map_err(store_error)?;
        }
        let driver = self.clone();
        let started = rec.clone();
        tokio::spawn(async move { driver.drive(started).await });
        let answer = if waits {
            let run = self.await_run(&run_id, Duration::from_millis(wait_ms), Until::Reply).await;
            match run {
                Ok(Some(r)) => response(&r.run),
                Ok(None) => accepted(&rec.run),
                Err(e) => {
                    tracing::warn!(error = %e, "cannot read a run while waiting; answering accepted");
                    accepted(&rec.run)
                }
            }
        } else {
            accepted(&rec.run)
        };
        if edge {
            let _ = self.store.remove_wait_edge(&requester, &address.to_string(), &token).await;
        }
        Ok(answer)
    }

    async fn create_run(
        &self,
        inc: &Incoming,
        req: SendRequest,
        target: &SessionRecord,
        waits: bool,
    ) -> Result<RunRecord, A2aError> {
        let did = Did::parse(&self.did).map_err(|e| error(ErrorCode::INTERNAL_ERROR, e.to_string()))?;
        let run_id = ExecutionId::generate(&did).map_err(|e| error(ErrorCode::INTERNAL_ERROR, e.to_string()))?;
        let now = now_ms();
        let deadline = now.saturating_add(req.run_timeout_ms.unwrap_or(s::DEFAULT_RUN_TIMEOUT_MS));
        let announce = req.announce.unwrap_or(true) && req.turn.is_none();
        let chain = if waits {
            inc.chain.clone().with(target.session.address.clone()).unwrap_or_else(|_| inc.chain.clone())
        } else {
            WaitChain::new()
        };
        let mut req = req;
        if req.trace_id.is_none() {
            req.trace_id = inc.trace_id.clone();
        }
        let rec = RunRecord {
            run: Run {
                run_id: run_id.to_string(),
                target: target.session.address.to_string(),
                from: inc.requester.address(),
                status: SendStatus::Accepted,
                reply: None,
                error: None,
                state: RunState::Queued,
                turns: Vec::new(),
                ended_by: None,
                announce: AnnounceOutcome {
                    status: if announce { AnnounceStatus::Pending } else { AnnounceStatus::NotRequested },
                    event_id: None,
                    text: None,
                },
                created_at: timestamp(now),
                updated_at: timestamp(now),
                deadline: timestamp(deadline),
            },
            sender: inc.requester.did.clone(),
            target_owner: target.session.owner.clone().unwrap_or_else(|| self.did.clone()),
            request: req,
            hop: inc.hop,
            deadline_ms: deadline,
            wait_chain: if chain.is_empty() { String::new() } else { chain.header_value() },
            done_ms: None,
        };
        // SND-6: stored before anything is answered.
        self.save(&rec).await?;
        Ok(rec)
    }

    /// Stores a run.
    pub(crate) async fn save(&self, rec: &RunRecord) -> Result<(), A2aError> {
        self.store.put_run(rec, self.settings.limits.run_retention_ms).await.map_err(store_error)
    }

    /// Saves a run, logging a failure (the driver has nobody to answer).
    pub(crate) async fn save_logged(&self, rec: &mut RunRecord) {
        rec.run.updated_at = timestamp(now_ms());
        if let Err(e) = self.save(rec).await {
            tracing::warn!(error = %e, run_id = %rec.run.run_id, "cannot store a run");
        }
    }

    /// Waits up to `wait` for a run to reach `until`; `None` when it did not (the run as it is then is in the
    /// store). Woken by the store's change signal, never by polling.
    pub async fn await_run(&self, run_id: &str, wait: Duration, until: Until) -> Result<Option<RunRecord>, A2aError> {
        let deadline = tokio::time::Instant::now() + wait;
        let mut changes = self.store.changes();
        loop {
            changes.borrow_and_update();
            let rec = self.store.get_run(run_id).await.map_err(store_error)?;
            if let Some(r) = &rec {
                let reached = match until {
                    Until::Reply => r.run.status.is_final(),
                    Until::Done => r.run.state == RunState::Done,
                };
                if reached {
                    return Ok(rec);
                }
            }
            tokio::select! {
                () = tokio::time::sleep_until(deadline) => return Ok(None),
                c = changes.changed() => if c.is_err() { return Ok(None) },
            }
        }
    }

    /// SND-10: `GET /a2a/runs/{id}` for the requester or the target's owner; others get `404 unknown_run`.
    pub async fn read_run(&self, reader: &str, run_id: &str, wait: Duration, until: Until) -> Result<Run, A2aError> {
        let not_found = || {
            error(ErrorCode::UNKNOWN_RUN, format!("no run {run_id:?} that you may read here"))
                .details(json!({"run_id": run_id}))
        };
        let rec = self.store.get_run(run_id).await.map_err(store_error)?.ok_or_else(not_found)?;
        if rec.sender != reader && rec.target_owner != reader {
            return Err(not_found());
        }
        let wait = wait.min(Duration::from_millis(self.settings.limits.max_wait_ms));
        match self.await_run(run_id, wait, until).await? {
            Some(r) => Ok(r.run),
            None => Ok(self.store.get_run(run_id).await.map_err(store_error)?.map_or(rec.run, |r| r.run)),
        }
    }

    /// Drives a run: round one, then ping-pong and announce, then `done` (publishing a `run` event).
    pub(crate) async fn drive(self: Arc<Self>, mut rec: RunRecord) {
        let Ok(Some(target)) = self.lookup(&rec.run.target).await else {
            self.finish_round_one(&mut rec, Err(Undelivered::Ended), None).await;
            self.done(&mut rec).await;
            return;
        };
        let step = if rec.request.turn.is_some() {
            Step::Reply
        } else if target.spawn.is_some() {
            Step::Spawn
        } else {
            Step::Message
        };
        let tool = match step {
            Step::Reply => SourceTool::PingPong,
            Step::Spawn => SourceTool::SessionsSpawn,
            _ => SourceTool::SessionsSend,
        };
        let delivery = self.delivery(&rec, &target, step, tool, rec.request.text.clone(), Vec::new());
        let deadline = rec.deadline_ms;
        let outcome = self.deliver(&mut rec, &target, delivery, deadline).await;
        let round_one = outcome.as_ref().ok().cloned();
        self.finish_round_one(&mut rec, outcome, Some(&target)).await;
        if rec.request.turn.is_none() {
            if let Some(r1) = round_one.filter(|_| rec.run.status == SendStatus::Ok) {
                self.ping_pong(&mut rec, &target, &r1).await;
            } else if rec.run.status == SendStatus::Ok {
                rec.run.ended_by = Some(s::EndedBy::ReplyNotWanted);
            }
            self.announce(&mut rec, &target).await;
        }
        // A worker's announce-back (and its session's end) comes before the run is shown done: whoever waits for
        // `done` sees all of it (SPN-3, SPN-4).
        if target.spawn.is_some() {
            self.announce_back(&rec, &target).await;
        }
        self.done(&mut rec).await;
    }

    /// The delivery of `text` to `target` for `step` in this run.
    pub(crate) fn delivery(
        &self,
        rec: &RunRecord,
        target: &SessionRecord,
        step: Step,
        tool: SourceTool,
        text: String,
        exchange: Vec<ContextMessage>,
    ) -> Delivery {
        let req = &rec.request;
        let mut provenance = Provenance::new(
            &rec.sender,
            req.from.as_ref().map(|_| rec.run.from.clone()),
            tool,
            rec.hop,
            &rec.run.run_id,
        );
        provenance.trace_id = req.trace_id.clone();
        let context = match req.context_mode.unwrap_or(ContextMode::None) {
            ContextMode::None => Vec::new(),
            ContextMode::Current => exchange,
            ContextMode::Full => {
                let mut c = req.context.clone();
                c.extend(exchange);
                bound_context(&mut c);
                c
            }
        };
        let turn = if step == Step::Reply { req.turn.clone() } else { None };
        Delivery {
            run_id: rec.run.run_id.clone(),
            session: target.session.address.to_string(),
            step,
            instruction: s::step_instruction(step, turn.as_ref()),
            text,
            provenance,
            turn,
            context,
            attachments: req.attachments.clone(),
            metadata: req.metadata.clone(),
            max_tokens: req.max_tokens,
            original: None,
            round_one: None,
            last: None,
        }
    }

    /// Hands a delivery to the session — its handler, or its inbox (SES-5) — one at a time per session (SND-12),
    /// recording both sides in the transcript (PP-6); `deadline_ms` bounds the wait for the session and the reply.
    pub(crate) async fn deliver(
        self: &Arc<Self>,
        rec: &mut RunRecord,
        target: &SessionRecord,
        delivery: Delivery,
        deadline_ms: u64,
    ) -> Result<String, Undelivered> {
        let address = target.session.address.to_string();
        let keep = self.settings.limits.max_transcript_messages;
        let msg = StoredMessage {
            role: Role::InterSession,
            text: delivery.text.clone(),
            run_id: Some(delivery.run_id.clone()),
            provenance: Some(delivery.provenance.clone()),
        };
        if let Err(e) = self.store.append_message(&address, &msg, keep).await {
            tracing::warn!(error = %e, "cannot append to a transcript");
        }
        let remaining = || Duration::from_millis(deadline_ms.saturating_sub(now_ms()));
        let budget = rec.request.run_timeout_ms.unwrap_or(0);
        let timed_out = || {
            Undelivered::Handler(HandlerFailure::TimedOut(format!(
                "{address} did not reply within run_timeout_ms ({budget} ms)"
            )))
        };
        let priority = rec.request.priority.unwrap_or(5);
        let result = match self.handler_for(target) {
            Some(handler) => {
                let Ok(_guard) = tokio::time::timeout(remaining(), self.acquire(&address, priority)).await else {
                    return Err(timed_out());
                };
                if rec.run.state == RunState::Queued {
                    rec.run.state = RunState::Running;
                    self.save_logged(rec).await;
                }
                let chain = rec.wait_chain.clone();
                match tokio::time::timeout(remaining(), with_wait_chain(chain, handler.handle(delivery))).await {
                    Err(_) => Err(timed_out()),
                    Ok(Err(f)) => Err(Undelivered::Handler(f)),
                    Ok(Ok(reply)) => Ok(reply),
                }
            }
            None if target.session.handler == HandlerKind::Inbox && target.session.agent == self.did => {
                if rec.run.state == RunState::Queued {
                    rec.run.state = RunState::Running;
                    self.save_logged(rec).await;
                }
                self.through_inbox(target, delivery, priority, deadline_ms).await
            }
            None => Err(Undelivered::Handler(HandlerFailure::Failed(format!(
                "{address} has no handler at this agent (its spawn template or hosted handler is not configured here)"
            )))),
        };
        if let Ok(reply) = &result
            && !reply.trim().is_empty()
        {
            let msg = StoredMessage {
                role: Role::Assistant,
                text: reply.clone(),
                run_id: Some(rec.run.run_id.clone()),
                provenance: None,
            };
            if let Err(e) = self.store.append_message(&address, &msg, keep).await {
                tracing::warn!(error = %e, "cannot append to a transcript");
            }
        }
        result
    }

    /// SES-5: queues the delivery in the inbox and waits for its owner's answer, the session's end or the deadline.
    async fn through_inbox(
        &self,
        target: &SessionRecord,
        delivery: Delivery,
        priority: u8,
        deadline_ms: u64,
    ) -> Result<String, Undelivered> {
        let address = target.session.address.to_string();
        let key = answer_key(&delivery);
        let run_id = delivery.run_id.clone();
        let item = InboxItem { delivery, priority, queued_ms: now_ms(), until_ms: deadline_ms };
        if let Err(e) = self.store.push_inbox(&address, &item).await {
            return Err(Undelivered::Handler(HandlerFailure::Failed(format!("cannot queue the delivery: {e}"))));
        }
        let mut changes = self.store.changes();
        let deadline = tokio::time::Instant::now() + Duration::from_millis(deadline_ms.saturating_sub(now_ms()));
        let out = loop {
            changes.borrow_and_update();
            match self.store.get_answer(&key).await {
                Ok(Some(RunReply { error: Some(e), .. })) => {
                    break Err(Undelivered::Handler(HandlerFailure::Failed(e)));
                }
                Ok(Some(RunReply { reply, .. })) => break Ok(reply.unwrap_or_default()),
                Ok(None) => {}
                Err(e) => tracing::warn!(error = %e, "cannot read an inbox answer"),
            }
            if let Ok(Some(s)) = self.store.get_session(&address).await
                && s.session.ended_at.is_some()
            {
                break Err(Undelivered::Ended);
            }
            tokio::select! {
                () = tokio::time::sleep_until(deadline) => break Err(Undelivered::Handler(HandlerFailure::TimedOut(
                    format!("the owner of {address} did not answer within run_timeout_ms")))),
                c = changes.changed() => if c.is_err() {
                    break Err(Undelivered::Handler(HandlerFailure::Failed("the store stopped".into())));
                },
            }
        };
        let _ = self.store.remove_inbox(&address, &run_id).await;
        out
    }

    /// Records the round-one outcome (SND-7, PP-5).
    async fn finish_round_one(
        &self,
        rec: &mut RunRecord,
        outcome: Result<String, Undelivered>,
        target: Option<&SessionRecord>,
    ) {
        let _ = target;
        match outcome {
            Ok(reply) if s::is_silent(&reply) => {
                rec.run.status = SendStatus::NoReply;
                rec.run.reply = (!reply.trim().is_empty()).then_some(reply);
                rec.run.ended_by = Some(if s::is_empty_reply(rec.run.reply.as_deref().unwrap_or("")) {
                    s::EndedBy::EmptyReply
                } else {
                    s::EndedBy::SkipToken
                });
            }
            Ok(reply) => {
                rec.run.status = SendStatus::Ok;
                rec.run.reply = Some(reply);
                if !rec.request.reply.unwrap_or(true) {
                    rec.run.ended_by = Some(s::EndedBy::ReplyNotWanted);
                }
            }
            Err(Undelivered::Handler(HandlerFailure::TimedOut(m))) => {
                rec.run.status = SendStatus::Timeout;
                rec.run.error = Some(ErrorObject { code: ErrorCode::TIMED_OUT, message: m, details: None });
                rec.run.ended_by = Some(s::EndedBy::Timeout);
            }
            Err(Undelivered::Handler(HandlerFailure::Failed(m))) => {
                rec.run.status = SendStatus::Error;
                rec.run.error = Some(ErrorObject { code: ErrorCode::HANDLER_FAILED, message: m, details: None });
                rec.run.ended_by = Some(s::EndedBy::Error);
            }
            Err(Undelivered::Ended) => {
                rec.run.status = SendStatus::Error;
                rec.run.error = Some(ErrorObject {
                    code: ErrorCode::SESSION_ENDED,
                    message: format!("{} ended before it replied", rec.run.target),
                    details: None,
                });
                rec.run.ended_by = Some(s::EndedBy::Error);
            }
        }
        if rec.run.state == RunState::Queued {
            rec.run.state = RunState::Running;
        }
        self.save_logged(rec).await;
    }

    /// Marks a run done and publishes its `run` event (ANN-3).
    async fn done(&self, rec: &mut RunRecord) {
        rec.run.state = RunState::Done;
        if rec.run.announce.status == AnnounceStatus::Pending {
            rec.run.announce.status = AnnounceStatus::Skipped;
        }
        rec.done_ms = Some(now_ms());
        self.save_logged(rec).await;
        let data = serde_json::to_value(&rec.run).unwrap_or_default();
        if let Err(e) = self.publish("run", &rec.run.target, data).await {
            tracing::warn!(error = %e, "cannot publish a run event");
        }
    }

    /// SES-5: the owner's answer to the delivery waiting for run `run_id` in its inbox.
    pub async fn reply_to(&self, owner: &str, run_id: &str, answer: RunReply) -> Result<Run, A2aError> {
        if answer.reply.is_some() == answer.error.is_some() {
            return Err(invalid("reply", "give exactly one of `reply` and `error`".into()));
        }
        let not_found = || {
            error(ErrorCode::UNKNOWN_RUN, format!("no delivery of run {run_id:?} waits in an inbox of yours"))
                .details(json!({"run_id": run_id}))
        };
        let rec = self.store.get_run(run_id).await.map_err(store_error)?.ok_or_else(not_found)?;
        let session = self.lookup(&rec.run.target).await?.ok_or_else(not_found)?;
        let address = session.session.address.to_string();
        // A ping-pong turn or announce step of the run may be waiting instead of round one.
        let item = self.store.inbox_item(&address, run_id).await.map_err(store_error)?;
        let (Some(item), true) = (item, session.session.owner.as_deref() == Some(owner)) else {
            return Err(not_found());
        };
        let ttl = item.until_ms.saturating_sub(now_ms()).saturating_add(60_000);
        if !self.store.put_answer(&answer_key(&item.delivery), &answer, ttl).await.map_err(store_error)? {
            return Err(error(ErrorCode::SESSION_CONFLICT, format!("run {run_id} was already answered")));
        }
        self.touch(&session).await;
        let done = self.await_run(run_id, Duration::from_millis(50), Until::Reply).await?;
        Ok(done.map_or(rec.run, |r| r.run))
    }

    /// SES-5: the deliveries waiting for the owner, held up to `wait` for one to arrive.
    pub async fn inbox(&self, owner: &str, key: &str, wait: Duration) -> Result<Vec<Delivery>, A2aError> {
        let session = self.live_session(key).await?;
        if session.session.owner.as_deref() != Some(owner) {
            return Err(unknown(key));
        }
        self.touch(&session).await;
        let address = session.session.address.to_string();
        let deadline = tokio::time::Instant::now() + wait.min(Duration::from_millis(self.settings.limits.max_wait_ms));
        let mut changes = self.store.changes();
        loop {
            changes.borrow_and_update();
            let items = self.store.inbox(&address, self.settings.limits.inbox_batch).await.map_err(store_error)?;
            if !items.is_empty() {
                return Ok(items.into_iter().map(|i| i.delivery).collect());
            }
            tokio::select! {
                () = tokio::time::sleep_until(deadline) => return Ok(Vec::new()),
                c = changes.changed() => if c.is_err() { return Ok(Vec::new()) },
            }
        }
    }
}

/// The key an inbox answer is stored under: one per step of a run.
fn answer_key(d: &Delivery) -> String {
    let step = match d.step {
        Step::Message => "message",
        Step::Reply => "reply",
        Step::Announce => "announce",
        Step::Spawn => "spawn",
    };
    format!("{}/{step}/{}", d.run_id, d.turn.as_ref().map_or(0, |t: &TurnRef| t.n))
}

fn is_token(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric() || b"!#$&-^_.+".contains(&b))
}

/// SND-11: at most 50 messages and 80 KiB, the newest kept.
fn bound_context(c: &mut Vec<ContextMessage>) {
    if c.len() > MAX_CONTEXT_MESSAGES {
        c.drain(..c.len() - MAX_CONTEXT_MESSAGES);
    }
    while !c.is_empty() && serde_json::to_vec(&*c).map_or(0, |v| v.len()) > MAX_CONTEXT_BYTES {
        c.remove(0);
    }
}

/// The answer for a run still without a round-one outcome.
fn accepted(run: &Run) -> SendResponse {
    SendResponse {
        run_id: Some(run.run_id.clone()),
        status: SendStatus::Accepted,
        reply: None,
        error: None,
        target: Some(run.target.clone()),
    }
}

/// The answer for a run as it is (SND-7).
pub(crate) fn response(run: &Run) -> SendResponse {
    SendResponse {
        run_id: Some(run.run_id.clone()),
        status: run.status,
        reply: run.reply.clone(),
        error: run.error.clone(),
        target: Some(run.target.clone()),
    }
}
