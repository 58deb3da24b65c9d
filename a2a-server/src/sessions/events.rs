//! The announce step (§17.6) and the agent's channel: events (`announce`, `run`, `spawn`) kept in the store's
//! buffer and served as Server-Sent Events by `GET /a2a/events`, with ids and `Last-Event-ID` resume (ANN-1..ANN-4).

use std::collections::HashMap;
use std::sync::Arc;

use a2a_core::sessions::{self as s, AnnounceStatus, RunState, SendStatus, SourceTool, Step};
use a2a_core::sse;
use bytes::Bytes;
use serde_json::{Value, json};

use super::Sessions;
use super::policy::Requester;
use super::runs::Undelivered;
use super::store::{Event, RunRecord, SessionRecord, StoreError};
use crate::store::{now_ms, timestamp};

impl Sessions {
    /// Publishes an event about `session` to the channel (ANN-3).
    /// Also queues it for the webhooks (ANN-5), without waiting for them.
    pub(crate) async fn publish(&self, event: &str, session: &str, data: Value) -> Result<Event, StoreError> {
        let e = self.store.publish(event, session, data, self.settings.limits.event_buffer).await?;
        if let Some(w) = &self.webhooks {
            w.enqueue(&e);
        }
        Ok(e)
    }

    /// ANN-1, ANN-2: asks the target whether to publish, after the exchange.
    pub(crate) async fn announce(self: &Arc<Self>, rec: &mut RunRecord, target: &SessionRecord) {
        if rec.run.announce.status != AnnounceStatus::Pending {
            return;
        }
        if rec.run.status != SendStatus::Ok {
            rec.run.announce.status = AnnounceStatus::Skipped;
            return;
        }
        rec.run.state = RunState::Announcing;
        self.save_logged(rec).await;
        let round_one = rec.run.reply.clone().unwrap_or_default();
        let last = rec.run.turns.last().map_or_else(|| round_one.clone(), |t| t.text.clone());
        let mut d =
            self.delivery(rec, target, Step::Announce, SourceTool::Announce, rec.request.text.clone(), Vec::new());
        d.original = Some(rec.request.text.clone());
        d.round_one = Some(round_one);
        d.last = Some(last);
        let deadline = now_ms().saturating_add(rec.request.run_timeout_ms.unwrap_or(s::DEFAULT_RUN_TIMEOUT_MS));
        let mut step_rec = rec.clone();
        match self.deliver(&mut step_rec, target, d.clone(), deadline).await {
            Ok(text) if s::is_silent(&text) => rec.run.announce.status = AnnounceStatus::Skipped,
            Ok(text) => {
                let data = json!({"session": target.session.address.to_string(), "run_id": rec.run.run_id,
                    "text": text, "from": rec.run.from, "provenance": d.provenance, "at": timestamp(now_ms())});
                match self.publish("announce", &target.session.address.to_string(), data).await {
                    Ok(e) => {
                        rec.run.announce.status = AnnounceStatus::Published;
                        rec.run.announce.event_id = Some(e.id.to_string());
                        rec.run.announce.text = Some(text);
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "cannot publish an announce event");
                        rec.run.announce.status = AnnounceStatus::Failed;
                    }
                }
            }
            Err(Undelivered::Handler(f)) => {
                tracing::info!(run_id = %rec.run.run_id, "the announce step failed: {f}");
                rec.run.announce.status = AnnounceStatus::Failed;
            }
            Err(Undelivered::Ended) => rec.run.announce.status = AnnounceStatus::Failed,
        }
        self.save_logged(rec).await;
    }

    /// The SSE stream of `GET /a2a/events` for `requester`, from after `last_id`, limited to `session` when given
    /// (ANN-3, ANN-4). Events about sessions the requester may not see are left out.
    pub fn event_stream(
        self: &Arc<Self>,
        requester: Requester,
        session: Option<String>,
        last_id: Option<u64>,
    ) -> impl futures_util::Stream<Item = Result<Bytes, std::convert::Infallible>> + Send + 'static {
        let state = State {
            changes: self.store.changes(),
            sessions: self.clone(),
            requester,
            session,
            after: last_id,
            first: true,
            pending: Default::default(),
            visible: HashMap::new(),
            closed: false,
        };
        futures_util::stream::unfold(state, |mut st| async move {
            loop {
                if let Some(b) = st.pending.pop_front() {
                    return Some((Ok(b), st));
                }
                if st.closed {
                    return None;
                }
                // ANN-4: once the agent shuts down, what is already published is sent, then a last `shutdown`.
                let closing = st.sessions.streams.is_cancelled();
                st.changes.borrow_and_update();
                let age = st.sessions.settings.event_retention.as_millis() as u64;
                match st.sessions.store.events_after(st.after, age).await {
                    Ok(found) => {
                        if st.first && found.gap {
                            st.pending.push_back(encoded(None, "gap", "{}".to_owned()));
                        }
                        if st.first && st.after.is_none() {
                            // A fresh stream starts at the newest event: only what happens from now on.
                            st.after = Some(found.events.last().map_or(0, |e| e.id));
                            st.first = false;
                            st.pending.push_back(comment("connected"));
                            continue;
                        }
                        st.first = false;
                        for e in found.events {
                            st.after = Some(e.id);
                            if st.session.as_ref().is_some_and(|s| s != &e.session) {
                                continue;
                            }
                            if !st.visible_event(&e).await {
                                continue;
                            }
                            let data = serde_json::to_string(&e.data).unwrap_or_default();
                            st.pending.push_back(encoded(Some(e.id.to_string()), &e.event, data));
                        }
                    }
                    Err(e) => tracing::warn!(error = %e, "cannot read events"),
                }
                if closing {
                    st.closed = true;
                    st.pending.push_back(encoded(None, "shutdown", "{}".to_owned()));
                    continue;
                }
                if !st.pending.is_empty() {
                    continue;
                }
                let keepalive = st.sessions.settings.keepalive;
                tokio::select! {
                    () = tokio::time::sleep(keepalive) => st.pending.push_back(comment("keepalive")),
                    c = st.changes.changed() => if c.is_err() { return None },
                    () = st.sessions.streams.cancelled() => {}
                }
            }
        })
    }
}

/// An event of the channel, written with the workspace's Server-Sent Events writer ([`a2a_core::sse`]). The last
/// event of a stream when the agent shuts down (`shutdown`, ANN-4) has no `id`, so that a client's `Last-Event-ID`
/// stays the last real event and a reconnection (to another process of the agent) misses nothing.
fn encoded(id: Option<String>, event: &str, data: String) -> Bytes {
    Bytes::from(sse::encode(&sse::Event { id, event: Some(event.to_owned()), data, ..sse::Event::default() }))
}

/// A comment line of the channel (`connected`, `keepalive`).
fn comment(text: &str) -> Bytes {
    let mut out = String::new();
    sse::write_comment(&mut out, text);
    Bytes::from(out)
}

/// The state of one event stream.
struct State {
    sessions: Arc<Sessions>,
    requester: Requester,
    session: Option<String>,
    after: Option<u64>,
    first: bool,
    pending: std::collections::VecDeque<Bytes>,
    visible: HashMap<String, bool>,
    changes: tokio::sync::watch::Receiver<u64>,
    /// The last event is sent: the stream ends (ANN-4).
    closed: bool,
}

impl State {
    /// ANN-6: an event about a session the requester may see, or the `run` event of a run it sent. Only the first is
    /// remembered per session (the second is about one event, not about the session).
    async fn visible_event(&mut self, e: &Event) -> bool {
        if e.event == "run" && e.data.get("from").and_then(Value::as_str) == Some(self.requester.address().as_str()) {
            return true;
        }
        if let Some(v) = self.visible.get(&e.session) {
            return *v;
        }
        let v = match self.sessions.lookup(&e.session).await {
            Ok(Some(rec)) => self.sessions.visible(&self.requester, &rec).await,
            _ => false,
        };
        self.visible.insert(e.session.clone(), v);
        v
    }
}
