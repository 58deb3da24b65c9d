//! The schema rules of NEGOTIATE (`spec/PROTOCOL.md` §6.2) and the `nullable` converter.
//!
//! A proposed schema, and every capability's `input_schema`, is a self-contained JSON Schema written in a subset of
//! draft 2020-12. [`check`] walks a schema and reports **every** rule it breaks at once, each as a [`Violation`] with a
//! stable rule id (see [`rules`]), a JSON Pointer into the schema and a message saying what to write instead. An agent
//! answers a proposal that breaks the rules with `422 schema_rule_violation` and the violations in
//! `details.violations` ([`violations_error`]).
//!
//! ```
//! use a2a_core::schema_rules::check;
//! use serde_json::json;
//!
//! let v = check(&json!({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n", "m"]}));
//! let found: Vec<(&str, &str)> = v.iter().map(|v| (v.rule.as_str(), v.path.as_str())).collect();
//! assert_eq!(found, [("type_not_allowed", "/properties/n/type"), ("required_not_defined", "/required/1")]);
//! ```
//!
//! [`fix_nullable`] is the tool step that rewrites OpenAPI 3.0 `nullable: true` into the union form the rules accept.

use std::cmp::Ordering;
use std::collections::HashSet;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::error::{A2aError, ErrorCode};

/// The stable rule ids a [`Violation`] carries.
pub mod rules {
    /// The root is not a JSON object with `"type": "object"`.
    pub const ROOT_NOT_OBJECT: &str = "root_not_object";
    /// A name in `required` is not defined in `properties` of the same schema object.
    pub const REQUIRED_NOT_DEFINED: &str = "required_not_defined";
    /// A property, `items` or `additionalProperties` schema has no `type`.
    pub const TYPE_MISSING: &str = "type_missing";
    /// `type` is not one of the five types, nor one of them united with `"null"`.
    pub const TYPE_NOT_ALLOWED: &str = "type_not_allowed";
    /// `format` on a schema whose type is not `"string"` (or `["string","null"]`).
    pub const FORMAT_REQUIRES_STRING: &str = "format_requires_string";
    /// The OpenAPI keyword `nullable`.
    pub const NULLABLE_NOT_SUPPORTED: &str = "nullable_not_supported";
    /// `$ref` and the other referencing keywords: schemas are self-contained.
    pub const REF_NOT_ALLOWED: &str = "ref_not_allowed";
    /// A keyword outside the allowed set (composition keywords included).
    pub const UNKNOWN_KEYWORD: &str = "unknown_keyword";
    /// A keyword whose value has the wrong JSON type or an impossible value.
    pub const INVALID_KEYWORD_VALUE: &str = "invalid_keyword_value";
    /// Subschemas nested deeper than [`MAX_DEPTH`](super::MAX_DEPTH).
    pub const TOO_DEEP: &str = "too_deep";
    /// More than [`MAX_SCHEMAS`](super::MAX_SCHEMAS) subschemas in total.
    pub const TOO_LARGE: &str = "too_large";

    /// Every rule id, in specification order.
    pub const ALL: &[&str] = &[
        ROOT_NOT_OBJECT,
        REQUIRED_NOT_DEFINED,
        TYPE_MISSING,
        TYPE_NOT_ALLOWED,
        FORMAT_REQUIRES_STRING,
        NULLABLE_NOT_SUPPORTED,
        REF_NOT_ALLOWED,
        UNKNOWN_KEYWORD,
        INVALID_KEYWORD_VALUE,
        TOO_DEEP,
        TOO_LARGE,
    ];
}

/// The deepest nesting of subschemas accepted: the root is at depth 0, each step into `properties/<name>`, `items` or
/// `additionalProperties` adds one.
pub const MAX_DEPTH: usize = 32;

/// The largest number of subschemas (schemas under `properties`, `items` and `additionalProperties`, at any depth)
/// accepted in one schema.
pub const MAX_SCHEMAS: usize = 1024;

/// The most violations [`check`] reports; the rest are dropped (the list is cut after sorting).
pub const MAX_VIOLATIONS: usize = 256;

/// The only `$schema` value accepted.
pub const DIALECT: &str = "https://json-schema.org/draft/2020-12/schema";

/// Every keyword a schema may use, besides extension keywords that start with `x-`.
pub const ALLOWED_KEYWORDS: &[&str] = &[
    "type",
    "properties",
    "required",
    "additionalProperties",
    "items",
    "minItems",
    "maxItems",
    "uniqueItems",
    "enum",
    "const",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
    "minLength",
    "maxLength",
    "pattern",
    "format",
    "description",
    "title",
    "default",
    "examples",
    "deprecated",
    "readOnly",
    "writeOnly",
    "$comment",
    "$schema",
];

/// One violation of the schema rules.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct Violation {
    /// The rule broken (stable identifier, one of [`rules::ALL`]).
    pub rule: String,
    /// JSON Pointer (RFC 6901) into the schema: the keyword, array element or subschema at fault.
    pub path: String,
    /// A message for people: what is wrong and what to write instead.
    pub message: String,
}

impl Violation {
    /// The error code a proposal with this violation is refused with: `schema_rule_violation`.
    pub fn code(&self) -> ErrorCode {
        ErrorCode::SCHEMA_RULE_VIOLATION
    }
}

/// The `422 schema_rule_violation` error for a list of violations, with `details.violations`.
pub fn violations_error(violations: &[Violation]) -> A2aError {
    let n = violations.len();
    let first = violations.first().map_or(String::new(), |v| {
        let at = if v.path.is_empty() { "the root".to_owned() } else { format!("`{}`", v.path) };
        format!("; first, at {at}: {}", v.message)
    });
    let noun = if n == 1 { "rule" } else { "rules" };
    A2aError::with_message(
        ErrorCode::SCHEMA_RULE_VIOLATION,
        format!("the proposed schema breaks {n} schema {noun}{first}; see details.violations"),
    )
    .details(serde_json::json!({ "violations": violations }))
}

// ---------------------------------------------------------------------------------------------------------------------
// Paths

/// One step of a JSON Pointer.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum Seg {
    /// An object member.
    Key(String),
    /// An array element.
    Index(usize),
}

/// Renders segments as an RFC 6901 JSON Pointer (`""` for the root).
pub(crate) fn pointer(segs: &[Seg]) -> String {
    let mut out = String::new();
    for s in segs {
        out.push('/');
        match s {
            Seg::Key(k) => {
                for c in k.chars() {
                    match c {
                        '~' => out.push_str("~0"),
                        '/' => out.push_str("~1"),
                        c => out.push(c),
                    }
                }
            }
            Seg::Index(i) => out.push_str(&i.to_string()),
        }
    }
    out
}

/// A path with a key appended.
pub(crate) fn join(base: &[Seg], key: &str) -> Vec<Seg> {
    let mut p = base.to_vec();
    p.push(Seg::Key(key.to_owned()));
    p
}

/// A path with an index appended.
pub(crate) fn join_index(base: &[Seg], i: usize) -> Vec<Seg> {
    let mut p = base.to_vec();
    p.push(Seg::Index(i));
    p
}

/// The order every list of this module and of `negotiation` is sorted in: by path, segment by segment (object keys by
/// code point, array indices by number, a path before its extensions), which is the document order of a depth-first
/// walk that visits object keys sorted.
pub(crate) fn path_order(a: &[Seg], b: &[Seg]) -> Ordering {
    a.cmp(b)
}

// ---------------------------------------------------------------------------------------------------------------------
// Types

/// One of the five types of the rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BaseType {
    String,
    Number,
    Boolean,
    Object,
    Array,
}

impl BaseType {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::String => "string",
            Self::Number => "number",
            Self::Boolean => "boolean",
            Self::Object => "object",
            Self::Array => "array",
        }
    }

    fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "string" => Self::String,
            "number" => Self::Number,
            "boolean" => Self::Boolean,
            "object" => Self::Object,
            "array" => Self::Array,
            _ => return None,
        })
    }

    /// Whether a JSON value is of this type.
    pub(crate) fn admits(self, v: &Value) -> bool {
        match self {
            Self::String => v.is_string(),
            Self::Number => v.is_number(),
            Self::Boolean => v.is_boolean(),
            Self::Object => v.is_object(),
            Self::Array => v.is_array(),
        }
    }
}

/// A `type` the rules accept: a base type, possibly united with `"null"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TypeSpec {
    pub(crate) base: BaseType,
    pub(crate) nullable: bool,
}

impl TypeSpec {
    /// Whether a JSON value is of this type.
    pub(crate) fn admits(self, v: &Value) -> bool {
        (self.nullable && v.is_null()) || self.base.admits(v)
    }

    /// The `type` value: `"string"` or `["string","null"]`.
    pub(crate) fn to_value(self) -> Value {
        if self.nullable {
            serde_json::json!([self.base.name(), "null"])
        } else {
            Value::String(self.base.name().to_owned())
        }
    }
}

/// Parses a `type` value the rules accept; `None` for anything else.
pub(crate) fn parse_type(v: &Value) -> Option<TypeSpec> {
    match v {
        Value::String(s) => BaseType::parse(s).map(|base| TypeSpec { base, nullable: false }),
        Value::Array(a) => match a.as_slice() {
            [Value::String(x), Value::String(y)] => {
                let base = if y == "null" {
                    x
                } else if x == "null" {
                    y
                } else {
                    return None;
                };
                BaseType::parse(base).map(|base| TypeSpec { base, nullable: true })
            }
            _ => None,
        },
        _ => None,
    }
}

/// Why a `type` value is refused: the rule and the message.
fn type_problem(v: &Value) -> Option<(&'static str, String)> {
    if parse_type(v).is_some() {
        return None;
    }
    let five = r#"one of "string", "number", "boolean", "object", "array""#;
    let name_problem = |s: &str, in_union: bool| -> String {
        match s {
            "integer" if in_union => {
                r#""integer" is not one of the five types; write "type": ["number","null"] with "multipleOf": 1"#.into()
            }
            "integer" => {
                r#""integer" is not one of the five types; write "type": "number" with "multipleOf": 1"#.into()
            }
            "null" => format!(
                r#""null" alone is not a type here (a value that is always null carries no data); use {five}, or a union with "null" such as ["string","null"]"#
            ),
            other => format!(
                "{} is not a type; use {five}, or a union with \"null\" such as [\"string\",\"null\"]",
                q(other)
            ),
        }
    };
    Some(match v {
        Value::String(s) => (rules::TYPE_NOT_ALLOWED, name_problem(s, false)),
        Value::Array(a) => {
            if a.iter().any(|x| !x.is_string()) {
                (rules::INVALID_KEYWORD_VALUE, "`type` must be a string or an array of two strings".into())
            } else if let [Value::String(x), Value::String(y)] = a.as_slice() {
                let other = if y == "null" {
                    x
                } else if x == "null" {
                    y
                } else {
                    ""
                };
                if other.is_empty() {
                    (
                        rules::TYPE_NOT_ALLOWED,
                        format!(
                            "a type union must be one of the five types and \"null\", e.g. [\"string\",\"null\"]; {} is not allowed",
                            compact(v)
                        ),
                    )
                } else {
                    (rules::TYPE_NOT_ALLOWED, name_problem(other, true))
                }
            } else {
                (
                    rules::TYPE_NOT_ALLOWED,
                    format!(
                        "a type union must have exactly two members, one of the five types and \"null\", e.g. [\"string\",\"null\"]; {} is not allowed",
                        compact(v)
                    ),
                )
            }
        }
        _ => (rules::INVALID_KEYWORD_VALUE, "`type` must be a string or an array of two strings".into()),
    })
}

/// A short JSON rendering of a value for messages (cut at 80 bytes).
pub(crate) fn compact(v: &Value) -> String {
    let s = v.to_string();
    if s.len() <= 80 {
        return s;
    }
    let mut end = 77;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}...", s.get(..end).unwrap_or_default())
}

/// A quoted string for messages.
fn q(s: &str) -> String {
    compact(&Value::String(s.to_owned()))
}

// ---------------------------------------------------------------------------------------------------------------------
// Keyword values

/// A non-negative integer length or count (`3` or `3.0`).
pub(crate) fn as_count(v: &Value) -> Option<u64> {
    if let Some(n) = v.as_u64() {
        return Some(n);
    }
    let f = v.as_f64()?;
    // 18446744073709551616.0 is 2^64, the first value that does not fit.
    if f >= 0.0 && f.fract() == 0.0 && f < 18_446_744_073_709_551_616.0 {
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        return Some(f as u64);
    }
    None
}

/// A numeric bound: its value and whether it is exclusive.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Bound {
    pub(crate) value: f64,
    pub(crate) exclusive: bool,
}

/// The effective lower bound of a schema object (`minimum` and `exclusiveMinimum`), with the keyword that sets it.
pub(crate) fn lower_bound(s: &Map<String, Value>) -> Option<(Bound, &'static str)> {
    let inc = s.get("minimum").and_then(Value::as_f64).map(|v| (Bound { value: v, exclusive: false }, "minimum"));
    let exc = s
        .get("exclusiveMinimum")
        .and_then(Value::as_f64)
        .map(|v| (Bound { value: v, exclusive: true }, "exclusiveMinimum"));
    match (inc, exc) {
        (Some(a), Some(b)) => Some(if stricter_lower(b.0, a.0) { b } else { a }),
        (a, b) => a.or(b),
    }
}

/// The effective upper bound of a schema object (`maximum` and `exclusiveMaximum`), with the keyword that sets it.
pub(crate) fn upper_bound(s: &Map<String, Value>) -> Option<(Bound, &'static str)> {
    let inc = s.get("maximum").and_then(Value::as_f64).map(|v| (Bound { value: v, exclusive: false }, "maximum"));
    let exc = s
        .get("exclusiveMaximum")
        .and_then(Value::as_f64)
        .map(|v| (Bound { value: v, exclusive: true }, "exclusiveMaximum"));
    match (inc, exc) {
        (Some(a), Some(b)) => Some(if stricter_upper(b.0, a.0) { b } else { a }),
        (a, b) => a.or(b),
    }
}

/// Whether lower bound `a` admits strictly fewer numbers than `b`.
pub(crate) fn stricter_lower(a: Bound, b: Bound) -> bool {
    a.value > b.value || (a.value == b.value && a.exclusive && !b.exclusive)
}

/// Whether upper bound `a` admits strictly fewer numbers than `b`.
pub(crate) fn stricter_upper(a: Bound, b: Bound) -> bool {
    a.value < b.value || (a.value == b.value && a.exclusive && !b.exclusive)
}

/// Whether no number lies between a lower and an upper bound.
pub(crate) fn range_is_empty(lo: Bound, hi: Bound) -> bool {
    lo.value > hi.value || (lo.value == hi.value && (lo.exclusive || hi.exclusive))
}

/// Renders a bound for messages, e.g. `minimum 5` or `exclusiveMaximum 10`.
pub(crate) fn describe_bound(keyword: &str, b: Bound) -> String {
    format!("{keyword} {}", number_text(b.value))
}

/// A number for messages, without a useless `.0`.
pub(crate) fn number_text(f: f64) -> String {
    Value::from(f).to_string().trim_end_matches(".0").to_owned()
}

/// Whether a `pattern` compiles with the regular-expression engine of the `jsonschema` crate (ECMA-262 syntax, the
/// engine that validates payloads); the error message otherwise.
pub(crate) fn pattern_error(pattern: &str) -> Option<String> {
    let probe = serde_json::json!({ "pattern": pattern });
    match jsonschema::options().with_draft(jsonschema::Draft::Draft202012).build(&probe) {
        Ok(_) => None,
        Err(e) => Some(e.to_string()),
    }
}

/// JSON equality with numbers compared by value (`1` equals `1.0`), as JSON Schema's `enum` and `const` compare.
pub(crate) fn json_equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => {
            if let (Some(x), Some(y)) = (x.as_i64(), y.as_i64()) {
                x == y
            } else if let (Some(x), Some(y)) = (x.as_u64(), y.as_u64()) {
                x == y
            } else {
                x.as_f64() == y.as_f64()
            }
        }
        (Value::Array(x), Value::Array(y)) => x.len() == y.len() && x.iter().zip(y).all(|(a, b)| json_equal(a, b)),
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| json_equal(v, w)))
        }
        _ => a == b,
    }
}

// ---------------------------------------------------------------------------------------------------------------------
// check

/// Checks a schema against the rules and returns every violation (empty when the schema follows them), sorted by
/// path (see the module documentation) and cut at [`MAX_VIOLATIONS`].
pub fn check(schema: &Value) -> Vec<Violation> {
    let mut c = Checker { found: Vec::new(), schemas: 0, stopped: false };
    match schema.as_object() {
        None => c.push(
            Vec::new(),
            rules::ROOT_NOT_OBJECT,
            format!(
                "the schema must be a JSON object with \"type\": \"object\" (payloads are JSON objects); got {}",
                json_kind(schema)
            ),
        ),
        Some(obj) => c.node(obj, &[], 0, true),
    }
    let mut found = c.found;
    found.sort_by(|a, b| path_order(&a.0, &b.0));
    found.truncate(MAX_VIOLATIONS);
    found
        .into_iter()
        .map(|(path, rule, message)| Violation { rule: rule.to_owned(), path: pointer(&path), message })
        .collect()
}

/// The JSON kind of a value, for messages: `an array`, `a string`, ...
pub(crate) fn json_kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

struct Checker {
    found: Vec<(Vec<Seg>, &'static str, String)>,
    schemas: usize,
    stopped: bool,
}

const COMPOSITION: &[&str] = &["allOf", "anyOf", "oneOf", "not", "if", "then", "else"];
const REFERENCING: &[&str] = &["$ref", "$dynamicRef", "$id", "$anchor", "$dynamicAnchor", "$defs", "definitions"];

impl Checker {
    fn push(&mut self, path: Vec<Seg>, rule: &'static str, message: String) {
        self.found.push((path, rule, message));
    }

    fn invalid(&mut self, path: Vec<Seg>, message: impl Into<String>) {
        self.push(path, rules::INVALID_KEYWORD_VALUE, message.into());
    }

    /// Checks a subschema reached through `properties`, `items` or `additionalProperties`.
    fn subschema(&mut self, v: &Value, path: Vec<Seg>, depth: usize, what: &str) {
        if self.stopped {
            return;
        }
        self.schemas += 1;
        if self.schemas > MAX_SCHEMAS {
            self.push(
                path,
                rules::TOO_LARGE,
                format!(
                    "the schema has more than {MAX_SCHEMAS} subschemas; split the capability or simplify the schema"
                ),
            );
            self.stopped = true;
            return;
        }
        match v.as_object() {
            Some(obj) => self.node(obj, &path, depth, false),
            None => self.invalid(
                path,
                format!("{what} must be a schema (a JSON object with a \"type\"); got {}", json_kind(v)),
            ),
        }
    }

    fn node(&mut self, obj: &Map<String, Value>, path: &[Seg], depth: usize, root: bool) {
        if depth > MAX_DEPTH {
            self.push(
                path.to_vec(),
                rules::TOO_DEEP,
                format!("subschemas are nested more than {MAX_DEPTH} levels deep; flatten the schema"),
            );
            return;
        }
        let ty = obj.get("type");
        if root {
            match ty {
                None => self.push(
                    path.to_vec(),
                    rules::ROOT_NOT_OBJECT,
                    "the root schema must declare \"type\": \"object\" (payloads are JSON objects)".into(),
                ),
                Some(Value::String(s)) if s == "object" => {}
                Some(other) => self.push(
                    join(path, "type"),
                    rules::ROOT_NOT_OBJECT,
                    format!(
                        "the root schema must have \"type\": \"object\" (payloads are JSON objects, never null); got {}",
                        compact(other)
                    ),
                ),
            }
        } else if ty.is_none() {
            let hint = if obj.contains_key("format") {
                " (this schema has a \"format\": write \"type\": \"string\")"
            } else {
                ""
            };
            self.push(
                path.to_vec(),
                rules::TYPE_MISSING,
                format!(
                    "this schema has no \"type\"; add one of \"string\", \"number\", \"boolean\", \"object\", \"array\", or a union with \"null\" such as [\"string\",\"null\"]{hint}"
                ),
            );
        }
        let spec = ty.and_then(parse_type);
        // Before the members, so that when `too_large` stops the walk every violation whose path sorts before the
        // stopping point has been found.
        self.empty_ranges(obj, path);

        let mut keys: Vec<&String> = obj.keys().collect();
        keys.sort();
        for key in keys {
            if self.stopped {
                return;
            }
            let Some(value) = obj.get(key.as_str()) else { continue };
            let at = join(path, key);
            match key.as_str() {
                "type" => {
                    if !root
                        && let Some((rule, msg)) = type_problem(value) {
                            self.push(at, rule, msg);
                        }
                }
                "properties" => self.properties(value, &at, depth),
                "required" => self.required(value, obj.get("properties"), &at),
                "additionalProperties" => match value {
                    Value::Bool(_) => {}
                    Value::Object(_) => self.subschema(value, at, depth + 1, "`additionalProperties`"),
                    other => self.invalid(
                        at,
                        format!("`additionalProperties` must be true, false or a schema; got {}", json_kind(other)),
                    ),
                },
                "items" => match value {
                    Value::Object(_) => self.subschema(value, at, depth + 1, "`items`"),
                    Value::Array(_) => self.invalid(
                        at,
                        "`items` must be one schema for every element; tuple validation (an array of schemas, prefixItems) is not supported",
                    ),
                    other => self.invalid(at, format!("`items` must be a schema; got {}", json_kind(other))),
                },
                "minItems" | "maxItems" | "minLength" | "maxLength" => {
                    if as_count(value).is_none() {
                        self.invalid(at, format!("`{key}` must be a non-negative integer; got {}", compact(value)));
                    }
                }
                "uniqueItems" | "deprecated" | "readOnly" | "writeOnly" => {
                    if !value.is_boolean() {
                        self.invalid(at, format!("`{key}` must be true or false; got {}", compact(value)));
                    }
                }
                "enum" => match value {
                    Value::Array(a) if !a.is_empty() => {
                        if let Some(t) = spec {
                            for (i, x) in a.iter().enumerate() {
                                if !t.admits(x) {
                                    self.invalid(
                                        join_index(&at, i),
                                        format!(
                                            "enum value {} is not of this schema's type {}; remove it or fix the type",
                                            compact(x),
                                            compact(&t.to_value())
                                        ),
                                    );
                                }
                            }
                        }
                    }
                    Value::Array(_) => self.invalid(at, "`enum` must list at least one value"),
                    other => self.invalid(
                        at,
                        format!("`enum` must be a non-empty array of the allowed values; got {}", json_kind(other)),
                    ),
                },
                "minimum" | "maximum" => {
                    if !value.is_number() {
                        self.invalid(at, format!("`{key}` must be a number; got {}", compact(value)));
                    }
                }
                "exclusiveMinimum" | "exclusiveMaximum" => {
                    if value.is_boolean() {
                        let inclusive = if key == "exclusiveMinimum" { "minimum" } else { "maximum" };
                        self.invalid(
                            at,
                            format!(
                                "in draft 2020-12 `{key}` is a number, not a boolean: write \"{key}\": <limit> instead of \"{inclusive}\": <limit> with \"{key}\": true"
                            ),
                        );
                    } else if !value.is_number() {
                        self.invalid(at, format!("`{key}` must be a number; got {}", compact(value)));
                    }
                }
                "multipleOf" => {
                    if !value.as_f64().is_some_and(|f| f > 0.0) {
                        self.invalid(at, format!("`multipleOf` must be a number greater than 0; got {}", compact(value)));
                    }
                }
                "pattern" => match value {
                    Value::String(p) => {
                        if let Some(e) = pattern_error(p) {
                            // The compiler's own text adds nothing when it only says the format `regex` failed.
                            let detail = if e.ends_with("is not a \"regex\"") { String::new() } else { format!(": {e}") };
                            self.invalid(
                                at,
                                format!(
                                    "`pattern` {} is not a valid regular expression in the ECMA-262 dialect payloads are validated with; check its brackets, parentheses, quantifiers and escapes{detail}",
                                    q(p)
                                ),
                            );
                        }
                    }
                    other => self.invalid(at, format!("`pattern` must be a string; got {}", json_kind(other))),
                },
                "format" => match value {
                    Value::String(_) => {
                        if spec.is_some_and(|t| t.base != BaseType::String) || (spec.is_none() && ty.is_some()) {
                            let got = ty.map(compact).unwrap_or_default();
                            self.push(
                                at,
                                rules::FORMAT_REQUIRES_STRING,
                                format!(
                                    "`format` applies to strings only: use \"type\": \"string\" (or [\"string\",\"null\"]) with it, or remove it; the type here is {got}"
                                ),
                            );
                        }
                    }
                    other => self.invalid(at, format!("`format` must be a string; got {}", json_kind(other))),
                },
                "description" | "title" | "$comment" => {
                    if !value.is_string() {
                        self.invalid(at, format!("`{key}` must be a string; got {}", json_kind(value)));
                    }
                }
                "examples" => {
                    if !value.is_array() {
                        self.invalid(at, format!("`examples` must be an array of example values; got {}", json_kind(value)));
                    }
                }
                "const" => {
                    if let Some(t) = spec.filter(|t| !t.admits(value)) {
                        self.invalid(
                            at,
                            format!(
                                "const {} is not of this schema's type {}; fix the value or the type",
                                compact(value),
                                compact(&t.to_value())
                            ),
                        );
                    }
                }
                "default" => {}
                "$schema" => {
                    if !root {
                        self.invalid(at, "`$schema` is allowed only at the root of the schema");
                    } else if value.as_str() != Some(DIALECT) {
                        self.invalid(
                            at,
                            format!("`$schema` must be \"{DIALECT}\" (draft 2020-12) or be left out; got {}", compact(value)),
                        );
                    }
                }
                "nullable" => {
                    let ty_text = match spec {
                        Some(t) => compact(&TypeSpec { nullable: true, ..t }.to_value()),
                        None => "[\"<type>\",\"null\"]".to_owned(),
                    };
                    self.push(
                        at,
                        rules::NULLABLE_NOT_SUPPORTED,
                        format!(
                            "`nullable` is an OpenAPI 3.0 keyword, not JSON Schema; write \"type\": {ty_text} instead (run `a2a schema fix FILE` to convert a whole schema)"
                        ),
                    );
                }
                k if REFERENCING.contains(&k) => self.push(
                    at,
                    rules::REF_NOT_ALLOWED,
                    format!(
                        "`{k}` is not allowed: schemas are self-contained and nothing is ever fetched; write the referenced schema inline"
                    ),
                ),
                k if COMPOSITION.contains(&k) => self.push(
                    at,
                    rules::UNKNOWN_KEYWORD,
                    format!(
                        "`{k}` (schema composition) is not supported in protocol 0.3; write one schema with the properties and constraints inline"
                    ),
                ),
                k if k.starts_with("x-") => {}
                k => self.push(
                    at,
                    rules::UNKNOWN_KEYWORD,
                    format!(
                        "`{}` is not a keyword of the schema rules; remove it, or rename it `x-{}` if it is an extension",
                        k.chars().take(64).collect::<String>(),
                        k.chars().take(64).collect::<String>()
                    ),
                ),
            }
        }
    }

    fn properties(&mut self, value: &Value, at: &[Seg], depth: usize) {
        let Some(props) = value.as_object() else {
            self.invalid(
                at.to_vec(),
                format!(
                    "`properties` must be an object mapping each property name to its schema; got {}",
                    json_kind(value)
                ),
            );
            return;
        };
        let mut names: Vec<&String> = props.keys().collect();
        names.sort();
        for name in names {
            if let Some(sub) = props.get(name.as_str()) {
                self.subschema(sub, join(at, name), depth + 1, "a property");
            }
        }
    }

    fn required(&mut self, value: &Value, props: Option<&Value>, at: &[Seg]) {
        let Some(names) = value.as_array() else {
            self.invalid(
                at.to_vec(),
                format!("`required` must be an array of property names; got {}", json_kind(value)),
            );
            return;
        };
        // When `properties` is present but not an object that is reported already; do not repeat it for each name.
        let props = match props {
            Some(Value::Object(p)) => Some(p),
            Some(_) => return,
            None => None,
        };
        let mut seen = HashSet::new();
        for (i, n) in names.iter().enumerate() {
            let here = join_index(at, i);
            let Some(name) = n.as_str() else {
                self.invalid(here, format!("`required` must contain property names (strings); got {}", compact(n)));
                continue;
            };
            if !seen.insert(name) {
                self.invalid(here, format!("{} is listed twice in `required`", q(name)));
                continue;
            }
            if !props.is_some_and(|p| p.contains_key(name)) {
                self.push(
                    here,
                    rules::REQUIRED_NOT_DEFINED,
                    format!(
                        "{} is required but not defined in `properties` of the same schema; add \"properties\": {{{}: {{\"type\": ...}}}} or remove it from `required`",
                        q(name),
                        q(name)
                    ),
                );
            }
        }
    }

    /// Ranges no value can satisfy: `minLength` > `maxLength`, `minItems` > `maxItems`, an empty numeric range.
    fn empty_ranges(&mut self, obj: &Map<String, Value>, path: &[Seg]) {
        for (lo, hi) in [("minLength", "maxLength"), ("minItems", "maxItems")] {
            if let (Some(a), Some(b)) = (obj.get(lo).and_then(as_count), obj.get(hi).and_then(as_count))
                && a > b
            {
                self.invalid(join(path, hi), format!("`{hi}` {b} is smaller than `{lo}` {a}: no value can match"));
            }
        }
        if let (Some((lo, lk)), Some((hi, hk))) = (lower_bound(obj), upper_bound(obj))
            && range_is_empty(lo, hi)
        {
            self.invalid(
                join(path, hk),
                format!("{} and {} leave no number that can match", describe_bound(lk, lo), describe_bound(hk, hi)),
            );
        }
    }
}

// ---------------------------------------------------------------------------------------------------------------------
// fix_nullable

/// What [`fix_nullable`] did at one place.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum NullableChangeKind {
    /// `nullable: true` became a union with `"null"` in `type` (`"string"` to `["string","null"]`).
    TypeUnion,
    /// `null` was appended to `enum`, because `nullable: true` admits null (OpenAPI 3.0 semantics).
    EnumNull,
    /// `nullable: false` was removed (it is the default).
    RemovedFalse,
    /// `nullable: true` was removed because `type` already admits null.
    RemovedRedundant,
}

/// One change [`fix_nullable`] made.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct NullableChange {
    /// JSON Pointer to the keyword changed: `.../type` or `.../enum` (in the output), `.../nullable` (removed).
    pub path: String,
    /// What was done.
    pub kind: NullableChangeKind,
    /// A message for people.
    pub message: String,
}

/// A `nullable` that [`fix_nullable`] could not convert; the schema is left unchanged there.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Unconvertible {
    /// JSON Pointer to the `nullable` keyword (or, for `too_deep`, to the schema not visited).
    pub path: String,
    /// Why: `no_type`, `not_boolean`, `type_not_convertible`, `next_to_ref`, `next_to_composition`, `next_to_const`,
    /// `too_deep`.
    pub reason: String,
    /// A message for people: what to do by hand.
    pub message: String,
}

/// The result of [`fix_nullable`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct NullableFix {
    /// The converted schema.
    pub schema: Value,
    /// What was changed, sorted by path.
    pub changes: Vec<NullableChange>,
    /// What could not be converted, sorted by path.
    pub unconvertible: Vec<Unconvertible>,
}

/// The deepest nesting [`fix_nullable`] visits; deeper schemas are reported `too_deep` and left unchanged.
pub const FIX_MAX_DEPTH: usize = 128;

/// Converts OpenAPI 3.0 `nullable` into the union form the schema rules accept (the seed's pre-process step for
/// OpenAPI Generator output; the `a2a schema fix FILE` command).
///
/// At every schema object (the root, and recursively under `properties`, `items`, `additionalProperties`,
/// `prefixItems`, `allOf`, `anyOf`, `oneOf`, `not`, `$defs` and `definitions`):
/// - `nullable: false` is removed;
/// - `nullable: true` with `type` a name (`"string"`) becomes `"type": ["string","null"]`; with `type` an array that
///   lacks `"null"`, `"null"` is appended; with a `type` that already admits null, `nullable` is just removed; when
///   `enum` is present and lacks `null`, `null` is appended to it;
/// - `nullable: true` without `type`, next to `$ref`, `allOf`, `anyOf`, `oneOf` or `const`, or `nullable` that is not a
///   boolean, is reported in `unconvertible` and left as it is.
///
/// The conversion is idempotent: converting its output again changes nothing.
///
/// ```
/// use a2a_core::schema_rules::fix_nullable;
/// use serde_json::json;
///
/// let fix = fix_nullable(&json!({"type": "object", "properties": {"n": {"type": "string", "nullable": true}}}));
/// assert_eq!(fix.schema, json!({"type": "object", "properties": {"n": {"type": ["string", "null"]}}}));
/// ```
pub fn fix_nullable(schema: &Value) -> NullableFix {
    let mut f = Fixer { changes: Vec::new(), unconvertible: Vec::new() };
    let mut out = schema.clone();
    f.visit(&mut out, &[], 0);
    f.changes.sort_by(|a, b| path_order(&a.0, &b.0));
    f.unconvertible.sort_by(|a, b| path_order(&a.0, &b.0));
    NullableFix {
        schema: out,
        changes: f
            .changes
            .into_iter()
            .map(|(p, kind, message)| NullableChange { path: pointer(&p), kind, message })
            .collect(),
        unconvertible: f
            .unconvertible
            .into_iter()
            .map(|(p, reason, message)| Unconvertible { path: pointer(&p), reason: reason.to_owned(), message })
            .collect(),
    }
}

struct Fixer {
    changes: Vec<(Vec<Seg>, NullableChangeKind, String)>,
    unconvertible: Vec<(Vec<Seg>, &'static str, String)>,
}

impl Fixer {
    fn visit(&mut self, v: &mut Value, path: &[Seg], depth: usize) {
        let Value::Object(obj) = v else { return };
        if depth > FIX_MAX_DEPTH {
            self.unconvertible.push((
                path.to_vec(),
                "too_deep",
                format!("the schema is nested more than {FIX_MAX_DEPTH} levels deep here; not converted"),
            ));
            return;
        }
        self.fix_node(obj, path);
        for key in ["properties", "$defs", "definitions"] {
            if let Some(Value::Object(map)) = obj.get_mut(key) {
                for (name, sub) in map.iter_mut() {
                    let p = join(&join(path, key), name);
                    self.visit(sub, &p, depth + 1);
                }
            }
        }
        for key in ["items", "additionalProperties", "not"] {
            if let Some(sub) = obj.get_mut(key) {
                match sub {
                    Value::Array(list) if key == "items" => {
                        for (i, s) in list.iter_mut().enumerate() {
                            self.visit(s, &join_index(&join(path, key), i), depth + 1);
                        }
                    }
                    _ => self.visit(sub, &join(path, key), depth + 1),
                }
            }
        }
        for key in ["prefixItems", "allOf", "anyOf", "oneOf"] {
            if let Some(Value::Array(list)) = obj.get_mut(key) {
                for (i, s) in list.iter_mut().enumerate() {
                    self.visit(s, &join_index(&join(path, key), i), depth + 1);
                }
            }
        }
    }

    fn fix_node(&mut self, obj: &mut Map<String, Value>, path: &[Seg]) {
        let Some(nullable) = obj.get("nullable") else { return };
        let at = join(path, "nullable");
        let flag = match nullable {
            Value::Bool(b) => *b,
            other => {
                self.unconvertible.push((
                    at,
                    "not_boolean",
                    format!("`nullable` must be true or false; got {}; fix it by hand", compact(other)),
                ));
                return;
            }
        };
        if !flag {
            obj.remove("nullable");
            self.changes.push((at, NullableChangeKind::RemovedFalse, "removed `nullable: false` (the default)".into()));
            return;
        }
        if obj.contains_key("$ref") {
            self.unconvertible.push((
                at,
                "next_to_ref",
                "`nullable: true` next to `$ref` cannot be converted: inline the referenced schema, then run the fix again"
                    .into(),
            ));
            return;
        }
        if let Some(k) = ["allOf", "anyOf", "oneOf"].into_iter().find(|k| obj.contains_key(*k)) {
            self.unconvertible.push((
                at,
                "next_to_composition",
                format!(
                    "`nullable: true` next to `{k}` cannot be converted: merge the schemas into one with a `type`, then run the fix again"
                ),
            ));
            return;
        }
        if obj.contains_key("const") {
            self.unconvertible.push((
                at,
                "next_to_const",
                "`nullable: true` next to `const` cannot be converted: write \"enum\": [<value>, null] instead".into(),
            ));
            return;
        }
        let new_type = match obj.get("type") {
            None => {
                self.unconvertible.push((
                    at,
                    "no_type",
                    "`nullable: true` without a `type` cannot be converted: add a `type` (e.g. \"string\"), then run the fix again"
                        .into(),
                ));
                return;
            }
            Some(Value::String(t)) if t == "null" => None,
            Some(Value::String(t)) => Some(serde_json::json!([t, "null"])),
            Some(Value::Array(a)) if a.iter().all(Value::is_string) => {
                if a.iter().any(|t| t == "null") {
                    None
                } else {
                    let mut a = a.clone();
                    a.push(Value::String("null".into()));
                    Some(Value::Array(a))
                }
            }
            Some(other) => {
                self.unconvertible.push((
                    at,
                    "type_not_convertible",
                    format!("`type` is {}, not a type name: fix the type by hand", compact(other)),
                ));
                return;
            }
        };
        obj.remove("nullable");
        match new_type {
            Some(t) => {
                let msg = format!("`nullable: true` became \"type\": {}", compact(&t));
                obj.insert("type".into(), t);
                self.changes.push((join(path, "type"), NullableChangeKind::TypeUnion, msg));
            }
            None => self.changes.push((
                at,
                NullableChangeKind::RemovedRedundant,
                "removed `nullable: true`: the type already admits null".into(),
            )),
        }
        if let Some(Value::Array(values)) = obj.get_mut("enum")
            && !values.iter().any(Value::is_null)
        {
            values.push(Value::Null);
            self.changes.push((
                join(path, "enum"),
                NullableChangeKind::EnumNull,
                "appended null to `enum`: `nullable: true` admits null".into(),
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rules_at(schema: Value) -> Vec<(String, String)> {
        check(&schema).into_iter().map(|v| (v.rule, v.path)).collect()
    }

    fn message_of(schema: Value, rule: &str) -> String {
        check(&schema).into_iter().find(|v| v.rule == rule).map(|v| v.message).unwrap_or_default()
    }

    #[test]
    fn seed_example_follows_the_rules() {
        assert!(
            check(&json!({"type":"object","properties":{"title":{"type":"string"}},"required":["title"]})).is_empty()
        );
    }

    #[test]
    fn integer_is_refused_with_number_and_multiple_of_suggestion() {
        let m = message_of(json!({"type":"object","properties":{"n":{"type":"integer"}}}), rules::TYPE_NOT_ALLOWED);
        assert!(m.contains("\"number\"") && m.contains("\"multipleOf\": 1"), "{m}");
        let m = message_of(
            json!({"type":"object","properties":{"n":{"type":["null","integer"]}}}),
            rules::TYPE_NOT_ALLOWED,
        );
        assert!(m.contains("[\"number\",\"null\"]"), "{m}");
    }

    #[test]
    fn nullable_message_gives_union_form_and_points_to_fix_command() {
        let m = message_of(
            json!({"type":"object","properties":{"n":{"type":"string","nullable":true}}}),
            rules::NULLABLE_NOT_SUPPORTED,
        );
        assert!(m.contains("[\"string\",\"null\"]") && m.contains("a2a schema fix"), "{m}");
    }

    #[test]
    fn composition_message_says_not_supported_in_0_3() {
        let m = message_of(json!({"type":"object","anyOf":[]}), rules::UNKNOWN_KEYWORD);
        assert!(m.contains("not supported in protocol 0.3"), "{m}");
    }

    #[test]
    fn violations_are_sorted_depth_first_with_sorted_keys() {
        let got = rules_at(json!({
            "type": "object",
            "zeta": 1,
            "required": ["b", "zz"],
            "properties": {"b": {"type": "integer", "nullable": true}, "a": {}}
        }));
        let want = [
            ("type_missing", "/properties/a"),
            ("nullable_not_supported", "/properties/b/nullable"),
            ("type_not_allowed", "/properties/b/type"),
            ("required_not_defined", "/required/1"),
            ("unknown_keyword", "/zeta"),
        ];
        let want: Vec<(String, String)> = want.iter().map(|(a, b)| ((*a).to_owned(), (*b).to_owned())).collect();
        assert_eq!(got, want);
    }

    #[test]
    fn array_indices_sort_numerically_not_as_text() {
        let names: Vec<String> = (0..12).map(|i| format!("p{i}")).collect();
        let got = rules_at(json!({"type":"object","required": names}));
        let paths: Vec<&str> = got.iter().map(|(_, p)| p.as_str()).collect();
        assert_eq!(paths.get(2), Some(&"/required/2"));
        assert_eq!(paths.last(), Some(&"/required/11"));
    }

    #[test]
    fn pointer_escapes_tilde_and_slash() {
        let got = rules_at(json!({"type":"object","properties":{"a/b~c":{}}}));
        assert_eq!(got, [("type_missing".to_owned(), "/properties/a~1b~0c".to_owned())]);
    }

    #[test]
    fn violation_list_is_cut_at_the_limit() {
        let mut root = Map::new();
        root.insert("type".into(), json!("object"));
        for i in 0..(MAX_VIOLATIONS + 10) {
            root.insert(format!("k{i:04}"), json!(1));
        }
        assert_eq!(check(&Value::Object(root)).len(), MAX_VIOLATIONS);
    }

    #[test]
    fn too_large_reports_exactly_the_violations_sorted_before_it() {
        let mut props = Map::new();
        for i in 0..=MAX_SCHEMAS {
            props.insert(format!("p{i:04}"), json!({"type": "string"}));
        }
        props.insert("p0000".into(), json!({"type": "integer"}));
        let schema = json!({"type": "object", "minLength": 5, "maxLength": 3, "properties": props, "zzz": 1});
        let got = rules_at(schema);
        let want = [
            ("invalid_keyword_value", "/maxLength"),
            ("type_not_allowed", "/properties/p0000/type"),
            ("too_large", "/properties/p1024"),
        ];
        let want: Vec<(String, String)> = want.iter().map(|(a, b)| ((*a).to_owned(), (*b).to_owned())).collect();
        assert_eq!(got, want);
    }

    #[test]
    fn violations_error_is_422_with_details() {
        let v = check(&json!([]));
        let e = violations_error(&v);
        assert_eq!(e.http_status(), 422);
        assert_eq!(e.code, ErrorCode::SCHEMA_RULE_VIOLATION);
        let d = e.details.unwrap_or_default();
        assert_eq!(d["violations"][0]["rule"], "root_not_object");
        assert!(v.iter().all(|x| x.code() == ErrorCode::SCHEMA_RULE_VIOLATION));
    }

    #[test]
    fn deeply_nested_value_is_bounded_without_overflow() {
        let mut s = json!({"type":"string"});
        for _ in 0..200 {
            s = json!({"type":"array","items": s});
        }
        let root = json!({"type":"object","properties":{"a": s}});
        let v = check(&root);
        assert_eq!(v.len(), 1);
        assert_eq!(v.first().map(|v| v.rule.as_str()), Some(rules::TOO_DEEP));
        let fix = fix_nullable(&root);
        assert_eq!(fix.unconvertible.len(), 1);
    }

    #[test]
    fn fix_nullable_is_idempotent_on_mixed_schema() {
        let s = json!({"type":"object","nullable":false,"properties":{
            "a":{"type":"string","nullable":true,"enum":["x"]},
            "b":{"nullable":true},
            "c":{"type":"array","items":{"type":"number","nullable":true}}}});
        let once = fix_nullable(&s);
        let twice = fix_nullable(&once.schema);
        assert_eq!(once.schema, twice.schema);
        assert!(twice.changes.is_empty());
        assert_eq!(once.unconvertible, twice.unconvertible);
    }
}
