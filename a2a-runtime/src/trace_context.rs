//! W3C Trace Context (`traceparent`): continue the caller's trace, or start one, so that an agent's logs and the
//! calls its handlers make (`command` gets `TRACEPARENT`, `http` forwards `traceparent`) join the caller's trace.

/// A parsed `traceparent` (version 00).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceParent {
    /// 32 lower-case hex digits, not all zero.
    pub trace_id: String,
    /// 16 lower-case hex digits, not all zero.
    pub parent_id: String,
    /// Trace flags (bit 0: sampled).
    pub flags: u8,
}

fn is_hex(s: &str, len: usize) -> bool {
    s.len() == len
        && s.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        && s.bytes().any(|b| b != b'0')
}

/// Lower-case hex of `N` random bytes (one `getrandom` call, no per-byte formatting: this runs on every request).
fn random_hex<const N: usize>() -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut buf = [0u8; N];
    if getrandom::fill(&mut buf).is_err() || buf.iter().all(|b| *b == 0) {
        // Without randomness the ids are still well-formed (and not all zero); tracing is best effort.
        buf.iter_mut().enumerate().for_each(|(i, b)| *b = (i as u8).wrapping_add(1));
    }
    let mut out = String::with_capacity(2 * N);
    for b in buf {
        out.push(char::from(DIGITS[usize::from(b >> 4)]));
        out.push(char::from(DIGITS[usize::from(b & 0x0f)]));
    }
    out
}

impl TraceParent {
    /// Parses a `traceparent` header value; `None` when it is not a valid version-00 value.
    pub fn parse(value: &str) -> Option<TraceParent> {
        let mut parts = value.trim().split('-');
        let (version, trace_id, parent_id, flags) = (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
        if version != "00"
            || parts.next().is_some()
            || !is_hex(trace_id, 32)
            || !is_hex(parent_id, 16)
            || flags.len() != 2
        {
            return None;
        }
        let flags = u8::from_str_radix(flags, 16).ok()?;
        Some(TraceParent { trace_id: trace_id.to_owned(), parent_id: parent_id.to_owned(), flags })
    }

    /// A new trace (sampled).
    pub fn root() -> TraceParent {
        TraceParent { trace_id: random_hex::<16>(), parent_id: random_hex::<8>(), flags: 1 }
    }

    /// The same trace with a new span id: what this agent passes on.
    pub fn child(&self) -> TraceParent {
        TraceParent { trace_id: self.trace_id.clone(), parent_id: random_hex::<8>(), flags: self.flags }
    }

    /// The header value.
    pub fn header(&self) -> String {
        format!("00-{}-{}-{:02x}", self.trace_id, self.parent_id, self.flags)
    }
}

/// The context to continue from a request's `traceparent` header: a child of it, or a new root.
pub fn continue_from(header: Option<&str>) -> TraceParent {
    header.and_then(TraceParent::parse).map_or_else(TraceParent::root, |p| p.child())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn valid_traceparent_is_continued_with_a_new_span_id() {
        let incoming = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        let p = TraceParent::parse(incoming).expect("valid");
        let c = continue_from(Some(incoming));
        assert_eq!(c.trace_id, p.trace_id);
        assert_ne!(c.parent_id, p.parent_id);
        assert!(TraceParent::parse(&c.header()).is_some());
    }

    #[test]
    fn malformed_traceparents_start_a_new_trace() {
        for bad in [
            "",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
            "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
        ] {
            assert!(TraceParent::parse(bad).is_none(), "{bad:?}");
            let root = continue_from(Some(bad));
            assert!(TraceParent::parse(&root.header()).is_some());
        }
    }
}
