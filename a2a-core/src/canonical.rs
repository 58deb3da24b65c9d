//! RFC 8785 JSON Canonicalization Scheme (JCS) (`spec/PROTOCOL.md`, requirements `JCS-*`).
//!
//! [`canonicalize`] is a strict, single-pass implementation that works directly on the bytes of a JSON text: it checks the
//! input against RFC 8259 and the I-JSON restrictions of RFC 7493 and writes the canonical form as it goes, without
//! building a tree. Only the members of each object are buffered, to be put in order when the object closes.
//!
//! The canonical form (RFC 8785 §3.2):
//!
//! - no whitespace between tokens;
//! - `null`, `true`, `false` as they are;
//! - numbers parsed as IEEE-754 doubles and written as ECMAScript's `Number.prototype.toString` writes them
//!   (`1E2` -> `100`, `1.0` -> `1`, `1e21` -> `1e+21`, `-0` -> `0`);
//! - strings with only `\"`, `\\`, `\b`, `\f`, `\n`, `\r`, `\t` and `\u00xx` (lower-case hex, other controls below
//!   U+0020) escaped; everything else, including `/`, DEL, U+2028, U+2029 and all non-ASCII, as literal UTF-8;
//! - object members sorted by their names compared as arrays of UTF-16 code units.
//!
//! ```
//! use a2a_core::canonical::canonicalize;
//!
//! let out = canonicalize(br#"{ "b": [1.0, 1E2, "\u00e9"], "a": -0 }"#).expect("valid I-JSON");
//! assert_eq!(out, r#"{"a":0,"b":[1,100,"é"]}"#.as_bytes());
//! ```
//!
//! Inputs that are not I-JSON are refused with a [`CanonicalError`] naming a stable [`Reason`] and the byte offset;
//! a receiver answers them with the protocol error [`ErrorCode::INVALID_JSON`].

use std::cmp::Ordering;
use std::fmt;

use serde_json::Value;

use crate::error::ErrorCode;

/// The deepest nesting of arrays and objects accepted by [`canonicalize`]: 128 open brackets are accepted, 129 are not.
pub const MAX_DEPTH: usize = 128;

/// Why a JSON text cannot be canonicalized: a stable, machine-readable reason.
///
/// [`Reason::as_str`] gives the snake_case name used in logs and in the test vectors (`spec/vectors/canonical_json.json`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Reason {
    /// The input is empty or only whitespace.
    EmptyInput,
    /// The input ends inside a value.
    UnexpectedEnd,
    /// A byte that the JSON grammar does not allow at this place (including a byte order mark).
    UnexpectedCharacter,
    /// A misspelt `true`, `false` or `null` (e.g. `True`, `nul`).
    InvalidLiteral,
    /// A number that breaks the RFC 8259 grammar (`+1`, `.5`, `1.`, `1e`, `-`).
    InvalidNumber,
    /// A number with a superfluous leading zero (`01`, `-00.5`).
    LeadingZero,
    /// `NaN`, `Infinity` or `-Infinity`, which JSON does not have.
    NonFiniteNumber,
    /// A number whose magnitude is too large for an IEEE-754 double (`1e400`).
    NumberOutOfRange,
    /// Bytes that are not well-formed UTF-8 (including encoded surrogates and overlong forms).
    InvalidUtf8,
    /// A control character (below U+0020) written unescaped inside a string.
    ControlCharacter,
    /// A backslash escape that JSON does not define (`\x`, `\'`, `\u12G4`).
    InvalidEscape,
    /// A `\u` escape of a surrogate that is not part of a high-low pair.
    LoneSurrogate,
    /// Two members of one object have the same name (compared after unescaping).
    DuplicateKey,
    /// A comma before `]` or `}`.
    TrailingComma,
    /// Something other than whitespace after the value.
    TrailingData,
    /// Arrays and objects nested deeper than [`MAX_DEPTH`].
    TooDeep,
}

impl Reason {
    /// Every reason, in declaration order.
    pub const ALL: &'static [Reason] = &[
        Reason::EmptyInput,
        Reason::UnexpectedEnd,
        Reason::UnexpectedCharacter,
        Reason::InvalidLiteral,
        Reason::InvalidNumber,
        Reason::LeadingZero,
        Reason::NonFiniteNumber,
        Reason::NumberOutOfRange,
        Reason::InvalidUtf8,
        Reason::ControlCharacter,
        Reason::InvalidEscape,
        Reason::LoneSurrogate,
        Reason::DuplicateKey,
        Reason::TrailingComma,
        Reason::TrailingData,
        Reason::TooDeep,
    ];

    /// The stable snake_case name, e.g. `duplicate_key`.
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::EmptyInput => "empty_input",
            Reason::UnexpectedEnd => "unexpected_end",
            Reason::UnexpectedCharacter => "unexpected_character",
            Reason::InvalidLiteral => "invalid_literal",
            Reason::InvalidNumber => "invalid_number",
            Reason::LeadingZero => "leading_zero",
            Reason::NonFiniteNumber => "non_finite_number",
            Reason::NumberOutOfRange => "number_out_of_range",
            Reason::InvalidUtf8 => "invalid_utf8",
            Reason::ControlCharacter => "control_character",
            Reason::InvalidEscape => "invalid_escape",
            Reason::LoneSurrogate => "lone_surrogate",
            Reason::DuplicateKey => "duplicate_key",
            Reason::TrailingComma => "trailing_comma",
            Reason::TrailingData => "trailing_data",
            Reason::TooDeep => "too_deep",
        }
    }

    /// A human explanation of the reason.
    pub fn message(self) -> &'static str {
        match self {
            Reason::EmptyInput => "the input is empty",
            Reason::UnexpectedEnd => "the input ends inside a value",
            Reason::UnexpectedCharacter => "unexpected character",
            Reason::InvalidLiteral => "invalid literal (expected true, false or null)",
            Reason::InvalidNumber => "invalid number",
            Reason::LeadingZero => "number with a leading zero",
            Reason::NonFiniteNumber => "NaN and Infinity are not JSON numbers",
            Reason::NumberOutOfRange => "number too large for an IEEE-754 double",
            Reason::InvalidUtf8 => "invalid UTF-8",
            Reason::ControlCharacter => "unescaped control character in a string",
            Reason::InvalidEscape => "invalid escape sequence",
            Reason::LoneSurrogate => "lone surrogate in a \\u escape",
            Reason::DuplicateKey => "duplicate member name",
            Reason::TrailingComma => "trailing comma",
            Reason::TrailingData => "data after the JSON value",
            Reason::TooDeep => "arrays and objects nested deeper than 128 levels",
        }
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a JSON text cannot be canonicalized, and where.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, thiserror::Error)]
#[error("cannot canonicalize JSON: {} ({reason}) at byte {offset}", reason.message())]
pub struct CanonicalError {
    /// The stable reason.
    pub reason: Reason,
    /// The byte offset in the input where the fault was found (for [`Reason::DuplicateKey`], the opening quote of the
    /// second occurrence of the name; for [`Reason::UnexpectedEnd`], the input's length).
    pub offset: usize,
}

impl CanonicalError {
    /// The protocol error a receiver answers with: always [`ErrorCode::INVALID_JSON`].
    pub fn code(&self) -> ErrorCode {
        ErrorCode::INVALID_JSON
    }
}

impl From<CanonicalError> for crate::error::A2aError {
    /// `invalid_json` with the reason and offset in `details`: `{"reason": "duplicate_key", "offset": 13}` (JCS-11).
    fn from(e: CanonicalError) -> Self {
        crate::error::A2aError::with_message(e.code(), e.to_string())
            .details(serde_json::json!({"reason": e.reason.as_str(), "offset": e.offset}))
    }
}

/// Parses the JSON text `json` and returns its RFC 8785 canonical form.
///
/// The input must be UTF-8 I-JSON (RFC 7493); see [`Reason`] for everything that is refused.
pub fn canonicalize(json: &[u8]) -> Result<Vec<u8>, CanonicalError> {
    let mut out = Vec::with_capacity(json.len());
    canonicalize_into(json, &mut out)?;
    Ok(out)
}

/// Like [`canonicalize`], appending the canonical form to `out`. On error `out` is left as it was.
pub fn canonicalize_into(json: &[u8], out: &mut Vec<u8>) -> Result<(), CanonicalError> {
    let start = out.len();
    let result = Parser { src: json, pos: 0, out, keys: Vec::new(), members: Vec::new(), tmp: Vec::new() }.document();
    if result.is_err() {
        out.truncate(start);
    }
    result
}

/// The RFC 8785 canonical form of a JSON value.
///
/// A `serde_json::Value` is always canonicalizable: its strings are valid Unicode and its numbers finite. Object member
/// names are unique by construction. Numbers are taken as IEEE-754 doubles (`u64`/`i64` beyond 2^53 are rounded).
pub fn to_canonical_vec(value: &Value) -> Vec<u8> {
    let mut out = Vec::with_capacity(256);
    write_canonical(value, &mut out);
    out
}

/// Appends the RFC 8785 canonical form of `value` to `out`.
pub fn write_canonical(value: &Value, out: &mut Vec<u8>) {
    match value {
        Value::Null => out.extend_from_slice(b"null"),
        Value::Bool(true) => out.extend_from_slice(b"true"),
        Value::Bool(false) => out.extend_from_slice(b"false"),
        Value::Number(n) => match n.as_f64() {
            Some(f) => write_f64(f, out),
            // Only reachable with serde_json's `arbitrary_precision`; ECMAScript writes a non-finite number as null.
            None => out.extend_from_slice(b"null"),
        },
        Value::String(s) => write_str(s.as_bytes(), out),
        Value::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_canonical(item, out);
            }
            out.push(b']');
        }
        Value::Object(map) => {
            out.push(b'{');
            let in_order = {
                let mut keys = map.keys();
                let mut prev = keys.next();
                keys.all(|k| {
                    let ok = prev.is_none_or(|p| utf16_cmp(p.as_bytes(), k.as_bytes()) == Ordering::Less);
                    prev = Some(k);
                    ok
                })
            };
            if in_order {
                for (i, (k, v)) in map.iter().enumerate() {
                    write_member(i, k, v, out);
                }
            } else {
                let mut members: Vec<(&String, &Value)> = map.iter().collect();
                members.sort_unstable_by(|a, b| utf16_cmp(a.0.as_bytes(), b.0.as_bytes()));
                for (i, (k, v)) in members.into_iter().enumerate() {
                    write_member(i, k, v, out);
                }
            }
            out.push(b'}');
        }
    }
}

fn write_member(i: usize, key: &str, value: &Value, out: &mut Vec<u8>) {
    if i > 0 {
        out.push(b',');
    }
    write_str(key.as_bytes(), out);
    out.push(b':');
    write_canonical(value, out);
}

/// Writes a finite double as ECMAScript's `Number.prototype.toString` does (RFC 8785 §3.2.2.3); zero, either sign, is `0`.
fn write_f64(f: f64, out: &mut Vec<u8>) {
    if f == 0.0 {
        out.push(b'0');
    } else if f.is_finite() {
        let mut buf = ryu_js::Buffer::new();
        out.extend_from_slice(buf.format_finite(f).as_bytes());
    } else {
        out.extend_from_slice(b"null");
    }
}

/// Bytes that end a run of string content that is copied as it is: `"`, `\` and the controls below 0x20.
static STRING_SPECIAL: [bool; 256] = {
    let mut t = [false; 256];
    let mut i = 0;
    while i < 0x20 {
        t[i] = true;
        i += 1;
    }
    t[b'"' as usize] = true;
    t[b'\\' as usize] = true;
    t
};

fn is_string_special(b: u8) -> bool {
    // A `u8` always indexes a 256-entry table.
    STRING_SPECIAL[usize::from(b)]
}

/// Writes a string (given as valid UTF-8) with RFC 8785 §3.2.2.2 escaping.
fn write_str(s: &[u8], out: &mut Vec<u8>) {
    out.push(b'"');
    let mut run = 0;
    for (i, &b) in s.iter().enumerate() {
        if is_string_special(b) {
            if let Some(plain) = s.get(run..i) {
                out.extend_from_slice(plain);
            }
            write_escaped_ascii(b, out);
            run = i + 1;
        }
    }
    if let Some(plain) = s.get(run..) {
        out.extend_from_slice(plain);
    }
    out.push(b'"');
}

/// Writes one character that needs escaping or is plain, as the canonical form requires.
fn write_char(c: char, out: &mut Vec<u8>) {
    match u8::try_from(c) {
        Ok(b) if is_string_special(b) => write_escaped_ascii(b, out),
        _ => {
            let mut buf = [0u8; 4];
            out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
        }
    }
}

/// Writes `"`, `\` or a control character in its canonical escaped form.
fn write_escaped_ascii(b: u8, out: &mut Vec<u8>) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    match b {
        b'"' => out.extend_from_slice(b"\\\""),
        b'\\' => out.extend_from_slice(b"\\\\"),
        0x08 => out.extend_from_slice(b"\\b"),
        0x0c => out.extend_from_slice(b"\\f"),
        b'\n' => out.extend_from_slice(b"\\n"),
        b'\r' => out.extend_from_slice(b"\\r"),
        b'\t' => out.extend_from_slice(b"\\t"),
        _ => {
            // Controls only (below 0x20): the high nibble is 0 or 1, the low one below 16.
            let hi = HEX.get(usize::from(b >> 4)).copied().unwrap_or(b'0');
            let lo = HEX.get(usize::from(b & 0x0f)).copied().unwrap_or(b'0');
            out.extend_from_slice(&[b'\\', b'u', b'0', b'0', hi, lo]);
        }
    }
}

/// Compares two UTF-8 strings as arrays of UTF-16 code units (RFC 8785 §3.2.3), without transcoding.
///
/// UTF-8 byte order is code point order; it differs from UTF-16 order only between U+E000..U+FFFF (UTF-8 lead bytes
/// 0xEE, 0xEF) and the supplementary planes (lead bytes 0xF0..0xF4, UTF-16 surrogates 0xD800..0xDFFF, which sort first).
/// Two strings that agree up to a byte are at the same place of the same character, so only the first differing byte
/// matters.
fn utf16_cmp(a: &[u8], b: &[u8]) -> Ordering {
    let first_difference = a.iter().zip(b).position(|(x, y)| x != y);
    match first_difference.and_then(|i| Some((*a.get(i)?, *b.get(i)?))) {
        Some((x, y)) => {
            let bmp_high = |c: u8| (0xee..=0xef).contains(&c);
            let supplementary = |c: u8| c >= 0xf0;
            if bmp_high(x) && supplementary(y) {
                Ordering::Greater
            } else if supplementary(x) && bmp_high(y) {
                Ordering::Less
            } else {
                x.cmp(&y)
            }
        }
        None => a.len().cmp(&b.len()),
    }
}

/// One member of an object being parsed.
struct Member {
    /// The unescaped name, as a range of `Parser::keys`.
    key_start: usize,
    key_end: usize,
    /// The offset of the name's opening quote in the input.
    at: usize,
    /// The canonical `"name":value` bytes, as a range of the output.
    start: usize,
    end: usize,
}

struct Parser<'s, 'o> {
    src: &'s [u8],
    pos: usize,
    out: &'o mut Vec<u8>,
    /// The unescaped names of the members of every open object, innermost last.
    keys: Vec<u8>,
    /// The members of every open object, innermost last.
    members: Vec<Member>,
    /// Scratch space to reorder an object's members.
    tmp: Vec<u8>,
}

fn fail<T>(reason: Reason, offset: usize) -> Result<T, CanonicalError> {
    Err(CanonicalError { reason, offset })
}

impl<'s> Parser<'s, '_> {
    fn peek(&self) -> Option<u8> {
        self.src.get(self.pos).copied()
    }

    fn rest(&self) -> &'s [u8] {
        self.src.get(self.pos..).unwrap_or_default()
    }

    fn skip_ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.peek() {
            self.pos += 1;
        }
    }

    /// The error for a byte that cannot appear here: the end of the input, or an unexpected character.
    fn unexpected<T>(&self) -> Result<T, CanonicalError> {
        match self.peek() {
            None => fail(Reason::UnexpectedEnd, self.pos),
            Some(_) => fail(Reason::UnexpectedCharacter, self.pos),
        }
    }

    fn document(&mut self) -> Result<(), CanonicalError> {
        self.skip_ws();
        if self.peek().is_none() {
            return fail(Reason::EmptyInput, self.pos);
        }
        self.value(0)?;
        self.skip_ws();
        if self.peek().is_some() {
            return fail(Reason::TrailingData, self.pos);
        }
        Ok(())
    }

    /// Parses a value at `depth` open containers.
    fn value(&mut self, depth: usize) -> Result<(), CanonicalError> {
        match self.peek() {
            None => fail(Reason::UnexpectedEnd, self.pos),
            Some(b'{') => self.object(depth + 1),
            Some(b'[') => self.array(depth + 1),
            Some(b'"') => self.string(false),
            Some(b'-' | b'0'..=b'9') => self.number(),
            Some(b't') => self.literal(b"true"),
            Some(b'f') => self.literal(b"false"),
            Some(b'n') => self.literal(b"null"),
            Some(b'N' | b'I') if self.rest().starts_with(b"NaN") || self.rest().starts_with(b"Infinity") => {
                fail(Reason::NonFiniteNumber, self.pos)
            }
            Some(b'+') if self.rest().starts_with(b"+Infinity") => fail(Reason::NonFiniteNumber, self.pos),
            Some(b'+' | b'.') => fail(Reason::InvalidNumber, self.pos),
            Some(_) => fail(Reason::UnexpectedCharacter, self.pos),
        }
    }

    fn literal(&mut self, lit: &'static [u8]) -> Result<(), CanonicalError> {
        let rest = self.rest();
        if rest.starts_with(lit) {
            self.pos += lit.len();
            self.out.extend_from_slice(lit);
            Ok(())
        } else if lit.starts_with(rest) {
            fail(Reason::UnexpectedEnd, self.src.len())
        } else {
            fail(Reason::InvalidLiteral, self.pos)
        }
    }

    fn array(&mut self, depth: usize) -> Result<(), CanonicalError> {
        if depth > MAX_DEPTH {
            return fail(Reason::TooDeep, self.pos);
        }
        self.pos += 1;
        self.out.push(b'[');
        self.skip_ws();
        if self.peek() == Some(b']') {
            self.pos += 1;
            self.out.push(b']');
            return Ok(());
        }
        loop {
            self.value(depth)?;
            self.skip_ws();
            match self.peek() {
                Some(b',') => {
                    let comma = self.pos;
                    self.pos += 1;
                    self.skip_ws();
                    if self.peek() == Some(b']') {
                        return fail(Reason::TrailingComma, comma);
                    }
                    self.out.push(b',');
                }
                Some(b']') => {
                    self.pos += 1;
                    self.out.push(b']');
                    return Ok(());
                }
                _ => return self.unexpected(),
            }
        }
    }

    fn object(&mut self, depth: usize) -> Result<(), CanonicalError> {
        if depth > MAX_DEPTH {
            return fail(Reason::TooDeep, self.pos);
        }
        self.pos += 1;
        self.out.push(b'{');
        let body_start = self.out.len();
        let members_base = self.members.len();
        let keys_base = self.keys.len();
        self.skip_ws();
        if self.peek() == Some(b'}') {
            self.pos += 1;
            self.out.push(b'}');
            return Ok(());
        }
        loop {
            if self.peek() != Some(b'"') {
                return self.unexpected();
            }
            let at = self.pos;
            let start = self.out.len();
            let key_start = self.keys.len();
            self.string(true)?;
            let key_end = self.keys.len();
            self.skip_ws();
            if self.peek() != Some(b':') {
                return self.unexpected();
            }
            self.pos += 1;
            self.out.push(b':');
            self.skip_ws();
            self.value(depth)?;
            self.members.push(Member { key_start, key_end, at, start, end: self.out.len() });
            self.skip_ws();
            match self.peek() {
                Some(b',') => {
                    let comma = self.pos;
                    self.pos += 1;
                    self.skip_ws();
                    if self.peek() == Some(b'}') {
                        return fail(Reason::TrailingComma, comma);
                    }
                    self.out.push(b',');
                }
                Some(b'}') => {
                    self.pos += 1;
                    break;
                }
                _ => return self.unexpected(),
            }
        }
        self.order_members(members_base, body_start)?;
        self.out.push(b'}');
        self.members.truncate(members_base);
        self.keys.truncate(keys_base);
        Ok(())
    }

    /// Puts the members of the object that just closed (`members[base..]`, written at `out[body_start..]`) in canonical
    /// order, refusing duplicate names.
    fn order_members(&mut self, base: usize, body_start: usize) -> Result<(), CanonicalError> {
        let keys = &self.keys;
        let name = |m: &Member| keys.get(m.key_start..m.key_end).unwrap_or_default();
        let members = self.members.get_mut(base..).unwrap_or_default();
        let strictly_ordered = members.windows(2).all(|w| match w {
            [a, b] => utf16_cmp(name(a), name(b)) == Ordering::Less,
            _ => true,
        });
        if strictly_ordered {
            return Ok(());
        }
        // The input offset breaks ties, so that duplicates end up adjacent in input order.
        members.sort_unstable_by(|a, b| utf16_cmp(name(a), name(b)).then(a.at.cmp(&b.at)));
        let duplicate = members
            .windows(2)
            .filter_map(|w| match w {
                [a, b] if name(a) == name(b) => Some(b.at),
                _ => None,
            })
            .min();
        if let Some(at) = duplicate {
            return fail(Reason::DuplicateKey, at);
        }
        self.tmp.clear();
        self.tmp.extend_from_slice(self.out.get(body_start..).unwrap_or_default());
        self.out.truncate(body_start);
        for (i, m) in members.iter().enumerate() {
            if i > 0 {
                self.out.push(b',');
            }
            if let Some(bytes) = self.tmp.get(m.start.saturating_sub(body_start)..m.end.saturating_sub(body_start)) {
                self.out.extend_from_slice(bytes);
            }
        }
        Ok(())
    }

    /// Parses a string at its opening quote and writes it canonically; a member name is also kept, unescaped, in `keys`.
    fn string(&mut self, is_key: bool) -> Result<(), CanonicalError> {
        self.pos += 1;
        self.out.push(b'"');
        loop {
            let run_start = self.pos;
            let rest = self.rest();
            let run_len = rest.iter().position(|&b| is_string_special(b)).unwrap_or(rest.len());
            let run = rest.get(..run_len).unwrap_or_default();
            self.pos += run_len;
            if !run.is_ascii()
                && let Err(e) = std::str::from_utf8(run)
            {
                return fail(Reason::InvalidUtf8, run_start + e.valid_up_to());
            }
            self.out.extend_from_slice(run);
            if is_key {
                self.keys.extend_from_slice(run);
            }
            match self.peek() {
                None => return fail(Reason::UnexpectedEnd, self.pos),
                Some(b'"') => {
                    self.pos += 1;
                    self.out.push(b'"');
                    return Ok(());
                }
                Some(b'\\') => {
                    let c = self.escape()?;
                    write_char(c, self.out);
                    if is_key {
                        let mut buf = [0u8; 4];
                        self.keys.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
                    }
                }
                Some(_) => return fail(Reason::ControlCharacter, self.pos),
            }
        }
    }

    /// Parses an escape sequence at its backslash and returns the character it stands for.
    fn escape(&mut self) -> Result<char, CanonicalError> {
        let at = self.pos;
        let simple = match self.src.get(at + 1) {
            None => return fail(Reason::UnexpectedEnd, self.src.len()),
            Some(b'u') => None,
            Some(b'"') => Some('"'),
            Some(b'\\') => Some('\\'),
            Some(b'/') => Some('/'),
            Some(b'b') => Some('\u{8}'),
            Some(b'f') => Some('\u{c}'),
            Some(b'n') => Some('\n'),
            Some(b'r') => Some('\r'),
            Some(b't') => Some('\t'),
            Some(_) => return fail(Reason::InvalidEscape, at),
        };
        if let Some(c) = simple {
            self.pos += 2;
            return Ok(c);
        }
        let unit = self.hex4(at)?;
        self.pos = at + 6;
        match unit {
            0xd800..=0xdbff => {
                let next = self.pos;
                match self.src.get(next..next + 2) {
                    Some(b"\\u") => {}
                    Some(_) => return fail(Reason::LoneSurrogate, at),
                    None => {
                        return if self.src.get(next) == Some(&b'\\') || next == self.src.len() {
                            fail(Reason::UnexpectedEnd, self.src.len())
                        } else {
                            fail(Reason::LoneSurrogate, at)
                        };
                    }
                }
                let low = self.hex4(next)?;
                if !(0xdc00..=0xdfff).contains(&low) {
                    return fail(Reason::LoneSurrogate, at);
                }
                self.pos = next + 6;
                let scalar = 0x10000 + ((unit - 0xd800) << 10) + (low - 0xdc00);
                char::from_u32(scalar).map_or_else(|| fail(Reason::LoneSurrogate, at), Ok)
            }
            0xdc00..=0xdfff => fail(Reason::LoneSurrogate, at),
            _ => char::from_u32(unit).map_or_else(|| fail(Reason::InvalidEscape, at), Ok),
        }
    }

    /// Reads the four hex digits of the `\u` escape whose backslash is at `at`.
    fn hex4(&self, at: usize) -> Result<u32, CanonicalError> {
        let mut unit = 0u32;
        for i in at + 2..at + 6 {
            let digit = match self.src.get(i) {
                None => return fail(Reason::UnexpectedEnd, self.src.len()),
                Some(&b) => char::from(b).to_digit(16),
            };
            match digit {
                Some(d) => unit = unit << 4 | d,
                None => return fail(Reason::InvalidEscape, at),
            }
        }
        Ok(unit)
    }

    fn digits(&mut self) -> usize {
        let start = self.pos;
        while let Some(b'0'..=b'9') = self.peek() {
            self.pos += 1;
        }
        self.pos - start
    }

    /// After a `.` or an exponent marker: at least one digit must follow.
    fn required_digits(&mut self, number_start: usize) -> Result<(), CanonicalError> {
        if self.digits() == 0 {
            return match self.peek() {
                None => fail(Reason::UnexpectedEnd, self.pos),
                Some(_) => fail(Reason::InvalidNumber, number_start),
            };
        }
        Ok(())
    }

    /// Parses a number (RFC 8259 §6 grammar) and writes it as ECMAScript does.
    fn number(&mut self) -> Result<(), CanonicalError> {
        let start = self.pos;
        let negative = self.peek() == Some(b'-');
        if negative {
            self.pos += 1;
        }
        let int_digits = match self.peek() {
            Some(b'0') => {
                self.pos += 1;
                if let Some(b'0'..=b'9') = self.peek() {
                    return fail(Reason::LeadingZero, start);
                }
                1
            }
            Some(b'1'..=b'9') => self.digits(),
            None => return fail(Reason::UnexpectedEnd, self.pos),
            Some(b'I') if self.rest().starts_with(b"Infinity") => return fail(Reason::NonFiniteNumber, start),
            Some(_) => return fail(Reason::InvalidNumber, start),
        };
        let mut integer = true;
        if self.peek() == Some(b'.') {
            self.pos += 1;
            self.required_digits(start)?;
            integer = false;
        }
        if let Some(b'e' | b'E') = self.peek() {
            self.pos += 1;
            if let Some(b'+' | b'-') = self.peek() {
                self.pos += 1;
            }
            self.required_digits(start)?;
            integer = false;
        }
        let text = self.src.get(start..self.pos).unwrap_or_default();
        // Integers of up to 15 digits are exact doubles, and ECMAScript writes them digit for digit.
        if integer && int_digits <= 15 && text != b"-0" {
            self.out.extend_from_slice(text);
            return Ok(());
        }
        let value = std::str::from_utf8(text).ok().and_then(|t| t.parse::<f64>().ok());
        match value {
            Some(f) if f.is_finite() => {
                write_f64(f, self.out);
                Ok(())
            }
            Some(_) => fail(Reason::NumberOutOfRange, start),
            None => fail(Reason::InvalidNumber, start),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn canon(s: &str) -> Result<String, (&'static str, usize)> {
        canonicalize(s.as_bytes())
            .map(|v| String::from_utf8(v).expect("canonical output is UTF-8"))
            .map_err(|e| (e.reason.as_str(), e.offset))
    }

    #[test]
    fn reason_names_are_unique_snake_case() {
        let mut seen = std::collections::HashSet::new();
        for r in Reason::ALL {
            assert!(seen.insert(r.as_str()), "{r:?} named twice");
            assert!(r.as_str().bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_'), "{r:?}");
            assert!(!r.message().is_empty());
        }
        assert_eq!(seen.len(), 16);
    }

    #[test]
    fn every_error_maps_to_invalid_json() {
        let e = canonicalize(b"{").expect_err("incomplete");
        assert_eq!(e.code(), ErrorCode::INVALID_JSON);
        assert_eq!(e.to_string(), "cannot canonicalize JSON: the input ends inside a value (unexpected_end) at byte 1");
    }

    #[test]
    fn errors_become_invalid_json_with_reason_and_offset_details() {
        let e = crate::error::A2aError::from(canonicalize(br#"{"a":1,"a":2}"#).expect_err("duplicate"));
        assert_eq!(e.code, ErrorCode::INVALID_JSON);
        assert_eq!(e.http_status(), 400);
        assert_eq!(e.details, Some(serde_json::json!({"reason": "duplicate_key", "offset": 7})));
        assert!(e.message.contains("duplicate member name"), "{}", e.message);
    }

    #[test]
    fn error_offsets_point_at_the_fault() {
        assert_eq!(canon(r#"{"a":1,"b":2,"a":3}"#), Err(("duplicate_key", 13)));
        assert_eq!(canon(r#"[1, 2,]"#), Err(("trailing_comma", 5)));
        assert_eq!(canon(r#"  [01]"#), Err(("leading_zero", 3)));
        assert_eq!(canon(r#"["a\ud800b"]"#), Err(("lone_surrogate", 3)));
        assert_eq!(canon("[\"\u{1}\"]"), Err(("control_character", 2)));
        assert_eq!(canon("[1] x"), Err(("trailing_data", 4)));
        assert_eq!(canon("[1e400]"), Err(("number_out_of_range", 1)));
        assert_eq!(canon("[tru]"), Err(("invalid_literal", 1)));
        assert_eq!(canon("tru"), Err(("unexpected_end", 3)));
        assert_eq!(canon(" \n"), Err(("empty_input", 2)));
        assert_eq!(canonicalize(b"[\"ab\xff\"]").map_err(|e| (e.reason, e.offset)), Err((Reason::InvalidUtf8, 4)));
    }

    #[test]
    fn offsets_name_the_first_byte_of_the_fault_as_jcs_25_says() {
        assert_eq!(canon(r#"["\x"]"#), Err(("invalid_escape", 2)));
        assert_eq!(canon(r#"["\u12g4"]"#), Err(("invalid_escape", 2)));
        assert_eq!(canon(r#"["\udc00"]"#), Err(("lone_surrogate", 2)));
        assert_eq!(canon("[1,-01]"), Err(("leading_zero", 3)));
        assert_eq!(canon("[1,-1e400]"), Err(("number_out_of_range", 3)));
        assert_eq!(canon("[1,-Infinity]"), Err(("non_finite_number", 3)));
        assert_eq!(canon("[1,1.]"), Err(("invalid_number", 3)));
        assert_eq!(canon("[1 2]"), Err(("unexpected_character", 3)));
        assert_eq!(canon("[nul"), Err(("unexpected_end", 4)));
        let deep = format!("{}{}", "[".repeat(MAX_DEPTH + 1), "]".repeat(MAX_DEPTH + 1));
        assert_eq!(canon(&deep), Err(("too_deep", MAX_DEPTH)));
        // A name three times: its second occurrence; a fault met before the object closes wins; inner before outer.
        assert_eq!(canon(r#"{"a":1,"a":2,"a":3}"#), Err(("duplicate_key", 7)));
        assert_eq!(canon(r#"{"a":1,"b":2,"b":3,"a":4}"#), Err(("duplicate_key", 13)));
        assert_eq!(canon(r#"{"a":1,"a":01}"#), Err(("leading_zero", 11)));
        assert_eq!(canon(r#"{"a":1,"a":{"x":1,"x":2}}"#), Err(("duplicate_key", 18)));
    }

    #[test]
    fn the_earliest_second_occurrence_is_reported_for_several_duplicates() {
        // "b" repeats at 13, "a" at 19 and 25: the first duplicate in input order is the "b" at 13.
        assert_eq!(canon(r#"{"a":1,"b":2,"b":3,"a":4,"a":5}"#), Err(("duplicate_key", 13)));
        assert_eq!(canon(r#"{"z":1,"a":2,"z":3}"#), Err(("duplicate_key", 13)));
    }

    #[test]
    fn duplicate_names_are_compared_after_unescaping() {
        assert_eq!(canon(r#"{"a":1,"\u0061":2}"#), Err(("duplicate_key", 7)));
        assert_eq!(canon(r#"{"\ud83d\ude00":1,"😀":2}"#), Err(("duplicate_key", 18)));
        assert_eq!(canon(r#"{"a":{"x":1},"b":{"x":2}}"#), Ok(r#"{"a":{"x":1},"b":{"x":2}}"#.to_owned()));
    }

    #[test]
    fn nesting_of_exactly_max_depth_is_accepted_and_one_more_refused() {
        let ok = format!("{}{}", "[".repeat(MAX_DEPTH), "]".repeat(MAX_DEPTH));
        assert_eq!(canon(&ok), Ok(ok.clone()));
        let deep = format!("{}{}", "[".repeat(MAX_DEPTH + 1), "]".repeat(MAX_DEPTH + 1));
        assert_eq!(canon(&deep), Err(("too_deep", MAX_DEPTH)));
        let objects = format!("{}1{}", r#"{"a":"#.repeat(MAX_DEPTH + 1), "}".repeat(MAX_DEPTH + 1));
        assert_eq!(canon(&objects), Err(("too_deep", 5 * MAX_DEPTH)));
        // Far deeper input fails without exhausting the stack.
        assert_eq!(canon(&"[".repeat(100_000)), Err(("too_deep", MAX_DEPTH)));
    }

    #[test]
    fn output_is_unchanged_on_error_and_appended_on_success() {
        let mut out = b"prefix".to_vec();
        assert!(canonicalize_into(br#"{"b":1,"a":[1,2,"#, &mut out).is_err());
        assert_eq!(out, b"prefix");
        canonicalize_into(br#"{"b":1,"a":2}"#, &mut out).expect("valid");
        assert_eq!(out, br#"prefix{"a":2,"b":1}"#);
    }

    #[test]
    fn utf16_order_puts_supplementary_characters_before_the_end_of_the_bmp() {
        let mut words = ["\u{e000}", "\u{10000}", "\u{ffff}", "\u{d7ff}", "a", "", "aa", "\u{10ffff}", "\u{fb33}", "ö"];
        words.sort_by(|a, b| utf16_cmp(a.as_bytes(), b.as_bytes()));
        let mut expected = words;
        expected.sort_by(|a, b| a.encode_utf16().cmp(b.encode_utf16()));
        assert_eq!(words, expected);
        assert_eq!(utf16_cmp("\u{e000}".as_bytes(), "\u{10000}".as_bytes()), Ordering::Greater);
        assert_eq!(utf16_cmp("\u{10000}".as_bytes(), "\u{ffff}".as_bytes()), Ordering::Less);
        assert_eq!(utf16_cmp("\u{d7ff}".as_bytes(), "\u{10000}".as_bytes()), Ordering::Less);
    }

    #[test]
    fn value_writer_sorts_by_utf16_and_escapes_canonically() {
        let v = serde_json::json!({"\u{e000}": 1, "\u{1f600}": [1.5, -0.0, 1e21, "\u{7f}\u{1f}\u{2028}/"], "a": null});
        assert_eq!(
            String::from_utf8(to_canonical_vec(&v)).expect("utf-8"),
            "{\"a\":null,\"\u{1f600}\":[1.5,0,1e+21,\"\u{7f}\\u001f\u{2028}/\"],\"\u{e000}\":1}"
        );
    }

    #[test]
    fn integers_beyond_fifteen_digits_go_through_the_double() {
        assert_eq!(canon("123456789012345"), Ok("123456789012345".to_owned()));
        assert_eq!(canon("1234567890123456"), Ok("1234567890123456".to_owned()));
        assert_eq!(canon("9007199254740993"), Ok("9007199254740992".to_owned()));
        assert_eq!(canon("-0"), Ok("0".to_owned()));
        assert_eq!(canon("-0.0e5"), Ok("0".to_owned()));
        assert_eq!(canon("1e-400"), Ok("0".to_owned()));
    }
}
