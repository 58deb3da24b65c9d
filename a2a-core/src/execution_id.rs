//! Execution ids (`spec/PROTOCOL.md` §8.5, EID-1 to EID-12): `{sender_did}_{unix_time_ns}_{suffix}`.
//!
//! - `sender_did` is the `A2A-Sender-ID` (a did:web DID) of the caller of EXECUTE;
//! - `unix_time_ns` is the time of generation in decimal nanoseconds since the Unix epoch, without leading zeros,
//!   strictly increasing within a process;
//! - `suffix` is 26 characters of lower-case RFC 4648 base32 (`a-z2-7`, no padding) encoding 128 bits from the
//!   operating system's CSPRNG.
//!
//! Parsing goes from the right, because a DID may contain `_`: the last `_` starts the suffix, the one before it the
//! timestamp, and everything before that must be a valid DID.
//!
//! ```
//! use a2a_core::did::Did;
//! use a2a_core::execution_id::ExecutionId;
//!
//! let sender = Did::parse("did:web:localhost%3A8080").expect("valid DID");
//! let id = ExecutionId::generate(&sender).expect("the OS CSPRNG is available");
//! assert_eq!(id.sender(), &sender);
//! assert_eq!(ExecutionId::parse(id.as_str()), Ok(id.clone()));
//! // In `GET /a2a/result/{execution_id}` the `%` of `%3A` is escaped:
//! assert!(id.to_path_segment().starts_with("did:web:localhost%253A8080_"));
//! assert_eq!(ExecutionId::from_path_segment(&id.to_path_segment()), Ok(id));
//! ```

use std::fmt;
use std::str::FromStr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, percent_decode_str, utf8_percent_encode};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::did::Did;
use crate::error::ErrorCode;

/// The longest execution id accepted, in bytes.
pub const MAX_LEN: usize = 600;
/// The length of the random suffix, in characters (128 bits of base32).
pub const SUFFIX_LEN: usize = 26;
/// The number of random bits in the suffix.
pub const RANDOM_BITS: u32 = 128;
/// The longest timestamp accepted, in digits (`u64::MAX` has 20).
const MAX_TIMESTAMP_DIGITS: usize = 20;

/// The characters a path segment keeps unescaped: RFC 3986 unreserved characters and `:`; everything else
/// (in a valid id, only `%`) is percent-encoded.
const SEGMENT: &AsciiSet = &NON_ALPHANUMERIC.remove(b'-').remove(b'.').remove(b'_').remove(b'~').remove(b':');

/// What is wrong with an execution id; [`ExecutionIdErrorKind::reason`] is the stable name.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ExecutionIdErrorKind {
    /// Longer than [`MAX_LEN`] bytes (or a path segment longer than three times that).
    TooLong,
    /// Fewer than two `_` separators.
    InvalidFormat,
    /// The timestamp is not decimal digits without leading zeros fitting in 64 bits.
    InvalidTimestamp,
    /// The suffix is not 26 characters of `a-z2-7`.
    InvalidSuffix,
    /// The part before the timestamp is not a valid did:web DID.
    InvalidSender,
    /// A path segment has a `%` not followed by two hex digits, or decodes to invalid UTF-8.
    InvalidPercentEncoding,
    /// The operating system's random number generator failed.
    RandomUnavailable,
}

impl ExecutionIdErrorKind {
    /// The stable reason string (used by the test vectors and in logs).
    pub fn reason(self) -> &'static str {
        match self {
            Self::TooLong => "too_long",
            Self::InvalidFormat => "invalid_format",
            Self::InvalidTimestamp => "invalid_timestamp",
            Self::InvalidSuffix => "invalid_suffix",
            Self::InvalidSender => "invalid_sender",
            Self::InvalidPercentEncoding => "invalid_percent_encoding",
            Self::RandomUnavailable => "random_unavailable",
        }
    }

    /// The protocol error code: an id that does not parse names no execution (`unknown_execution`, 404); a failed
    /// random generator is an `internal_error`.
    pub fn code(self) -> ErrorCode {
        match self {
            Self::RandomUnavailable => ErrorCode::INTERNAL_ERROR,
            _ => ErrorCode::UNKNOWN_EXECUTION,
        }
    }
}

/// An invalid execution id, or a failure to generate one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ExecutionIdError {
    kind: ExecutionIdErrorKind,
    message: String,
}

impl ExecutionIdError {
    fn new(kind: ExecutionIdErrorKind, message: impl Into<String>) -> Self {
        ExecutionIdError { kind, message: message.into() }
    }

    /// What kind of error.
    pub fn kind(&self) -> ExecutionIdErrorKind {
        self.kind
    }

    /// The stable reason string, e.g. `invalid_suffix`.
    pub fn reason(&self) -> &'static str {
        self.kind.reason()
    }

    /// The protocol error code (see [`ExecutionIdErrorKind::code`]).
    pub fn code(&self) -> ErrorCode {
        self.kind.code()
    }

    /// The message for people.
    pub fn message(&self) -> &str {
        &self.message
    }
}

/// A validated execution id.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct ExecutionId {
    s: String,
    sender: Did,
    timestamp_ns: u64,
}

/// The last timestamp handed out in this process.
static LAST_TIMESTAMP_NS: AtomicU64 = AtomicU64::new(0);

/// `max(now, last + 1)`, atomically: strictly increasing within the process even if the clock stalls or steps back.
fn next_timestamp_ns() -> u64 {
    let now =
        SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX));
    let mut prev = LAST_TIMESTAMP_NS.load(Ordering::Relaxed);
    loop {
        let next = now.max(prev.saturating_add(1));
        match LAST_TIMESTAMP_NS.compare_exchange_weak(prev, next, Ordering::Relaxed, Ordering::Relaxed) {
            Ok(_) => return next,
            Err(current) => prev = current,
        }
    }
}

/// The base32 symbol (RFC 4648 alphabet, lower case) of the low five bits of `v`.
#[cfg(test)]
fn symbol(v: u32) -> char {
    // `v & 31` is below 32, so both sums stay within ASCII.
    let v = (v & 31) as u8;
    if v < 26 { char::from(b'a' + v) } else { char::from(b'2' + (v - 26)) }
}

/// RFC 4648 base32 of 16 bytes, lower case, without padding: 26 characters, the last 2 bits zero.
fn base32_128(bytes: &[u8; 16]) -> String {
    let mut out = data_encoding::BASE32_NOPAD.encode(bytes);
    out.make_ascii_lowercase();
    out
}

fn is_base32_symbol(b: u8) -> bool {
    b.is_ascii_lowercase() || (b'2'..=b'7').contains(&b)
}

impl ExecutionId {
    /// Generates a new id for an execution requested by `sender`: the next process-wide timestamp and 128 bits from
    /// the operating system's CSPRNG. Fails (never panics) if the CSPRNG is unavailable.
    pub fn generate(sender: &Did) -> Result<ExecutionId, ExecutionIdError> {
        let mut random = [0u8; 16];
        getrandom::fill(&mut random).map_err(|e| {
            ExecutionIdError::new(
                ExecutionIdErrorKind::RandomUnavailable,
                format!("the operating system's random number generator failed: {e}"),
            )
        })?;
        Ok(ExecutionId::from_parts(sender, next_timestamp_ns(), random))
    }

    /// Builds an id from its parts. For test vectors and reproducible examples: ids of real executions come from
    /// [`ExecutionId::generate`].
    pub fn from_parts(sender: &Did, timestamp_ns: u64, random: [u8; 16]) -> ExecutionId {
        let s = format!("{sender}_{timestamp_ns}_{}", base32_128(&random));
        ExecutionId { s, sender: sender.clone(), timestamp_ns }
    }

    /// Parses and validates an execution id (EID-8): read from the right, at most [`MAX_LEN`] bytes.
    pub fn parse(s: &str) -> Result<ExecutionId, ExecutionIdError> {
        use ExecutionIdErrorKind as K;
        if s.len() > MAX_LEN {
            return Err(ExecutionIdError::new(
                K::TooLong,
                format!("an execution id is at most {MAX_LEN} bytes; this one has {}", s.len()),
            ));
        }
        let format_err = || {
            ExecutionIdError::new(
                K::InvalidFormat,
                "an execution id is {sender_did}_{unix_time_ns}_{suffix}, e.g. did:web:a.example.com_1712345678901234567_aaaaaaaaaaaaaaaaaaaaaaaaaa",
            )
        };
        let (rest, suffix) = s.rsplit_once('_').ok_or_else(format_err)?;
        let (sender, ts) = rest.rsplit_once('_').ok_or_else(format_err)?;
        if suffix.len() != SUFFIX_LEN || !suffix.bytes().all(is_base32_symbol) {
            return Err(ExecutionIdError::new(
                K::InvalidSuffix,
                format!("the suffix of an execution id is {SUFFIX_LEN} characters of a-z and 2-7 (base32 of 128 bits)"),
            ));
        }
        let ts_ok = !ts.is_empty()
            && ts.len() <= MAX_TIMESTAMP_DIGITS
            && ts.bytes().all(|b| b.is_ascii_digit())
            && (ts == "0" || !ts.starts_with('0'));
        let timestamp_ns = ts.parse::<u64>().ok().filter(|_| ts_ok).ok_or_else(|| {
            ExecutionIdError::new(
                K::InvalidTimestamp,
                "the timestamp of an execution id is decimal nanoseconds since the Unix epoch, without leading zeros",
            )
        })?;
        let sender = Did::parse(sender).map_err(|e| {
            ExecutionIdError::new(
                K::InvalidSender,
                format!("the sender part of the execution id is not a did:web DID: {e}"),
            )
        })?;
        Ok(ExecutionId { s: s.to_owned(), sender, timestamp_ns })
    }

    /// The id as a string.
    pub fn as_str(&self) -> &str {
        &self.s
    }

    /// The DID of the caller of EXECUTE.
    pub fn sender(&self) -> &Did {
        &self.sender
    }

    /// The timestamp, in nanoseconds since the Unix epoch.
    pub fn timestamp_ns(&self) -> u64 {
        self.timestamp_ns
    }

    /// The 26-character random suffix.
    pub fn suffix(&self) -> &str {
        self.s.get(self.s.len().saturating_sub(SUFFIX_LEN)..).unwrap_or_default()
    }

    /// The id as one path segment of `GET /a2a/result/{execution_id}` (EID-11): RFC 3986 percent-encoding of every
    /// byte outside `A-Z a-z 0-9 - . _ ~ :`; for a valid id that means `%` becomes `%25` and nothing else changes.
    pub fn to_path_segment(&self) -> String {
        utf8_percent_encode(&self.s, SEGMENT).to_string()
    }

    /// Reads an id from a path segment (EID-12): a segment that is itself a valid id is taken as it is (a framework
    /// may already have decoded it); otherwise it is percent-decoded once and parsed.
    pub fn from_path_segment(segment: &str) -> Result<ExecutionId, ExecutionIdError> {
        use ExecutionIdErrorKind as K;
        if segment.len() > 3 * MAX_LEN {
            return Err(ExecutionIdError::new(K::TooLong, format!("an execution id is at most {MAX_LEN} bytes")));
        }
        if let Ok(id) = ExecutionId::parse(segment) {
            return Ok(id);
        }
        let bytes = segment.as_bytes();
        let mut i = 0;
        while let Some(&b) = bytes.get(i) {
            if b == b'%' {
                let hex = |j: usize| bytes.get(j).is_some_and(u8::is_ascii_hexdigit);
                if !(hex(i + 1) && hex(i + 2)) {
                    return Err(ExecutionIdError::new(
                        K::InvalidPercentEncoding,
                        "the path segment has a `%` that is not followed by two hex digits",
                    ));
                }
                i += 3;
            } else {
                i += 1;
            }
        }
        let decoded = percent_decode_str(segment).decode_utf8().map_err(|_| {
            ExecutionIdError::new(K::InvalidPercentEncoding, "the path segment does not decode to UTF-8")
        })?;
        ExecutionId::parse(&decoded)
    }
}

impl fmt::Display for ExecutionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.s)
    }
}

impl fmt::Debug for ExecutionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ExecutionId({:?})", self.s)
    }
}

impl FromStr for ExecutionId {
    type Err = ExecutionIdError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        ExecutionId::parse(s)
    }
}

impl AsRef<str> for ExecutionId {
    fn as_ref(&self) -> &str {
        &self.s
    }
}

impl Serialize for ExecutionId {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.s)
    }
}

impl<'de> Deserialize<'de> for ExecutionId {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        ExecutionId::parse(&s).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sender() -> Did {
        Did::parse("did:web:agent-a.example.com%3A8443:team_a").expect("valid DID")
    }

    /// Decodes a canonical 26-character suffix into its 128 bits.
    fn suffix_bits(suffix: &str) -> u128 {
        let mut acc: u128 = 0;
        for (i, b) in suffix.bytes().enumerate() {
            let v = if b.is_ascii_lowercase() { b - b'a' } else { b - b'2' + 26 };
            if i < SUFFIX_LEN - 1 {
                acc = (acc << 5) | u128::from(v);
            } else {
                assert_eq!(v & 0b11, 0, "padding bits of {suffix} are not zero");
                acc = (acc << 3) | u128::from(v >> 2);
            }
        }
        acc
    }

    #[test]
    fn base32_matches_rfc4648_test_vectors() {
        // RFC 4648 §10 alphabet, checked on 16 bytes: all zeros, all ones, and a pattern.
        assert_eq!(base32_128(&[0; 16]), "aaaaaaaaaaaaaaaaaaaaaaaaaa");
        assert_eq!(base32_128(&[0xff; 16]), "77777777777777777777777774");
        let pattern: [u8; 16] = *b"foobarfoobarfoob";
        // Python: base64.b32encode(b"foobarfoobarfoob").decode().lower().rstrip("=")
        assert_eq!(base32_128(&pattern), "mzxw6ytbojtg633cmfzgm33pmi");
    }

    #[test]
    fn generated_id_round_trips_through_parse_and_path_segment() {
        let s = sender();
        let id = ExecutionId::generate(&s).expect("generated");
        let back = ExecutionId::parse(id.as_str()).expect("parses");
        assert_eq!(back, id);
        assert_eq!(back.sender(), &s);
        assert_eq!(back.timestamp_ns(), id.timestamp_ns());
        assert_eq!(back.suffix().len(), SUFFIX_LEN);
        let seg = id.to_path_segment();
        assert!(seg.contains("%253A8443"), "{seg}");
        assert_eq!(ExecutionId::from_path_segment(&seg), Ok(id.clone()));
        assert_eq!(ExecutionId::from_path_segment(id.as_str()), Ok(id));
    }

    #[test]
    fn timestamps_are_strictly_increasing_within_a_thread() {
        let s = sender();
        let mut last = 0;
        for _ in 0..100_000 {
            let t = ExecutionId::generate(&s).expect("generated").timestamp_ns();
            assert!(t > last, "{t} after {last}");
            last = t;
        }
    }

    #[test]
    fn millions_of_ids_from_eight_threads_have_no_duplicate() {
        const THREADS: usize = 8;
        // 4 million ids with optimisations (`cargo test --release`); 1 million in an unoptimised build, where the
        // same run would take about a minute.
        const PER_THREAD: usize = if cfg!(debug_assertions) { 125_000 } else { 500_000 };
        let s = sender();
        let start = std::time::Instant::now();
        let per_thread: Vec<Vec<(u64, u128)>> = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..THREADS)
                .map(|_| {
                    scope.spawn(|| {
                        let mut out = Vec::with_capacity(PER_THREAD);
                        for _ in 0..PER_THREAD {
                            let id = ExecutionId::generate(&s).expect("generated");
                            out.push((id.timestamp_ns(), suffix_bits(id.suffix())));
                        }
                        out
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().expect("thread finished")).collect()
        });
        let elapsed = start.elapsed();
        let total = THREADS * PER_THREAD;
        eprintln!(
            "generated {total} execution ids on {THREADS} threads in {elapsed:?}: {:.0} ids/s",
            total as f64 / elapsed.as_secs_f64()
        );
        for ids in &per_thread {
            assert!(ids.windows(2).all(|w| matches!(w, [a, b] if a.0 < b.0)), "timestamps not increasing in a thread");
        }
        // The sender is the same for all, so (timestamp, suffix) is the whole id. The timestamps alone are already
        // unique (the seed's failure, equal timestamps, cannot happen) and so are the random suffixes alone.
        let mut timestamps: Vec<u64> = per_thread.iter().flatten().map(|p| p.0).collect();
        let mut suffixes: Vec<u128> = per_thread.iter().flatten().map(|p| p.1).collect();
        assert_eq!(timestamps.len(), total);
        timestamps.sort_unstable();
        assert!(timestamps.windows(2).all(|w| w.first() != w.last()), "two ids share a timestamp");
        suffixes.sort_unstable();
        assert!(suffixes.windows(2).all(|w| w.first() != w.last()), "two ids share a random suffix");
        eprintln!("checked {total} ids for duplicates in {:?}", start.elapsed() - elapsed);
    }

    #[test]
    fn suffix_bits_are_uniform_and_every_symbol_appears_at_every_position() {
        const N: usize = 100_000;
        let s = sender();
        let mut ones = [0u32; 128];
        let mut seen = vec![[false; 32]; SUFFIX_LEN];
        for _ in 0..N {
            let id = ExecutionId::generate(&s).expect("generated");
            let bits = suffix_bits(id.suffix());
            for (bit, count) in ones.iter_mut().enumerate() {
                *count += u32::try_from((bits >> bit) & 1).unwrap_or(0);
            }
            for (pos, b) in id.suffix().bytes().enumerate() {
                let v = if b.is_ascii_lowercase() { b - b'a' } else { b - b'2' + 26 };
                if let Some(slot) = seen.get_mut(pos).and_then(|row| row.get_mut(usize::from(v))) {
                    *slot = true;
                }
            }
        }
        // Each bit is a fair coin: mean N/2, standard deviation sqrt(N)/2 ~ 158; allow about 9.5 sigma.
        for (bit, &count) in ones.iter().enumerate() {
            assert!((48_500..=51_500).contains(&count), "bit {bit} was set {count} times out of {N}");
        }
        // The first 25 positions carry 5 random bits each: all 32 symbols appear. The last carries 3 random bits and
        // 2 zero padding bits: exactly the 8 symbols a e i m q u y 4 appear.
        for (pos, row) in seen.iter().enumerate() {
            let appeared: String = row.iter().enumerate().filter(|(_, s)| **s).map(|(v, _)| symbol(v as u32)).collect();
            if pos < SUFFIX_LEN - 1 {
                assert_eq!(appeared.len(), 32, "position {pos} saw only {appeared}");
            } else {
                assert_eq!(appeared, "aeimquy4", "last position");
            }
        }
    }

    #[test]
    fn generate_never_repeats_even_when_the_clock_is_behind() {
        // Push the process-wide counter far into the future: timestamps continue from it, still strictly increasing.
        let future =
            SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64) + 3_600_000_000_000;
        LAST_TIMESTAMP_NS.fetch_max(future, Ordering::Relaxed);
        let a = ExecutionId::generate(&sender()).expect("generated");
        let b = ExecutionId::generate(&sender()).expect("generated");
        assert!(a.timestamp_ns() > future && b.timestamp_ns() > a.timestamp_ns());
    }
}
