//! An agent's A2A endpoint: an `http(s)` URL whose path ends in `/a2a` (`spec/PROTOCOL.md` §2, TR-2).

use std::fmt;

use url::Url;

use crate::error::ClientError;

/// An agent's A2A endpoint, e.g. `https://agent.example.com/a2a`.
///
/// A URL whose path does not end in `/a2a` has `/a2a` appended (TR-2), so `https://agent.example.com` and
/// `https://agent.example.com/a2a` name the same agent.
///
/// ```
/// use a2a_client::Endpoint;
///
/// let e = Endpoint::parse("https://agent.example.com").expect("valid");
/// assert_eq!(e.as_str(), "https://agent.example.com/a2a");
/// assert_eq!(e.target("/negotiate", None), "/a2a/negotiate");
/// ```
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Endpoint {
    url: Url,
    text: String,
}

impl Endpoint {
    /// Parses an endpoint URL (`http` or `https`, no query, no fragment, no credentials).
    pub fn parse(s: &str) -> Result<Endpoint, ClientError> {
        let url = a2a_core::remote::endpoint_url(s).map_err(ClientError::invalid)?;
        let text = url.as_str().to_owned();
        Ok(Endpoint { url, text })
    }

    /// The endpoint URL, ending in `/a2a`.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// The URL's origin, `scheme://host:port`, which credentials are bound to.
    pub fn origin(&self) -> String {
        self.url.origin().ascii_serialization()
    }

    /// Whether the host is a loopback name or address (`localhost`, `*.localhost`, `127.0.0.0/8`, `::1`).
    pub fn is_loopback(&self) -> bool {
        match self.url.host() {
            Some(url::Host::Domain(d)) => d == "localhost" || d.ends_with(".localhost"),
            Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
            Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
            None => false,
        }
    }

    /// Whether the endpoint is served over HTTPS.
    pub fn is_https(&self) -> bool {
        self.url.scheme() == "https"
    }

    /// The request target (origin-form, as on the request line and in a signature's `htu`) of the endpoint's path
    /// followed by `tail` (`""`, `/negotiate`, `/result/<segment>`), with an optional query.
    pub fn target(&self, tail: &str, query: Option<&str>) -> String {
        let mut t = format!("{}{tail}", self.url.path());
        if let Some(q) = query {
            t.push('?');
            t.push_str(q);
        }
        t
    }

    /// The absolute URL of a request target built by [`Endpoint::target`].
    pub fn url_of(&self, target: &str) -> String {
        format!("{}{target}", self.origin())
    }
}

impl fmt::Display for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Endpoint({})", self.text)
    }
}

impl std::str::FromStr for Endpoint {
    type Err = ClientError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Endpoint::parse(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a2a_is_appended_once_and_trailing_slashes_dropped() {
        for (input, want) in [
            ("https://a.example.com", "https://a.example.com/a2a"),
            ("https://a.example.com/", "https://a.example.com/a2a"),
            ("https://a.example.com/a2a", "https://a.example.com/a2a"),
            ("https://a.example.com/a2a/", "https://a.example.com/a2a"),
            ("http://127.0.0.1:8080/agents/x", "http://127.0.0.1:8080/agents/x/a2a"),
        ] {
            assert_eq!(Endpoint::parse(input).expect(input).as_str(), want);
        }
    }

    #[test]
    fn non_http_urls_queries_and_credentials_are_refused() {
        for bad in
            ["ftp://a.example.com", "a.example.com", "https://u:p@a.example.com", "https://a.example.com/a2a?x=1", ""]
        {
            assert!(Endpoint::parse(bad).is_err(), "{bad} accepted");
        }
    }

    #[test]
    fn targets_keep_percent_escapes_of_execution_ids() {
        let e = Endpoint::parse("http://127.0.0.1:9/p").expect("valid");
        let t = e.target("/result/did:web:localhost%253A8080_1_abc", Some("wait_ms=5"));
        assert_eq!(t, "/p/a2a/result/did:web:localhost%253A8080_1_abc?wait_ms=5");
        assert_eq!(e.url_of(&t), "http://127.0.0.1:9/p/a2a/result/did:web:localhost%253A8080_1_abc?wait_ms=5");
        assert!(e.is_loopback());
        assert!(!Endpoint::parse("https://example.com").expect("valid").is_loopback());
    }
}
