//! The polling schedule of RESULT when the agent offers no long-poll (`spec/PROTOCOL.md` CLI-2, CLI-7): 100 ms,
//! then doubling, capped (1.6 s by default).

use std::time::Duration;

/// The first poll interval.
pub const INITIAL: Duration = Duration::from_millis(100);
/// The default cap of the interval.
pub const DEFAULT_CAP: Duration = Duration::from_millis(1600);
/// The largest cap the protocol allows (CLI-2).
pub const MAX_CAP: Duration = Duration::from_secs(5);

/// An exponential backoff: `initial`, `2 × initial`, `4 × initial`, ... up to `cap`, forever.
///
/// ```
/// use std::time::Duration;
/// use a2a_client::backoff::Backoff;
///
/// let ms: Vec<u128> = Backoff::default().take(7).map(|d| d.as_millis()).collect();
/// assert_eq!(ms, [100, 200, 400, 800, 1600, 1600, 1600]);
/// ```
#[derive(Debug, Clone)]
pub struct Backoff {
    next: Duration,
    cap: Duration,
}

impl Backoff {
    /// A schedule from `initial` doubling up to `cap` (the cap is kept within 1 ms to [`MAX_CAP`]).
    pub fn new(initial: Duration, cap: Duration) -> Self {
        let cap = cap.clamp(Duration::from_millis(1), MAX_CAP);
        Backoff { next: initial.clamp(Duration::from_millis(1), cap), cap }
    }
}

impl Default for Backoff {
    fn default() -> Self {
        Backoff::new(INITIAL, DEFAULT_CAP)
    }
}

impl Iterator for Backoff {
    type Item = Duration;
    fn next(&mut self) -> Option<Duration> {
        let d = self.next;
        self.next = (d * 2).min(self.cap);
        Some(d)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_from_100_ms_and_stops_at_the_cap() {
        let ms: Vec<u128> = Backoff::new(INITIAL, Duration::from_millis(500)).take(5).map(|d| d.as_millis()).collect();
        assert_eq!(ms, [100, 200, 400, 500, 500]);
    }

    #[test]
    fn the_cap_never_exceeds_five_seconds() {
        let last = Backoff::new(INITIAL, Duration::from_secs(60)).nth(20).expect("infinite");
        assert_eq!(last, MAX_CAP);
    }
}
