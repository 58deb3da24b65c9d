//! Canonical JSON throughput on a realistic ~1 KiB protocol message (`benches/canonical_message.json`).
//!
//! Run with: `cargo bench -p a2a-core --bench canonical`
//!
//! - `canonicalize_bytes`: `a2a_core::canonical::canonicalize` straight from the bytes;
//! - `canonicalize_into_reused_buffer`: the same, appending to a buffer that is reused;
//! - `canonicalize_bytes_already_canonical`: input that is already canonical (what a verifier usually gets);
//! - `to_canonical_vec_from_value`: `to_canonical_vec` of an already-parsed `serde_json::Value`;
//! - `serde_json_parse_serialize` (baseline): `serde_json::from_slice::<Value>` + `serde_json::to_vec`, no sorting;
//! - `naive_value_jcs` (baseline): the first version of this module: parse into a `Value`, then sort each object's
//!   names by collecting them and comparing `encode_utf16()` iterators, and format numbers via `ryu_js`.

use std::hint::black_box;

use a2a_core::canonical::{canonicalize, canonicalize_into, to_canonical_vec};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use serde_json::Value;

const MESSAGE: &[u8] = include_bytes!("canonical_message.json");

/// The first, tree-based implementation, kept here as a baseline.
fn naive_jcs(v: &Value, out: &mut Vec<u8>) {
    match v {
        Value::Null => out.extend_from_slice(b"null"),
        Value::Bool(b) => out.extend_from_slice(if *b { b"true" } else { b"false" }),
        Value::Number(n) => {
            let f = n.as_f64().unwrap_or(0.0);
            if f == 0.0 {
                out.push(b'0');
            } else {
                let mut buf = ryu_js::Buffer::new();
                out.extend_from_slice(buf.format_finite(f).as_bytes());
            }
        }
        Value::String(s) => naive_string(s, out),
        Value::Array(a) => {
            out.push(b'[');
            for (i, x) in a.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                naive_jcs(x, out);
            }
            out.push(b']');
        }
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort_by(|a, b| a.encode_utf16().cmp(b.encode_utf16()));
            out.push(b'{');
            for (i, k) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                naive_string(k, out);
                out.push(b':');
                if let Some(x) = m.get(k) {
                    naive_jcs(x, out);
                }
            }
            out.push(b'}');
        }
    }
}

fn naive_string(s: &str, out: &mut Vec<u8>) {
    out.push(b'"');
    for c in s.chars() {
        match c {
            '"' => out.extend_from_slice(b"\\\""),
            '\\' => out.extend_from_slice(b"\\\\"),
            '\u{8}' => out.extend_from_slice(b"\\b"),
            '\t' => out.extend_from_slice(b"\\t"),
            '\n' => out.extend_from_slice(b"\\n"),
            '\u{c}' => out.extend_from_slice(b"\\f"),
            '\r' => out.extend_from_slice(b"\\r"),
            c if (c as u32) < 0x20 => out.extend_from_slice(format!("\\u{:04x}", c as u32).as_bytes()),
            c => {
                let mut b = [0u8; 4];
                out.extend_from_slice(c.encode_utf8(&mut b).as_bytes());
            }
        }
    }
    out.push(b'"');
}

fn canonical_1k(c: &mut Criterion) {
    let value: Value = serde_json::from_slice(MESSAGE).expect("the fixture is JSON");
    let canonical = canonicalize(MESSAGE).expect("the fixture is I-JSON");
    let mut naive = Vec::new();
    naive_jcs(&value, &mut naive);
    assert_eq!(naive, canonical, "the baseline computes the same bytes");
    assert_eq!(to_canonical_vec(&value), canonical);

    let mut g = c.benchmark_group("canonical_1k");
    g.throughput(Throughput::Bytes(MESSAGE.len() as u64));
    g.bench_function("canonicalize_bytes", |b| b.iter(|| canonicalize(black_box(MESSAGE))));
    let mut buf = Vec::with_capacity(2048);
    g.bench_function("canonicalize_into_reused_buffer", |b| {
        b.iter(|| {
            buf.clear();
            canonicalize_into(black_box(MESSAGE), &mut buf)
        })
    });
    g.bench_function("canonicalize_bytes_already_canonical", |b| b.iter(|| canonicalize(black_box(&canonical))));
    g.bench_function("to_canonical_vec_from_value", |b| b.iter(|| to_canonical_vec(black_box(&value))));
    g.bench_function("serde_json_parse_serialize", |b| {
        b.iter(|| {
            let v: Value = serde_json::from_slice(black_box(MESSAGE)).unwrap_or(Value::Null);
            serde_json::to_vec(&v).unwrap_or_default()
        })
    });
    g.bench_function("naive_value_jcs", |b| {
        b.iter(|| {
            let v: Value = serde_json::from_slice(black_box(MESSAGE)).unwrap_or(Value::Null);
            let mut out = Vec::new();
            naive_jcs(&v, &mut out);
            out
        })
    });
    g.finish();
}

criterion_group!(benches, canonical_1k);
criterion_main!(benches);
