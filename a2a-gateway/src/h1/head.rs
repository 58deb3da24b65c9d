//! Message heads as received: one buffer and the offsets of each header field in it, with no `HeaderMap`, no
//! `HeaderName` and no copy of a name or value. Lookups compare names case-insensitively against the lowercase names
//! the gateway reads; edits (remove, insert) change the list, and writing the head copies the fields out as bytes.

use bytes::{BufMut, Bytes};
use http::{HeaderMap, HeaderName, HeaderValue, Method};

/// Bytes of a field: a range of the head it was received in, or bytes of its own (a value the gateway set).
#[derive(Clone, Debug)]
enum Part {
    Head(u32, u32),
    Own(Bytes),
}

/// The header fields of one message, in order. Names are matched case-insensitively; the first field of a name is
/// the one [`Headers::get`] returns, as `HeaderMap::get` does.
#[derive(Clone, Debug, Default)]
pub struct Headers {
    head: Bytes,
    fields: Vec<(Part, Part)>,
}

/// A value as the protocol reads it: visible ASCII (and tab) only, else `None` (as `HeaderValue::to_str`).
pub fn visible_ascii(v: &[u8]) -> Option<&str> {
    if v.iter().all(|&b| b == b'\t' || (32..127).contains(&b)) { std::str::from_utf8(v).ok() } else { None }
}

impl Headers {
    /// No fields.
    pub fn new() -> Self {
        Headers::default()
    }

    fn bytes<'a>(&'a self, p: &'a Part) -> &'a [u8] {
        match p {
            Part::Head(s, e) => &self.head[*s as usize..*e as usize],
            Part::Own(b) => b,
        }
    }

    /// The fields, in order: (name as received, value).
    pub fn iter(&self) -> impl Iterator<Item = (&[u8], &[u8])> {
        self.fields.iter().map(|(n, v)| (self.bytes(n), self.bytes(v)))
    }

    /// How many fields.
    pub fn len(&self) -> usize {
        self.fields.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.fields.is_empty()
    }

    /// The value of the first field named `name` (lowercase).
    pub fn get(&self, name: &str) -> Option<&[u8]> {
        self.fields.iter().find(|(n, _)| self.bytes(n).eq_ignore_ascii_case(name.as_bytes())).map(|(_, v)| self.bytes(v))
    }

    /// [`Headers::get`] as text: `Some(Err(()))` when the value is not visible ASCII.
    pub fn get_str(&self, name: &str) -> Option<Result<&str, ()>> {
        self.get(name).map(|v| visible_ascii(v).ok_or(()))
    }

    /// Whether a field named `name` (lowercase) is present.
    pub fn contains(&self, name: &str) -> bool {
        self.get(name).is_some()
    }

    /// Every value of `name` (lowercase), in order.
    pub fn get_all<'a, 'n>(&'a self, name: &'n str) -> impl Iterator<Item = &'a [u8]> + use<'a, 'n> {
        self.fields
            .iter()
            .filter(move |(n, _)| self.bytes(n).eq_ignore_ascii_case(name.as_bytes()))
            .map(|(_, v)| self.bytes(v))
    }

    /// Removes every field named `name` (lowercase); whether there was one.
    pub fn remove(&mut self, name: &str) -> bool {
        let before = self.fields.len();
        let head = &self.head;
        self.fields.retain(|(n, _)| {
            let n = match n {
                Part::Head(s, e) => &head[*s as usize..*e as usize],
                Part::Own(b) => b,
            };
            !n.eq_ignore_ascii_case(name.as_bytes())
        });
        self.fields.len() != before
    }

    /// Removes every field named `name` and returns the first value, owned.
    pub fn take(&mut self, name: &str) -> Option<Bytes> {
        let v = self.get(name).map(Bytes::copy_from_slice)?;
        self.remove(name);
        Some(v)
    }

    /// Adds a field after the others (`name` as it should be written).
    pub fn append(&mut self, name: &'static str, value: Bytes) {
        self.fields.push((Part::Own(Bytes::from_static(name.as_bytes())), Part::Own(value)));
    }

    /// Adds a field whose name is not a constant.
    pub fn append_owned(&mut self, name: &str, value: Bytes) {
        self.fields.push((Part::Own(Bytes::copy_from_slice(name.as_bytes())), Part::Own(value)));
    }

    /// Sets `name` to `value`: the fields of that name are removed, one is added.
    pub fn insert(&mut self, name: &'static str, value: Bytes) {
        self.remove(name);
        self.append(name, value);
    }

    /// Sets `name` to a value the gateway holds as a `HeaderValue`.
    pub fn insert_value(&mut self, name: &'static str, value: &HeaderValue) {
        self.insert(name, Bytes::copy_from_slice(value.as_bytes()));
    }

    /// Renames every field `from` (lowercase) to `to`, keeping its value and place.
    pub fn rename(&mut self, from: &str, to: &str) {
        let to = Bytes::copy_from_slice(to.as_bytes());
        for i in 0..self.fields.len() {
            if self.bytes(&self.fields[i].0).eq_ignore_ascii_case(from.as_bytes()) {
                self.fields[i].0 = Part::Own(to.clone());
            }
        }
    }

    /// The total size as the limits count it: name, value and 4 bytes of separators per field.
    pub fn size(&self) -> usize {
        self.iter().map(|(n, v)| n.len() + v.len() + 4).sum()
    }

    /// The fields as `(name, value)` text pairs, skipping values that are not visible ASCII (what the signature code
    /// reads).
    pub fn text_pairs(&self) -> Vec<(&str, &str)> {
        self.iter().filter_map(|(n, v)| Some((std::str::from_utf8(n).ok()?, visible_ascii(v)?))).collect()
    }

    /// Writes every field as `name: value\r\n`.
    pub fn write(&self, out: &mut Vec<u8>) {
        for (n, v) in self.iter() {
            out.reserve(n.len() + v.len() + 4);
            out.put_slice(n);
            out.put_slice(b": ");
            out.put_slice(v);
            out.put_slice(b"\r\n");
        }
    }

    /// The fields of a `HeaderMap` (the HTTP/2 path and the gateway's own answers).
    pub fn from_header_map(map: &HeaderMap) -> Headers {
        let mut fields = Vec::with_capacity(map.len());
        for (n, v) in map {
            fields.push((Part::Own(Bytes::copy_from_slice(n.as_str().as_bytes())), Part::Own(Bytes::copy_from_slice(v.as_bytes()))));
        }
        Headers { head: Bytes::new(), fields }
    }

    /// The fields as a `HeaderMap`; fields whose name or value HTTP does not allow are left out.
    pub fn to_header_map(&self) -> HeaderMap {
        let mut map = HeaderMap::with_capacity(self.fields.len());
        for (n, v) in self.iter() {
            if let (Ok(n), Ok(v)) = (HeaderName::from_bytes(n), HeaderValue::from_bytes(v)) {
                map.append(n, v);
            }
        }
        map
    }
}

/// Read access to a message's fields, whether they are held as [`Headers`] (the proxy) or as a `HeaderMap` (the
/// bridge, the event streams): the edge checks are written once against this.
pub trait Fields {
    /// The value of the first field named `name` (lowercase).
    fn field(&self, name: &str) -> Option<&[u8]>;
    /// Every value of `name` (lowercase).
    fn field_all(&self, name: &str) -> Vec<&[u8]>;
    /// The fields as text pairs, skipping values that are not visible ASCII (what signatures cover).
    fn text_pairs(&self) -> Vec<(&str, &str)>;
    /// [`Fields::field`] as text: `Some(Err(()))` when the value is not visible ASCII.
    fn field_str(&self, name: &str) -> Option<Result<&str, ()>> {
        self.field(name).map(|v| visible_ascii(v).ok_or(()))
    }
}

impl Fields for Headers {
    fn field(&self, name: &str) -> Option<&[u8]> {
        self.get(name)
    }
    fn field_all(&self, name: &str) -> Vec<&[u8]> {
        self.get_all(name).collect()
    }
    fn text_pairs(&self) -> Vec<(&str, &str)> {
        Headers::text_pairs(self)
    }
}

impl Fields for HeaderMap {
    fn field(&self, name: &str) -> Option<&[u8]> {
        self.get(name).map(HeaderValue::as_bytes)
    }
    fn field_all(&self, name: &str) -> Vec<&[u8]> {
        self.get_all(name).iter().map(HeaderValue::as_bytes).collect()
    }
    fn text_pairs(&self) -> Vec<(&str, &str)> {
        self.iter().filter_map(|(k, v)| v.to_str().ok().map(|v| (k.as_str(), v))).collect()
    }
}

/// Why a head could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HeadError {
    /// Not HTTP/1.x (the text says what was wrong).
    Malformed(String),
    /// More fields than allowed.
    TooManyHeaders,
}

/// The request line and fields of a request.
#[derive(Debug, Clone)]
pub struct RequestHead {
    /// The method.
    pub method: Method,
    target: (u32, u32),
    /// `1` for HTTP/1.1, `0` for HTTP/1.0.
    pub version: u8,
    /// The fields.
    pub headers: Headers,
}

impl RequestHead {
    /// The request target as received (origin form: path and query).
    pub fn target(&self) -> &str {
        // Checked to be visible ASCII when parsed.
        std::str::from_utf8(&self.headers.head[self.target.0 as usize..self.target.1 as usize]).unwrap_or("")
    }

    /// The path of the target (without the query).
    pub fn path(&self) -> &str {
        let t = self.target();
        t.split_once('?').map_or(t, |(p, _)| p)
    }

    /// A request built by the gateway (the HTTP/2 path).
    pub fn new(method: Method, target: &str, headers: Headers) -> RequestHead {
        let mut headers = headers;
        // The target is kept in the head buffer, after the fields' own bytes (none: they are owned).
        debug_assert!(headers.head.is_empty());
        let len = target.len() as u32;
        headers.head = Bytes::copy_from_slice(target.as_bytes());
        RequestHead { method, target: (0, len), version: 1, headers }
    }
}

/// The status line and fields of an answer.
#[derive(Debug, Clone)]
pub struct ResponseHead {
    /// The status code.
    pub status: u16,
    /// `1` for HTTP/1.1, `0` for HTTP/1.0.
    pub version: u8,
    /// The fields.
    pub headers: Headers,
}

fn offsets(base: &[u8], part: &[u8]) -> (u32, u32) {
    let s = part.as_ptr() as usize - base.as_ptr() as usize;
    (s as u32, (s + part.len()) as u32)
}

fn fields(base: &[u8], parsed: &[httparse::Header<'_>]) -> Vec<(Part, Part)> {
    let mut out = Vec::with_capacity(parsed.len() + 4);
    for h in parsed {
        let (ns, ne) = offsets(base, h.name.as_bytes());
        let (vs, ve) = offsets(base, h.value);
        out.push((Part::Head(ns, ne), Part::Head(vs, ve)));
    }
    out
}

/// Most fields a head may have before parsing stops (the configured limits are checked after parsing, with a clear
/// error; this only bounds the parser's work).
pub const MAX_FIELDS: usize = 256;

/// What a complete request head was parsed into: the offsets, to be bound to the buffer once it is split off.
pub struct ParsedRequest {
    method: Method,
    target: (u32, u32),
    version: u8,
    fields: Vec<(Part, Part)>,
    /// Length of the head in bytes (up to and including the empty line).
    pub len: usize,
}

impl ParsedRequest {
    /// Binds the offsets to `head` (the first `len` bytes of the buffer parsed).
    pub fn bind(self, head: Bytes) -> RequestHead {
        RequestHead {
            method: self.method,
            target: self.target,
            version: self.version,
            headers: Headers { head, fields: self.fields },
        }
    }
}

/// Parses a request head at the start of `buf`: `Ok(None)` when it is not complete yet. Empty lines before the
/// request line are skipped, as RFC 9112 §2.2 allows.
pub fn parse_request(buf: &[u8], max_fields: usize) -> Result<Option<ParsedRequest>, HeadError> {
    let mut hs = [httparse::EMPTY_HEADER; MAX_FIELDS];
    let hs = &mut hs[..max_fields.clamp(1, MAX_FIELDS)];
    let mut req = httparse::Request::new(hs);
    match req.parse(buf) {
        Ok(httparse::Status::Complete(len)) => {
            let method = Method::from_bytes(req.method.unwrap_or("").as_bytes())
                .map_err(|_| HeadError::Malformed("invalid method".into()))?;
            let path = req.path.unwrap_or("");
            if !path.starts_with('/') {
                // Absolute-form and authority-form targets are for proxies of another kind (RFC 9112 §3.2).
                return Err(HeadError::Malformed(format!("the request target {path:?} is not a path")));
            }
            if visible_ascii(path.as_bytes()).is_none() {
                return Err(HeadError::Malformed("the request target is not visible ASCII".into()));
            }
            Ok(Some(ParsedRequest {
                method,
                target: offsets(buf, path.as_bytes()),
                version: req.version.unwrap_or(1),
                fields: fields(buf, req.headers),
                len,
            }))
        }
        Ok(httparse::Status::Partial) => Ok(None),
        Err(httparse::Error::TooManyHeaders) => Err(HeadError::TooManyHeaders),
        Err(e) => Err(HeadError::Malformed(e.to_string())),
    }
}

/// Parses an answer's head at the start of `buf`: `Ok(None)` when not complete yet; the length of the head with it.
pub fn parse_response(buf: &[u8]) -> Result<Option<(u16, u8, Vec<(u32, u32, u32, u32)>, usize)>, HeadError> {
    let mut hs = [httparse::EMPTY_HEADER; MAX_FIELDS];
    let mut resp = httparse::Response::new(&mut hs);
    match resp.parse(buf) {
        Ok(httparse::Status::Complete(len)) => {
            let mut out = Vec::with_capacity(resp.headers.len());
            for h in resp.headers.iter() {
                let (ns, ne) = offsets(buf, h.name.as_bytes());
                let (vs, ve) = offsets(buf, h.value);
                out.push((ns, ne, vs, ve));
            }
            Ok(Some((resp.code.unwrap_or(0), resp.version.unwrap_or(1), out, len)))
        }
        Ok(httparse::Status::Partial) => Ok(None),
        Err(httparse::Error::TooManyHeaders) => Err(HeadError::TooManyHeaders),
        Err(e) => Err(HeadError::Malformed(e.to_string())),
    }
}

impl ResponseHead {
    /// Binds offsets from [`parse_response`] to `head`.
    pub fn bind(status: u16, version: u8, offsets: Vec<(u32, u32, u32, u32)>, head: Bytes) -> ResponseHead {
        let fields = offsets.into_iter().map(|(ns, ne, vs, ve)| (Part::Head(ns, ne), Part::Head(vs, ve))).collect();
        ResponseHead { status, version, headers: Headers { head, fields } }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_head_is_read_in_place_and_edited() {
        let raw = b"\r\nPOST /a2a/confirm?x=1 HTTP/1.1\r\nHost: gw\r\nA2A-Sender-ID: did:web:a.example\r\nX-Two: 1\r\nx-two: 2\r\n\r\n{}";
        let p = parse_request(raw, 64).expect("valid").expect("complete");
        assert_eq!(&raw[p.len..], b"{}");
        let len = p.len;
        let mut head = p.bind(Bytes::copy_from_slice(&raw[..len]));
        assert_eq!(head.method, Method::POST);
        assert_eq!(head.target(), "/a2a/confirm?x=1");
        assert_eq!(head.path(), "/a2a/confirm");
        assert_eq!(head.version, 1);
        let h = &mut head.headers;
        assert_eq!(h.get("a2a-sender-id"), Some(&b"did:web:a.example"[..]));
        assert_eq!(h.get_all("x-two").collect::<Vec<_>>(), vec![&b"1"[..], &b"2"[..]]);
        assert!(h.remove("x-two"));
        assert!(!h.contains("x-two"));
        h.insert("a2a-sender-id", Bytes::from_static(b"did:web:gw.example"));
        h.rename("host", "x-host");
        let mut out = Vec::new();
        h.write(&mut out);
        assert_eq!(out, b"x-host: gw\r\na2a-sender-id: did:web:gw.example\r\n");
        assert_eq!(h.to_header_map().len(), 2);
    }

    #[test]
    fn partial_heads_wait_and_bad_ones_are_refused() {
        assert!(parse_request(b"GET /a2a HTTP/1.1\r\nHost: x\r\n", 64).expect("valid").is_none());
        assert!(matches!(parse_request(b"GET /a2a HTTP/1.1\r\nBad Header: x\r\n\r\n", 64), Err(HeadError::Malformed(_))));
        assert!(matches!(parse_request(b"GET http://x/ HTTP/1.1\r\n\r\n", 64), Err(HeadError::Malformed(_))));
        assert!(matches!(parse_request(b"GET / HTTP/1.1\r\na: 1\r\nb: 2\r\n\r\n", 1), Err(HeadError::TooManyHeaders)));
        let v = b"GET / HTTP/1.1\r\nx: caf\xc3\xa9\r\n\r\n";
        let p = parse_request(v, 8).expect("obs-text is allowed").expect("complete");
        let head = p.bind(Bytes::copy_from_slice(v));
        assert_eq!(head.headers.get_str("x"), Some(Err(())));
    }

    #[test]
    fn answers_are_parsed() {
        let raw = b"HTTP/1.1 201 Created\r\nContent-Length: 2\r\nA2A-Execution-ID: e1\r\n\r\n{}";
        let (status, version, offs, len) = parse_response(raw).expect("valid").expect("complete");
        let head = ResponseHead::bind(status, version, offs, Bytes::copy_from_slice(&raw[..len]));
        assert_eq!(head.status, 201);
        assert_eq!(head.headers.get("a2a-execution-id"), Some(&b"e1"[..]));
        assert_eq!(head.headers.get("content-length"), Some(&b"2"[..]));
    }
}
