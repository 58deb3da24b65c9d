//! The wait chain (POL-5).

use super::*;

/// The sessions already blocked waiting on a chain of sends, outermost first (POL-5), as carried by
/// `A2A-Wait-Chain`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WaitChain(Vec<SessionAddress>);

impl WaitChain {
    /// An empty chain.
    pub fn new() -> WaitChain {
        WaitChain(Vec::new())
    }

    /// Parses a header value: comma-separated session addresses (blanks around them ignored); an empty value is an
    /// empty chain. More than [`MAX_WAIT_CHAIN`] entries, or an entry that is not an address, is an error.
    pub fn parse(value: &str) -> Result<WaitChain, SessionError> {
        let value = value.trim();
        if value.is_empty() {
            return Ok(WaitChain::new());
        }
        let parts: Vec<&str> = value.split(',').map(str::trim).collect();
        if parts.len() > MAX_WAIT_CHAIN {
            return Err(SessionError(format!(
                "{WAIT_CHAIN_HEADER} holds {} sessions; at most {MAX_WAIT_CHAIN} are allowed",
                parts.len()
            )));
        }
        parts.into_iter().map(str::parse).collect::<Result<Vec<_>, _>>().map(WaitChain)
    }

    /// The chain with `address` appended (the requester adds itself before it waits).
    pub fn with(mut self, address: SessionAddress) -> Result<WaitChain, SessionError> {
        if self.0.len() >= MAX_WAIT_CHAIN {
            return Err(SessionError(format!("a wait chain holds at most {MAX_WAIT_CHAIN} sessions")));
        }
        if !self.0.contains(&address) {
            self.0.push(address);
        }
        Ok(self)
    }

    /// Whether `address` is already waiting in this chain: a send to it that waits would be a cycle.
    pub fn contains(&self, address: &SessionAddress) -> bool {
        self.0.contains(address)
    }

    /// The cycle a waiting send to `target` would close: the chain from `target`'s first appearance, then `target`.
    pub fn cycle_to(&self, target: &SessionAddress) -> Option<Vec<String>> {
        let start = self.0.iter().position(|a| a == target)?;
        let mut cycle: Vec<String> = self.0[start..].iter().map(ToString::to_string).collect();
        cycle.push(target.to_string());
        Some(cycle)
    }

    /// The addresses, outermost first.
    pub fn addresses(&self) -> &[SessionAddress] {
        &self.0
    }

    /// Whether the chain is empty.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The header value.
    pub fn header_value(&self) -> String {
        self.0.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ")
    }
}
