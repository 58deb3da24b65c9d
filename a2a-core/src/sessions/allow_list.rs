//! Allow-list globs (POL-1).

use super::*;

/// Whether `text` matches the glob `pattern`: `*` matches any run of characters (also none), `?` exactly one, every
/// other character itself. Linear in practice (the classic backtracking-to-last-star algorithm, no recursion).
pub fn glob_match(pattern: &str, text: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let t: Vec<char> = text.chars().collect();
    let (mut pi, mut ti) = (0usize, 0usize);
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        if pi < p.len() && (p[pi] == '?' || (p[pi] != '*' && p[pi] == t[ti])) {
            pi += 1;
            ti += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some((pi, ti));
            pi += 1;
        } else if let Some((sp, st)) = star {
            pi = sp + 1;
            ti = st + 1;
            star = Some((sp, st + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|c| *c == '*')
}

/// An allow list of session-address globs (POL-1).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(transparent)]
pub struct AllowList(pub Vec<String>);

/// Which side of a send an allow list refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RefusedSide {
    /// The requester matches no pattern.
    Requester,
    /// The target matches no pattern.
    Target,
}

impl AllowList {
    /// Whether `address` matches one of the patterns.
    pub fn matches(&self, address: &str) -> bool {
        self.0.iter().any(|p| glob_match(p, address))
    }

    /// POL-1: same-agent traffic is always allowed; otherwise both sides must match.
    pub fn check(&self, requester: &SessionAddress, target: &SessionAddress) -> Result<(), RefusedSide> {
        if requester.agent() == target.agent() {
            return Ok(());
        }
        if !self.matches(&requester.to_string()) {
            return Err(RefusedSide::Requester);
        }
        if !self.matches(&target.to_string()) {
            return Err(RefusedSide::Target);
        }
        Ok(())
    }
}
