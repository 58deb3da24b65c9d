//! Arbitrary bytes into `a2a_core::canonical::canonicalize`: it never panics, and whenever it accepts an input its output
//! is canonical (a fixed point), is JSON that serde_json parses, and equals the canonical form of serde_json's reading
//! of both the output and the input.
#![no_main]

use a2a_core::canonical::{canonicalize, to_canonical_vec};
use libfuzzer_sys::fuzz_target;
use serde::Deserialize;

/// serde_json without its recursion limit of 127 levels (canonicalize accepts 128).
fn parse(bytes: &[u8]) -> serde_json::Result<serde_json::Value> {
    let mut de = serde_json::Deserializer::from_slice(bytes);
    de.disable_recursion_limit();
    let value = serde_json::Value::deserialize(&mut de)?;
    de.end()?;
    Ok(value)
}

fuzz_target!(|data: &[u8]| {
    let Ok(out) = canonicalize(data) else {
        return;
    };
    let again = canonicalize(&out).expect("canonical output is accepted again");
    assert_eq!(again, out, "canonicalization is not idempotent");
    let value = parse(&out).expect("canonical output parses with serde_json");
    assert_eq!(to_canonical_vec(&value), out, "the byte and the value canonicalizers disagree");
    let input_value = parse(data).expect("accepted input parses with serde_json");
    assert_eq!(
        to_canonical_vec(&input_value),
        out,
        "the canonical form differs from serde_json's reading of the input"
    );
});
