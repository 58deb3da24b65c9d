//! What the client does when an agent cannot serve a capability (`spec/PROTOCOL.md` §11, FB-4): use
//! another agent that the registry names for the same capability, accept a degraded capability, or refuse and report
//! `no_matching_capability`. The caller chooses; the default tries other agents and never degrades silently.

use a2a_core::wire::{FallbackOption, FallbackRelation};

use crate::endpoint::Endpoint;

/// One way to recover from a capability mismatch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FallbackStrategy {
    /// Call the same capability at another agent named by the registry (`relation: same`), starting again from
    /// DISCOVER there (FB-5).
    TryOtherAgents,
    /// Call a capability that declares `fallback_for` the one asked (`relation: degraded`), at this agent or another;
    /// the outcome says `degraded: true`.
    AcceptDegraded,
}

/// The fallback policy of a call: the strategies allowed, in order of preference, and a bound on the agents tried.
///
/// ```
/// use a2a_client::fallback::{FallbackPolicy, FallbackStrategy};
///
/// assert_eq!(FallbackPolicy::default().strategies, [FallbackStrategy::TryOtherAgents]);
/// assert!(FallbackPolicy::refuse().strategies.is_empty());
/// let any = FallbackPolicy::accept_degraded();
/// assert_eq!(any.strategies, [FallbackStrategy::TryOtherAgents, FallbackStrategy::AcceptDegraded]);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FallbackPolicy {
    /// Allowed strategies, most preferred first; empty: refuse at once.
    pub strategies: Vec<FallbackStrategy>,
    /// The most attempts in all (the first agent included).
    pub max_attempts: usize,
}

impl Default for FallbackPolicy {
    /// Try other agents offering the same capability (up to 3 attempts in all), never degrade.
    fn default() -> Self {
        FallbackPolicy { strategies: vec![FallbackStrategy::TryOtherAgents], max_attempts: 3 }
    }
}

impl FallbackPolicy {
    /// Refuse: report `no_matching_capability` with the options offered, and try nothing else.
    pub fn refuse() -> Self {
        FallbackPolicy { strategies: Vec::new(), max_attempts: 1 }
    }

    /// Try other agents first, then accept a degraded capability.
    pub fn accept_degraded() -> Self {
        FallbackPolicy {
            strategies: vec![FallbackStrategy::TryOtherAgents, FallbackStrategy::AcceptDegraded],
            max_attempts: 3,
        }
    }

    /// The same policy with another bound on attempts (at least 1).
    #[must_use]
    pub fn max_attempts(mut self, n: usize) -> Self {
        self.max_attempts = n.max(1);
        self
    }
}

/// An option chosen by a policy: where to go and what to call.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Choice {
    pub(crate) endpoint: Endpoint,
    pub(crate) capability: String,
    pub(crate) degraded: bool,
    pub(crate) option: FallbackOption,
}

/// Picks the next option allowed by `policy` among `options` offered by the agent at `current`, skipping what was
/// tried (`endpoint capability`). Options without an endpoint are served by `current` itself; an option may not
/// downgrade an `https` agent to plain `http`.
pub(crate) fn choose(
    policy: &FallbackPolicy,
    options: &[FallbackOption],
    current: &Endpoint,
    requested: &str,
    tried: &[String],
) -> Option<Choice> {
    for strategy in &policy.strategies {
        for o in options {
            let wanted = match strategy {
                FallbackStrategy::TryOtherAgents => {
                    o.relation == Some(FallbackRelation::Same) && o.capability == requested && o.endpoint.is_some()
                }
                FallbackStrategy::AcceptDegraded => o.relation == Some(FallbackRelation::Degraded),
            };
            if !wanted {
                continue;
            }
            let endpoint = match &o.endpoint {
                None => current.clone(),
                Some(url) => match Endpoint::parse(url) {
                    Ok(e) if current.is_https() && !e.is_https() => continue,
                    Ok(e) => e,
                    Err(_) => continue,
                },
            };
            let key = attempt_key(&endpoint, &o.capability);
            if tried.contains(&key) {
                continue;
            }
            return Some(Choice {
                endpoint,
                capability: o.capability.clone(),
                degraded: *strategy == FallbackStrategy::AcceptDegraded,
                option: o.clone(),
            });
        }
    }
    None
}

/// How attempts are named in [`crate::CallTrace::attempts`]: `endpoint capability`.
pub(crate) fn attempt_key(endpoint: &Endpoint, capability: &str) -> String {
    format!("{endpoint} {capability}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use a2a_core::wire::FallbackSource;

    fn opt(cap: &str, rel: FallbackRelation, endpoint: Option<&str>) -> FallbackOption {
        FallbackOption {
            capability: cap.into(),
            agent: endpoint.map(|_| "did:web:b.example.com".into()),
            endpoint: endpoint.map(Into::into),
            estimated_cost: None,
            estimated_latency_ms: None,
            auth_requirement: None,
            description: None,
            relation: Some(rel),
            source: Some(if endpoint.is_some() { FallbackSource::Registry } else { FallbackSource::Local }),
        }
    }

    #[test]
    fn default_policy_tries_other_agents_but_never_degrades() {
        let here = Endpoint::parse("https://a.example.com").expect("valid");
        let options = [
            opt("generate_brief_summary", FallbackRelation::Degraded, None),
            opt("generate_summary", FallbackRelation::Same, Some("https://b.example.com/a2a")),
        ];
        let c = choose(&FallbackPolicy::default(), &options, &here, "generate_summary", &[]).expect("a choice");
        assert_eq!((c.endpoint.as_str(), c.degraded), ("https://b.example.com/a2a", false));
        let tried = [attempt_key(&c.endpoint, "generate_summary")];
        assert!(choose(&FallbackPolicy::default(), &options, &here, "generate_summary", &tried).is_none());
        let d =
            choose(&FallbackPolicy::accept_degraded(), &options, &here, "generate_summary", &tried).expect("degraded");
        assert_eq!(
            (d.endpoint.as_str(), d.capability.as_str(), d.degraded),
            (here.as_str(), "generate_brief_summary", true)
        );
        assert!(choose(&FallbackPolicy::refuse(), &options, &here, "generate_summary", &[]).is_none());
    }

    #[test]
    fn an_option_cannot_downgrade_https_to_http() {
        let here = Endpoint::parse("https://a.example.com").expect("valid");
        let options = [opt("generate_summary", FallbackRelation::Same, Some("http://b.example.com/a2a"))];
        assert!(choose(&FallbackPolicy::default(), &options, &here, "generate_summary", &[]).is_none());
        let local = Endpoint::parse("http://127.0.0.1:1").expect("valid");
        assert!(choose(&FallbackPolicy::default(), &options, &local, "generate_summary", &[]).is_some());
    }
}
