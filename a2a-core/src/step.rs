//! The protocol steps a request can be (§4–§11), as the agent and the gateway both label them: the `step` label
//! of their metrics (OPS-1) and the name of their request spans (OPS-6).

/// A protocol step, the `step` label.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Step {
    /// `OPTIONS /a2a`.
    Discover,
    /// `GET /a2a/capabilities`.
    Capabilities,
    /// `POST /a2a/negotiate`.
    Negotiate,
    /// `POST /a2a/execute`.
    Execute,
    /// `POST /a2a/confirm`.
    Confirm,
    /// `GET /a2a/result/{id}`.
    Result,
    /// `POST /a2a/cancel`.
    Cancel,
    /// `POST /a2a/fallback`.
    Fallback,
    /// CORS preflights (the gateway counts them apart; the agent counts them as [`Step::Other`]).
    Preflight,
    /// Anything else under the endpoint: unknown paths and methods (probes).
    Other,
}

impl Step {
    /// Whether requests of this step draw on their sender's share of the requests in progress (LIM-14): the
    /// handshake's steps after DISCOVER.
    pub fn shared(self) -> bool {
        matches!(self, Step::Negotiate | Step::Execute | Step::Confirm | Step::Result | Step::Cancel | Step::Fallback)
    }

    /// How many steps there are.
    pub const COUNT: usize = 10;

    /// Every step.
    pub const ALL: [Step; Step::COUNT] = [
        Step::Discover,
        Step::Capabilities,
        Step::Negotiate,
        Step::Execute,
        Step::Confirm,
        Step::Result,
        Step::Cancel,
        Step::Fallback,
        Step::Preflight,
        Step::Other,
    ];

    /// The steps an agent labels (preflights are [`Step::Other`] there).
    pub const AGENT: [Step; 9] = [
        Step::Discover,
        Step::Capabilities,
        Step::Negotiate,
        Step::Execute,
        Step::Confirm,
        Step::Result,
        Step::Cancel,
        Step::Fallback,
        Step::Other,
    ];

    /// The label value.
    pub fn as_str(self) -> &'static str {
        self.names().0
    }

    /// The name of an agent's span of the step (OPS-6): `a2a.` and the label value.
    pub fn span_name(self) -> &'static str {
        self.names().1
    }

    /// The name of a gateway's span of the step (OPS-6): `a2a.gateway.` and the label value.
    pub fn gateway_span_name(self) -> &'static str {
        self.names().2
    }

    /// The label, the agent's span name and the gateway's, in one table.
    fn names(self) -> (&'static str, &'static str, &'static str) {
        match self {
            Step::Discover => ("discover", "a2a.discover", "a2a.gateway.discover"),
            Step::Capabilities => ("capabilities", "a2a.capabilities", "a2a.gateway.capabilities"),
            Step::Negotiate => ("negotiate", "a2a.negotiate", "a2a.gateway.negotiate"),
            Step::Execute => ("execute", "a2a.execute", "a2a.gateway.execute"),
            Step::Confirm => ("confirm", "a2a.confirm", "a2a.gateway.confirm"),
            Step::Result => ("result", "a2a.result", "a2a.gateway.result"),
            Step::Cancel => ("cancel", "a2a.cancel", "a2a.gateway.cancel"),
            Step::Fallback => ("fallback", "a2a.fallback", "a2a.gateway.fallback"),
            Step::Preflight => ("preflight", "a2a.preflight", "a2a.gateway.preflight"),
            Step::Other => ("other", "a2a.other", "a2a.gateway.other"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Step;

    #[test]
    fn span_names_are_the_label_under_their_prefix() {
        for s in Step::ALL {
            assert_eq!(s.span_name(), format!("a2a.{}", s.as_str()));
            assert_eq!(s.gateway_span_name(), format!("a2a.gateway.{}", s.as_str()));
        }
        assert!(!Step::AGENT.contains(&Step::Preflight));
    }
}
