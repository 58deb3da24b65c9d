//! Each sender's share of the requests an agent serves at once (`spec/PROTOCOL.md` LIM-14..LIM-17).
//!
//! A request naming a sender (`A2A-Sender-ID`) is served only while that sender has fewer than
//! `limits.max_in_progress_per_sender` requests in progress; past it the request waits in the sender's own queue,
//! first come first served, for at most `limits.sender_queue_timeout_ms`. A request that finds the queue holding
//! `limits.max_queued_per_sender` requests, or that waited its time out, is answered `429 quota_exceeded` with
//! `Retry-After` and the quota named (LIM-5's answer). One sender's queue never holds another sender's request, so a
//! flooder waits behind its own requests only, and its requests in progress — what occupies the agent's workers and
//! its store connection — are bounded by its share.
//!
//! A slot is held from the request's head to its answer's head (a streamed body is not in progress); a RESULT
//! long-poll gives its slot back while it waits (LIM-16).

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::oneshot;

use crate::store::QuotaExceeded;

/// The shares of every sender with a request in progress or waiting. A sender's entry is dropped when it has
/// neither, so the map holds at most one entry per request being served or waiting.
pub(crate) struct Shares {
    in_progress: usize,
    queued: usize,
    timeout: Duration,
    senders: Mutex<HashMap<Arc<str>, Entry>>,
}

#[derive(Default)]
struct Entry {
    in_progress: usize,
    next_ticket: u64,
    /// Requests waiting for a slot, oldest first: their ticket and where to hand them the slot.
    queue: VecDeque<(u64, oneshot::Sender<()>)>,
}

/// How a request got its slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Admission {
    /// At once: the sender was inside its share.
    Immediate,
    /// After waiting in the sender's queue.
    Queued,
}

impl Shares {
    /// Shares of `in_progress` requests per sender (0 counts as 1), `queued` waiting (0: refused at once), each
    /// waiting at most `timeout`.
    pub(crate) fn new(in_progress: usize, queued: usize, timeout: Duration) -> Self {
        Shares { in_progress: in_progress.max(1), queued, timeout, senders: Mutex::new(HashMap::new()) }
    }

    /// A slot of `sender`'s share: at once, after waiting in its queue, or refused (LIM-15).
    pub(crate) async fn acquire(self: &Arc<Self>, sender: &str) -> Result<(Slot, Admission), QuotaExceeded> {
        let (ticket, rx) = {
            let mut senders = self.senders.lock().unwrap_or_else(|e| e.into_inner());
            if !senders.contains_key(sender) {
                senders.insert(Arc::from(sender), Entry::default());
            }
            let Some(entry) = senders.get_mut(sender) else { unreachable!("inserted above") };
            if entry.in_progress < self.in_progress {
                entry.in_progress += 1;
                return Ok((self.slot(sender), Admission::Immediate));
            }
            if entry.queue.len() >= self.queued {
                return Err(QuotaExceeded {
                    quota: "max_queued_per_sender",
                    limit: self.queued as u64,
                    retry_after_ms: 1000,
                });
            }
            let ticket = entry.next_ticket;
            entry.next_ticket += 1;
            let (tx, rx) = oneshot::channel();
            entry.queue.push_back((ticket, tx));
            (ticket, rx)
        };
        let mut waiter = Waiter { shares: self, sender, ticket, rx: Some(rx) };
        let granted = tokio::time::timeout(self.timeout, waiter.rx.as_mut().expect("set above")).await;
        match granted {
            Ok(Ok(())) => {
                waiter.rx = None;
                Ok((self.slot(sender), Admission::Queued))
            }
            // Timed out (the sender's requests in progress held every slot for the whole time); the waiter's drop
            // leaves the queue, or gives back a slot handed over meanwhile.
            _ => Err(QuotaExceeded {
                quota: "max_in_progress_per_sender",
                limit: self.in_progress as u64,
                retry_after_ms: 1000,
            }),
        }
    }

    fn slot(self: &Arc<Self>, sender: &str) -> Slot {
        Slot { shares: Some((self.clone(), Arc::from(sender))) }
    }

    /// Gives a slot of `sender` back: to the oldest request still waiting in its queue, else to the share.
    fn release(&self, sender: &str) {
        let mut senders = self.senders.lock().unwrap_or_else(|e| e.into_inner());
        let Some(entry) = senders.get_mut(sender) else { return };
        while let Some((_, tx)) = entry.queue.pop_front() {
            if tx.send(()).is_ok() {
                return;
            }
        }
        entry.in_progress = entry.in_progress.saturating_sub(1);
        if entry.in_progress == 0 {
            senders.remove(sender);
        }
    }

    /// Requests of `sender` in progress and waiting (tests).
    #[cfg(test)]
    fn counts(&self, sender: &str) -> (usize, usize) {
        let senders = self.senders.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        senders.get(sender).map_or((0, 0), |e| (e.in_progress, e.queue.len()))
    }
}

/// A request waiting in its sender's queue; dropped (the request canceled, or its time out), it leaves the queue,
/// or gives back the slot handed to it meanwhile.
struct Waiter<'a> {
    shares: &'a Shares,
    sender: &'a str,
    ticket: u64,
    rx: Option<oneshot::Receiver<()>>,
}

impl Drop for Waiter<'_> {
    fn drop(&mut self) {
        let Some(mut rx) = self.rx.take() else { return };
        let handed = {
            let mut senders = self.shares.senders.lock().unwrap_or_else(|e| e.into_inner());
            match senders.get_mut(self.sender) {
                Some(entry) => match entry.queue.iter().position(|(t, _)| *t == self.ticket) {
                    Some(i) => {
                        entry.queue.remove(i);
                        false
                    }
                    // Popped by a release under the lock: the slot was sent to this waiter.
                    None => rx.try_recv().is_ok(),
                },
                None => false,
            }
        };
        if handed {
            self.shares.release(self.sender);
        }
    }
}

/// A slot of a sender's share, given back when dropped (or by [`Slot::give_back`]).
pub(crate) struct Slot {
    shares: Option<(Arc<Shares>, Arc<str>)>,
}

impl Slot {
    /// Gives the slot back now (a RESULT long-poll before it waits, LIM-16).
    pub(crate) fn give_back(&mut self) {
        if let Some((shares, sender)) = self.shares.take() {
            shares.release(&sender);
        }
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.give_back();
    }
}

/// The slot of the request being served, in its extensions: a handler that waits without working (a RESULT
/// long-poll) gives it back first.
#[derive(Clone)]
pub(crate) struct HeldSlot(pub(crate) Arc<Mutex<Option<Slot>>>);

impl HeldSlot {
    /// Gives the request's slot back, if it still holds one.
    pub(crate) fn give_back(&self) {
        let slot = self.0.lock().unwrap_or_else(|e| e.into_inner()).take();
        drop(slot);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_sender_past_its_share_waits_in_its_own_queue_then_is_refused() {
        let shares = Arc::new(Shares::new(2, 1, Duration::from_millis(200)));
        let (a1, _) = shares.acquire("a").await.expect("in the test");
        let (a2, _) = shares.acquire("a").await.expect("in the test");
        // Another sender is not held behind a's share.
        let (b1, how) = shares.acquire("b").await.expect("in the test");
        assert_eq!(how, Admission::Immediate);
        drop(b1);
        assert_eq!(shares.counts("b"), (0, 0));
        // a's third request waits; its fourth finds the queue full.
        let s = shares.clone();
        let third = tokio::spawn(async move { s.acquire("a").await });
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert_eq!(shares.counts("a"), (2, 1));
        let refused = shares.acquire("a").await.err().expect("refused");
        assert_eq!((refused.quota, refused.limit), ("max_queued_per_sender", 1));
        // A slot given back goes to the waiting request, not to the share.
        drop(a1);
        let (slot, how) = third.await.expect("in the test").expect("in the test");
        assert_eq!(how, Admission::Queued);
        assert_eq!(shares.counts("a"), (2, 0));
        // A request that waits its time out is refused, and leaves the queue.
        let refused = shares.acquire("a").await.err().expect("refused");
        assert_eq!((refused.quota, refused.limit), ("max_in_progress_per_sender", 2));
        assert_eq!(shares.counts("a"), (2, 0));
        drop(slot);
        drop(a2);
        assert_eq!(shares.counts("a"), (0, 0));
        assert!(shares.senders.lock().expect("in the test").is_empty());
    }

    #[tokio::test]
    async fn a_waiting_request_dropped_leaves_the_queue() {
        let shares = Arc::new(Shares::new(1, 4, Duration::from_secs(10)));
        let (held, _) = shares.acquire("a").await.expect("in the test");
        let s = shares.clone();
        let waiting = tokio::spawn(async move { s.acquire("a").await.map(|_| ()) });
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert_eq!(shares.counts("a"), (1, 1));
        waiting.abort();
        let _ = waiting.await;
        assert_eq!(shares.counts("a"), (1, 0));
        drop(held);
        assert_eq!(shares.counts("a"), (0, 0));
    }

    #[tokio::test]
    async fn a_given_back_slot_serves_the_next_request() {
        let shares = Arc::new(Shares::new(1, 0, Duration::from_secs(1)));
        let (mut slot, _) = shares.acquire("a").await.expect("in the test");
        assert_eq!(shares.acquire("a").await.err().expect("refused").quota, "max_queued_per_sender");
        slot.give_back();
        let (_again, how) = shares.acquire("a").await.expect("in the test");
        assert_eq!(how, Admission::Immediate);
        drop(slot);
        assert_eq!(shares.counts("a"), (1, 0));
    }
}
