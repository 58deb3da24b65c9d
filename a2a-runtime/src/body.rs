//! Reading a request body within the size and time limits (spec §13, LIM-1), for every route of the agent, the
//! A2A 1.x bridge and the gateway: one reader, three error mappings.
//!
//! A body over the limit is not kept: the reader stops storing at `limit` bytes. It then goes on reading, and
//! throws away, what the client is still sending, for a bounded number of bytes and a bounded time (a *lingering*
//! read, as nginx does).
//!
//! Memory follows the bytes received, never the bytes declared (LIM-7): the buffer grows as data arrives, so a head
//! declaring `Content-Length: 1048576` followed by 1 KiB and a stall holds about 1 KiB. Every body being received
//! draws on a [`BodyBudget`] shared by the whole agent; past it the body is refused `503 overloaded` with
//! `Retry-After` instead of buffered. Without it the agent would answer `413` and close a connection whose receive buffer still
//! holds unread bytes; the kernel then resets the connection, and a client still busy writing its body may never
//! read the `413`. With it the client finishes writing, reads the answer, and sees a clean close.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use a2a_core::error::{A2aError, ErrorCode};
use bytes::{Bytes, BytesMut};
use http::{HeaderMap, header};
use http_body_util::BodyExt;

/// The most bytes over the limit a reader throws away before it answers `413` (then the connection is reset).
pub const DRAIN_MAX_BYTES: u64 = 8 * 1024 * 1024;
/// The longest a reader throws bytes away before it answers `413`.
pub const DRAIN_MAX_TIME: Duration = Duration::from_secs(2);

/// Why a body could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BodyError {
    /// The body is larger than the limit (`413 payload_too_large`).
    TooLarge {
        /// The limit, in bytes.
        limit: usize,
    },
    /// The body did not arrive within the time limit (`408 request_timeout`).
    Timeout {
        /// The time limit.
        after: Duration,
    },
    /// The body could not be read (the connection broke, a bad chunk); the text says why.
    Unreadable(String),
    /// The agent's budget for request bodies being received is spent (`503 overloaded`, LIM-7).
    Overloaded {
        /// The budget, in bytes.
        budget: usize,
    },
}

/// The bytes of request bodies an agent holds while receiving them, all requests together (LIM-7,
/// `limits.max_buffered_body_bytes`). A reader takes from it as bytes arrive and gives everything back when it is
/// done; a reader that cannot take refuses its body `503 overloaded`.
#[derive(Debug)]
pub struct BodyBudget {
    capacity: usize,
    used: AtomicUsize,
}

impl BodyBudget {
    /// A budget of `capacity` bytes.
    pub fn new(capacity: usize) -> Arc<BodyBudget> {
        Arc::new(BodyBudget { capacity, used: AtomicUsize::new(0) })
    }

    /// A budget that never runs out (for readers outside an agent).
    pub fn unlimited() -> Arc<BodyBudget> {
        BodyBudget::new(usize::MAX)
    }

    /// The budget, in bytes.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// The bytes taken now.
    pub fn used(&self) -> usize {
        self.used.load(Ordering::Relaxed)
    }

    /// A charge of nothing yet, for one body.
    pub fn charge(&self) -> BodyCharge<'_> {
        BodyCharge { budget: self, bytes: 0 }
    }

    fn try_take(&self, n: usize) -> bool {
        self.used
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |u| u.checked_add(n).filter(|t| *t <= self.capacity))
            .is_ok()
    }
}

/// What one body took from a [`BodyBudget`], given back when dropped (on every way out, including a dropped future).
#[derive(Debug)]
pub struct BodyCharge<'a> {
    budget: &'a BodyBudget,
    bytes: usize,
}

impl BodyCharge<'_> {
    /// Takes `n` bytes more; `false` (nothing taken) when that would take the budget past its capacity.
    pub fn take(&mut self, n: usize) -> bool {
        if self.budget.try_take(n) {
            self.bytes += n;
            true
        } else {
            false
        }
    }

    /// Counts the body as `total` bytes held (takes what is missing); `false` (nothing more taken) when that would
    /// take the budget past its capacity.
    pub fn hold(&mut self, total: usize) -> bool {
        total <= self.bytes || self.take(total - self.bytes)
    }
}

/// Marks a request whose body a front already read whole and holds counted in the process's [`BodyBudget`] (the
/// gateway's HTTP/1.1 loop, handing a request to its HTTP service): a reader of that body takes nothing more from
/// the budget ([`BodyBudget::for_request`]), so that one body is counted once (LIM-7, GW-23).
#[derive(Debug, Clone, Copy)]
pub struct Counted;

/// The budget of a body already counted ([`Counted`]): never runs out, holds nothing.
static COUNTED: BodyBudget = BodyBudget { capacity: usize::MAX, used: AtomicUsize::new(0) };

impl BodyBudget {
    /// The budget the body of a request with these `extensions` draws on: this one, or none when the request is
    /// marked [`Counted`] (its bytes are counted already, by the front that read them).
    pub fn for_request<'a>(&'a self, extensions: &http::Extensions) -> &'a BodyBudget {
        if extensions.get::<Counted>().is_some() { &COUNTED } else { self }
    }
}

impl Drop for BodyCharge<'_> {
    fn drop(&mut self) {
        self.budget.used.fetch_sub(self.bytes, Ordering::AcqRel);
    }
}

impl std::fmt::Display for BodyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BodyError::TooLarge { limit } => write!(f, "the request body is larger than {limit} bytes"),
            BodyError::Timeout { after } => {
                write!(f, "the request body was not received within {} ms", after.as_millis())
            }
            BodyError::Unreadable(e) => write!(f, "the request body could not be read: {e}"),
            BodyError::Overloaded { budget } => write!(
                f,
                "this server is receiving {budget} bytes of request bodies, its limit (limits.max_buffered_body_bytes); \
                 retry after the Retry-After delay"
            ),
        }
    }
}

impl std::error::Error for BodyError {}

impl BodyError {
    /// The protocol error: `413 payload_too_large` (with `details.limit_bytes`), `408 request_timeout` or
    /// `400 invalid_request`, or `503 overloaded` (with `details.retry_after_s`, sent as `Retry-After`).
    pub fn into_a2a(self) -> A2aError {
        let code = match self {
            BodyError::TooLarge { .. } => ErrorCode::PAYLOAD_TOO_LARGE,
            BodyError::Timeout { .. } => ErrorCode::REQUEST_TIMEOUT,
            BodyError::Unreadable(_) => ErrorCode::INVALID_REQUEST,
            BodyError::Overloaded { .. } => ErrorCode::OVERLOADED,
        };
        let e = A2aError::with_message(code, self.to_string());
        match self {
            BodyError::TooLarge { limit } => e.details(serde_json::json!({"limit_bytes": limit})),
            BodyError::Overloaded { .. } => e.details(serde_json::json!({"retry_after_s": 1})),
            _ => e,
        }
    }
}

/// Reads `body` whole when it is at most `limit` bytes and arrives within `timeout`.
///
/// A `Content-Length` over the limit is refused without storing anything; the bytes over the limit are read
/// and dropped (up to [`DRAIN_MAX_BYTES`] and [`DRAIN_MAX_TIME`]) so that the client reads the answer.
pub async fn read_limited<B>(headers: &HeaderMap, body: B, limit: usize, timeout: Duration) -> Result<Bytes, BodyError>
where
    B: hyper::body::Body<Data = Bytes> + Unpin,
    B::Error: std::fmt::Display,
{
    read_within(headers, body, limit, timeout, &BodyBudget::unlimited()).await
}

/// [`read_limited`] drawing on `budget` as bytes arrive (LIM-7): the buffer grows with the bytes received (never to
/// the declared length at once), and a body that would take the budget past its capacity is refused
/// ([`BodyError::Overloaded`]). What was taken is given back when the read ends.
pub async fn read_within<B>(
    headers: &HeaderMap,
    body: B,
    limit: usize,
    timeout: Duration,
    budget: &BodyBudget,
) -> Result<Bytes, BodyError>
where
    B: hyper::body::Body<Data = Bytes> + Unpin,
    B::Error: std::fmt::Display,
{
    read_held(headers, body, limit, timeout, budget).await.map(|(bytes, _)| bytes)
}

/// [`read_within`], the body's charge kept: the bytes stay counted in `budget` until the caller drops the charge
/// (when it is done with the body: the gateway, once it has answered, GW-23).
pub async fn read_held<'b, B>(
    headers: &HeaderMap,
    body: B,
    limit: usize,
    timeout: Duration,
    budget: &'b BodyBudget,
) -> Result<(Bytes, BodyCharge<'b>), BodyError>
where
    B: hyper::body::Body<Data = Bytes> + Unpin,
    B::Error: std::fmt::Display,
{
    let declared =
        headers.get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()).and_then(|v| v.trim().parse::<u64>().ok());
    let mut body = body;
    if let Some(len) = declared.filter(|len| *len > limit as u64) {
        if len <= limit as u64 + DRAIN_MAX_BYTES {
            drain(&mut body, len).await;
        }
        return Err(BodyError::TooLarge { limit });
    }
    let read = async {
        let mut taken = budget.charge();
        // Grown as bytes arrive (LIM-7): a declared length is a claim, not bytes received.
        let mut buf = BytesMut::new();
        let mut first: Option<Bytes> = None;
        while let Some(frame) = body.frame().await {
            let frame = frame.map_err(|e| BodyError::Unreadable(e.to_string()))?;
            let Ok(data) = frame.into_data() else { continue };
            let have = first.as_ref().map_or(0, Bytes::len) + buf.len();
            if have + data.len() > limit {
                drain(&mut body, DRAIN_MAX_BYTES).await;
                return Err(BodyError::TooLarge { limit });
            }
            if !taken.take(data.len()) {
                return Err(BodyError::Overloaded { budget: budget.capacity() });
            }
            // A body that comes in one frame (the usual case) is kept as it came, without a copy.
            match first.take() {
                None if buf.is_empty() => first = Some(data),
                None => buf.extend_from_slice(&data),
                Some(f) => {
                    buf.reserve((f.len() + data.len()).min(limit));
                    buf.extend_from_slice(&f);
                    buf.extend_from_slice(&data);
                }
            }
        }
        Ok((first.unwrap_or_else(|| buf.freeze()), taken))
    };
    match tokio::time::timeout(timeout, read).await {
        Ok(r) => r,
        Err(_) => Err(BodyError::Timeout { after: timeout }),
    }
}

/// Reads and drops up to `max` more bytes of `body`, for at most [`DRAIN_MAX_TIME`].
async fn drain<B>(body: &mut B, max: u64)
where
    B: hyper::body::Body<Data = Bytes> + Unpin,
{
    let run = async {
        let mut seen = 0u64;
        while seen <= max {
            match body.frame().await {
                Some(Ok(frame)) => seen += frame.data_ref().map_or(0, |d| d.len() as u64),
                _ => return,
            }
        }
    };
    let _ = tokio::time::timeout(DRAIN_MAX_TIME, run).await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures_util::StreamExt;
    use http_body_util::{Full, StreamBody};

    #[test]
    fn a_body_budget_counts_what_is_held_and_refuses_past_its_limit() {
        let budget = BodyBudget::new(100);
        let mut a = budget.charge();
        assert!(a.hold(60));
        assert!(a.hold(40), "holding less than before takes nothing more");
        let mut b = budget.charge();
        assert!(!b.hold(41), "60 + 41 is past 100");
        assert_eq!(budget.used(), 60, "a refused hold takes nothing");
        assert!(b.hold(40));
        assert_eq!(budget.used(), 100);
        drop(a);
        assert_eq!(budget.used(), 40);
        drop(b);
        assert_eq!(budget.used(), 0);
    }

    fn headers(len: Option<usize>) -> HeaderMap {
        let mut h = HeaderMap::new();
        if let Some(l) = len {
            h.insert(header::CONTENT_LENGTH, l.into());
        }
        h
    }

    #[tokio::test]
    async fn a_body_within_the_limit_is_read_whole() {
        let b =
            read_limited(&headers(Some(5)), Full::new(Bytes::from_static(b"hello")), 5, Duration::from_secs(1)).await;
        assert_eq!(b.expect("the body is read"), Bytes::from_static(b"hello"));
    }

    #[tokio::test]
    async fn a_declared_length_over_the_limit_is_refused_and_the_body_read_out() {
        let body = Full::new(Bytes::from(vec![b'x'; 100]));
        let r = read_limited(&headers(Some(100)), body, 10, Duration::from_secs(1)).await;
        assert_eq!(r, Err(BodyError::TooLarge { limit: 10 }));
    }

    #[tokio::test]
    async fn a_chunked_body_over_the_limit_is_refused() {
        let chunks =
            (0..10).map(|_| Ok::<_, std::convert::Infallible>(hyper::body::Frame::data(Bytes::from(vec![0u8; 4]))));
        let body = StreamBody::new(futures_util::stream::iter(chunks));
        let r = read_limited(&headers(None), body, 10, Duration::from_secs(1)).await;
        assert_eq!(r, Err(BodyError::TooLarge { limit: 10 }));
    }

    /// LIM-7: a body declared 1 MiB that stalls after 1 KiB holds 1 KiB of the budget, and gives it back.
    #[tokio::test]
    async fn a_stalled_body_holds_the_bytes_received_not_the_bytes_declared() {
        let budget = BodyBudget::new(1 << 30);
        let first = futures_util::stream::iter([Ok::<_, std::io::Error>(hyper::body::Frame::data(Bytes::from(vec![
                b' ';
                1024
            ])))]);
        let body = StreamBody::new(first.chain(futures_util::stream::pending()));
        let h = headers(Some(1024 * 1024));
        let read = read_within(&h, body, 2 * 1024 * 1024, Duration::from_millis(300), &budget);
        tokio::pin!(read);
        assert!(tokio::time::timeout(Duration::from_millis(100), &mut read).await.is_err(), "still reading");
        assert_eq!(budget.used(), 1024);
        assert_eq!(read.await, Err(BodyError::Timeout { after: Duration::from_millis(300) }));
        assert_eq!(budget.used(), 0, "given back");
    }

    #[test]
    fn a_body_already_counted_takes_nothing_more_from_the_budget() {
        let budget = BodyBudget::new(10);
        let mut counted = http::Extensions::new();
        counted.insert(Counted);
        assert!(budget.for_request(&counted).charge().hold(1000), "counted once, by the front");
        assert_eq!(budget.used(), 0);
        assert!(!budget.for_request(&http::Extensions::new()).charge().hold(11), "any other body draws on it");
    }

    #[tokio::test]
    async fn a_body_past_the_budget_is_refused_overloaded() {
        let budget = BodyBudget::new(10);
        let body = Full::new(Bytes::from(vec![b'x'; 11]));
        let r = read_within(&headers(Some(11)), body, 100, Duration::from_secs(1), &budget).await;
        assert_eq!(r, Err(BodyError::Overloaded { budget: 10 }));
        assert_eq!(budget.used(), 0);
        let e = BodyError::Overloaded { budget: 10 }.into_a2a();
        assert_eq!(e.http_status(), 503);
    }

    #[tokio::test]
    async fn a_body_that_stalls_times_out() {
        let body =
            StreamBody::new(futures_util::stream::pending::<Result<hyper::body::Frame<Bytes>, std::io::Error>>());
        let r = read_limited(&headers(Some(4)), body, 10, Duration::from_millis(50)).await;
        assert_eq!(r, Err(BodyError::Timeout { after: Duration::from_millis(50) }));
    }
}
