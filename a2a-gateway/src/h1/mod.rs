//! The gateway's own HTTP/1.1: request heads parsed once by httparse into offsets of one buffer ([`head`]), bodies
//! delimited by RFC 9112's rules ([`body`]), and a connection loop that serves the protocol's steps without building
//! `http::Request`s or `HeaderMap`s ([`server`]). The agents' side is [`crate::upstream`].
//!
//! Why: a proxy's cost per request on loopback is its HTTP machinery, not its logic. Built on hyper's server and
//! client, the gateway spent ~1.5× nginx's CPU per proxied request, ~1.4× with no logic at all; a proxy that parses
//! heads in place and copies them through as bytes costs ~0.75× (`docs/BENCHMARKS.md`, "a2a-gateway"). HTTP/2
//! connections and the routes the gateway answers from other code (the A2A 1.x bridge) still go through hyper and
//! axum, converted at the edge ([`crate::proxy::handle_http`]).

pub mod body;
pub mod head;
pub(crate) mod server;

use std::pin::Pin;

use tokio::time::{Instant, Sleep};

/// A deadline whose timer is armed once and moved only when it fires early: a connection that serves one request
/// after another within the time limit moves the deadline (a store) instead of registering a timer per request.
pub(crate) struct Deadline {
    at: Instant,
    sleep: Option<Pin<Box<Sleep>>>,
}

impl Deadline {
    /// No deadline yet (call [`Deadline::set`] before [`Deadline::passed`]).
    pub(crate) fn new() -> Self {
        Deadline { at: Instant::now(), sleep: None }
    }

    /// Sets the deadline.
    pub(crate) fn set(&mut self, at: Instant) {
        self.at = at;
        // A timer armed for later than the new deadline is moved now (it would fire too late).
        if let Some(s) = &mut self.sleep
            && s.deadline() > at
        {
            s.as_mut().reset(at);
        }
    }

    /// Whether no timer was ever made (nothing waited on the deadline).
    #[cfg(test)]
    pub(crate) fn is_unarmed(&self) -> bool {
        self.sleep.is_none()
    }

    /// Completes when the deadline has passed.
    pub(crate) async fn passed(&mut self) {
        let at = self.at;
        let sleep = self.sleep.get_or_insert_with(|| Box::pin(tokio::time::sleep_until(at)));
        loop {
            sleep.as_mut().await;
            if Instant::now() >= self.at {
                return;
            }
            sleep.as_mut().reset(self.at);
        }
    }
}

/// Writes `METHOD target HTTP/1.1\r\n`.
pub(crate) fn write_request_line(out: &mut Vec<u8>, method: &str, target: &str) {
    out.extend_from_slice(method.as_bytes());
    out.push(b' ');
    out.extend_from_slice(target.as_bytes());
    out.extend_from_slice(b" HTTP/1.1\r\n");
}

/// Writes `content-length: n\r\n`, except for an empty body of a request that has none by its method (`GET`).
pub(crate) fn write_content_length(out: &mut Vec<u8>, n: usize, bodiless_method: bool) {
    if n == 0 && bodiless_method {
        return;
    }
    out.extend_from_slice(b"content-length: ");
    server::write_decimal(out, n as u64);
    out.extend_from_slice(b"\r\n");
}

/// Fields that belong to one connection or to the message's framing: never copied from one connection to another
/// (RFC 9110 §7.6.1; `host` and the framing are written for the next hop).
pub(crate) const HOP_BY_HOP: [&str; 9] = [
    "connection",
    "keep-alive",
    "proxy-connection",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "host",
    "content-length",
];

/// Whether `name` is one of [`HOP_BY_HOP`] (any case).
pub(crate) fn is_framing_or_hop(name: &[u8]) -> bool {
    // Most names are longer than the longest of these (17) or start with another letter: one length check.
    name.len() <= 17 && HOP_BY_HOP.iter().any(|h| name.eq_ignore_ascii_case(h.as_bytes()))
}

/// Removes [`HOP_BY_HOP`] fields and those named by `Connection` (RFC 9110 §7.6.1), in one pass over the fields.
pub(crate) fn strip_hop_by_hop(h: &mut head::Headers) {
    h.strip_hop_by_hop();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hop_by_hop_fields_and_those_connection_names_are_removed() {
        let raw = b"GET / HTTP/1.1\r\nHost: a\r\nConnection: keep-alive, X-Private\r\nX-Private: 1\r\nTE: trailers\r\nA2A-Version: 0.3\r\nContent-Length: 0\r\n\r\n";
        let p = head::parse_request(raw, 64).expect("valid").expect("complete");
        let mut h = p.bind(bytes::Bytes::copy_from_slice(raw)).expect("a path").headers;
        strip_hop_by_hop(&mut h);
        let names: Vec<&[u8]> = h.iter().map(|(n, _)| n).collect();
        assert_eq!(names, vec![&b"A2A-Version"[..]]);
        let mut out = Vec::new();
        write_content_length(&mut out, 1234, false);
        write_content_length(&mut out, 0, true);
        assert_eq!(out, b"content-length: 1234\r\n");
    }
}
