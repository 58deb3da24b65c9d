//! What the gateway says about itself: DISCOVER with the union of its agents' capabilities (under its own DID), the
//! merged capabilities document, and FALLBACK options aggregated from every agent (FB-2).

use std::collections::BTreeMap;
use std::sync::Arc;

use a2a_core::capability::CapabilityDeclaration;
use a2a_core::headers as h;
use a2a_core::wire::{
    AgentInfo as DocAgent, AgentLimits, CapabilitiesDocument, FallbackOption, FallbackRelation, FallbackSource,
};
use a2a_runtime::registry::{Registry, RegistryEntry};
use http::{HeaderMap, HeaderName, HeaderValue, header};

use crate::agents::{Agent, AgentInfo, Agents};

/// Every capability offered through the gateway, first declaration of each name (agents in their order).
pub async fn union(agents: &Agents) -> (Vec<CapabilityDeclaration>, Vec<Arc<AgentInfo>>) {
    let mut decls: Vec<CapabilityDeclaration> = Vec::new();
    let mut infos = Vec::new();
    for a in agents.listed().iter() {
        if let Ok(info) = agents.info(a).await {
            for d in &info.doc.capabilities {
                if !decls.iter().any(|x| x.name == d.name) {
                    decls.push(d.clone());
                }
            }
            infos.push(info);
        }
    }
    (decls, infos)
}

/// The DISCOVER headers (DISC-2) of the union.
pub fn discover_headers(decls: &[CapabilityDeclaration], infos: &[Arc<AgentInfo>]) -> HeaderMap {
    let mut hm = HeaderMap::new();
    let names: Vec<&str> = decls.iter().map(|d| d.name.as_str()).collect();
    if let Ok(v) = HeaderValue::from_str(&h::format_capabilities(&names)) {
        hm.insert(HeaderName::from_static(h::A2A_CAPABILITIES), v);
    }
    // A capability is restricted through the gateway only when every agent offering it restricts it; its regions
    // are then the union of theirs.
    let mut regions: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for d in decls {
        let offering: Vec<&CapabilityDeclaration> = infos.iter().filter_map(|i| i.capability(&d.name)).collect();
        if offering.iter().all(|o| !o.region_restriction.is_empty()) && !offering.is_empty() {
            let mut all: Vec<String> = offering.iter().flat_map(|o| o.region_restriction.iter().cloned()).collect();
            all.sort();
            all.dedup();
            regions.insert(d.name.clone(), all);
        }
    }
    if !regions.is_empty()
        && let Ok(v) = HeaderValue::from_str(&h::format_region_map(&regions))
    {
        hm.insert(HeaderName::from_static(h::A2A_REGION), v);
    }
    hm.insert(header::ACCESS_CONTROL_ALLOW_METHODS, HeaderValue::from_static(h::CORS_ALLOW_METHODS));
    hm.insert(header::ACCESS_CONTROL_ALLOW_HEADERS, HeaderValue::from_static(h::CORS_ALLOW_HEADERS));
    hm.insert(header::ACCESS_CONTROL_MAX_AGE, HeaderValue::from_static("300"));
    hm
}

/// The merged capabilities document (DISC-8): the gateway's DID, the union of declarations, its features (GW-19),
/// and the strictest of the agents' limits.
pub fn document(
    did: &str,
    name: Option<String>,
    decls: Vec<CapabilityDeclaration>,
    infos: &[Arc<AgentInfo>],
    max_body_bytes: u64,
) -> CapabilitiesDocument {
    // GW-19: what every agent does through the gateway (long-poll, cancel, idempotency), and what the gateway carries
    // for the agents that do it: streamed RESULTs (GW-14; an agent that does not stream answers a stream request
    // with its plain RESULT, STR-3) and composite capabilities (their declarations are in the union). Sessions (§17)
    // are not routed.
    let mut features: Vec<String> = vec!["long_poll".into(), "cancel".into(), "idempotency".into()];
    features.retain(|f| infos.iter().all(|i| i.doc.features.contains(f)));
    for carried in ["streaming", "composite"] {
        if infos.iter().any(|i| i.doc.features.iter().any(|f| f == carried)) {
            features.push(carried.to_owned());
        }
    }
    let limits = infos.iter().filter_map(|i| i.doc.limits.clone()).reduce(|a, b| AgentLimits {
        max_body_bytes: a.max_body_bytes.min(b.max_body_bytes),
        max_wait_ms: a.max_wait_ms.min(b.max_wait_ms),
        max_timeout_ms: a.max_timeout_ms.min(b.max_timeout_ms),
        confirm_window_ms: a.confirm_window_ms.min(b.confirm_window_ms),
        max_negotiations_per_sender: min_of(a.max_negotiations_per_sender, b.max_negotiations_per_sender),
        max_received_per_sender: min_of(a.max_received_per_sender, b.max_received_per_sender),
        max_nonces_per_sender: min_of(a.max_nonces_per_sender, b.max_nonces_per_sender),
        max_in_progress_per_sender: min_of(a.max_in_progress_per_sender, b.max_in_progress_per_sender),
        max_queued_per_sender: min_of(a.max_queued_per_sender, b.max_queued_per_sender),
        sender_queue_timeout_ms: min_of(a.sender_queue_timeout_ms, b.sender_queue_timeout_ms),
    });
    let limits = limits.map(|mut l| {
        l.max_body_bytes = l.max_body_bytes.min(max_body_bytes);
        l
    });
    CapabilitiesDocument {
        a2a_version: a2a_core::PROTOCOL_VERSION.to_owned(),
        agent: DocAgent { id: did.to_owned(), name },
        capabilities: decls,
        features,
        limits,
        // The gateway does not route §17 (it lists no `sessions` feature).
        sessions: None,
    }
}

fn option(d: &CapabilityDeclaration, relation: FallbackRelation, source: FallbackSource) -> FallbackOption {
    FallbackOption {
        capability: d.name.clone(),
        agent: None,
        endpoint: None,
        estimated_cost: d.estimated_cost,
        estimated_latency_ms: d.estimated_latency_ms,
        auth_requirement: Some(d.auth_requirement),
        description: Some(d.description.clone()),
        relation: Some(relation),
        source: Some(source),
    }
}

fn sort(group: &mut [FallbackOption]) {
    group.sort_by(|a, b| {
        let cost = |o: &FallbackOption| o.estimated_cost.unwrap_or(f64::INFINITY);
        let lat = |o: &FallbackOption| o.estimated_latency_ms.unwrap_or(u64::MAX);
        cost(a).total_cmp(&cost(b)).then(lat(a).cmp(&lat(b)))
    });
}

/// FALLBACK options for `capability` (FB-2), aggregated over every agent behind the gateway (offered through the
/// gateway: no `agent` member, `source: local`) and the capability registry's agents that are not behind it
/// (`source: registry`, with their DID and endpoint). `except`: agents whose own offer of the capability is not an
/// option (the agent that just refused it).
pub async fn fallback_options(
    agents: &Agents,
    registry: Option<&Arc<dyn Registry>>,
    capability: &str,
    except: Option<&Arc<Agent>>,
) -> Vec<FallbackOption> {
    let mut decls: Vec<CapabilityDeclaration> = Vec::new();
    for a in agents.listed().iter() {
        if except.is_some_and(|x| Arc::ptr_eq(x, a)) {
            continue;
        }
        if let Ok(info) = agents.info(a).await {
            for d in &info.doc.capabilities {
                if !decls.iter().any(|x| x.name == d.name) {
                    decls.push(d.clone());
                }
            }
        }
    }
    let remote: Vec<RegistryEntry> = match registry {
        Some(r) => match r.related(capability).await {
            Ok(entries) => entries
                .into_iter()
                .filter(|e| e.endpoint.as_deref().is_none_or(|ep| agents.get(ep.trim_end_matches('/')).is_none()))
                .collect(),
            Err(e) => {
                tracing::warn!(error = %e, "capability registry unavailable; offering the gateway's agents only");
                Vec::new()
            }
        },
        None => Vec::new(),
    };
    let remote_opt = |e: &RegistryEntry, relation| {
        let mut o = option(&e.capability, relation, FallbackSource::Registry);
        o.agent = Some(e.agent.clone());
        o.endpoint = e.endpoint.clone();
        o
    };
    let mut same: Vec<FallbackOption> = decls
        .iter()
        .filter(|d| d.name == capability)
        .map(|d| option(d, FallbackRelation::Same, FallbackSource::Local))
        .chain(remote.iter().filter(|e| e.capability.name == capability).map(|e| remote_opt(e, FallbackRelation::Same)))
        .collect();
    let mut degraded_local: Vec<FallbackOption> = decls
        .iter()
        .filter(|d| d.fallback_for.iter().any(|f| f == capability))
        .map(|d| option(d, FallbackRelation::Degraded, FallbackSource::Local))
        .collect();
    let mut degraded_remote: Vec<FallbackOption> = remote
        .iter()
        .filter(|e| e.capability.fallback_for.iter().any(|f| f == capability))
        .map(|e| remote_opt(e, FallbackRelation::Degraded))
        .collect();
    let subs_of: Vec<String> = decls
        .iter()
        .filter(|d| d.name == capability)
        .flat_map(|d| d.sub_capabilities.iter().cloned())
        .chain(
            remote
                .iter()
                .filter(|e| e.capability.name == capability)
                .flat_map(|e| e.capability.sub_capabilities.clone()),
        )
        .collect();
    let mut subs: Vec<FallbackOption> = decls
        .iter()
        .filter(|d| subs_of.contains(&d.name))
        .map(|d| option(d, FallbackRelation::SubCapability, FallbackSource::Local))
        .chain(
            remote
                .iter()
                .filter(|e| subs_of.contains(&e.capability.name))
                .map(|e| remote_opt(e, FallbackRelation::SubCapability)),
        )
        .collect();
    for g in [&mut same, &mut degraded_local, &mut degraded_remote, &mut subs] {
        sort(g);
    }
    let mut out = same;
    out.extend(degraded_local);
    out.extend(degraded_remote);
    out.extend(subs);
    out
}

/// The smaller of two announced per-sender limits (LIM-4, LIM-5); an agent that announces none bounds nothing the
/// caller can see.
fn min_of(a: Option<u64>, b: Option<u64>) -> Option<u64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}
