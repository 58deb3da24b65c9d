//! The cost of a write to the in-memory event log of streaming (LIM-6) at its bound, with 1,000 to 1,000,000
//! executions' logs held: every write is a new execution's first event, so that it evicts the log kept shortest.
//! Reported per size: the median over `--rounds` of the mean time of `--writes` appends, and the ratio to the
//! smallest size. The time is the thread's CPU time (`/proc/thread-self/schedstat`, Linux), so that a shared,
//! loaded machine does not count the time other processes ran; elsewhere wall-clock time.
//!
//! ```text
//! cargo bench -p a2a-server --bench event_log -- --rounds 5 --writes 200000 --sizes 1000,10000,100000,1000000
//! ```

use std::time::Instant;

use a2a_server::store::now_ms;
use a2a_server::streaming::{EventKind, EventLimits, EventLog, MemoryEventLog};

fn arg(name: &str, default: usize) -> usize {
    let args: Vec<String> = std::env::args().collect();
    args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// This thread's CPU time in ns (Linux), or the wall-clock time since `start` elsewhere.
fn cpu_ns(start: Instant) -> u128 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next().and_then(|n| n.parse().ok()))
        .unwrap_or_else(|| start.elapsed().as_nanos())
}

fn main() {
    let origin = Instant::now();
    let rounds = arg("--rounds", 5).max(1);
    let writes = arg("--writes", 200_000).max(1);
    let rt = tokio::runtime::Builder::new_current_thread().build().expect("runtime");
    let limits = EventLimits { max_events: 100, max_bytes: 65_536 };
    let until = now_ms() + 3_600_000;
    let mut first = None;
    println!("| logs held | ns per append (median of {rounds}) | ratio |");
    println!("|---:|---:|---:|");
    let sizes: Vec<usize> = std::env::args()
        .skip_while(|a| a != "--sizes")
        .nth(1)
        .map(|v| v.split(',').filter_map(|n| n.parse().ok()).collect())
        .unwrap_or_else(|| vec![1_000, 10_000, 100_000, 1_000_000]);
    for held in sizes {
        let log = MemoryEventLog::new(limits, held);
        let mut n = 0u64;
        let append = |log: &MemoryEventLog, n: &mut u64| {
            *n += 1;
            let id = format!("x{n:012}");
            rt.block_on(log.append(&id, EventKind::Status, "{\"state\":\"running\"}", until + *n)).expect("append");
        };
        for _ in 0..held {
            append(&log, &mut n);
        }
        let mut times: Vec<f64> = (0..rounds)
            .map(|_| {
                let start = cpu_ns(origin);
                for _ in 0..writes {
                    append(&log, &mut n);
                }
                (cpu_ns(origin) - start) as f64 / writes as f64
            })
            .collect();
        assert_eq!(log.len(), held, "the bound holds");
        times.sort_by(f64::total_cmp);
        let median = times[times.len() / 2];
        let base = *first.get_or_insert(median);
        println!("| {held} | {median:.0} | {:.2} |", median / base);
    }
}
