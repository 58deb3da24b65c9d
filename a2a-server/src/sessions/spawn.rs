//! Spawn (§17.8): an ephemeral worker session for one task, with a label, a run timeout, cleanup `delete|keep`,
//! limits on depth, children and concurrency, and an announce-back to its parent when done (SPN-1..SPN-4).

use std::sync::Arc;
use std::sync::atomic::Ordering;

use a2a_core::error::{A2aError, ErrorCode};
use a2a_core::sessions::{
    self as s, Cleanup, HandlerKind, Provenance, Role, SendRequest, SendStatus, Session, SessionKind, SourceTool,
    SpawnRequest, SpawnResponse,
};
use serde_json::json;

use super::policy::Requester;
use super::registry::{invalid, unknown};
use super::runs::Incoming;
use super::store::{RunRecord, SessionRecord, SpawnInfo, StoredMessage};
use super::{Sessions, error, store_error};
use crate::store::{now_ms, timestamp};

impl Sessions {
    /// SPN-1, SPN-2: creates the worker and sends it the task; answers at once.
    pub async fn spawn(self: &Arc<Self>, inc: Incoming, req: SpawnRequest) -> Result<SpawnResponse, A2aError> {
        s::validate_session_key(&req.parent).map_err(|e| invalid("parent", e.to_string()))?;
        let n = req.task.chars().count();
        if n == 0 || n > s::MAX_TEXT_CHARS {
            return Err(invalid("task", format!("task is 1 to {} characters (got {n})", s::MAX_TEXT_CHARS)));
        }
        if let Some(l) = &req.label
            && !(1..=512).contains(&l.chars().count())
        {
            return Err(invalid("label", "label is 1 to 512 characters".into()));
        }
        let template = self.template(req.template.as_deref()).ok_or_else(|| {
            invalid(
                "template",
                match &req.template {
                    Some(t) => format!("this agent has no spawn template {t:?}"),
                    None => "this agent has no spawn template configured; it cannot spawn workers".into(),
                },
            )
        })?;
        let parent = self.live_session(&req.parent).await?;
        let requester = Requester { did: inc.requester.did.clone(), session: Some(req.parent.clone()) };
        // The parent must be the sender's own session here: one of the agent's when the agent itself spawns, or an
        // inbox session the sender owns.
        let owns = parent.session.owner.as_deref() == Some(inc.requester.did.as_str())
            || (parent.session.owner.is_none() && inc.requester.did == self.did);
        if !owns {
            return Err(unknown(&req.parent));
        }
        self.check_allowed(&requester, &parent.session.address.to_string())?;
        let depth = parent.session.depth + 1;
        let limit = |name: &str, max: u64, message: String| {
            error(ErrorCode::SPAWN_LIMIT, message).details(json!({"limit": name, "max": max}))
        };
        if depth > self.settings.limits.max_spawn_depth {
            return Err(limit(
                "depth",
                u64::from(self.settings.limits.max_spawn_depth),
                format!(
                    "a worker of {} would be at depth {depth}; the limit is {}",
                    parent.session.address, self.settings.limits.max_spawn_depth
                ),
            ));
        }
        let parent_address = parent.session.address.to_string();
        let all = self.store.list_sessions(self.settings.limits.max_sessions * 2).await.map_err(store_error)?;
        let children = all
            .iter()
            .filter(|r| r.session.parent.as_deref() == Some(parent_address.as_str()) && self.is_live(r))
            .count();
        if children >= self.settings.limits.max_children {
            return Err(limit(
                "children",
                self.settings.limits.max_children as u64,
                format!(
                    "{parent_address} has {children} live workers; the limit is {}",
                    self.settings.limits.max_children
                ),
            ));
        }
        // In progress at the agent: the live workers of this agent in the store, which every process of the agent
        // shares (a worker ends when its run is done, and counts no longer than the longest worker time, so that a
        // process that died mid-run does not hold a slot), and this process's own count, which also covers spawns
        // racing here.
        let horizon = now_ms().saturating_sub(self.settings.limits.max_spawn_timeout_ms);
        let shared = all
            .iter()
            .filter(|r| r.spawn.is_some() && r.session.agent == self.did && self.is_live(r) && r.updated_ms >= horizon)
            .count();
        let local = self.spawned_in_progress.fetch_add(1, Ordering::SeqCst);
        let in_progress = local.max(shared);
        if in_progress >= self.settings.limits.max_spawn_concurrency {
            self.spawned_in_progress.fetch_sub(1, Ordering::SeqCst);
            return Err(limit(
                "concurrency",
                self.settings.limits.max_spawn_concurrency as u64,
                format!(
                    "this agent runs {in_progress} spawned workers; the limit is {}",
                    self.settings.limits.max_spawn_concurrency
                ),
            ));
        }
        let out = self.spawn_worker(&inc, req, &parent, depth, template).await;
        if out.is_err() {
            self.spawned_in_progress.fetch_sub(1, Ordering::SeqCst);
        }
        out
    }

    async fn spawn_worker(
        self: &Arc<Self>,
        inc: &Incoming,
        req: SpawnRequest,
        parent: &SessionRecord,
        depth: u32,
        template: String,
    ) -> Result<SpawnResponse, A2aError> {
        let mut suffix = [0u8; 6];
        getrandom::fill(&mut suffix).map_err(|e| error(ErrorCode::INTERNAL_ERROR, e.to_string()))?;
        let hex = data_encoding::HEXLOWER.encode(&suffix);
        let base: String = req.parent.chars().take(100).collect();
        let key = format!("{base}.spawn-{hex}");
        let address = self.address(&key)?;
        let now = now_ms();
        let timeout = match req.run_timeout_ms {
            None => self.settings.limits.default_spawn_timeout_ms,
            Some(0) => self.settings.limits.max_spawn_timeout_ms,
            Some(t) => t.min(self.settings.limits.max_spawn_timeout_ms),
        };
        let rec = SessionRecord {
            session: Session {
                address,
                session_key: key.clone(),
                agent: self.did.clone(),
                endpoint: self.endpoint(),
                label: req.label.clone(),
                kind: SessionKind::Spawn,
                summary: format!(
                    "worker spawned by {}: {}",
                    parent.session.address,
                    req.task.chars().take(200).collect::<String>()
                ),
                handler: HandlerKind::Hosted,
                owner: parent.session.owner.clone(),
                created_at: timestamp(now),
                updated_at: timestamp(now),
                ended_at: None,
                parent: Some(parent.session.address.to_string()),
                depth,
            },
            updated_ms: now,
            spawn: Some(SpawnInfo { template, cleanup: req.cleanup, announce: req.announce.unwrap_or(true) }),
        };
        self.store.put_session(&rec).await.map_err(store_error)?;
        let send = SendRequest {
            target: Some(key.clone()),
            target_label: None,
            text: req.task,
            from: Some(req.parent.clone()),
            from_endpoint: None,
            reply: Some(true),
            announce: Some(false),
            wait_ms: Some(0),
            run_timeout_ms: Some(timeout),
            max_turns: Some(0),
            attachments: Vec::new(),
            metadata: Default::default(),
            priority: None,
            context_mode: None,
            context: Vec::new(),
            trace_id: None,
            max_tokens: None,
            turn: None,
        };
        let inc = Incoming {
            requester: Requester { did: inc.requester.did.clone(), session: Some(req.parent) },
            hop: inc.hop,
            chain: Default::default(),
            trace_id: inc.trace_id.clone(),
        };
        let answer = self.send(inc, send).await?;
        Ok(SpawnResponse {
            run_id: answer.run_id.unwrap_or_default(),
            child_session_key: key,
            status: SendStatus::Accepted,
        })
    }

    /// SPN-3, SPN-4: the worker's outcome delivered to its parent and published, then the worker ended.
    pub(crate) async fn announce_back(&self, rec: &RunRecord, worker: &SessionRecord) {
        self.spawned_in_progress.fetch_sub(1, Ordering::SeqCst);
        let Some(info) = &worker.spawn else { return };
        let parent = worker.session.parent.clone().unwrap_or_default();
        let reply = rec.run.reply.clone().unwrap_or_default();
        let silent = rec.run.status == SendStatus::NoReply || s::is_silent(&reply) && rec.run.status == SendStatus::Ok;
        if info.announce && !silent {
            let text = match rec.run.status {
                SendStatus::Ok => reply.clone(),
                _ => format!(
                    "worker {} ended {}: {}",
                    worker.session.address,
                    rec.run.status.as_str(),
                    rec.run.error.as_ref().map_or("", |e| e.message.as_str())
                ),
            };
            let mut provenance = Provenance::new(
                &self.did,
                Some(worker.session.address.to_string()),
                SourceTool::SessionsSpawn,
                rec.hop,
                &rec.run.run_id,
            );
            provenance.trace_id = rec.request.trace_id.clone();
            let msg = StoredMessage {
                role: Role::InterSession,
                text,
                run_id: Some(rec.run.run_id.clone()),
                provenance: Some(provenance),
            };
            if let Err(e) = self.store.append_message(&parent, &msg, self.settings.limits.max_transcript_messages).await
            {
                tracing::warn!(error = %e, "cannot deliver a worker's announce-back");
            }
            let data = json!({"parent": parent, "child": worker.session.address.to_string(), "run_id": rec.run.run_id,
                              "status": rec.run.status, "reply": rec.run.reply});
            if let Err(e) = self.publish("spawn", &parent, data).await {
                tracing::warn!(error = %e, "cannot publish a spawn event");
            }
        }
        let delete = info.cleanup == Cleanup::Delete;
        if let Err(e) = self.end_session(&worker.session.address.to_string(), Some(delete)).await {
            tracing::warn!(error = %e, "cannot end a worker session");
        }
    }
}
