//! Fuzzing the gateway's HTTP/1.1 on the stable toolchain (proptest, run by `cargo test`, so in CI): the kept seed
//! corpus (`tests/corpus/h1/*.http`, plus the differential corpus of `h1_diff`) mutated — bytes flipped, inserted,
//! removed, requests spliced — and fed
//!
//! - to the chunked decoder in arbitrary pieces: the same data and the same verdict as when fed whole;
//! - to a running gateway over loopback, in arbitrary pieces: every answer is HTTP/1.1 that parses, every error
//!   answer is a JSON `ErrorBody` (ERR-4), the connection ends within its time limits (no hang), and the gateway
//!   serves a normal request afterwards.
//!
//! A failing input is shrunk by proptest and kept in `proptest-regressions/` (committed); add it to
//! `tests/corpus/h1/` as a seed once fixed. `PROPTEST_CASES=5000 cargo test -p a2a-tests --test integration
//! h1_fuzz` runs longer.

use std::time::Duration;

use a2a_gateway::h1::body::{Chunked, Decoded};
use bytes::BytesMut;
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::common::*;

/// The seeds: every file of the kept corpus, and the differential corpus.
fn seeds() -> Vec<Vec<u8>> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus/h1");
    let mut out: Vec<Vec<u8>> = Vec::new();
    let mut files: Vec<_> = std::fs::read_dir(&dir).expect("corpus/h1").flatten().map(|e| e.path()).collect();
    files.sort();
    for f in files {
        if f.extension().is_some_and(|e| e == "http") {
            out.push(std::fs::read(&f).expect("seed"));
        }
    }
    assert!(out.len() >= 5, "the kept corpus is missing");
    out.extend(crate::h1_diff::corpus().into_iter().map(|(_, r)| r));
    out
}

/// One mutation of a seed.
#[derive(Debug, Clone)]
enum Edit {
    Flip(usize, u8),
    Insert(usize, u8),
    Remove(usize),
    Cut(usize),
    /// Another seed appended (a pipelined request, or bytes after a body).
    Splice(usize),
}

fn edit() -> impl Strategy<Value = Edit> {
    // Bytes that matter to framing are tried more often than others.
    let byte = prop_oneof![
        Just(b'\r'),
        Just(b'\n'),
        Just(b';'),
        Just(b','),
        Just(b':'),
        Just(b' '),
        Just(b'0'),
        Just(b'f'),
        Just(0u8),
        any::<u8>()
    ];
    prop_oneof![
        (any::<usize>(), byte.clone()).prop_map(|(i, b)| Edit::Flip(i, b)),
        (any::<usize>(), byte).prop_map(|(i, b)| Edit::Insert(i, b)),
        any::<usize>().prop_map(Edit::Remove),
        any::<usize>().prop_map(Edit::Cut),
        any::<usize>().prop_map(Edit::Splice),
    ]
}

fn mutate(seeds: &[Vec<u8>], seed: usize, edits: &[Edit]) -> Vec<u8> {
    let mut v = seeds[seed % seeds.len()].clone();
    for e in edits {
        let at = |i: usize, len: usize| if len == 0 { 0 } else { i % len };
        match *e {
            Edit::Flip(i, b) if !v.is_empty() => {
                let i = at(i, v.len());
                v[i] = b;
            }
            Edit::Insert(i, b) => {
                let i = at(i, v.len() + 1);
                v.insert(i, b);
            }
            Edit::Remove(i) if !v.is_empty() => {
                let i = at(i, v.len());
                v.remove(i);
            }
            Edit::Cut(i) => v.truncate(at(i, v.len() + 1)),
            Edit::Splice(s) => v.extend_from_slice(&seeds[s % seeds.len()]),
            _ => {}
        }
    }
    v
}

/// The decoder's reading of `raw` fed in pieces of the given sizes (then the rest whole): the data, and how it
/// ended (`Ok(true)`: the last chunk; `Ok(false)`: more needed; `Err`: refused).
fn decode_in_pieces(raw: &[u8], pieces: &[usize]) -> (Vec<u8>, Result<bool, String>) {
    let mut dec = Chunked::default();
    let mut buf = BytesMut::new();
    let mut fed = 0;
    let mut sizes = pieces.iter().copied();
    let mut data = Vec::new();
    loop {
        match dec.decode(&mut buf) {
            Ok(Decoded::Data(d)) => data.extend_from_slice(&d),
            Ok(Decoded::End) => return (data, Ok(true)),
            Err(e) => return (data, Err(e.0.to_owned())),
            Ok(Decoded::NeedMore) => {
                if fed == raw.len() {
                    return (data, Ok(false));
                }
                let n = sizes.next().unwrap_or(raw.len()).max(1);
                let end = (fed + n).min(raw.len());
                buf.extend_from_slice(&raw[fed..end]);
                fed = end;
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, .. ProptestConfig::default() })]

    #[test]
    fn the_chunked_decoder_reads_the_same_in_any_pieces(
        seed in any::<usize>(),
        edits in proptest::collection::vec(edit(), 0..6),
        pieces in proptest::collection::vec(1usize..16, 0..64),
    ) {
        let seeds = seeds();
        let raw = mutate(&seeds, seed, &edits);
        // The body part of the request (after its head), or the whole input when there is no head.
        let body = raw.windows(4).position(|w| w == b"\r\n\r\n").map_or(&raw[..], |i| &raw[i + 4..]);
        let whole = decode_in_pieces(body, &[]);
        let split = decode_in_pieces(body, &pieces);
        prop_assert_eq!(&whole, &split, "the pieces changed the reading");
    }
}

/// Every answer in `out` (a connection's whole output) parses as HTTP/1.1; error answers are JSON error bodies.
fn check_answers(out: &[u8], input: &[u8]) -> Result<usize, String> {
    let mut rest = out;
    let mut n = 0;
    while !rest.is_empty() {
        let mut hs = [httparse::EMPTY_HEADER; 64];
        let mut r = httparse::Response::new(&mut hs);
        let len = match r.parse(rest) {
            Ok(httparse::Status::Complete(len)) => len,
            other => return Err(format!("answer {n} does not parse ({other:?}): {:?}", String::from_utf8_lossy(rest))),
        };
        let status = r.code.unwrap_or(0);
        let header = |name: &str| {
            r.headers.iter().find(|h| h.name.eq_ignore_ascii_case(name)).map(|h| String::from_utf8_lossy(h.value))
        };
        let length = header("content-length").and_then(|v| v.trim().parse::<usize>().ok());
        if header("transfer-encoding").is_some() {
            // A streamed answer (none of these requests should get one): stop checking here.
            return Ok(n + 1);
        }
        let body_len =
            if (100..200).contains(&status) || status == 204 || status == 304 { 0 } else { length.unwrap_or(0) };
        // An answer to HEAD announces a length it does not carry: the next answer (or the end) follows its head.
        let head_answer = body_len > 0
            && input.windows(5).any(|w| w == b"HEAD ")
            && (rest[len..].starts_with(b"HTTP/1.") || rest.len() == len);
        let body_len = if head_answer { 0 } else { body_len };
        let body = rest.get(len..len + body_len);
        if status >= 400 && !head_answer {
            match body {
                Some(b) => {
                    let v: serde_json::Value = serde_json::from_slice(b).map_err(|e| {
                        format!(
                            "error answer {status} is not JSON ({e}): {:?} to {:?}",
                            String::from_utf8_lossy(b),
                            String::from_utf8_lossy(input)
                        )
                    })?;
                    if !v["error"]["code"].is_string() {
                        return Err(format!("error answer {status} without error.code: {v}"));
                    }
                }
                None if input.windows(5).any(|w| w == b"HEAD ") => return Ok(n + 1),
                None => return Err(format!("error answer {status} cut short")),
            }
        }
        rest = match body {
            Some(_) => &rest[len + body_len..],
            None => &rest[len..],
        };
        n += 1;
    }
    Ok(n)
}

#[test]
fn the_connection_answers_mutated_requests_in_any_pieces_with_http_and_json_errors() {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime");
    let world = World::new();
    let agent = rt.block_on(async {
        TestAgent::start("agent-fuzz", vec![decl("submit_report", a2a_core::capability::AuthRequirement::None)], &world)
    });
    let gw = rt.block_on(TestGateway::start(
        &[&agent],
        &world,
        "[limits]\nheader_read_timeout_ms = 2000\nbody_read_timeout_ms = 2000\nmax_body_bytes = 65536\n",
    ));
    let addr = gw.base.trim_start_matches("http://").to_owned();
    let seeds = seeds();
    let cases = std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(96u32);
    // Failures are kept beside the corpus (run from the package's directory, as `cargo test` does).
    let persistence = proptest::test_runner::FileFailurePersistence::Direct("corpus/h1-regressions.txt");
    let mut runner =
        TestRunner::new(Config { cases, failure_persistence: Some(Box::new(persistence)), ..Config::default() });
    let strategy =
        (any::<usize>(), proptest::collection::vec(edit(), 0..5), proptest::collection::vec(1usize..40, 0..12));
    let result = runner.run(&strategy, |(seed, edits, pieces)| {
        let raw = mutate(&seeds, seed, &edits);
        let out = rt.block_on(async {
            let mut c = TcpStream::connect(&addr).await.expect("connect");
            c.set_nodelay(true).expect("nodelay");
            let mut fed = 0;
            for n in pieces.iter().copied().chain(std::iter::once(usize::MAX)) {
                if fed == raw.len() {
                    break;
                }
                let end = fed.saturating_add(n).min(raw.len());
                if c.write_all(&raw[fed..end]).await.is_err() {
                    break;
                }
                fed = end;
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
            let _ = c.shutdown().await;
            let mut out = Vec::new();
            // The longest a connection may take: its head and body times, and the write time of the answers.
            let read = tokio::time::timeout(Duration::from_secs(15), c.read_to_end(&mut out)).await;
            (read.is_ok(), out)
        });
        prop_assert!(out.0, "the connection did not end within 15 s: {:?}", String::from_utf8_lossy(&raw));
        let checked = check_answers(&out.1, &raw);
        prop_assert!(checked.is_ok(), "{}", checked.err().unwrap_or_default());
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e}");
    }
    // Still serving.
    let still = rt.block_on(async {
        let c = Caller::new(&gw.base);
        c.send("OPTIONS", "/a2a", &[], None, Sign::No).await.status
    });
    assert_eq!(still, 204);
    drop(gw);
    drop(agent);
}
