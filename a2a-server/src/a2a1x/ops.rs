//! The 1.x operations, independent of the binding: a message becomes NEGOTIATE / EXECUTE / CONFIRM / RESULT
//! (BR-7..BR-13), a task is read with RESULT and canceled with CANCEL.

use std::sync::Arc;
use std::time::Duration;

use a2a_core::a2a1x::select;
use a2a_core::a2a1x::{
    Artifact, ListTasksRequest, ListTasksResponse, Message, Part, Role, SendMessageRequest, Task, TaskState, TaskStatus,
};
use a2a_core::capability::AuthRequirement;
use a2a_core::error::ErrorCode;
use a2a_core::execution_id::ExecutionId;
use a2a_core::headers as h;
use a2a_core::wire::{ExecutionStatus, NegotiateRequest, ResultResponse};
use axum::http::HeaderMap;
use serde_json::{Map, Value, json};

use super::error::{BridgeError, Kind};
use a2a_runtime::a2a1x::{check_headers, check_version, sender_of};

use super::{ANONYMOUS_SENDER, Inner};
use crate::auth::SignedParts;
use crate::engine::{Caller, Capability};

/// Longest `messageId` and `contextId` (BR-9).
const MAX_ID_LEN: usize = 128;
/// Default and largest `ListTasks` page (BR-9).
const DEFAULT_PAGE: u32 = 50;
const MAX_PAGE: u32 = 100;
/// Negotiations cached per (sender, skill) at most.
pub(crate) const MAX_CACHED_NEGOTIATIONS: u64 = 10_000;

/// One 1.x request: who calls, and what to check its credentials against.
pub(crate) struct Ctx<'a> {
    pub(crate) caller: Caller,
    pub(crate) headers: &'a HeaderMap,
    pub(crate) method: &'static str,
    pub(crate) target: &'a str,
    pub(crate) body: &'a [u8],
}

/// BR-10: the caller is `A2A-Sender-ID` when it is a did:web DID, else the anonymous sender; the header limits of
/// §13 apply as on `/a2a`.
pub(crate) fn caller(inner: &Inner, headers: &HeaderMap) -> Result<Caller, BridgeError> {
    let limits = &inner.app.engine.limits;
    check_headers(headers, limits.max_headers, limits.max_header_bytes)?;
    check_version(headers)?;
    let sender = sender_of(headers)?;
    let region = headers
        .get(h::A2A_REGION)
        .and_then(|v| v.to_str().ok())
        .and_then(|r| h::parse_region(r).ok())
        .map(str::to_owned);
    let incoming = headers.get("traceparent").and_then(|v| v.to_str().ok());
    let traceparent = Some(crate::trace_context::continue_from(incoming).header());
    Ok(Caller { sender, verified: false, region, traceparent, via_gateway: None })
}

fn check_id(what: &str, id: &str) -> Result<(), BridgeError> {
    if id.is_empty() || id.chars().count() > MAX_ID_LEN {
        return Err(BridgeError::params(format!("{what} must be 1 to {MAX_ID_LEN} characters (got {})", id.len())));
    }
    Ok(())
}

/// A new context id, `ctx-` and 128 random bits.
fn new_context_id() -> Result<String, BridgeError> {
    let mut b = [0u8; 16];
    getrandom::fill(&mut b).map_err(|e| BridgeError::new(Kind::Internal, format!("no random bytes: {e}")))?;
    Ok(format!("ctx-{}", data_encoding::HEXLOWER.encode(&b)))
}

/// What a started message is (BR-12).
pub(crate) struct Started {
    pub(crate) task_id: String,
    pub(crate) caller: Caller,
}

impl Inner {
    fn skill_names(&self) -> String {
        super::card::skills(&self.app.engine).iter().map(|c| c.decl.name.as_str()).collect::<Vec<_>>().join(", ")
    }

    /// BR-7, BR-27: the skill of a message: the one it names; else the one [`select::select`] chooses (the agent's
    /// only skill, the only one whose input schema accepts the message's payload, the default skill), or its refusal.
    fn skill_of(&self, req: &SendMessageRequest) -> Result<Arc<Capability>, BridgeError> {
        let skills = super::card::skills(&self.app.engine);
        let named = select::named_skill(req);
        let cap = match named {
            Some(n) => skills.iter().find(|c| c.decl.name == n).copied(),
            None => {
                let content = self.content_of(&req.message)?;
                let candidates: Vec<select::Skill<'_>> = skills.iter().map(|c| self.skill(c)).collect();
                let i = select::select(&content, &candidates, self.opts.default_skill.as_deref())
                    .map_err(BridgeError::params)?;
                skills.get(i).copied()
            }
        };
        cap.cloned().ok_or_else(|| {
            let mut e = BridgeError::params(format!(
                "this agent has no skill {:?} that A2A 1.x can call; its skills are: {}",
                named.unwrap_or_default(),
                self.skill_names()
            ));
            e.code = Some(ErrorCode::NO_MATCHING_CAPABILITY);
            e
        })
    }

    /// `cap` as a skill to choose from, with its input schema compiled once (BR-27, BR-28).
    fn skill<'a>(&'a self, cap: &'a Capability) -> select::Skill<'a> {
        select::Skill {
            name: &cap.decl.name,
            input_schema: &cap.decl.input_schema,
            compiled: self.input_schemas.get(&cap.decl.name),
        }
    }

    /// BR-8, BR-28: the payload of a message for `cap`.
    fn payload_of(&self, msg: &Message, cap: &Capability) -> Result<Value, BridgeError> {
        Ok(select::payload_for(&self.content_of(msg)?, &self.skill(cap)))
    }

    /// BR-8, BR-9: what a message carries: one JSON object, or one text.
    fn content_of(&self, msg: &Message) -> Result<select::Content, BridgeError> {
        let l = &self.opts.limits;
        select::content_of(msg, select::PartLimits { max_parts: l.max_parts, max_text_bytes: l.max_text_bytes })
            .map_err(|e| match e {
                select::ContentError::File(m) => BridgeError::new(Kind::ContentType, m),
                select::ContentError::Params(m) => BridgeError::params(m),
            })
    }

    /// BR-10: the request's credentials meet `requirement`.
    async fn authorize(&self, ctx: &mut Ctx<'_>, requirement: AuthRequirement) -> Result<(), BridgeError> {
        let parts = SignedParts { method: ctx.method, target: ctx.target, headers: ctx.headers, body: ctx.body };
        self.app.auth.check(&self.app.engine, requirement, &parts, &mut ctx.caller).await.map_err(|e| {
            let mut b = BridgeError::from(*e.err);
            b.kind = Kind::InvalidRequest;
            b
        })
    }

    /// NEGOTIATE for (sender, skill), reused until shortly before it expires (BR-11).
    async fn negotiation(
        &self,
        caller: &Caller,
        cap: &Arc<Capability>,
        fresh: bool,
    ) -> Result<crate::store::NegotiationRecord, BridgeError> {
        let key = (caller.sender.clone(), cap.decl.name.clone());
        let now = crate::store::now_ms();
        let cached =
            if fresh { None } else { self.negotiations.get(&key).filter(|(_, until)| *until > now).map(|(id, _)| id) };
        let engine = &self.app.engine;
        let id = match cached {
            Some(id) => id,
            None => {
                let req = NegotiateRequest {
                    target_capability: cap.decl.name.clone(),
                    proposed_schema: cap.decl.input_schema.clone(),
                    timeout_ms: None,
                    strict: false,
                };
                let resp = engine.negotiate(caller, cap, req).await?;
                let ttl = engine.limits.negotiation_ttl_ms;
                let until = now.saturating_add(ttl.saturating_sub((ttl / 2).min(60_000)));
                self.negotiations.insert(key, (resp.negotiation_id.clone(), until));
                resp.negotiation_id
            }
        };
        Ok(engine.negotiation_for(caller, &id).await?.0)
    }

    /// BR-11: NEGOTIATE, EXECUTE and CONFIRM a message; the task is running (or already terminal) afterwards.
    pub(crate) async fn start(&self, mut ctx: Ctx<'_>, req: &SendMessageRequest) -> Result<Started, BridgeError> {
        let msg = &req.message;
        check_id("message.messageId", &msg.message_id)?;
        if let Some(c) = &msg.context_id {
            check_id("message.contextId", c)?;
        }
        if msg.task_id.as_deref().is_some_and(|t| !t.is_empty()) {
            return Err(BridgeError::params(
                "message.taskId: this agent's tasks take no further input; send a new message without taskId",
            ));
        }
        let cap = self.skill_of(req)?;
        self.authorize(&mut ctx, cap.decl.auth_requirement).await?;
        let payload = self.payload_of(msg, &cap)?;
        let idem = h::parse_token("Idempotency-Key", &msg.message_id).ok();
        let engine = &self.app.engine;
        let caller = ctx.caller;
        let mut neg = self.negotiation(&caller, &cap, false).await;
        if matches!(&neg, Err(e) if e.code == Some(ErrorCode::UNKNOWN_NEGOTIATION)) {
            neg = self.negotiation(&caller, &cap, true).await;
        }
        let neg = neg?;
        let (exe, _) = engine.execute(&caller, &neg, &cap, idem, payload).await?;
        let rec = engine.execution_for(&caller, &exe.execution_id).await?;
        match engine.confirm(&caller, rec).await {
            Ok(_) => {}
            // A replayed message whose execution was canceled before CONFIRM: its task shows that (BR-11).
            Err(e) if e.code == ErrorCode::INVALID_STATE => {}
            Err(e) => return Err(e.into()),
        }
        let context_id = match self.indexed(&exe.execution_id) {
            Some(i) => i.context_id,
            None => match &msg.context_id {
                Some(c) => c.clone(),
                None => new_context_id()?,
            },
        };
        let mut stored = msg.clone();
        stored.context_id = Some(context_id.clone());
        stored.task_id = Some(exe.execution_id.clone());
        self.remember(&exe.execution_id, &caller.sender, &context_id, &stored);
        Ok(Started { task_id: exe.execution_id, caller })
    }

    /// `SendMessage` (BR-12): waits for a terminal state up to `max_wait_ms` unless `returnImmediately`.
    pub(crate) async fn send(&self, ctx: Ctx<'_>, req: &SendMessageRequest) -> Result<Task, BridgeError> {
        let started = self.start(ctx, req).await?;
        let immediately = req.configuration.as_ref().is_some_and(|c| c.return_immediately);
        let wait = if immediately { Duration::ZERO } else { Duration::from_millis(self.app.engine.limits.max_wait_ms) };
        let history = req.configuration.as_ref().and_then(|c| c.history_length);
        self.read(&started.caller, &started.task_id, wait, history).await
    }

    /// The task `id` of `caller` as it is, or after waiting up to `wait` for a terminal state.
    pub(crate) async fn read(
        &self,
        caller: &Caller,
        id: &str,
        wait: Duration,
        history: Option<u32>,
    ) -> Result<Task, BridgeError> {
        let r = self.result(caller, id, wait).await?;
        Ok(self.task_of(&r, history))
    }

    /// RESULT of the caller's execution `id` (unknown ids are `TaskNotFound`, BR-13).
    pub(crate) async fn result(
        &self,
        caller: &Caller,
        id: &str,
        wait: Duration,
    ) -> Result<ResultResponse, BridgeError> {
        let rec = self.record(caller, id).await?;
        Ok(self.app.engine.result(rec, wait).await?)
    }

    async fn record(&self, caller: &Caller, id: &str) -> Result<crate::store::ExecutionRecord, BridgeError> {
        if ExecutionId::parse(id).is_err() {
            let mut e =
                BridgeError::new(Kind::TaskNotFound, format!("no task {id:?}: it is not a task id of this agent"));
            e.code = Some(ErrorCode::UNKNOWN_EXECUTION);
            return Err(e);
        }
        Ok(self.app.engine.execution_for(caller, id).await?)
    }

    /// The caller's execution `id`, after checking the request's credentials against its capability (BR-13); a
    /// refusal of the credentials is answered as an unknown task (AUTH-10).
    pub(crate) async fn authorized(&self, ctx: &mut Ctx<'_>, id: &str) -> Result<(), BridgeError> {
        let rec = self.record(&ctx.caller, id).await?;
        let requirement =
            self.app.engine.capability(&rec.capability).map_or(AuthRequirement::None, |c| c.decl.auth_requirement);
        let parts = SignedParts { method: ctx.method, target: ctx.target, headers: ctx.headers, body: ctx.body };
        match self.app.auth.check(&self.app.engine, requirement, &parts, &mut ctx.caller).await {
            Ok(()) => Ok(()),
            Err(e) => Err(BridgeError::from(
                *crate::auth::as_unknown(e, || crate::engine::unknown_execution(&ctx.caller, id)).err,
            )),
        }
    }

    /// `GetTask` (BR-13).
    pub(crate) async fn get(&self, mut ctx: Ctx<'_>, id: &str, history: Option<u32>) -> Result<Task, BridgeError> {
        self.authorized(&mut ctx, id).await?;
        self.read(&ctx.caller, id, Duration::ZERO, history).await
    }

    /// `CancelTask` (BR-13).
    pub(crate) async fn cancel(&self, mut ctx: Ctx<'_>, id: &str) -> Result<Task, BridgeError> {
        self.authorized(&mut ctx, id).await?;
        let rec = self.record(&ctx.caller, id).await?;
        let r = self.app.engine.cancel(rec).await.map_err(|e| {
            let mut b = BridgeError::from(e);
            if b.kind == Kind::TaskNotCancelable {
                b.message = format!("{}; a task that has finished cannot be canceled", b.message);
            }
            b
        })?;
        Ok(self.task_of(&r, None))
    }

    /// `ListTasks` (BR-13).
    pub(crate) async fn list(&self, ctx: Ctx<'_>, req: &ListTasksRequest) -> Result<ListTasksResponse, BridgeError> {
        let page = req.page_size.filter(|p| *p > 0).unwrap_or(DEFAULT_PAGE);
        if page > MAX_PAGE {
            return Err(BridgeError::params(format!("pageSize {page} is above the maximum of {MAX_PAGE}")));
        }
        let context = req.context_id.as_deref().filter(|c| !c.is_empty());
        if ctx.caller.sender == ANONYMOUS_SENDER && context.is_none() {
            return Err(BridgeError::params(
                "an anonymous caller lists its tasks by contextId; give contextId, or send A2A-Sender-ID with your DID",
            ));
        }
        let before = match req.page_token.as_deref().filter(|t| !t.is_empty()) {
            None => u64::MAX,
            Some(t) => {
                t.parse().map_err(|_| BridgeError::params(format!("pageToken {t:?} is not one this agent gave")))?
            }
        };
        let candidates = self.list_indexed(&ctx.caller.sender, context, before);
        let mut tasks = Vec::new();
        let (mut total, mut last_seq, mut more) = (0u32, 0u64, false);
        for c in &candidates {
            let Ok(r) = self.result(&ctx.caller, &c.task_id, Duration::ZERO).await else { continue };
            let t = self.task_of(&r, Some(0));
            if req.status.is_some_and(|s| s != t.status.state) {
                continue;
            }
            total = total.saturating_add(1);
            if tasks.len() < page as usize {
                tasks.push(t);
                last_seq = c.seq;
            } else {
                more = true;
                if req.status.is_none() {
                    // Without a status filter every remembered task counts; no need to read them all.
                    total = u32::try_from(candidates.len()).unwrap_or(u32::MAX);
                    break;
                }
            }
        }
        let next = if more { last_seq.to_string() } else { String::new() };
        Ok(ListTasksResponse { tasks, next_page_token: next, page_size: page, total_size: total })
    }

    /// BR-12: the 1.x view of an execution.
    pub(crate) fn task_of(&self, r: &ResultResponse, history: Option<u32>) -> Task {
        let indexed = self.indexed(&r.execution_id);
        let context_id = indexed.as_ref().map_or_else(|| r.negotiation_id.clone(), |i| i.context_id.clone());
        let state = state_of(r.status);
        let message = r.error.as_ref().map(|e| Message {
            message_id: format!("{}-status", r.execution_id),
            context_id: Some(context_id.clone()),
            task_id: Some(r.execution_id.clone()),
            role: Role::Agent,
            parts: vec![Part::text(e.message.clone()), Part::data(json!({"code": e.code, "details": e.details}))],
            metadata: None,
        });
        let artifacts = match (&r.result, r.status) {
            (Some(result), ExecutionStatus::Succeeded) => vec![Artifact {
                artifact_id: "result".into(),
                name: Some("result".into()),
                parts: vec![Part::data(result.clone())],
            }],
            _ => Vec::new(),
        };
        let history = match (indexed, history) {
            (_, Some(0)) | (None, _) => Vec::new(),
            (Some(i), _) => vec![i.message],
        };
        let mut metadata = Map::new();
        metadata.insert("skill".into(), json!(r.capability));
        Task {
            id: r.execution_id.clone(),
            context_id,
            status: TaskStatus { state, message, timestamp: Some(r.updated_at.clone()) },
            artifacts,
            history,
            metadata: Some(metadata),
        }
    }
}

/// BR-12's table.
pub(crate) fn state_of(s: ExecutionStatus) -> TaskState {
    match s {
        ExecutionStatus::Received | ExecutionStatus::Accepted => TaskState::Submitted,
        ExecutionStatus::Running => TaskState::Working,
        ExecutionStatus::Succeeded => TaskState::Completed,
        ExecutionStatus::Failed | ExecutionStatus::TimedOut => TaskState::Failed,
        ExecutionStatus::Canceled => TaskState::Canceled,
    }
}
