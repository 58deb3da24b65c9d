//! Ping-pong (§17.5): after round one the target's agent drives up to `max_turns` alternating turns between the
//! requester's session and the target's, each told "turn N of M" and how to stop, and ends the exchange on a skip
//! token, an empty reply, a repeat, the last turn, a deadline or a failed turn (PP-1..PP-7).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use a2a_core::headers as h;
use a2a_core::integrity::{self, Coverage, MessageParts};
use a2a_core::sessions::{
    self as s, ContextMessage, EndedBy, Role, RunState, SendRequest, SendResponse, SendStatus, SessionAddress,
    SourceTool, Step, Turn, TurnRef, WaitChain,
};

use super::Sessions;
use super::handler::HandlerFailure;
use super::policy::Requester;
use super::runs::{Incoming, Undelivered};
use super::store::{RunRecord, SessionRecord};
use crate::store::{now_ms, timestamp};

/// Why a turn brought no reply.
enum TurnFailure {
    Timeout(String),
    Failed(String),
}

type TurnFuture<'a> = Pin<Box<dyn Future<Output = Result<String, TurnFailure>> + Send + 'a>>;

impl Sessions {
    /// Where the requester's agent serves §17 (PP-1): `from_endpoint`, the registry, or this agent.
    async fn requester_endpoint(&self, rec: &RunRecord, requester: &SessionAddress) -> Option<String> {
        if requester.agent() == self.did {
            return Some(String::new());
        }
        if let Some(e) = &rec.request.from_endpoint {
            return Some(e.clone());
        }
        match self.store.get_session(&requester.to_string()).await {
            Ok(Some(r)) => r.session.endpoint,
            _ => None,
        }
    }

    /// PP-1..PP-6: the exchange after a round one that ended `ok` with `round_one`.
    pub(crate) async fn ping_pong(self: &Arc<Self>, rec: &mut RunRecord, target: &SessionRecord, round_one: &str) {
        let max_turns = self.settings.turns(rec.request.max_turns);
        let requester = match (&rec.request.from, rec.run.from.parse::<SessionAddress>()) {
            (Some(_), Ok(a)) => Some(a),
            _ => None,
        };
        let (Some(requester), true, true) = (requester, rec.request.reply.unwrap_or(true), max_turns > 0) else {
            rec.run.ended_by = Some(EndedBy::ReplyNotWanted);
            return;
        };
        let Some(endpoint) = self.requester_endpoint(rec, &requester).await else {
            rec.run.ended_by = Some(EndedBy::NotReachable);
            return;
        };
        rec.run.state = RunState::PingPong;
        self.save_logged(rec).await;
        let mut exchange = vec![
            ContextMessage { role: Role::InterSession, text: rec.request.text.clone() },
            ContextMessage { role: Role::Assistant, text: round_one.to_owned() },
        ];
        let mut last = round_one.to_owned();
        let mut prev_requester: Option<String> = None;
        let mut prev_target: Option<String> = Some(round_one.to_owned());
        let mut ended = EndedBy::MaxTurns;
        for n in 1..=max_turns {
            let turn = TurnRef { run_id: rec.run.run_id.clone(), n, of: max_turns };
            let to_requester = n % 2 == 1;
            let outcome = if to_requester {
                self.turn_to_requester(rec, &requester, &endpoint, &target.session.address, &last, turn.clone()).await
            } else {
                self.turn_to_target(rec, target, &last, turn.clone(), exchange.clone()).await
            };
            let reply = match outcome {
                Ok(r) => r,
                Err(TurnFailure::Timeout(m)) => {
                    tracing::info!(run_id = %rec.run.run_id, turn = n, "ping-pong turn timed out: {m}");
                    ended = EndedBy::Timeout;
                    break;
                }
                Err(TurnFailure::Failed(m)) => {
                    tracing::info!(run_id = %rec.run.run_id, turn = n, "ping-pong turn failed: {m}");
                    ended = EndedBy::Error;
                    break;
                }
            };
            let side = if to_requester { &requester } else { &target.session.address };
            let previous = if to_requester { prev_requester.as_deref() } else { prev_target.as_deref() };
            let end = s::ends_exchange(&reply, previous, &last);
            rec.run.turns.push(Turn {
                n,
                of: max_turns,
                session: side.to_string(),
                text: reply.clone(),
                at: timestamp(now_ms()),
            });
            self.save_logged(rec).await;
            exchange.push(ContextMessage {
                role: if to_requester { Role::InterSession } else { Role::Assistant },
                text: reply.clone(),
            });
            if let Some(e) = end {
                ended = e;
                break;
            }
            if to_requester {
                prev_requester = Some(reply.clone());
            } else {
                prev_target = Some(reply.clone());
            }
            last = reply;
        }
        rec.run.ended_by = Some(ended);
        self.save_logged(rec).await;
    }

    /// The target's side of a turn: a reply step of its own handler.
    fn turn_to_target<'a>(
        self: &'a Arc<Self>,
        rec: &'a mut RunRecord,
        target: &'a SessionRecord,
        given: &'a str,
        turn: TurnRef,
        exchange: Vec<ContextMessage>,
    ) -> TurnFuture<'a> {
        Box::pin(async move {
            let mut turn_rec = rec.clone();
            turn_rec.request.turn = Some(turn);
            let mut delivery =
                self.delivery(&turn_rec, target, Step::Reply, SourceTool::PingPong, given.to_owned(), exchange);
            // The turn comes from the requester's side.
            delivery.provenance.source_session = Some(rec.run.from.clone());
            let deadline = now_ms().saturating_add(rec.request.run_timeout_ms.unwrap_or(s::DEFAULT_RUN_TIMEOUT_MS));
            match self.deliver(&mut turn_rec, target, delivery, deadline).await {
                Ok(r) => Ok(r),
                Err(Undelivered::Handler(HandlerFailure::TimedOut(m))) => Err(TurnFailure::Timeout(m)),
                Err(Undelivered::Handler(HandlerFailure::Failed(m))) => Err(TurnFailure::Failed(m)),
                Err(Undelivered::Ended) => Err(TurnFailure::Failed(format!("{} ended", target.session.address))),
            }
        })
    }

    /// The requester's side of a turn: a send with `turn` to its session, here or at its agent (PP-2).
    fn turn_to_requester<'a>(
        self: &'a Arc<Self>,
        rec: &'a RunRecord,
        requester: &'a SessionAddress,
        endpoint: &'a str,
        target: &'a SessionAddress,
        given: &'a str,
        turn: TurnRef,
    ) -> TurnFuture<'a> {
        Box::pin(async move {
            let budget = rec.request.run_timeout_ms.unwrap_or(s::DEFAULT_RUN_TIMEOUT_MS);
            let req = SendRequest {
                target: Some(requester.key().to_owned()),
                target_label: None,
                text: given.to_owned(),
                from: Some(target.key().to_owned()),
                from_endpoint: self.endpoint(),
                reply: Some(true),
                announce: Some(false),
                wait_ms: Some(budget.min(self.settings.limits.max_wait_ms)),
                run_timeout_ms: Some(budget),
                max_turns: Some(0),
                attachments: Vec::new(),
                metadata: Default::default(),
                priority: rec.request.priority,
                context_mode: None,
                context: Vec::new(),
                trace_id: rec.request.trace_id.clone(),
                max_tokens: rec.request.max_tokens,
                turn: Some(turn),
            };
            let answer = if requester.agent() == self.did {
                let inc = Incoming {
                    requester: Requester { did: self.did.clone(), session: Some(target.key().to_owned()) },
                    hop: rec.hop,
                    chain: WaitChain::new(),
                    trace_id: rec.request.trace_id.clone(),
                };
                self.send(inc, req).await.map_err(|e| TurnFailure::Failed(e.to_string()))?
            } else {
                self.post_send(endpoint, requester.agent(), rec.hop, &req).await?
            };
            match answer.status {
                SendStatus::Ok | SendStatus::NoReply => Ok(answer.reply.unwrap_or_default()),
                SendStatus::Accepted | SendStatus::Timeout => {
                    Err(TurnFailure::Timeout(format!("{requester} did not reply to turn within {budget} ms")))
                }
                SendStatus::Error | SendStatus::Forbidden => Err(TurnFailure::Failed(
                    answer.error.map_or_else(|| format!("{requester} failed the turn"), |e| e.message),
                )),
            }
        })
    }

    /// `POST {endpoint}/sessions/send` to another agent, signed with this agent's key when it has one (§9.5).
    async fn post_send(
        &self,
        endpoint: &str,
        audience: &str,
        hop: u32,
        req: &SendRequest,
    ) -> Result<SendResponse, TurnFailure> {
        let url = format!("{}/sessions/send", endpoint.trim_end_matches('/'));
        let parsed = url::Url::parse(&url).map_err(|e| TurnFailure::Failed(format!("{url}: {e}")))?;
        let body = serde_json::to_vec(req).map_err(|e| TurnFailure::Failed(e.to_string()))?;
        let hop_value = hop.to_string();
        let mut rb = self
            .http
            .post(parsed.clone())
            .header(h::A2A_VERSION, a2a_core::PROTOCOL_VERSION)
            .header(h::A2A_SENDER_ID, &self.did)
            .header(s::HOP_HEADER, &hop_value)
            .header("content-type", "application/json");
        if let Some((key_id, key)) = self.signer() {
            // Every a2a-* header is covered (§9.5), the hop included.
            let headers = [
                (h::A2A_VERSION, a2a_core::PROTOCOL_VERSION),
                (h::A2A_SENDER_ID, self.did.as_str()),
                ("a2a-hop", hop_value.as_str()),
            ];
            let target = match parsed.query() {
                Some(q) => format!("{}?{q}", parsed.path()),
                None => parsed.path().to_owned(),
            };
            let parts = MessageParts { method: "POST", target: &target, headers: &headers, body: &body, status: None };
            let now = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64);
            let sig = integrity::sign(key, key_id, &self.did, audience, Coverage::PayloadHash, &parts, now, 60)
                .map_err(|e| TurnFailure::Failed(format!("cannot sign the turn: {e}")))?;
            rb = rb.header(h::A2A_SIGNATURE, sig);
        }
        let resp = rb.body(body).send().await.map_err(|e| TurnFailure::Failed(format!("{url}: {e}")))?;
        let status = resp.status();
        let bytes = resp.bytes().await.map_err(|e| TurnFailure::Failed(format!("{url}: {e}")))?;
        if status.is_success() {
            return serde_json::from_slice(&bytes)
                .map_err(|e| TurnFailure::Failed(format!("{url} answered something that is not a SendResponse: {e}")));
        }
        let why = serde_json::from_slice::<a2a_core::error::ErrorBody>(&bytes)
            .map_or_else(|_| String::from_utf8_lossy(&bytes).into_owned(), |b| b.error.message);
        Err(TurnFailure::Failed(format!("{url} answered {status}: {why}")))
    }
}
