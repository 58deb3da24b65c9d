//! Payloads made from a capability's declared `input_schema`, so that the suite can exercise an agent it knows
//! nothing about: a minimal valid payload (only required members, values at their bounds), and payloads that break
//! the schema in one known way. Every payload is checked with `a2a-core`'s validator (JSON Schema 2020-12, formats
//! asserted) before it is used, so a schema the generator does not understand yields no payload rather than a wrong one.

use a2a_core::negotiation::AgreedSchema;
use serde_json::{Map, Value, json};

/// Nesting beyond which the generator gives up.
const MAX_DEPTH: usize = 16;

/// A payload valid under `schema`, if the generator can make one.
pub fn valid(schema: &Value) -> Option<Value> {
    let candidate = generate(schema, 0)?;
    let compiled = AgreedSchema::compile(schema).ok()?;
    compiled.is_valid(&candidate).then_some(candidate)
}

/// A payload that `schema` refuses, the way it breaks the schema, and the paths `a2a-core`'s validator reports.
#[derive(Debug, Clone)]
pub struct Invalid {
    /// What is wrong with it, for the report.
    pub what: String,
    /// The payload.
    pub payload: Value,
    /// The error paths of the reference validator (NEG-42), sorted.
    pub paths: Vec<String>,
}

/// Payloads that break `schema`, each in one way: a required member left out, a member of the wrong type.
pub fn invalid(schema: &Value) -> Vec<Invalid> {
    let Some(good) = valid(schema) else { return Vec::new() };
    let Ok(compiled) = AgreedSchema::compile(schema) else { return Vec::new() };
    let mut out = Vec::new();
    let mut push = |what: String, payload: Value| {
        if let Err(errors) = compiled.validate(&payload) {
            let mut paths: Vec<String> = errors.into_iter().map(|e| e.path).collect();
            paths.sort();
            paths.dedup();
            out.push(Invalid { what, payload, paths });
        }
    };
    let props = schema.get("properties").and_then(Value::as_object);
    for name in schema.get("required").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str) {
        if let Some(obj) = good.as_object() {
            let mut p = obj.clone();
            p.remove(name);
            push(format!("required member {name:?} left out"), Value::Object(p));
        }
    }
    for (name, sub) in props.into_iter().flatten() {
        if let (Some(obj), Some(wrong)) = (good.as_object(), wrong_type(sub)) {
            let mut p = obj.clone();
            p.insert(name.clone(), wrong.clone());
            push(format!("member {name:?} of the wrong type ({wrong})"), Value::Object(p));
        }
    }
    // Several errors in one payload, so that their order (by path, then by message) and their uniqueness show
    // (NEG-43): every required member left out (several errors at ""), and every member of the wrong type.
    let required: Vec<&str> =
        schema.get("required").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str).collect();
    if required.len() >= 2 {
        push(format!("every required member ({}) left out", required.join(", ")), json!({}));
    }
    if let Some(obj) = good.as_object() {
        let mut p = obj.clone();
        let mut wrong_members = 0;
        for (name, sub) in props.into_iter().flatten() {
            if let Some(wrong) = wrong_type(sub) {
                p.insert(name.clone(), wrong);
                wrong_members += 1;
            }
        }
        if wrong_members >= 2 {
            push("every member of the wrong type".into(), Value::Object(p));
        }
    }
    out
}

/// A value of a type the subschema does not admit.
fn wrong_type(schema: &Value) -> Option<Value> {
    let types = types_of(schema);
    if types.is_empty() {
        return None;
    }
    [json!(true), json!(12345), json!("not-of-this-type"), json!([1]), json!({"x": 1})]
        .into_iter()
        .find(|v| !types.iter().any(|t| admits(t, v)))
}

fn admits(t: &str, v: &Value) -> bool {
    match t {
        "string" => v.is_string(),
        "number" => v.is_number(),
        "integer" => v.is_i64() || v.is_u64(),
        "boolean" => v.is_boolean(),
        "object" => v.is_object(),
        "array" => v.is_array(),
        "null" => v.is_null(),
        _ => true,
    }
}

fn types_of(schema: &Value) -> Vec<String> {
    match schema.get("type") {
        Some(Value::String(s)) => vec![s.clone()],
        Some(Value::Array(a)) => a.iter().filter_map(Value::as_str).map(str::to_owned).collect(),
        _ => Vec::new(),
    }
}

fn generate(schema: &Value, depth: usize) -> Option<Value> {
    if depth > MAX_DEPTH {
        return None;
    }
    let obj = schema.as_object()?;
    if let Some(c) = obj.get("const") {
        return Some(c.clone());
    }
    if let Some(values) = obj.get("enum").and_then(Value::as_array) {
        return values.iter().find(|v| !v.is_null()).or(values.first()).cloned();
    }
    let types = types_of(schema);
    let base = types.iter().find(|t| *t != "null").map(String::as_str).or(types.first().map(String::as_str));
    match base? {
        "object" => {
            let mut out = Map::new();
            let props = obj.get("properties").and_then(Value::as_object);
            for name in obj.get("required").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str) {
                let sub = props.and_then(|p| p.get(name));
                let v = match sub {
                    Some(s) => generate(s, depth + 1)?,
                    None => match obj.get("additionalProperties") {
                        Some(ap @ Value::Object(_)) => generate(ap, depth + 1)?,
                        _ => json!("conformance"),
                    },
                };
                out.insert(name.to_owned(), v);
            }
            Some(Value::Object(out))
        }
        "array" => {
            let n = obj.get("minItems").and_then(Value::as_u64).unwrap_or(0).min(16) as usize;
            let unique = obj.get("uniqueItems").and_then(Value::as_bool).unwrap_or(false);
            let item = obj.get("items");
            let mut out = Vec::with_capacity(n);
            for i in 0..n {
                let v = match item {
                    Some(s) => variant(s, i, depth)?,
                    None => json!(i),
                };
                if unique && out.contains(&v) {
                    return None;
                }
                out.push(v);
            }
            Some(Value::Array(out))
        }
        "string" => string(obj, 0),
        "number" | "integer" => number(obj, 0),
        "boolean" => Some(json!(false)),
        "null" => Some(Value::Null),
        _ => None,
    }
}

/// The `i`-th distinct value of a subschema (for arrays with `uniqueItems`).
fn variant(schema: &Value, i: usize, depth: usize) -> Option<Value> {
    let obj = schema.as_object()?;
    if obj.contains_key("const") {
        return generate(schema, depth + 1);
    }
    if let Some(values) = obj.get("enum").and_then(Value::as_array) {
        return values.get(i).or(values.first()).cloned();
    }
    match types_of(schema).iter().find(|t| *t != "null").map(String::as_str) {
        Some("string") => string(obj, i),
        Some("number" | "integer") => number(obj, i),
        Some("boolean") => Some(json!(i % 2 == 1)),
        _ => generate(schema, depth + 1),
    }
}

fn format_sample(format: &str) -> Option<&'static str> {
    Some(match format {
        "date-time" => "2026-01-01T00:00:00Z",
        "date" => "2026-01-01",
        "time" => "00:00:00Z",
        "duration" => "PT1S",
        "email" | "idn-email" => "conformance@example.com",
        "hostname" | "idn-hostname" => "example.com",
        "ipv4" => "192.0.2.1",
        "ipv6" => "2001:db8::1",
        "uri" | "iri" => "https://example.com/conformance",
        "uri-reference" | "iri-reference" => "/conformance",
        "uri-template" => "https://example.com/{id}",
        "uuid" => "00000000-0000-4000-8000-000000000000",
        "json-pointer" => "/conformance",
        "relative-json-pointer" => "0",
        "regex" => "^conformance$",
        _ => return None,
    })
}

fn string(obj: &Map<String, Value>, i: usize) -> Option<Value> {
    let min = obj.get("minLength").and_then(Value::as_u64).unwrap_or(0) as usize;
    let max = obj.get("maxLength").and_then(Value::as_u64).map_or(usize::MAX, |m| m as usize);
    let fits = |s: &str| (min..=max).contains(&s.chars().count());
    let mut candidates: Vec<String> = Vec::new();
    if let Some(f) = obj.get("format").and_then(Value::as_str).and_then(format_sample) {
        candidates.push(f.to_owned());
    }
    // The i-th distinct value: a letter suffix and a digit suffix, for patterns of either kind.
    let suffixes: Vec<String> = if i == 0 {
        vec![String::new()]
    } else {
        let letters: String = std::iter::successors(Some(i), |n| (*n >= 26).then(|| n / 26))
            .map(|n| char::from(b'a' + (n % 26) as u8))
            .collect();
        vec![letters, i.to_string()]
    };
    for suffix in &suffixes {
        let word = format!("conformance{suffix}");
        candidates.push(word.clone());
        candidates.push(format!("{word}{}", "x".repeat(min.saturating_sub(word.len()))));
        candidates.push(word.chars().take(max).collect());
        candidates.push(format!("{}{suffix}", "x".repeat(min.max(1))));
        for s in ["a", "A", "0", "1", "aa", "abc", "ABC", "a1", "x-1", "a_b", "2026-01-01"] {
            candidates.push(format!("{s}{suffix}"));
            candidates.push(format!("{s}{}", suffix.to_ascii_uppercase()));
        }
    }
    let validator = AgreedSchema::compile(&Value::Object(obj.clone())).ok()?;
    candidates.into_iter().filter(|c| fits(c)).map(Value::String).find(|c| validator.is_valid(c))
}

fn number(obj: &Map<String, Value>, i: usize) -> Option<Value> {
    let get = |k: &str| obj.get(k).and_then(Value::as_f64);
    let step = get("multipleOf").unwrap_or(1.0);
    let mut candidates = Vec::new();
    for base in [get("minimum"), get("exclusiveMinimum"), Some(0.0), get("maximum"), get("exclusiveMaximum")]
        .into_iter()
        .flatten()
    {
        let k = (base / step).ceil();
        for d in [0.0, 1.0, -1.0, 2.0] {
            candidates.push((k + d + i as f64) * step);
        }
        candidates.push(base + i as f64);
    }
    let sub = Value::Object(obj.clone());
    let validator = AgreedSchema::compile(&sub).ok()?;
    candidates
        .into_iter()
        .filter(|n| n.is_finite())
        .map(|n| if n.fract() == 0.0 && n.abs() < 9.0e15 { json!(n as i64) } else { json!(n) })
        .find(|v| validator.is_valid(v))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn valid_payloads_satisfy_the_demo_schemas() {
        for schema in [
            json!({"type":"object","properties":{"message":{"type":"string"}},"required":["message"]}),
            json!({"type":"object","properties":{"title":{"type":"string","minLength":1},
                   "timestamp":{"type":"string","format":"date-time"}},"required":["title","timestamp"]}),
            json!({"type":"object","properties":{"seconds":{"type":"number","minimum":0,"maximum":600}},"required":["seconds"]}),
            json!({"type":"object","properties":{"amount":{"type":"number","minimum":0},
                   "currency":{"type":"string","enum":["EUR","USD"]}},"required":["amount","currency"]}),
            json!({"type":"object","properties":{"tags":{"type":"array","items":{"type":"string","pattern":"^[a-z]+$"},
                   "minItems":3,"uniqueItems":true},"n":{"type":"number","exclusiveMinimum":2,"multipleOf":0.5}},
                   "required":["tags","n"]}),
            json!({"type":"object","properties":{"code":{"type":"string","pattern":"^[A-Z]{3}$"}},"required":["code"]}),
            json!({"type":"object"}),
        ] {
            let p = valid(&schema).unwrap_or_else(|| panic!("no payload for {schema}"));
            assert!(AgreedSchema::compile(&schema).map(|s| s.is_valid(&p)).unwrap_or(false), "{schema}: {p}");
        }
    }

    #[test]
    fn invalid_payloads_break_the_schema_where_they_say() {
        let schema = json!({"type":"object","properties":{"title":{"type":"string"},"n":{"type":"number"}},
                            "required":["title"]});
        let bad = invalid(&schema);
        assert!(bad.iter().any(|b| b.paths == ["/title"] && b.what.contains("left out")), "{bad:?}");
        assert!(bad.iter().any(|b| b.paths == ["/n"]), "{bad:?}");
        assert!(invalid(&json!({"type":"object"})).is_empty());
    }

    #[test]
    fn impossible_patterns_give_no_payload_rather_than_a_wrong_one() {
        let schema = json!({"type":"object","properties":{"x":{"type":"string","pattern":"^q{40}$"}},"required":["x"]});
        assert_eq!(valid(&schema), None);
    }
}
