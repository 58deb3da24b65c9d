//! How a message's body is delimited (RFC 9112 §6), and the chunked coding, as pure functions over buffers: the
//! connections read bytes into a buffer and these say what part of it is body.

use bytes::{Bytes, BytesMut};

use super::head::Headers;

/// How a body is delimited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    /// No body.
    Empty,
    /// `Content-Length` bytes.
    Length(u64),
    /// The chunked transfer coding.
    Chunked,
    /// Until the connection closes (answers only).
    Close,
}

/// Why a message's framing is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FramingError {
    /// A transfer coding other than `chunked` (`501`).
    UnsupportedCoding(String),
    /// Contradictory or invalid framing (`400`): both `Content-Length` and `Transfer-Encoding`, two different
    /// lengths, a length that is not a number, `Transfer-Encoding` in HTTP/1.0 or not ending with `chunked`.
    Invalid(&'static str),
}

fn content_length(h: &Headers) -> Result<Option<u64>, FramingError> {
    let mut found: Option<u64> = None;
    let mut values = h.get_all("content-length");
    let Some(first) = values.next() else { return Ok(None) };
    // The usual case: one value of a few digits.
    if (1..=19).contains(&first.len()) && first.iter().all(u8::is_ascii_digit) {
        let mut n = 0u64;
        for &b in first {
            n = n * 10 + u64::from(b - b'0');
        }
        if values.next().is_none() {
            return Ok(Some(n));
        }
    }
    for v in h.get_all("content-length") {
        // A list of equal values (`5, 5`) is the same length (RFC 9110 §8.6); anything else is an error.
        for part in v.split(|&b| b == b',') {
            let part = part.trim_ascii();
            if part.is_empty() || part.len() > 19 {
                return Err(FramingError::Invalid("Content-Length is not a number"));
            }
            // At most 19 digits: no overflow.
            let mut n: u64 = 0;
            for &b in part {
                if !b.is_ascii_digit() {
                    return Err(FramingError::Invalid("Content-Length is not a number"));
                }
                n = n * 10 + u64::from(b - b'0');
            }
            if found.is_some_and(|f| f != n) {
                return Err(FramingError::Invalid("two different Content-Length values"));
            }
            found = Some(n);
        }
    }
    Ok(found)
}

/// Whether the message is chunked; `Err` for any other coding, `chunked` not last, or a `Transfer-Encoding` field that
/// names no coding at all (empty, or only commas).
fn chunked(h: &Headers) -> Result<bool, FramingError> {
    let mut present = false;
    let mut codings: Vec<&[u8]> = Vec::new();
    for v in h.get_all("transfer-encoding") {
        present = true;
        for coding in v.split(|&b| b == b',') {
            let coding = coding.trim_ascii();
            if !coding.is_empty() {
                codings.push(coding);
            }
        }
    }
    if !present {
        return Ok(false);
    }
    // GW-20: a field that is there but names nothing is not "no field": two hops could disagree on whether the
    // message is chunked, so it is refused rather than read as absent.
    let Some(last) = codings.last() else {
        return Err(FramingError::Invalid("a Transfer-Encoding that names no coding"));
    };
    // RFC 9112 §6.3: chunked not last (or not at all) leaves the length unknown: 400 whatever the other codings are.
    if !last.eq_ignore_ascii_case(b"chunked") {
        return Err(FramingError::Invalid("chunked is not the final transfer coding"));
    }
    let rest = &codings[..codings.len() - 1];
    if rest.iter().any(|c| c.eq_ignore_ascii_case(b"chunked")) {
        return Err(FramingError::Invalid("chunked applied twice"));
    }
    // RFC 9112 §6.1: a coding the server does not implement under a final chunked: 501.
    if let Some(other) = rest.first() {
        return Err(FramingError::UnsupportedCoding(String::from_utf8_lossy(other).into_owned()));
    }
    Ok(true)
}

/// The framing of a request's body (RFC 9112 §6.3): `Transfer-Encoding: chunked`, `Content-Length`, or none.
pub fn request_framing(h: &Headers, version: u8) -> Result<Framing, FramingError> {
    let te = chunked(h)?;
    let cl = content_length(h)?;
    match (te, cl) {
        (true, Some(_)) => Err(FramingError::Invalid("both Transfer-Encoding and Content-Length")),
        (true, None) if version == 0 => Err(FramingError::Invalid("Transfer-Encoding in an HTTP/1.0 request")),
        (true, None) => Ok(Framing::Chunked),
        (false, Some(0)) | (false, None) => Ok(Framing::Empty),
        (false, Some(n)) => Ok(Framing::Length(n)),
    }
}

/// The framing of an answer's body to a request that was not `HEAD` (RFC 9112 §6.3).
pub fn response_framing(status: u16, h: &Headers) -> Result<Framing, FramingError> {
    if (100..200).contains(&status) || status == 204 || status == 304 {
        return Ok(Framing::Empty);
    }
    let te = chunked(h).map_err(|e| match e {
        // An answer with another coding cannot be delimited except by its close.
        FramingError::UnsupportedCoding(_) => FramingError::Invalid("an unsupported transfer coding"),
        other => other,
    })?;
    if te {
        // Transfer-Encoding overrides Content-Length in an answer (RFC 9112 §6.3, 3).
        return Ok(Framing::Chunked);
    }
    Ok(match content_length(h)? {
        Some(0) => Framing::Empty,
        Some(n) => Framing::Length(n),
        None => Framing::Close,
    })
}

/// Why a chunked body could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChunkError(pub &'static str);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Size,
    Data(u64),
    DataEnd,
    Trailer,
    Done,
}

/// An incremental decoder of the chunked coding.
#[derive(Debug)]
pub struct Chunked {
    state: State,
    /// Bytes of chunk-size lines and trailers read so far (bounded: [`MAX_LINES`]).
    overhead: usize,
}

/// Bytes of chunk-size lines, extensions and trailer fields a body may have in all.
pub const MAX_LINES: usize = 64 * 1024;

/// What [`Chunked::decode`] found.
#[derive(Debug, PartialEq, Eq)]
pub enum Decoded {
    /// Body data.
    Data(Bytes),
    /// More bytes are needed.
    NeedMore,
    /// The body ended (its trailers were read and dropped).
    End,
}

impl Default for Chunked {
    fn default() -> Self {
        Chunked { state: State::Size, overhead: 0 }
    }
}

impl Chunked {
    /// Decodes from the start of `buf`, taking the bytes it used.
    pub fn decode(&mut self, buf: &mut BytesMut) -> Result<Decoded, ChunkError> {
        loop {
            match self.state {
                State::Done => return Ok(Decoded::End),
                State::Size => match chunk_size_line(buf)? {
                    Some((used, size)) => {
                        self.account(used)?;
                        let _ = buf.split_to(used);
                        self.state = if size == 0 { State::Trailer } else { State::Data(size) };
                    }
                    None => {
                        if buf.len() > 1024 {
                            return Err(ChunkError("a chunk-size line longer than 1 KiB"));
                        }
                        return Ok(Decoded::NeedMore);
                    }
                },
                State::Data(left) => {
                    if buf.is_empty() {
                        return Ok(Decoded::NeedMore);
                    }
                    let n = (buf.len() as u64).min(left) as usize;
                    let data = buf.split_to(n).freeze();
                    self.state = if left == n as u64 { State::DataEnd } else { State::Data(left - n as u64) };
                    return Ok(Decoded::Data(data));
                }
                State::DataEnd => {
                    if buf.len() < 2 {
                        return Ok(Decoded::NeedMore);
                    }
                    if &buf[..2] != b"\r\n" {
                        return Err(ChunkError("a chunk not followed by CRLF"));
                    }
                    let _ = buf.split_to(2);
                    self.state = State::Size;
                }
                State::Trailer => {
                    let Some(end) = line_end(buf)? else {
                        self.account(0)?;
                        if buf.len() > MAX_LINES {
                            return Err(ChunkError("trailer fields too large"));
                        }
                        return Ok(Decoded::NeedMore);
                    };
                    self.account(end + 2)?;
                    let _ = buf.split_to(end + 2);
                    if end == 0 {
                        self.state = State::Done;
                    }
                }
            }
        }
    }

    fn account(&mut self, n: usize) -> Result<(), ChunkError> {
        self.overhead += n;
        if self.overhead > MAX_LINES {
            return Err(ChunkError("chunk-size lines and trailers over 64 KiB"));
        }
        Ok(())
    }

    /// Whether the body has ended.
    pub fn is_done(&self) -> bool {
        self.state == State::Done
    }
}

/// Where the line at the start of `buf` ends (the index of its CR), `None` when no line end has come yet. GW-20: a
/// line ends in CRLF only; a bare LF, a CR not followed by LF, or any other control byte but HTAB in the line is an
/// error (RFC 9112 §7.1, §2.2: a recipient that reads a bare LF as a line end would split the body differently from
/// one that does not).
fn line_end(buf: &[u8]) -> Result<Option<usize>, ChunkError> {
    for (i, &b) in buf.iter().enumerate() {
        match b {
            b'\r' => {
                return match buf.get(i + 1) {
                    None => Ok(None),
                    Some(b'\n') => Ok(Some(i)),
                    Some(_) => Err(ChunkError("a CR not followed by LF in a chunk-size or trailer line")),
                };
            }
            b'\n' => return Err(ChunkError("a bare LF ends a chunk-size or trailer line (CRLF is required)")),
            b'\t' => {}
            0..=31 | 127 => return Err(ChunkError("a control character in a chunk-size or trailer line")),
            _ => {}
        }
    }
    Ok(None)
}

/// Reads a chunk-size line (RFC 9112 §7.1: `chunk-size [ chunk-ext ] CRLF`, `chunk-size = 1*HEXDIG`): the bytes it
/// takes and the size, `None` when the line has not ended yet. At least one hex digit; at most 16 (a size that fits
/// 64 bits); then optional whitespace and extensions, which start with `;` (their content is ignored but may hold no
/// control byte, [`line_end`]).
fn chunk_size_line(buf: &[u8]) -> Result<Option<(usize, u64)>, ChunkError> {
    let digits = buf.iter().take_while(|b| b.is_ascii_hexdigit()).count();
    if digits > 16 {
        return Err(ChunkError("a chunk size over 16 hex digits"));
    }
    if digits == buf.len() {
        return Ok(None);
    }
    if digits == 0 {
        return Err(ChunkError("a chunk-size line without a hex digit"));
    }
    let mut i = digits;
    while i < buf.len() && (buf[i] == b' ' || buf[i] == b'\t') {
        i += 1;
    }
    match buf.get(i) {
        None => return Ok(None),
        Some(b';' | b'\r') => {}
        Some(b'\n') => return Err(ChunkError("a bare LF ends a chunk-size line (CRLF is required)")),
        Some(_) => return Err(ChunkError("an invalid chunk size")),
    }
    let Some(end) = line_end(&buf[i..])? else { return Ok(None) };
    let mut size = 0u64;
    for &b in &buf[..digits] {
        size = (size << 4) | u64::from((b as char).to_digit(16).unwrap_or(0));
    }
    Ok(Some((i + end + 2, size)))
}

/// Appends one chunk of the chunked coding (`data` must not be empty: an empty chunk ends the body).
pub fn encode_chunk(out: &mut Vec<u8>, data: &[u8]) {
    use std::io::Write;
    let _ = write!(out, "{:x}\r\n", data.len());
    out.extend_from_slice(data);
    out.extend_from_slice(b"\r\n");
}

/// The last chunk, with no trailers.
pub const LAST_CHUNK: &[u8] = b"0\r\n\r\n";

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(raw: &str) -> Headers {
        let text = format!("GET / HTTP/1.1\r\n{raw}\r\n");
        let p = super::super::head::parse_request(text.as_bytes(), 64).expect("valid").expect("complete");
        p.bind(Bytes::copy_from_slice(text.as_bytes())).expect("a path").headers
    }

    #[test]
    fn request_framing_follows_rfc_9112() {
        assert_eq!(request_framing(&headers(""), 1), Ok(Framing::Empty));
        assert_eq!(request_framing(&headers("Content-Length: 12\r\n"), 1), Ok(Framing::Length(12)));
        assert_eq!(request_framing(&headers("Content-Length: 5, 5\r\n"), 1), Ok(Framing::Length(5)));
        assert_eq!(request_framing(&headers("Transfer-Encoding: chunked\r\n"), 1), Ok(Framing::Chunked));
        assert!(matches!(
            request_framing(&headers("Content-Length: 5\r\nContent-Length: 6\r\n"), 1),
            Err(FramingError::Invalid(_))
        ));
        assert!(matches!(request_framing(&headers("Content-Length: -1\r\n"), 1), Err(FramingError::Invalid(_))));
        assert!(matches!(request_framing(&headers("Content-Length: +5\r\n"), 1), Err(FramingError::Invalid(_))));
        assert!(matches!(
            request_framing(&headers("Transfer-Encoding: chunked\r\nContent-Length: 5\r\n"), 1),
            Err(FramingError::Invalid(_))
        ));
        assert!(matches!(
            request_framing(&headers("Transfer-Encoding: gzip, chunked\r\n"), 1),
            Err(FramingError::UnsupportedCoding(_))
        ));
        assert!(matches!(
            request_framing(&headers("Transfer-Encoding: chunked\r\n"), 0),
            Err(FramingError::Invalid(_))
        ));
    }

    #[test]
    fn response_framing_follows_rfc_9112() {
        assert_eq!(response_framing(204, &headers("Content-Length: 3\r\n")), Ok(Framing::Empty));
        assert_eq!(response_framing(200, &headers("")), Ok(Framing::Close));
        assert_eq!(
            response_framing(200, &headers("Transfer-Encoding: chunked\r\nContent-Length: 3\r\n")),
            Ok(Framing::Chunked)
        );
        assert_eq!(response_framing(200, &headers("Content-Length: 0\r\n")), Ok(Framing::Empty));
    }

    #[test]
    fn chunked_bodies_decode_in_any_split() {
        let raw = b"4;ext=1\r\nWiki\r\n5\r\npedia\r\n0\r\nTrailer: x\r\n\r\nNEXT";
        for split in 0..raw.len() {
            let mut dec = Chunked::default();
            let mut buf = BytesMut::from(&raw[..split]);
            let mut body = Vec::new();
            let mut fed = split;
            loop {
                match dec.decode(&mut buf).expect("valid") {
                    Decoded::Data(d) => body.extend_from_slice(&d),
                    Decoded::NeedMore => {
                        assert!(fed < raw.len(), "ran out at split {split}");
                        buf.extend_from_slice(&raw[fed..fed + 1]);
                        fed += 1;
                    }
                    Decoded::End => break,
                }
            }
            assert_eq!(body, b"Wikipedia");
            // What follows the body is left for the next message.
            let mut rest = buf.to_vec();
            rest.extend_from_slice(&raw[fed..]);
            assert_eq!(rest, b"NEXT", "split {split}");
        }
    }

    #[test]
    fn bad_chunks_are_refused() {
        let mut dec = Chunked::default();
        assert!(dec.decode(&mut BytesMut::from(&b"zz\r\n"[..])).is_err());
        let mut dec = Chunked::default();
        let mut buf = BytesMut::from(&b"2\r\nabXY"[..]);
        assert_eq!(dec.decode(&mut buf), Ok(Decoded::Data(Bytes::from_static(b"ab"))));
        assert!(dec.decode(&mut buf).is_err());
        let mut dec = Chunked::default();
        assert!(dec.decode(&mut BytesMut::from(&[b'1'; 2000][..])).is_err());
        let mut out = Vec::new();
        encode_chunk(&mut out, b"hello");
        assert_eq!(out, b"5\r\nhello\r\n");
    }
}
