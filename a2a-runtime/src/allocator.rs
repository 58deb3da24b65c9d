//! Giving memory back to the system after a burst (LIM-7, GW-23).
//!
//! mimalloc (the shipped allocator) returns the pages a burst freed only after a delay, and only when the thread that
//! owns them calls it again; frees from other threads wait on the owner's list until then. A serving thread that goes
//! idle after a burst (the connections of a stalled-body attack closing) would keep them: the agent was measured at
//! 5.3 times its idle RSS ten seconds after such an attack (docs/BENCHMARKS.md). So each serving thread calls the
//! allocator once a second: [`tick_here`], from [`ticker`] (a task on each serving runtime) and, on the multi-thread
//! runtime of [`runtime`], from every worker as it parks. Connections are served on single-threaded runtimes (the
//! gateway's workers, the agent's [`crate::serve::serve_threads`]), so that a connection's blocks are freed by the
//! thread that allocated them: frees across threads wait for a collection this tick does not make. And the process
//! runs without transparent huge pages ([`small_pages`]), which the kernel would otherwise rebuild over the pages
//! returned (docs/BENCHMARKS.md, "a2a-server under a stalled-body attack").

use std::cell::Cell;
use std::time::{Duration, Instant};

/// How often a thread calls the allocator at most.
const EVERY: Duration = Duration::from_secs(1);

/// Allocates and frees one large block (1 MiB) on this thread, at most once a second per thread: the allocator then
/// takes back the frees other threads made of this thread's memory and returns the pages freed since to the system.
/// Cheap when not due (one clock read).
pub fn tick_here() {
    thread_local! {
        static LAST: Cell<Option<Instant>> = const { Cell::new(None) };
    }
    let now = Instant::now();
    LAST.with(|last| {
        if last.get().is_some_and(|t| now.saturating_duration_since(t) < EVERY) {
            return;
        }
        last.set(Some(now));
        drop(std::hint::black_box(Vec::<u8>::with_capacity(1024 * 1024)));
    });
}

/// Runs until dropped (abort it with the serving loop): once a second, ticks the thread it runs on and wakes the
/// runtime's other workers with a few empty tasks, so that a worker idle since a burst parks again and ticks (with
/// [`runtime`]'s park hook). On a current-thread runtime it ticks its one thread.
pub async fn ticker() {
    let mut every = tokio::time::interval(EVERY);
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    loop {
        every.tick().await;
        tick_here();
        let workers = tokio::runtime::Handle::current().metrics().num_workers();
        // Two per other worker: a task spawned from a worker goes to its own queue, and only the second one there
        // wakes an idle worker to take it; each woken worker that finds work wakes the next.
        for _ in 0..2 * workers.saturating_sub(1) {
            tokio::spawn(async {});
        }
    }
}

/// Turns transparent huge pages off for this process (Linux; elsewhere nothing), so that the pages the allocator
/// returns after a burst stay returned (LIM-7, GW-23).
///
/// mimalloc asks for huge pages on its arenas (`madvise(MADV_HUGEPAGE)`); it returns a burst's memory in pieces
/// smaller than a huge page, and the kernel's `khugepaged` (every 10 s) then fills each 2 MiB range that still has one
/// page in use back to a whole huge page: after a stalled-body attack the agent's RSS grew again from 1.4 to 2.3
/// times its idle size within 25 s of the connections closing (docs/BENCHMARKS.md). Programs the agent starts through
/// `a2a-supervise` (command handlers) get the system's setting back; any other child process inherits this one.
pub fn small_pages() {
    #[cfg(target_os = "linux")]
    if let Err(e) = rustix::thread::disable_transparent_huge_pages(true) {
        tracing::debug!(error = %e, "transparent huge pages could not be turned off for this process");
    }
}

/// The multi-thread runtime the `a2a-server` and `a2a-gateway` binaries run on: every worker calls [`tick_here`] as
/// it parks (goes idle). Turns transparent huge pages off first ([`small_pages`]).
///
/// An error when the runtime cannot be started.
pub fn runtime() -> std::io::Result<tokio::runtime::Runtime> {
    small_pages();
    tokio::runtime::Builder::new_multi_thread().enable_all().on_thread_park(tick_here).build()
}
