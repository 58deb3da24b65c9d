//! Who may message whom and who sees what (§17.9): the allow list on both sides (POL-1), visibility (POL-2), the hop
//! limit (POL-4) and wait cycles, by the `A2A-Wait-Chain` header (POL-5) and by the wait edges of a shared store
//! (POL-6).

use a2a_core::error::{A2aError, ErrorCode};
use a2a_core::sessions::{self as s, RefusedSide, SessionAddress, WaitChain};
use serde_json::json;

use super::settings::Visibility;
use super::store::{SessionRecord, waits_on};
use super::{Sessions, error, store_error};

/// Who is asking: the authenticated (or claimed) sender and, when it named one, its session at its own agent.
#[derive(Debug, Clone)]
pub struct Requester {
    /// The sender's DID.
    pub did: String,
    /// The requester's session key at the sender's agent.
    pub session: Option<String>,
}

impl Requester {
    /// `{did}#{session}`, or the DID alone when no session was named.
    pub fn address(&self) -> String {
        match &self.session {
            Some(k) => format!("{}#{k}", self.did),
            None => self.did.clone(),
        }
    }

    /// The parsed address, when a session was named.
    pub fn session_address(&self) -> Option<SessionAddress> {
        self.session.as_ref().and_then(|_| self.address().parse().ok())
    }
}

impl Sessions {
    /// POL-1: same-agent traffic is allowed; otherwise the requester and the target must both match the allow list.
    /// A requester that named no session is matched as `{did}#`.
    pub(crate) fn check_allowed(&self, requester: &Requester, target: &str) -> Result<(), A2aError> {
        let target_agent = target.rsplit_once('#').map_or(target, |(a, _)| a);
        if requester.did == target_agent {
            return Ok(());
        }
        let list = &self.settings.allow_list;
        let req = match &requester.session {
            Some(_) => requester.address(),
            None => format!("{}#", requester.did),
        };
        let side = if !list.matches(&req) {
            Some(RefusedSide::Requester)
        } else if !list.matches(target) {
            Some(RefusedSide::Target)
        } else {
            None
        };
        match side {
            None => Ok(()),
            Some(side) => {
                let (name, who) = match side {
                    RefusedSide::Requester => ("requester", req),
                    RefusedSide::Target => ("target", target.to_owned()),
                };
                Err(error(
                    ErrorCode::FORBIDDEN,
                    format!(
                        "the {name} {who} matches no pattern of this agent's sessions allow list; cross-agent \
                         messages need both sides on it (POL-1)"
                    ),
                )
                .details(json!({"side": name, "address": who})))
            }
        }
    }

    /// POL-2: whether `requester` may see `rec`.
    pub(crate) async fn visible(&self, requester: &Requester, rec: &SessionRecord) -> bool {
        let address = rec.session.address.to_string();
        if self.check_allowed(requester, &address).is_err() {
            return false;
        }
        let own = rec.session.owner.as_deref() == Some(requester.did.as_str())
            && requester.session.as_deref().is_none_or(|k| k == rec.session.session_key);
        let is_self = address == requester.address() || own;
        match self.settings.visibility {
            Visibility::All => true,
            Visibility::Agent => rec.session.agent == requester.did || own,
            Visibility::Own => is_self,
            Visibility::Tree => is_self || self.descends_from(rec, requester).await,
        }
    }

    /// Whether `rec` was spawned, transitively, by the requester's session: the one at its agent, or an inbox
    /// session it owns here.
    async fn descends_from(&self, rec: &SessionRecord, requester: &Requester) -> bool {
        let Some(key) = &requester.session else { return false };
        let ancestor = requester.address();
        let mut parent = rec.session.parent.clone();
        for _ in 0..=self.settings.limits.max_spawn_depth {
            let Some(p) = parent else { return false };
            if p == ancestor {
                return true;
            }
            let Ok(Some(r)) = self.store.get_session(&p).await else { return false };
            if r.session.owner.as_deref() == Some(requester.did.as_str()) && &r.session.session_key == key {
                return true;
            }
            parent = r.session.parent;
        }
        false
    }

    /// POL-4: the hop of a send that came with `A2A-Hop: value` (absent: 1); beyond the maximum is `409 hop_limit`.
    pub(crate) fn hop(&self, value: Option<&str>) -> Result<u32, A2aError> {
        let hop = match value {
            None => 1,
            Some(v) => v.trim().parse::<u32>().ok().filter(|h| *h >= 1).ok_or_else(|| {
                error(ErrorCode::INVALID_HEADER, format!("{} must be a positive integer, got {v:?}", s::HOP_HEADER))
                    .details(json!({"header": s::HOP_HEADER}))
            })?,
        };
        if hop > self.settings.limits.max_hops {
            return Err(error(
                ErrorCode::HOP_LIMIT,
                format!(
                    "this send is hop {hop} of a chain of sends; this agent accepts at most {} (POL-4)",
                    self.settings.limits.max_hops
                ),
            )
            .details(json!({"hop": hop, "max_hops": self.settings.limits.max_hops})));
        }
        Ok(hop)
    }

    /// POL-5 and POL-6: a waiting send from `requester` to `target` that closes a cycle of waits is `409 wait_cycle`.
    pub(crate) async fn check_cycle(
        &self,
        chain: &WaitChain,
        requester: &str,
        target: &SessionAddress,
    ) -> Result<(), A2aError> {
        let cycle = |path: Vec<String>| {
            error(
                ErrorCode::WAIT_CYCLE,
                format!(
                    "{target} is already waiting on this chain of sends ({}); waiting on it again could only \
                     deadlock: send without waiting (wait_ms 0) or answer from what you have (POL-5)",
                    path.join(" -> ")
                ),
            )
            .details(json!({"cycle": path}))
        };
        if let Some(path) = chain.cycle_to(target) {
            return Err(cycle(path));
        }
        let edges = self.store.wait_edges().await.map_err(store_error)?;
        if let Some(mut path) = waits_on(&edges, &target.to_string(), requester) {
            path.push(target.to_string());
            return Err(cycle(path));
        }
        Ok(())
    }
}
