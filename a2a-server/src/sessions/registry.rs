//! The session registry (§17.2): inbox sessions registered by their owners (SES-4), lists with filters (SES-8),
//! staleness (SES-6) and ending (SES-7).

use a2a_core::error::{A2aError, ErrorCode};
use a2a_core::sessions::{HandlerKind, Session, SessionKind, SessionList, SessionRegistration, validate_session_key};
use serde_json::json;

use super::policy::Requester;
use super::store::SessionRecord;
use super::{Sessions, error, store_error};
use crate::store::{now_ms, timestamp};

/// The filters of `GET /a2a/sessions` (SES-8): the wire type the client writes.
pub use a2a_core::sessions::ListQuery;

/// The largest `GET /a2a/sessions` body (SES-8).
pub const MAX_LIST_BYTES: usize = 64 * 1024;

impl Sessions {
    /// Whether a session record is live: not ended and not stale (SES-6).
    pub(crate) fn is_live(&self, rec: &SessionRecord) -> bool {
        rec.session.ended_at.is_none()
            && now_ms().saturating_sub(rec.updated_ms) < self.settings.stale_after.as_millis() as u64
    }

    /// The session at `address` as stored, or as declared for a hosted session of this agent.
    pub(crate) async fn lookup(&self, address: &str) -> Result<Option<SessionRecord>, A2aError> {
        if let Some(r) = self.store.get_session(address).await.map_err(store_error)? {
            return Ok(Some(r));
        }
        let key = address.strip_prefix(&format!("{}#", self.did));
        Ok(key.and_then(|k| self.declared(k)))
    }

    /// A live session of this agent by key, or `404 unknown_session`.
    pub(crate) async fn live_session(&self, key: &str) -> Result<SessionRecord, A2aError> {
        let address = self.address(key).map_err(|_| unknown(key))?;
        match self.lookup(&address.to_string()).await? {
            Some(r) if self.is_live(&r) => Ok(r),
            _ => Err(unknown(key)),
        }
    }

    /// SES-4: registers (201, `true`) or refreshes (200, `false`) an inbox session owned by the sender.
    pub async fn register(&self, owner: &str, reg: SessionRegistration) -> Result<(Session, bool), A2aError> {
        validate_session_key(&reg.session_key).map_err(|e| invalid("session_key", e.to_string()))?;
        if matches!(reg.session_key.as_str(), "send" | "spawn") {
            return Err(invalid(
                "session_key",
                format!("{:?} names an endpoint; choose another key (SES-11)", reg.session_key),
            ));
        }
        let n = reg.summary.chars().count();
        if !(5..=2000).contains(&n) {
            return Err(invalid("summary", format!("summary is 5 to 2000 characters (got {n})")));
        }
        if let Some(l) = &reg.label
            && !(1..=512).contains(&l.chars().count())
        {
            return Err(invalid("label", "label is 1 to 512 characters".into()));
        }
        let address = self.address(&reg.session_key)?;
        let now = now_ms();
        let existing = self.lookup(&address.to_string()).await?;
        let created = match &existing {
            Some(r) if r.session.handler == HandlerKind::Hosted && r.session.ended_at.is_none() => {
                return Err(conflict(&reg.session_key, "names a session hosted by this agent"));
            }
            Some(r) if self.is_live(r) && r.session.owner.as_deref() != Some(owner) => {
                return Err(conflict(&reg.session_key, "is held by another owner"));
            }
            Some(r) if self.is_live(r) => Some(r.session.created_at.clone()),
            _ => None,
        };
        let fresh = created.is_none();
        let live = self.store.list_sessions(self.settings.limits.max_sessions + 1).await.map_err(store_error)?;
        if fresh && live.iter().filter(|r| self.is_live(r)).count() >= self.settings.limits.max_sessions {
            return Err(error(
                ErrorCode::OVERLOADED,
                format!(
                    "this agent holds its maximum of {} sessions; end some first",
                    self.settings.limits.max_sessions
                ),
            )
            .details(json!({"limit": "max_sessions", "max": self.settings.limits.max_sessions})));
        }
        let session = Session {
            address,
            session_key: reg.session_key,
            agent: self.did.clone(),
            endpoint: self.endpoint(),
            label: reg.label,
            kind: reg.kind.unwrap_or(SessionKind::Other),
            summary: reg.summary,
            handler: HandlerKind::Inbox,
            owner: Some(owner.to_owned()),
            created_at: created.unwrap_or_else(|| timestamp(now)),
            updated_at: timestamp(now),
            ended_at: None,
            parent: None,
            depth: 0,
        };
        let rec = SessionRecord { session: session.clone(), updated_ms: now, spawn: None };
        self.store.put_session(&rec).await.map_err(store_error)?;
        Ok((session, fresh))
    }

    /// SES-6: an inbox session's owner refreshes it by reading its inbox or answering.
    pub(crate) async fn touch(&self, rec: &SessionRecord) {
        let mut rec = rec.clone();
        let now = now_ms();
        rec.updated_ms = now;
        rec.session.updated_at = timestamp(now);
        if let Err(e) = self.store.put_session(&rec).await {
            tracing::warn!(error = %e, "cannot refresh a session");
        }
    }

    /// SES-3, SES-8: the sessions `requester` may see, filtered, newest first, within 64 KiB.
    pub async fn list(&self, requester: &Requester, q: &ListQuery) -> Result<SessionList, A2aError> {
        let mut all = self.store.list_sessions(self.settings.limits.max_sessions * 2).await.map_err(store_error)?;
        for h in &self.hosted {
            if !all.iter().any(|r| r.session.address == h.session.address) {
                all.push(self.declared(&h.session.session_key).unwrap_or_else(|| h.clone()));
            }
        }
        let cutoff = q.active_minutes.map(|m| now_ms().saturating_sub(m.saturating_mul(60_000)));
        let search = q.search.as_ref().map(|s| s.to_lowercase());
        let mut kept = Vec::new();
        for rec in all {
            let live = self.is_live(&rec);
            let ended_kept = q.include_ended && rec.session.ended_at.is_some();
            if !(live || ended_kept) || !self.visible(requester, &rec).await {
                continue;
            }
            let s = &rec.session;
            let is_self = s.agent == requester.did || s.owner.as_deref() == Some(requester.did.as_str());
            if is_self && !q.include_self {
                continue;
            }
            if (!q.kinds.is_empty() && !q.kinds.contains(&s.kind))
                || q.label.as_ref().is_some_and(|l| s.label.as_ref() != Some(l))
                || q.agent.as_ref().is_some_and(|a| &s.agent != a)
                || cutoff.is_some_and(|c| rec.updated_ms < c)
            {
                continue;
            }
            if let Some(needle) = &search {
                let hay = format!("{}\n{}\n{}", s.label.as_deref().unwrap_or(""), s.summary, s.session_key);
                if !hay.to_lowercase().contains(needle) {
                    continue;
                }
            }
            kept.push(rec);
        }
        kept.sort_by(|a, b| b.updated_ms.cmp(&a.updated_ms).then(a.session.address.cmp(&b.session.address)));
        let total = kept.len();
        let mut out = Vec::new();
        let mut bytes = 64usize;
        let mut truncated = false;
        let (offset, limit) =
            (q.offset.unwrap_or(0) as usize, q.limit.unwrap_or(a2a_core::sessions::LIST_DEFAULT_LIMIT) as usize);
        for rec in kept.into_iter().skip(offset).take(limit) {
            let len = serde_json::to_vec(&rec.session).map_or(0, |v| v.len()) + 1;
            if bytes + len > MAX_LIST_BYTES {
                truncated = true;
                break;
            }
            bytes += len;
            out.push(rec.session);
        }
        truncated |= offset.saturating_add(out.len()) < total;
        Ok(SessionList { sessions: out, total, truncated })
    }

    /// SES-3: one session `requester` may see.
    pub async fn get(&self, requester: &Requester, key: &str) -> Result<Session, A2aError> {
        let rec = self.live_session(key).await?;
        if !self.visible(requester, &rec).await {
            return Err(unknown(key));
        }
        Ok(rec.session)
    }

    /// SES-7: `DELETE /a2a/sessions/{key}` by its owner (the agent itself for a hosted session).
    pub async fn end(&self, requester: &Requester, key: &str) -> Result<Session, A2aError> {
        let rec = self.live_session(key).await?;
        let owner = rec.session.owner.clone().unwrap_or_else(|| self.did.clone());
        if owner != requester.did {
            // Not the owner: as if the session did not exist for it, unless it may see it.
            if !self.visible(requester, &rec).await {
                return Err(unknown(key));
            }
            return Err(error(
                ErrorCode::FORBIDDEN,
                format!("only the session's owner {owner} may end {}", rec.session.address),
            ));
        }
        self.end_session(&rec.session.address.to_string(), None).await
    }

    /// Ends a session: gone from lists at once; runs waiting on it end `error` (`session_ended`) as their drivers
    /// see it; the transcript is deleted when `delete_transcript` says so (SPN-4), kept otherwise.
    pub(crate) async fn end_session(
        &self,
        address: &str,
        delete_transcript: Option<bool>,
    ) -> Result<Session, A2aError> {
        // Not interleaved with a heartbeat's refresh, which would write the session back as live.
        let _writes = self.record_writes.lock().await;
        let Some(mut rec) = self.lookup(address).await? else {
            return Err(unknown(address));
        };
        let now = now_ms();
        rec.session.ended_at = Some(timestamp(now));
        rec.session.updated_at = timestamp(now);
        rec.updated_ms = now;
        self.store.put_session(&rec).await.map_err(store_error)?;
        if delete_transcript == Some(true) {
            self.store.delete_messages(address).await.map_err(store_error)?;
        }
        Ok(rec.session)
    }
}

/// `404 unknown_session`.
pub(crate) fn unknown(key: &str) -> A2aError {
    error(
        ErrorCode::UNKNOWN_SESSION,
        format!("no live session {key:?} that you may see here; list them with GET /a2a/sessions"),
    )
    .details(json!({"session": key}))
}

fn conflict(key: &str, why: &str) -> A2aError {
    error(ErrorCode::SESSION_CONFLICT, format!("session key {key:?} {why}; choose another key"))
        .details(json!({"session_key": key}))
}

/// `400 invalid_request` naming the member.
pub(crate) fn invalid(member: &str, message: String) -> A2aError {
    error(ErrorCode::INVALID_REQUEST, message).details(json!({"member": member}))
}
