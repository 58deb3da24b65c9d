//! RFC 8785 JSON Canonicalization Scheme (JCS) (`spec/PROTOCOL.md` §9.2). Being rewritten (issue 2): this first version
//! works on `serde_json::Value`.

use serde_json::Value;

/// Why a JSON text cannot be canonicalized.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("cannot canonicalize: {0}")]
pub struct CanonicalError(pub String);

/// Parses `json` and returns its RFC 8785 canonical form.
pub fn canonicalize(json: &[u8]) -> Result<Vec<u8>, CanonicalError> {
    let v: Value = serde_json::from_slice(json).map_err(|e| CanonicalError(e.to_string()))?;
    Ok(to_canonical_vec(&v))
}

/// The RFC 8785 canonical form of a JSON value.
pub fn to_canonical_vec(value: &Value) -> Vec<u8> {
    let mut out = Vec::new();
    write_value(value, &mut out);
    out
}

fn write_value(v: &Value, out: &mut Vec<u8>) {
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
        Value::String(s) => write_string(s, out),
        Value::Array(a) => {
            out.push(b'[');
            for (i, x) in a.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_value(x, out);
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
                write_string(k, out);
                out.push(b':');
                if let Some(x) = m.get(k) {
                    write_value(x, out);
                }
            }
            out.push(b'}');
        }
    }
}

fn write_string(s: &str, out: &mut Vec<u8>) {
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
