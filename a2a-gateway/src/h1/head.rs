//! Message heads as received: one buffer and the offsets of each header field in it, with no `HeaderMap`, no
//! `HeaderName` and no copy of a name or value. Lookups compare names case-insensitively against the lowercase names
//! the gateway reads; edits (remove, insert) change the list, and writing the head copies the fields out as bytes.

use std::mem::MaybeUninit;

use bytes::{BufMut, Bytes};
use http::uri::PathAndQuery;
use http::{HeaderMap, HeaderName, HeaderValue, Method};

/// Bytes of a field: a range of the head it was received in, or bytes of its own (a value the gateway set).
#[derive(Clone, Debug)]
enum Part {
    Head(u32, u32),
    Own(Bytes),
}

/// One field: a key of its name (for lookups), the name and the value.
#[derive(Clone, Debug)]
struct Field {
    key: u128,
    name: Part,
    value: Part,
}

/// How many leading bytes of a name its key holds; names up to this long are told apart by their keys alone.
const KEY_BYTES: usize = 15;

/// A lookup key of a field name: its length and its first [`KEY_BYTES`] bytes in lower case. Two names with different
/// keys differ; names with equal keys are compared in full only when longer than [`KEY_BYTES`] (most names the gateway
/// reads are shorter: `content-length`, `a2a-sender-id`, `a2a-version`, `idempotency-key`).
#[inline]
const fn name_key(name: &[u8]) -> u128 {
    let mut b = [0u8; 16];
    let mut i = 0;
    while i < KEY_BYTES && i < name.len() {
        b[i] = name[i];
        i += 1;
    }
    let x = u128::from_le_bytes(b);
    // ASCII upper case to lower case in all bytes at once: a byte in 'A'..='Z' gets 0x20.
    const LOW7: u128 = u128::from_le_bytes([0x7f; 16]);
    const HIGH: u128 = u128::from_le_bytes([0x80; 16]);
    let low7 = x & LOW7;
    let at_least_a = low7 + u128::from_le_bytes([0x3f; 16]);
    let above_z = low7 + u128::from_le_bytes([0x25; 16]);
    let upper = at_least_a & !above_z & !x & HIGH;
    (x | (upper >> 2)) | ((name.len() as u128 & 0xff) << 120)
}

/// The keys of [`crate::h1::HOP_BY_HOP`], in its order.
const HOP_KEYS: [u128; 9] = {
    let mut k = [0u128; 9];
    let mut i = 0;
    while i < 9 {
        k[i] = name_key(crate::h1::HOP_BY_HOP[i].as_bytes());
        i += 1;
    }
    k
};

/// The bit of a key in a set of keys seen ([`Headers`]'s `seen`).
#[inline]
const fn key_bit(key: u128) -> u64 {
    1 << (((key as u64) ^ ((key >> 64) as u64)).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 58)
}

/// The bits of [`HOP_KEYS`]: a field whose key's bit is not in it is certainly not one of them.
const HOP_BITS: u64 = {
    let mut bits = 0;
    let mut i = 0;
    while i < HOP_KEYS.len() {
        bits |= key_bit(HOP_KEYS[i]);
        i += 1;
    }
    bits
};

/// The header fields of one message, in order. Names are matched case-insensitively; the first field of a name is
/// the one [`Headers::get`] returns, as `HeaderMap::get` does.
#[derive(Clone, Debug, Default)]
pub struct Headers {
    head: Bytes,
    fields: Vec<Field>,
    /// A bit per name key ever held ([`key_bit`]): a name whose bit is clear is certainly absent, so that most
    /// lookups of absent fields (the usual case) return at once. Bits are not cleared when fields are removed.
    seen: u64,
}

/// A value as the protocol reads it: visible ASCII (and tab) only, else `None` (as `HeaderValue::to_str`).
#[inline]
pub fn visible_ascii(v: &[u8]) -> Option<&str> {
    // Eight bytes at a time: no byte above ASCII, below the space (a tab sends the value to the exact check), or DEL.
    // Each test is exact about whether any byte matches.
    let exact = |v: &[u8]| v.iter().all(|&b| b == b'\t' || (32..127).contains(&b));
    let mut chunks = v.chunks_exact(8);
    for c in &mut chunks {
        let x = u64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]);
        const ONES: u64 = 0x0101_0101_0101_0101;
        const HIGH: u64 = 0x8080_8080_8080_8080;
        let below_space = x.wrapping_sub(ONES * 0x20) & !x & HIGH;
        let d = x ^ (ONES * 0x7f);
        let del = d.wrapping_sub(ONES) & !d & HIGH;
        if (x & HIGH) != 0 || del != 0 || below_space != 0 {
            return if exact(v) { std::str::from_utf8(v).ok() } else { None };
        }
    }
    if exact(chunks.remainder()) { std::str::from_utf8(v).ok() } else { None }
}

impl Headers {
    /// No fields.
    pub fn new() -> Self {
        Headers::default()
    }

    #[inline(always)]
    fn bytes<'a>(&'a self, p: &'a Part) -> &'a [u8] {
        match p {
            Part::Head(s, e) => &self.head[*s as usize..*e as usize],
            Part::Own(b) => b,
        }
    }

    /// The fields, in order: (name as received, value).
    pub fn iter(&self) -> impl Iterator<Item = (&[u8], &[u8])> {
        self.fields.iter().map(|f| (self.bytes(&f.name), self.bytes(&f.value)))
    }

    #[inline(always)]
    fn is(&self, f: &Field, key: u128, name: &str) -> bool {
        f.key == key && ((name.len() <= KEY_BYTES) || self.bytes(&f.name).eq_ignore_ascii_case(name.as_bytes()))
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
    #[inline(always)]
    pub fn get(&self, name: &str) -> Option<&[u8]> {
        let key = name_key(name.as_bytes());
        if self.seen & key_bit(key) == 0 {
            return None;
        }
        for f in &self.fields {
            if f.key == key && (name.len() <= KEY_BYTES || self.bytes(&f.name).eq_ignore_ascii_case(name.as_bytes())) {
                return Some(self.bytes(&f.value));
            }
        }
        None
    }

    /// [`Headers::get`] as text: `Some(Err(()))` when the value is not visible ASCII.
    #[inline]
    pub fn get_str(&self, name: &str) -> Option<Result<&str, ()>> {
        self.get(name).map(|v| visible_ascii(v).ok_or(()))
    }

    /// Whether a field named `name` (lowercase) is present.
    #[inline]
    pub fn contains(&self, name: &str) -> bool {
        self.get(name).is_some()
    }

    /// Every value of `name` (lowercase), in order.
    pub fn get_all<'a, 'n>(&'a self, name: &'n str) -> impl Iterator<Item = &'a [u8]> + use<'a, 'n> {
        let key = name_key(name.as_bytes());
        let fields = if self.seen & key_bit(key) == 0 { &self.fields[..0] } else { &self.fields[..] };
        fields.iter().filter(move |f| self.is(f, key, name)).map(|f| self.bytes(&f.value))
    }

    /// Removes every field named `name` (lowercase); whether there was one.
    pub fn remove(&mut self, name: &str) -> bool {
        let key = name_key(name.as_bytes());
        if self.seen & key_bit(key) == 0 || !self.fields.iter().any(|f| f.key == key) {
            return false;
        }
        let before = self.fields.len();
        let head = &self.head;
        self.fields.retain(|f| {
            let n = match &f.name {
                Part::Head(s, e) => &head[*s as usize..*e as usize],
                Part::Own(b) => b,
            };
            !n.eq_ignore_ascii_case(name.as_bytes())
        });
        self.fields.len() != before
    }

    /// Keeps the fields whose name `keep` accepts.
    pub fn retain(&mut self, mut keep: impl FnMut(&[u8]) -> bool) {
        let head = &self.head;
        self.fields.retain(|f| {
            keep(match &f.name {
                Part::Head(s, e) => &head[*s as usize..*e as usize],
                Part::Own(b) => b,
            })
        });
    }

    /// Removes every field named `name` and returns the first value, owned.
    pub fn take(&mut self, name: &str) -> Option<Bytes> {
        let v = self.get(name).map(Bytes::copy_from_slice)?;
        self.remove(name);
        Some(v)
    }

    /// Adds a field after the others (`name` as it should be written).
    pub fn append(&mut self, name: &'static str, value: Bytes) {
        let key = name_key(name.as_bytes());
        self.seen |= key_bit(key);
        self.fields.push(Field { key, name: Part::Own(Bytes::from_static(name.as_bytes())), value: Part::Own(value) });
    }

    /// Adds a field whose name is not a constant.
    pub fn append_owned(&mut self, name: &str, value: Bytes) {
        let key = name_key(name.as_bytes());
        self.seen |= key_bit(key);
        let name = Part::Own(Bytes::copy_from_slice(name.as_bytes()));
        self.fields.push(Field { key, name, value: Part::Own(value) });
    }

    /// Sets `name` to `value`: the first field of that name gets it (in its place), any other is removed; without
    /// one, a field is added.
    pub fn insert(&mut self, name: &'static str, value: Bytes) {
        let key = name_key(name.as_bytes());
        let found =
            if self.seen & key_bit(key) != 0 { self.fields.iter().position(|f| self.is(f, key, name)) } else { None };
        let Some(i) = found else {
            self.append(name, value);
            return;
        };
        self.fields[i].value = Part::Own(value);
        if self.fields[i + 1..].iter().any(|f| self.is(f, key, name)) {
            let head = &self.head;
            let mut seen = 0usize;
            self.fields.retain(|f| {
                let n = match &f.name {
                    Part::Head(s, e) => &head[*s as usize..*e as usize],
                    Part::Own(b) => b,
                };
                let same = f.key == key && n.eq_ignore_ascii_case(name.as_bytes());
                seen += usize::from(same);
                !same || seen == 1
            });
        }
    }

    /// Sets `name` to a value the gateway holds as a `HeaderValue`.
    pub fn insert_value(&mut self, name: &'static str, value: &HeaderValue) {
        self.insert(name, Bytes::copy_from_slice(value.as_bytes()));
    }

    /// Renames every field `from` (lowercase) to `to`, keeping its value and place.
    pub fn rename(&mut self, from: &str, to: &str) {
        let (from_key, to_key) = (name_key(from.as_bytes()), name_key(to.as_bytes()));
        let to = Bytes::copy_from_slice(to.as_bytes());
        for i in 0..self.fields.len() {
            if self.is(&self.fields[i], from_key, from) {
                self.fields[i].name = Part::Own(to.clone());
                self.fields[i].key = to_key;
                self.seen |= key_bit(to_key);
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
        self.write_except(out, &[]);
    }

    /// Writes every field but those of one connection ([`crate::h1::HOP_BY_HOP`]) and those named in `more`
    /// (lowercase, at most four).
    pub fn write_except(&self, out: &mut Vec<u8>, more: &[&str]) {
        assert!(more.len() <= 4, "write_except takes at most four names");
        let mut keys = [0u128; 4];
        let mut bits = HOP_BITS;
        for (k, m) in keys.iter_mut().zip(more) {
            *k = name_key(m.as_bytes());
            bits |= key_bit(*k);
        }
        // Fields kept as they were received, one after the other, are copied as one run of their lines.
        let mut run: Option<(usize, usize)> = None;
        let flush = |run: &mut Option<(usize, usize)>, out: &mut Vec<u8>| {
            if let Some((s, e)) = run.take() {
                out.extend_from_slice(&self.head[s..e]);
            }
        };
        for f in &self.fields {
            let n = self.bytes(&f.name);
            // Most fields are none of the names left out: their key's bit says so without comparing names.
            if key_bit(f.key) & bits != 0 {
                let named = more.iter().zip(&keys).any(|(m, k)| f.key == *k && n.eq_ignore_ascii_case(m.as_bytes()));
                if named || self.hop(f, n) {
                    flush(&mut run, out);
                    continue;
                }
            }
            // A received line `name: value\r\n` (httparse also takes a bare `\n`, which is never copied as is).
            if let (Part::Head(ns, _), Part::Head(_, ve)) = (&f.name, &f.value) {
                let (ns, ve) = (*ns as usize, *ve as usize);
                if self.head.get(ve..ve + 2) == Some(b"\r\n") {
                    match &mut run {
                        Some((_, e)) if *e == ns => *e = ve + 2,
                        _ => {
                            flush(&mut run, out);
                            run = Some((ns, ve + 2));
                        }
                    }
                    continue;
                }
            }
            flush(&mut run, out);
            let v = self.bytes(&f.value);
            out.reserve(n.len() + v.len() + 4);
            out.put_slice(n);
            out.put_slice(b": ");
            out.put_slice(v);
            out.put_slice(b"\r\n");
        }
        flush(&mut run, out);
    }

    /// Whether a field is one of [`crate::h1::HOP_BY_HOP`] (by its key; in full for the longer names).
    #[inline(always)]
    fn hop(&self, f: &Field, name: &[u8]) -> bool {
        match HOP_KEYS.iter().position(|k| *k == f.key) {
            None => false,
            Some(i) => name.len() <= KEY_BYTES || name.eq_ignore_ascii_case(crate::h1::HOP_BY_HOP[i].as_bytes()),
        }
    }

    /// Removes the fields of one connection: [`crate::h1::HOP_BY_HOP`] and the fields `Connection` names.
    pub fn strip_hop_by_hop(&mut self) {
        let named: Vec<String> = if self.contains("connection") {
            self.get_all("connection")
                .flat_map(|v| v.split(|&b| b == b','))
                .map(|t| String::from_utf8_lossy(t.trim_ascii()).to_ascii_lowercase())
                .filter(|t| !t.is_empty() && t != "close" && t != "keep-alive")
                .collect()
        } else {
            Vec::new()
        };
        if named.is_empty() && !self.fields.iter().any(|f| HOP_KEYS.contains(&f.key)) {
            return;
        }
        let head = &self.head;
        self.fields.retain(|f| {
            let n = match &f.name {
                Part::Head(s, e) => &head[*s as usize..*e as usize],
                Part::Own(b) => b,
            };
            let hop = match HOP_KEYS.iter().position(|k| *k == f.key) {
                None => false,
                Some(i) => n.len() <= KEY_BYTES || n.eq_ignore_ascii_case(crate::h1::HOP_BY_HOP[i].as_bytes()),
            };
            !hop && !named.iter().any(|m| n.eq_ignore_ascii_case(m.as_bytes()))
        });
    }

    /// The fields of a `HeaderMap` (the HTTP/2 path and the gateway's own answers).
    pub fn from_header_map(map: &HeaderMap) -> Headers {
        let mut h = Headers { head: Bytes::new(), fields: Vec::with_capacity(map.len()), seen: 0 };
        for (n, v) in map {
            h.append_owned(n.as_str(), Bytes::copy_from_slice(v.as_bytes()));
        }
        h
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
    target: PathAndQuery,
    /// `1` for HTTP/1.1, `0` for HTTP/1.0.
    pub version: u8,
    /// The fields.
    pub headers: Headers,
    /// [`Headers::size`] of the fields as received (before any edit), for the limits.
    pub received_size: usize,
}

impl RequestHead {
    /// The request target as received (origin form: path and query).
    pub fn target(&self) -> &str {
        self.target.as_str()
    }

    /// The path of the target (without the query).
    pub fn path(&self) -> &str {
        self.target.path()
    }

    /// The target as a `PathAndQuery`.
    pub fn path_and_query(&self) -> &PathAndQuery {
        &self.target
    }

    /// A request built by the gateway (the HTTP/2 path).
    pub fn new(method: Method, target: PathAndQuery, headers: Headers) -> RequestHead {
        let received_size = headers.size();
        RequestHead { method, target, version: 1, headers, received_size }
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

/// The fields of a parsed head: their offsets, the set of their name keys, and their [`Headers::size`].
fn fields(base: &[u8], parsed: &[httparse::Header<'_>]) -> (Vec<Field>, u64, usize) {
    let mut out = Vec::with_capacity(parsed.len() + 4);
    let mut seen = 0;
    let mut size = 0;
    for h in parsed {
        size += h.name.len() + h.value.len() + 4;
        let (ns, ne) = offsets(base, h.name.as_bytes());
        let (vs, ve) = offsets(base, h.value);
        let key = name_key(h.name.as_bytes());
        seen |= key_bit(key);
        out.push(Field { key, name: Part::Head(ns, ne), value: Part::Head(vs, ve) });
    }
    (out, seen, size)
}

/// Most fields a head may have before parsing stops (the configured limits are checked after parsing, with a clear
/// error; this only bounds the parser's work).
pub const MAX_FIELDS: usize = 256;

/// What a complete request head was parsed into: the offsets, to be bound to the buffer once it is split off.
pub struct ParsedRequest {
    method: Method,
    target: (u32, u32),
    version: u8,
    fields: (Vec<Field>, u64, usize),
    /// Length of the head in bytes (up to and including the empty line).
    pub len: usize,
}

impl ParsedRequest {
    /// Binds the offsets to `head` (the first `len` bytes of the buffer parsed). `Err` when the target is not a
    /// valid path and query.
    pub fn bind(self, head: Bytes) -> Result<RequestHead, HeadError> {
        let target = if self.target.1 == 0 {
            PathAndQuery::from_static("/")
        } else {
            PathAndQuery::from_maybe_shared(head.slice(self.target.0 as usize..self.target.1 as usize))
                .map_err(|e| HeadError::Malformed(format!("the request target: {e}")))?
        };
        let headers = Headers { head, fields: self.fields.0, seen: self.fields.1 };
        Ok(RequestHead { method: self.method, target, version: self.version, headers, received_size: self.fields.2 })
    }
}

/// Parses a request head at the start of `buf`: `Ok(None)` when it is not complete yet. Empty lines before the
/// request line are skipped, as RFC 9112 §2.2 allows.
pub fn parse_request(buf: &[u8], max_fields: usize) -> Result<Option<ParsedRequest>, HeadError> {
    // Uninitialised slots: zeroing 256 of them would cost more than parsing a head.
    let mut hs = [const { MaybeUninit::<httparse::Header<'_>>::uninit() }; MAX_FIELDS];
    let hs = &mut hs[..max_fields.clamp(1, MAX_FIELDS)];
    let mut req = httparse::Request::new(&mut []);
    match req.parse_with_uninit_headers(buf, hs) {
        Ok(httparse::Status::Complete(len)) => {
            let method = Method::from_bytes(req.method.unwrap_or("").as_bytes())
                .map_err(|_| HeadError::Malformed("invalid method".into()))?;
            let target = req.path.unwrap_or("");
            if visible_ascii(target.as_bytes()).is_none() {
                return Err(HeadError::Malformed("the request target is not visible ASCII".into()));
            }
            // Origin form (`/path?query`), asterisk form (`OPTIONS *`), or absolute form, which a server must accept
            // too (RFC 9112 §3.2.2): its path is the target (`/` when it has none). Authority form is for CONNECT.
            let scheme = ["http://", "https://"]
                .into_iter()
                .find(|s| target.len() > s.len() && target.as_bytes()[..s.len()].eq_ignore_ascii_case(s.as_bytes()));
            let path = match scheme {
                _ if target.starts_with('/') || target == "*" => Some(target),
                Some(s) => {
                    // GW-20: the authority ends at the first `/`, `?` or `#` (RFC 3986 §3.2); the path starts only
                    // at a `/` that ends it. A `/` inside the query (`http://evil.example?x=/a2a/capabilities`)
                    // is not a path: such a target has none, and is `/` (its query dropped with the authority).
                    let rest = &target[s.len()..];
                    match rest.find(['/', '?', '#']) {
                        Some(i) if rest.as_bytes()[i] == b'/' => Some(&rest[i..]),
                        _ => Some(""),
                    }
                }
                None => None,
            };
            let Some(path) = path else {
                return Err(HeadError::Malformed(format!("the request target {target:?} is not a path")));
            };
            Ok(Some(ParsedRequest {
                method,
                target: if path.is_empty() { (0, 0) } else { offsets(buf, path.as_bytes()) },
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
pub fn parse_response(buf: &[u8]) -> Result<Option<ParsedResponse>, HeadError> {
    let mut hs = [const { MaybeUninit::<httparse::Header<'_>>::uninit() }; MAX_FIELDS];
    let mut resp = httparse::Response::new(&mut []);
    match httparse::ParserConfig::default().parse_response_with_uninit_headers(&mut resp, buf, &mut hs) {
        Ok(httparse::Status::Complete(len)) => Ok(Some(ParsedResponse {
            status: resp.code.unwrap_or(0),
            version: resp.version.unwrap_or(1),
            fields: fields(buf, resp.headers),
            len,
        })),
        Ok(httparse::Status::Partial) => Ok(None),
        Err(httparse::Error::TooManyHeaders) => Err(HeadError::TooManyHeaders),
        Err(e) => Err(HeadError::Malformed(e.to_string())),
    }
}

/// What a complete answer head was parsed into (see [`ParsedRequest`]).
pub struct ParsedResponse {
    /// The status code.
    pub status: u16,
    version: u8,
    fields: (Vec<Field>, u64, usize),
    /// Length of the head in bytes.
    pub len: usize,
}

impl ParsedResponse {
    /// Binds the offsets to `head` (the first `len` bytes of the buffer parsed).
    pub fn bind(self, head: Bytes) -> ResponseHead {
        let headers = Headers { head, fields: self.fields.0, seen: self.fields.1 };
        ResponseHead { status: self.status, version: self.version, headers }
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
        let mut head = p.bind(Bytes::copy_from_slice(&raw[..len])).expect("a path");
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
        assert_eq!(out, b"x-host: gw\r\nA2A-Sender-ID: did:web:gw.example\r\n", "a set field keeps its place");
        assert_eq!(h.to_header_map().len(), 2);
    }

    #[test]
    fn every_connection_field_and_every_name_left_out_is_left_out_in_any_case() {
        let mut raw = b"POST / HTTP/1.1\r\n".to_vec();
        for n in crate::h1::HOP_BY_HOP.iter().chain(&["a2a-forwarded-sender", "x-kept", "x-upgrade"]) {
            raw.extend_from_slice(n.to_ascii_uppercase().as_bytes());
            raw.extend_from_slice(b": v\r\n");
        }
        raw.extend_from_slice(b"\r\n");
        let p = parse_request(&raw, 64).expect("valid").expect("complete");
        let h = p.bind(Bytes::from(raw)).expect("a path").headers;
        let mut out = Vec::new();
        h.write_except(&mut out, &["a2a-forwarded-sender"]);
        assert_eq!(String::from_utf8(out).expect("ascii"), "X-KEPT: v\r\nX-UPGRADE: v\r\n");
    }

    #[test]
    fn fields_written_on_are_the_received_lines_minus_connection_fields() {
        let raw = b"POST / HTTP/1.1\r\nHost: a\r\nX-A:  1 \r\nContent-Length: 2\r\nX-B: 2\r\nX-C: 3\nConnection: close\r\nX-D: 4\r\n\r\n";
        let p = parse_request(raw, 64).expect("valid").expect("complete");
        let mut h = p.bind(Bytes::copy_from_slice(raw)).expect("a path").headers;
        h.insert("x-b", Bytes::from_static(b"two"));
        let mut out = Vec::new();
        h.write_except(&mut out, &["x-d"]);
        // X-A without its optional whitespace; X-B set by the gateway; X-C's bare LF written as CRLF.
        assert_eq!(String::from_utf8(out).expect("ascii"), "X-A: 1\r\nX-B: two\r\nX-C: 3\r\n");
        // Lines received whole are copied as one run.
        let raw = b"GET / HTTP/1.1\r\nA: 1\r\nB: 2\r\nHost: x\r\nC: 3\r\n\r\n";
        let p = parse_request(raw, 64).expect("valid").expect("complete");
        let h = p.bind(Bytes::copy_from_slice(raw)).expect("a path").headers;
        let mut out = Vec::new();
        h.write_except(&mut out, &[]);
        assert_eq!(out, b"A: 1\r\nB: 2\r\nC: 3\r\n");
    }

    #[test]
    fn partial_heads_wait_and_bad_ones_are_refused() {
        assert!(parse_request(b"GET /a2a HTTP/1.1\r\nHost: x\r\n", 64).expect("valid").is_none());
        assert!(matches!(
            parse_request(b"GET /a2a HTTP/1.1\r\nBad Header: x\r\n\r\n", 64),
            Err(HeadError::Malformed(_))
        ));
        assert!(matches!(parse_request(b"CONNECT x:443 HTTP/1.1\r\n\r\n", 64), Err(HeadError::Malformed(_))));
        for (raw, target) in [
            (&b"GET http://gw.example:8080/a2a/x?y=1 HTTP/1.1\r\n\r\n"[..], "/a2a/x?y=1"),
            (b"GET HTTPS://gw.example HTTP/1.1\r\n\r\n", "/"),
            (b"GET http://evil.example?x=/a2a/capabilities HTTP/1.1\r\n\r\n", "/"),
            (b"GET http://evil.example#/a2a/capabilities HTTP/1.1\r\n\r\n", "/"),
            (b"GET http://u@evil.example:80?/a2a HTTP/1.1\r\n\r\n", "/"),
            (b"OPTIONS * HTTP/1.1\r\n\r\n", "*"),
        ] {
            let p = parse_request(raw, 8).expect("valid").expect("complete");
            let head = p.bind(Bytes::copy_from_slice(raw)).expect("a target");
            assert_eq!(head.target(), target);
        }
        assert!(matches!(parse_request(b"GET / HTTP/1.1\r\na: 1\r\nb: 2\r\n\r\n", 1), Err(HeadError::TooManyHeaders)));
        let v = b"GET / HTTP/1.1\r\nx: caf\xc3\xa9\r\n\r\n";
        let p = parse_request(v, 8).expect("obs-text is allowed").expect("complete");
        let head = p.bind(Bytes::copy_from_slice(v)).expect("a path");
        assert_eq!(head.headers.get_str("x"), Some(Err(())));
    }

    #[test]
    fn visible_ascii_is_exact() {
        let ok = |v: &[u8]| v.iter().all(|&b| b == b'\t' || (32..127).contains(&b));
        let mut seed = 0x1234_5678_9abc_def0u64;
        for len in 0..40 {
            for _ in 0..2000 {
                let v: Vec<u8> = (0..len)
                    .map(|_| {
                        seed ^= seed << 13;
                        seed ^= seed >> 7;
                        seed ^= seed << 17;
                        // Mostly visible ASCII, sometimes a tab, a control byte, DEL or a high byte.
                        match seed % 16 {
                            0 => [9u8, 0, 31, 127, 128, 255, 10][(seed >> 8) as usize % 7],
                            _ => 32 + (seed >> 8) as u8 % 95,
                        }
                    })
                    .collect();
                assert_eq!(visible_ascii(&v).is_some(), ok(&v), "{v:?}");
            }
        }
    }

    #[test]
    fn name_keys_ignore_case_and_tell_lengths_apart() {
        assert_eq!(name_key(b"Content-Length"), name_key(b"content-length"));
        assert_eq!(name_key(b"A2A-SENDER-ID"), name_key(b"a2a-sender-id"));
        assert_ne!(name_key(b"host"), name_key(b"hosts"));
        assert_eq!(name_key(b"Idempotency-Key"), name_key(b"idempotency-key"));
        assert_ne!(name_key(b"content-length"), name_key(b"content-lengtx"));
        // Beyond the key's bytes, only the length tells names apart: they are compared in full.
        assert_eq!(name_key(b"a2a-negotiation-id"), name_key(b"a2a-negotiation-XX"));
        assert_ne!(name_key(b"a@z["), name_key(b"a`z{"));
        for b in 0u8..=255 {
            let k = name_key(&[b]);
            assert_eq!(k & 0xff, u128::from(b.to_ascii_lowercase()), "byte {b}");
        }
    }

    #[test]
    fn answers_are_parsed() {
        let raw = b"HTTP/1.1 201 Created\r\nContent-Length: 2\r\nA2A-Execution-ID: e1\r\n\r\n{}";
        let p = parse_response(raw).expect("valid").expect("complete");
        let len = p.len;
        let head = p.bind(Bytes::copy_from_slice(&raw[..len]));
        assert_eq!(head.status, 201);
        assert_eq!(head.headers.get("a2a-execution-id"), Some(&b"e1"[..]));
        assert_eq!(head.headers.get("content-length"), Some(&b"2"[..]));
    }
}
