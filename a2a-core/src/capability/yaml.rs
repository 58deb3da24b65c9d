//! Capability declarations written in YAML, with comments (`spec/PROTOCOL.md` §4.8, CAP-21, CAP-22), turned
//! into the JSON declarations of §4.1. Available with the `yaml` feature; the `a2a capability lint|convert FILE`
//! commands are built on it.
//!
//! ```
//! use a2a_core::capability::yaml;
//!
//! let text = "\
//! - name: process_payment
//!   description: \"Charge user's card on file; requires PCI-DSS compliant environment\"
//!   auth_requirement: oauth2
//!   ## Note: This capability only available in EU region due to GDPR
//!   region_restriction: eu-west-1
//! ";
//! let decls = yaml::load(text).expect("valid");
//! assert_eq!(decls[0].region_restriction, vec!["eu-west-1".to_owned()]);
//! ```
//!
//! Plain scalars are read with the YAML 1.2 core schema (`null`, `true`, `false`, integers, floats, otherwise strings),
//! except where the declaration holds a string (CAP-22): `name`, `description`, `auth_requirement`,
//! `region_restriction`, the names of `sub_capabilities` and `fallback_for`, and inside a schema the annotations
//! (`description`, `title`, `$comment`), `pattern`, `format`, and the `enum`, `const`, `default` and `examples` values
//! of a string-typed schema. There a plain `yes`, `off` or `1.10` stays the string it looks like, as its author meant.
//!
//! Every problem is reported with its line and column ([`Diagnostic`]). The input is bounded: [`MAX_YAML_BYTES`],
//! [`MAX_NODES`] nodes (aliases included, so that a "billion laughs" document is refused), [`MAX_DEPTH`] levels.
//! Duplicate keys, non-scalar keys, several documents, custom tags and non-finite numbers are refused.

use std::collections::{BTreeMap, HashMap};
use std::fmt;

use serde_json::{Map, Number, Value};
use yaml_rust2::parser::{Event, Parser, Tag};
use yaml_rust2::scanner::{Marker, TScalarStyle};

use super::{CapabilityDeclaration, CapabilityError, parse_declaration};

/// The largest YAML text accepted, in bytes.
pub const MAX_YAML_BYTES: usize = 1024 * 1024;
/// The most nodes a document may expand to (aliases count each time they are used).
pub const MAX_NODES: usize = 100_000;
/// The deepest nesting accepted (the limit of canonical JSON, JCS-8).
pub const MAX_DEPTH: usize = 128;

/// A place in the YAML text, 1-based.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Position {
    /// The line, from 1.
    pub line: usize,
    /// The column, from 1.
    pub column: usize,
}

impl fmt::Display for Position {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.line, self.column)
    }
}

/// One problem found in a declaration file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostic {
    /// Where it is, when known.
    pub position: Option<Position>,
    /// A JSON Pointer to the value at fault in the converted JSON (`/0/auth_requirement`); `""` for the file.
    pub pointer: String,
    /// A stable reason: `yaml_syntax`, `yaml_unsupported`, `too_large`, `not_a_declaration_list`, or a
    /// [`CapabilityError::reason`] (`missing_field`, `invalid_input_schema`, ...).
    pub reason: String,
    /// For people: what is wrong and what to write instead.
    pub message: String,
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.position {
            Some(p) => write!(f, "{p}: {}", self.message),
            None => f.write_str(&self.message),
        }
    }
}

fn diag(position: Option<Position>, pointer: &str, reason: &str, message: impl Into<String>) -> Diagnostic {
    Diagnostic { position, pointer: pointer.to_owned(), reason: reason.to_owned(), message: message.into() }
}

fn pos(m: &Marker) -> Position {
    // yaml-rust2 markers: line from 1, column from 0.
    Position { line: m.line(), column: m.col() + 1 }
}

#[derive(Debug, Clone)]
enum Kind {
    Scalar { text: String, style: TScalarStyle, tag: Option<Tag> },
    Seq(Vec<Node>),
    Map(Vec<(Node, Node)>),
}

#[derive(Debug, Clone)]
struct Node {
    kind: Kind,
    mark: Marker,
}

impl Node {
    fn size(&self) -> usize {
        match &self.kind {
            Kind::Scalar { .. } => 1,
            Kind::Seq(items) => 1 + items.iter().map(Node::size).sum::<usize>(),
            Kind::Map(pairs) => 1 + pairs.iter().map(|(k, v)| k.size() + v.size()).sum::<usize>(),
        }
    }
}

struct Reader<'a> {
    parser: Parser<std::str::Chars<'a>>,
    anchors: HashMap<usize, Node>,
    nodes: usize,
}

fn yaml_error(e: &yaml_rust2::ScanError) -> Diagnostic {
    diag(Some(pos(e.marker())), "", "yaml_syntax", format!("YAML syntax error: {}", e.info()))
}

impl Reader<'_> {
    fn next(&mut self) -> Result<(Event, Marker), Diagnostic> {
        self.parser.next_token().map_err(|e| yaml_error(&e))
    }

    fn count(&mut self, n: usize, mark: &Marker) -> Result<(), Diagnostic> {
        self.nodes = self.nodes.saturating_add(n);
        if self.nodes > MAX_NODES {
            return Err(diag(
                Some(pos(mark)),
                "",
                "too_large",
                format!("the document expands to more than {MAX_NODES} nodes (aliases included); split it"),
            ));
        }
        Ok(())
    }

    fn check_collection_tag(tag: Option<&Tag>, expected: &str, mark: &Marker) -> Result<(), Diagnostic> {
        match tag {
            None => Ok(()),
            Some(t) if t.handle == "tag:yaml.org,2002:" && t.suffix == expected => Ok(()),
            Some(t) => Err(diag(
                Some(pos(mark)),
                "",
                "yaml_unsupported",
                format!("the tag {}{} is not supported in a declaration file; remove it", t.handle, t.suffix),
            )),
        }
    }

    fn node(&mut self, ev: Event, mark: Marker, depth: usize) -> Result<Node, Diagnostic> {
        if depth > MAX_DEPTH {
            return Err(diag(
                Some(pos(&mark)),
                "",
                "too_large",
                format!("the document nests deeper than {MAX_DEPTH} levels"),
            ));
        }
        match ev {
            Event::Scalar(text, style, anchor, tag) => {
                self.count(1, &mark)?;
                let node = Node { kind: Kind::Scalar { text, style, tag }, mark };
                self.remember(anchor, &node);
                Ok(node)
            }
            Event::Alias(id) => {
                let node = self.anchors.get(&id).cloned().ok_or_else(|| {
                    diag(Some(pos(&mark)), "", "yaml_syntax", "an alias refers to an anchor that is not defined")
                })?;
                self.count(node.size(), &mark)?;
                Ok(node)
            }
            Event::SequenceStart(anchor, tag) => {
                Self::check_collection_tag(tag.as_ref(), "seq", &mark)?;
                self.count(1, &mark)?;
                let mut items = Vec::new();
                loop {
                    let (ev, m) = self.next()?;
                    if matches!(ev, Event::SequenceEnd) {
                        break;
                    }
                    items.push(self.node(ev, m, depth + 1)?);
                }
                let node = Node { kind: Kind::Seq(items), mark };
                self.remember(anchor, &node);
                Ok(node)
            }
            Event::MappingStart(anchor, tag) => {
                Self::check_collection_tag(tag.as_ref(), "map", &mark)?;
                self.count(1, &mark)?;
                let mut pairs: Vec<(Node, Node)> = Vec::new();
                loop {
                    let (ev, m) = self.next()?;
                    if matches!(ev, Event::MappingEnd) {
                        break;
                    }
                    let key = self.node(ev, m, depth + 1)?;
                    let (ev, m) = self.next()?;
                    let value = self.node(ev, m, depth + 1)?;
                    pairs.push((key, value));
                }
                let node = Node { kind: Kind::Map(pairs), mark };
                self.remember(anchor, &node);
                Ok(node)
            }
            other => Err(diag(Some(pos(&mark)), "", "yaml_syntax", format!("unexpected YAML event {other:?}"))),
        }
    }

    fn remember(&mut self, anchor: usize, node: &Node) {
        if anchor > 0 {
            self.anchors.insert(anchor, node.clone());
        }
    }
}

/// Reads the single YAML document of `text` into a node tree.
fn read(text: &str) -> Result<Node, Diagnostic> {
    if text.len() > MAX_YAML_BYTES {
        return Err(diag(
            None,
            "",
            "too_large",
            format!("the file is {} bytes; at most {MAX_YAML_BYTES} are accepted", text.len()),
        ));
    }
    let mut r = Reader { parser: Parser::new_from_str(text), anchors: HashMap::new(), nodes: 0 };
    let mut root = None;
    loop {
        let (ev, mark) = r.next()?;
        match ev {
            Event::StreamStart | Event::DocumentEnd | Event::Nothing => {}
            Event::StreamEnd => break,
            Event::DocumentStart => {
                let (ev, mark) = r.next()?;
                if root.is_some() {
                    return Err(diag(
                        Some(pos(&mark)),
                        "",
                        "yaml_unsupported",
                        "the file holds more than one YAML document (`---`); put every declaration in one list",
                    ));
                }
                root = Some(r.node(ev, mark, 0)?);
            }
            other => {
                return Err(diag(Some(pos(&mark)), "", "yaml_syntax", format!("unexpected YAML event {other:?}")));
            }
        }
    }
    root.ok_or_else(|| diag(None, "", "not_a_declaration_list", "the file is empty; write a list of declarations"))
}

/// Escapes a JSON Pointer segment (RFC 6901).
fn escape(seg: &str) -> String {
    seg.replace('~', "~0").replace('/', "~1")
}

/// How a scalar must be read at its place.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Ctx {
    /// Any JSON value (YAML 1.2 core schema).
    Any,
    /// A place that holds a string: a plain scalar is its text.
    Str,
    /// A list of strings.
    StrList,
    /// A string or a list of strings (`region_restriction`).
    StrOrList,
    /// A JSON Schema object.
    Schema,
    /// The members of `properties`: each value a schema.
    Properties,
    /// Data of a string-typed schema (`enum`, `examples` items, `const`, `default`).
    StrData,
    /// A list of StrData (`enum`, `examples` of a string-typed schema).
    StrDataList,
}

struct Converter {
    positions: BTreeMap<String, Position>,
}

fn is_core_null(s: &str) -> bool {
    matches!(s, "" | "~" | "null" | "Null" | "NULL")
}

fn core_bool(s: &str) -> Option<bool> {
    match s {
        "true" | "True" | "TRUE" => Some(true),
        "false" | "False" | "FALSE" => Some(false),
        _ => None,
    }
}

/// A YAML 1.2 core-schema integer: `[-+]?[0-9]+`, `0o[0-7]+`, `0x[0-9a-fA-F]+`.
fn core_int(s: &str) -> Option<Value> {
    let (neg, digits) = match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    if let Some(hex) = s.strip_prefix("0x") {
        return (!hex.is_empty() && hex.bytes().all(|b| b.is_ascii_hexdigit()))
            .then(|| u64::from_str_radix(hex, 16).ok().map(Value::from))
            .flatten();
    }
    if let Some(oct) = s.strip_prefix("0o") {
        return (!oct.is_empty() && oct.bytes().all(|b| (b'0'..=b'7').contains(&b)))
            .then(|| u64::from_str_radix(oct, 8).ok().map(Value::from))
            .flatten();
    }
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    if neg {
        format!("-{digits}").parse::<i64>().ok().map(Value::from).or_else(|| float_value(s))
    } else {
        digits.parse::<u64>().ok().map(Value::from).or_else(|| float_value(s))
    }
}

fn float_value(s: &str) -> Option<Value> {
    s.parse::<f64>().ok().and_then(Number::from_f64).map(Value::Number)
}

/// A YAML 1.2 core-schema float: `[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?`; `.inf`/`.nan` are reported.
fn core_float(s: &str) -> Result<Option<Value>, &'static str> {
    let lower = s.to_ascii_lowercase();
    if matches!(lower.trim_start_matches(['+', '-']), ".inf" | ".nan") {
        return Err("infinity and NaN have no JSON form");
    }
    let b = s.trim_start_matches(['+', '-']);
    if s.len() - b.len() > 1 {
        return Ok(None);
    }
    let (mantissa, exp) = match b.find(['e', 'E']) {
        Some(i) => (&b[..i], Some(&b[i + 1..])),
        None => (b, None),
    };
    let mantissa_ok = match mantissa.split_once('.') {
        Some((int, frac)) => {
            (int.bytes().all(|c| c.is_ascii_digit()) && frac.bytes().all(|c| c.is_ascii_digit()))
                && (!int.is_empty() || !frac.is_empty())
        }
        None => !mantissa.is_empty() && mantissa.bytes().all(|c| c.is_ascii_digit()),
    };
    let exp_ok = exp.is_none_or(|e| {
        let e = e.strip_prefix(['+', '-']).unwrap_or(e);
        !e.is_empty() && e.bytes().all(|c| c.is_ascii_digit())
    });
    if !(mantissa_ok && exp_ok) {
        return Ok(None);
    }
    match s.parse::<f64>() {
        Ok(f) if f.is_finite() => Ok(Number::from_f64(f).map(Value::Number)),
        _ => Err("the number is out of range"),
    }
}

impl Converter {
    fn scalar(
        &self,
        node: &Node,
        text: &str,
        style: TScalarStyle,
        tag: Option<&Tag>,
        ctx: Ctx,
        pointer: &str,
    ) -> Result<Value, Diagnostic> {
        let at = || Some(pos(&node.mark));
        if let Some(t) = tag {
            if t.handle != "tag:yaml.org,2002:" {
                return Err(diag(
                    at(),
                    pointer,
                    "yaml_unsupported",
                    format!("the tag {}{} is not supported in a declaration file; remove it", t.handle, t.suffix),
                ));
            }
            let bad =
                |what: &str| diag(at(), pointer, "yaml_syntax", format!("{text:?} is not {what} (tag !!{})", t.suffix));
            return match t.suffix.as_str() {
                "str" => Ok(Value::String(text.to_owned())),
                "null" if is_core_null(text) => Ok(Value::Null),
                "null" => Err(bad("null")),
                "bool" => core_bool(text).map(Value::Bool).ok_or_else(|| bad("a boolean")),
                "int" => core_int(text).ok_or_else(|| bad("an integer")),
                "float" => match core_int(text) {
                    Some(v) => Ok(v),
                    None => core_float(text).ok().flatten().ok_or_else(|| bad("a finite number")),
                },
                other => Err(diag(
                    at(),
                    pointer,
                    "yaml_unsupported",
                    format!("the tag !!{other} is not supported in a declaration file; remove it"),
                )),
            };
        }
        if style != TScalarStyle::Plain || matches!(ctx, Ctx::Str | Ctx::StrOrList) {
            return Ok(Value::String(text.to_owned()));
        }
        if ctx == Ctx::StrData && !is_core_null(text) {
            return Ok(Value::String(text.to_owned()));
        }
        if is_core_null(text) {
            return Ok(Value::Null);
        }
        if let Some(b) = core_bool(text) {
            return Ok(Value::Bool(b));
        }
        if let Some(i) = core_int(text) {
            return Ok(i);
        }
        match core_float(text) {
            Ok(Some(f)) => Ok(f),
            Ok(None) => Ok(Value::String(text.to_owned())),
            Err(why) => Err(diag(at(), pointer, "yaml_unsupported", format!("{text:?}: {why}; quote it for a string"))),
        }
    }

    fn convert(&mut self, node: &Node, ctx: Ctx, pointer: &str) -> Result<Value, Diagnostic> {
        self.positions.insert(pointer.to_owned(), pos(&node.mark));
        match &node.kind {
            Kind::Scalar { text, style, tag } => self.scalar(node, text, *style, tag.as_ref(), ctx, pointer),
            Kind::Seq(items) => {
                let item_ctx = match ctx {
                    Ctx::StrList | Ctx::StrOrList => Ctx::Str,
                    Ctx::StrDataList => Ctx::StrData,
                    _ => Ctx::Any,
                };
                let mut out = Vec::with_capacity(items.len());
                for (i, item) in items.iter().enumerate() {
                    out.push(self.convert(item, item_ctx, &format!("{pointer}/{i}"))?);
                }
                Ok(Value::Array(out))
            }
            Kind::Map(pairs) => {
                let string_typed = ctx == Ctx::Schema && schema_is_string_typed(pairs);
                let mut out = Map::new();
                for (k, v) in pairs {
                    let key = match &k.kind {
                        Kind::Scalar { text, .. } => text.clone(),
                        _ => {
                            return Err(diag(
                                Some(pos(&k.mark)),
                                pointer,
                                "yaml_unsupported",
                                "a key must be a plain string, not a list or a mapping",
                            ));
                        }
                    };
                    let child = format!("{pointer}/{}", escape(&key));
                    if out.contains_key(&key) {
                        return Err(diag(
                            Some(pos(&k.mark)),
                            &child,
                            "yaml_syntax",
                            format!("the key `{key}` appears twice in the same mapping"),
                        ));
                    }
                    let child_ctx = match ctx {
                        Ctx::Schema => match key.as_str() {
                            "properties" => Ctx::Properties,
                            "items" | "additionalProperties" => Ctx::Schema,
                            "description" | "title" | "$comment" | "pattern" | "format" | "$schema" => Ctx::Str,
                            "enum" | "examples" if string_typed => Ctx::StrDataList,
                            "const" | "default" if string_typed => Ctx::StrData,
                            _ => Ctx::Any,
                        },
                        Ctx::Properties => Ctx::Schema,
                        _ => Ctx::Any,
                    };
                    let value = self.convert(v, child_ctx, &child)?;
                    self.positions.insert(child.clone(), pos(&k.mark));
                    out.insert(key, value);
                }
                Ok(Value::Object(out))
            }
        }
    }

    fn declaration(&mut self, node: &Node, pointer: &str) -> Result<Value, Diagnostic> {
        let Kind::Map(pairs) = &node.kind else {
            return self.convert(node, Ctx::Any, pointer);
        };
        // A block mapping's own marker points past its first key: the first key is where a reader looks.
        let start = pairs.first().map_or(&node.mark, |(k, _)| &k.mark);
        self.positions.insert(pointer.to_owned(), pos(start));
        let mut out = Map::new();
        for (k, v) in pairs {
            let Kind::Scalar { text: key, .. } = &k.kind else {
                return Err(diag(
                    Some(pos(&k.mark)),
                    pointer,
                    "yaml_unsupported",
                    "a key must be a plain string, not a list or a mapping",
                ));
            };
            let child = format!("{pointer}/{}", escape(key));
            if out.contains_key(key) {
                return Err(diag(
                    Some(pos(&k.mark)),
                    &child,
                    "yaml_syntax",
                    format!("the key `{key}` appears twice in the same declaration"),
                ));
            }
            let ctx = match key.as_str() {
                "name" | "description" | "auth_requirement" => Ctx::Str,
                "region_restriction" => Ctx::StrOrList,
                "sub_capabilities" | "fallback_for" => Ctx::StrList,
                "input_schema" | "output_schema" => Ctx::Schema,
                _ => Ctx::Any,
            };
            let value = self.convert(v, ctx, &child)?;
            self.positions.insert(child.clone(), pos(&k.mark));
            out.insert(key.clone(), value);
        }
        Ok(Value::Object(out))
    }

    /// The position of the value at `pointer`, or of its closest ancestor that has one.
    fn position(&self, pointer: &str) -> Option<Position> {
        let mut p = pointer;
        loop {
            if let Some(pos) = self.positions.get(p) {
                return Some(*pos);
            }
            p = &p[..p.rfind('/')?];
        }
    }
}

fn schema_is_string_typed(pairs: &[(Node, Node)]) -> bool {
    let ty = pairs.iter().find(|(k, _)| matches!(&k.kind, Kind::Scalar { text, .. } if text == "type"));
    match ty.map(|(_, v)| &v.kind) {
        Some(Kind::Scalar { text, .. }) => text == "string",
        Some(Kind::Seq(items)) => {
            items.iter().any(|i| matches!(&i.kind, Kind::Scalar { text, .. } if text == "string"))
        }
        _ => false,
    }
}

/// A declaration file converted to JSON, before the declarations are checked.
#[derive(Debug, Clone)]
pub struct YamlDeclarations {
    /// The declarations as JSON objects, in file order.
    pub declarations: Vec<Value>,
    /// For each declaration, the JSON Pointer prefix of its place in the file (`/0`, or `/capabilities/0`).
    pointers: Vec<String>,
    conv: Converter,
}

impl fmt::Debug for Converter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Converter").field("positions", &self.positions.len()).finish()
    }
}

impl Clone for Converter {
    fn clone(&self) -> Self {
        Converter { positions: self.positions.clone() }
    }
}

impl YamlDeclarations {
    /// The position of the value at `pointer` (relative to the declaration `index`), or of its closest ancestor.
    pub fn position(&self, index: usize, pointer: &str) -> Option<Position> {
        let base = self.pointers.get(index)?;
        self.conv.position(&format!("{base}{pointer}"))
    }
}

/// Converts a declaration file to JSON objects (CAP-22), without checking the declarations. The file holds a list of
/// declarations, a single declaration, or a mapping with a `capabilities` list.
pub fn to_json(text: &str) -> Result<YamlDeclarations, Diagnostic> {
    let root = read(text)?;
    let mut conv = Converter { positions: BTreeMap::new() };
    let (items, base): (Vec<&Node>, &str) = match &root.kind {
        Kind::Seq(items) => (items.iter().collect(), ""),
        Kind::Map(pairs) => {
            let caps =
                pairs.iter().find(|(k, _)| matches!(&k.kind, Kind::Scalar { text, .. } if text == "capabilities"));
            match caps {
                Some((_, v)) if pairs.len() == 1 => match &v.kind {
                    Kind::Seq(items) => (items.iter().collect(), "/capabilities"),
                    _ => {
                        return Err(diag(
                            Some(pos(&v.mark)),
                            "/capabilities",
                            "not_a_declaration_list",
                            "`capabilities` must be a list of declarations",
                        ));
                    }
                },
                _ => (vec![&root], ""),
            }
        }
        Kind::Scalar { .. } => {
            return Err(diag(
                Some(pos(&root.mark)),
                "",
                "not_a_declaration_list",
                "the file holds a single value; write a list of declarations (`- name: ...`)",
            ));
        }
    };
    let single = matches!(root.kind, Kind::Map(_)) && base.is_empty();
    let mut declarations = Vec::with_capacity(items.len());
    let mut pointers = Vec::with_capacity(items.len());
    for (i, item) in items.into_iter().enumerate() {
        let p = if single { String::new() } else { format!("{base}/{i}") };
        declarations.push(conv.declaration(item, &p)?);
        pointers.push(p);
    }
    Ok(YamlDeclarations { declarations, pointers, conv })
}

fn capability_diagnostics(file: &YamlDeclarations, index: usize, e: &CapabilityError) -> Vec<Diagnostic> {
    let base = file.pointers.get(index).cloned().unwrap_or_default();
    match e {
        CapabilityError::InvalidInputSchema { name, violations } => violations
            .iter()
            .map(|v| {
                let pointer = format!("/input_schema{}", v.path);
                diag(
                    file.position(index, &pointer),
                    &format!("{base}{pointer}"),
                    e.reason(),
                    format!("capability {name:?}: input_schema{}: {} ({})", v.path, v.message, v.rule),
                )
            })
            .collect(),
        _ => {
            let pointer = match (e, e.field()) {
                (CapabilityError::MissingField { .. }, _) | (_, None | Some("declaration")) => String::new(),
                (_, Some(f)) => format!("/{}", escape(f)),
            };
            vec![diag(file.position(index, &pointer), &format!("{base}{pointer}"), e.reason(), e.to_string())]
        }
    }
}

/// Checks every declaration of a file (CAP-1 to CAP-20) and reports every problem with its position: for each
/// declaration its first problem (every violation of its `input_schema`), then names declared twice. An empty result
/// means the file is valid.
pub fn lint(text: &str) -> Vec<Diagnostic> {
    match check(text) {
        Ok(_) => Vec::new(),
        Err(d) => d,
    }
}

fn check(text: &str) -> Result<Vec<CapabilityDeclaration>, Vec<Diagnostic>> {
    let file = to_json(text).map_err(|d| vec![d])?;
    let mut diags = Vec::new();
    let mut decls = Vec::new();
    let mut seen: HashMap<String, usize> = HashMap::new();
    for (i, value) in file.declarations.iter().enumerate() {
        match parse_declaration(value) {
            Ok(d) => {
                if seen.insert(d.name.clone(), i).is_some() {
                    let e = CapabilityError::Duplicate(d.name.clone());
                    let pointer = "/name";
                    diags.push(diag(
                        file.position(i, pointer),
                        &format!("{}{pointer}", file.pointers[i]),
                        e.reason(),
                        e.to_string(),
                    ));
                }
                decls.push(d);
            }
            Err(e) => diags.extend(capability_diagnostics(&file, i, &e)),
        }
    }
    if file.declarations.is_empty() {
        diags.push(diag(None, "", "not_a_declaration_list", "the file declares no capability"));
    }
    if diags.is_empty() { Ok(decls) } else { Err(diags) }
}

/// Loads and checks the declarations of a YAML (or JSON) file: the declarations, or every problem found ([`lint`]).
pub fn load(text: &str) -> Result<Vec<CapabilityDeclaration>, Vec<Diagnostic>> {
    check(text)
}

/// Converts a declaration file to the JSON array of its declarations in normal form (§4.1: `region_restriction` as an
/// array, `input_schema` written, absent optional members omitted), or every problem found.
pub fn convert(text: &str) -> Result<Value, Vec<Diagnostic>> {
    let decls = check(text)?;
    serde_json::to_value(&decls).map_err(|e| vec![diag(None, "", "internal", e.to_string())])
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const SEED: &str = r#"
- name: process_payment
  description: "Charge user's card on file; requires PCI-DSS compliant environment"
  auth_requirement: oauth2
  # Note: This capability only available in EU region due to GDPR
  region_restriction: eu-west-1
"#;

    #[test]
    fn seed_example_with_comment_converts_to_the_normal_form() {
        let v = convert(SEED).expect("valid");
        assert_eq!(
            v,
            json!([{"name": "process_payment",
                    "description": "Charge user's card on file; requires PCI-DSS compliant environment",
                    "auth_requirement": "oauth2", "region_restriction": ["eu-west-1"],
                    "input_schema": {"type": "object"}}])
        );
    }

    #[test]
    fn yaml_1_1_lookalikes_stay_strings_where_the_declaration_holds_strings() {
        let text = r#"
- name: toggle_switch
  description: yes
  auth_requirement: none
  input_schema:
    type: object
    properties:
      state: {type: [string, "null"], enum: [on, off, 1.10, null]}
      level: {type: number, enum: [1.10, 2]}
      flag: {type: boolean, default: true}
"#;
        let v = convert(text).expect("valid");
        assert_eq!(v[0]["description"], json!("yes"));
        assert_eq!(v[0]["input_schema"]["properties"]["state"]["enum"], json!(["on", "off", "1.10", null]));
        assert_eq!(v[0]["input_schema"]["properties"]["level"]["enum"], json!([1.1, 2]));
        assert_eq!(v[0]["input_schema"]["properties"]["flag"]["default"], json!(true));
    }

    #[test]
    fn missing_auth_requirement_is_reported_at_the_declaration_line() {
        let d = lint("- name: query_status\n  description: Status of an order\n");
        assert_eq!(d.len(), 1, "{d:?}");
        assert_eq!(d[0].reason, "missing_field");
        assert_eq!(d[0].position, Some(Position { line: 1, column: 3 }));
        assert!(d[0].message.contains("use \"none\""), "{}", d[0].message);
    }

    #[test]
    fn unknown_field_is_reported_at_its_key() {
        let d = lint("- name: query_status\n  description: x\n  auth_requirement: none\n  estimated_latency: 5\n");
        assert_eq!(d[0].reason, "unknown_field");
        assert_eq!(d[0].position, Some(Position { line: 4, column: 3 }));
        assert_eq!(d[0].pointer, "/0/estimated_latency");
    }

    #[test]
    fn every_schema_violation_is_reported_with_its_line() {
        let text = "- name: submit_report\n  description: x\n  auth_requirement: none\n  input_schema:\n    type: object\n    properties:\n      title: {type: string, nullable: true}\n      count: {type: integer}\n";
        let d = lint(text);
        assert_eq!(d.len(), 2, "{d:?}");
        assert!(d.iter().all(|x| x.reason == "invalid_input_schema"));
        assert_eq!(d[0].pointer, "/0/input_schema/properties/count/type");
        assert_eq!(d[0].position.map(|p| p.line), Some(8));
        assert_eq!(d[1].position.map(|p| p.line), Some(7));
    }

    #[test]
    fn duplicate_names_and_duplicate_keys_are_refused() {
        let dup = "- {name: a_b, description: x, auth_requirement: none}\n- {name: a_b, description: y, auth_requirement: none}\n";
        let d = lint(dup);
        assert_eq!((d[0].reason.as_str(), d[0].position.map(|p| p.line)), ("duplicate", Some(2)));
        let d = lint("- name: a_b\n  name: c_d\n  description: x\n  auth_requirement: none\n");
        assert_eq!((d[0].reason.as_str(), d[0].position.map(|p| p.line)), ("yaml_syntax", Some(2)));
    }

    #[test]
    fn alias_bombs_and_deep_nesting_are_refused() {
        let mut bomb = String::from("a: &a [x, x, x, x, x, x, x, x, x, x]\n");
        for i in 0..8 {
            bomb.push_str(&format!(
                "b{i}: &b{i} [*{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}]\n",
                p = if i == 0 { "a".to_owned() } else { format!("b{}", i - 1) }
            ));
        }
        assert_eq!(lint(&bomb)[0].reason, "too_large");
        let deep = "[".repeat(200) + &"]".repeat(200);
        assert_eq!(lint(&deep)[0].reason, "too_large");
    }

    #[test]
    fn syntax_errors_tags_and_several_documents_are_reported() {
        assert_eq!(lint("- name: [unclosed\n")[0].reason, "yaml_syntax");
        assert_eq!(lint("- !custom {name: a_b}\n")[0].reason, "yaml_unsupported");
        assert_eq!(lint("--- [ ]\n--- [ ]\n")[0].reason, "yaml_unsupported");
        assert_eq!(lint("")[0].reason, "not_a_declaration_list");
        assert_eq!(lint("just a string")[0].reason, "not_a_declaration_list");
        assert_eq!(
            lint("- name: a_b\n  description: x\n  auth_requirement: none\n  estimated_cost: .inf\n")[0].reason,
            "yaml_unsupported"
        );
    }

    #[test]
    fn json_files_and_single_declarations_and_capabilities_lists_load() {
        let json_text =
            r#"[{"name": "query_status", "description": "x", "auth_requirement": "api_key", "estimated_cost": 0.5}]"#;
        assert_eq!(load(json_text).expect("json")[0].estimated_cost, Some(0.5));
        assert_eq!(load("name: a_b\ndescription: x\nauth_requirement: none\n").expect("single").len(), 1);
        let listed = "capabilities:\n  - {name: a_b, description: x, auth_requirement: none}\n";
        assert_eq!(load(listed).expect("listed")[0].name, "a_b");
        let bad = "capabilities:\n  - {name: a_b, description: x}\n";
        assert_eq!(lint(bad)[0].pointer, "/capabilities/0");
    }

    #[test]
    fn anchors_can_share_a_schema() {
        let text = "- name: a_b\n  description: x\n  auth_requirement: none\n  input_schema: &s {type: object, properties: {t: {type: string}}}\n- name: c_d\n  description: y\n  auth_requirement: none\n  input_schema: *s\n";
        let d = load(text).expect("valid");
        assert_eq!(d[0].input_schema, d[1].input_schema);
    }

    #[test]
    fn core_schema_scalars_are_read_exactly() {
        assert_eq!(core_int("0x1F"), Some(json!(31)));
        assert_eq!(core_int("0o17"), Some(json!(15)));
        assert_eq!(core_int("-12"), Some(json!(-12)));
        assert_eq!(core_int("1_000"), None);
        assert_eq!(core_float("1.5e3"), Ok(Some(json!(1500.0))));
        assert_eq!(core_float(".5"), Ok(Some(json!(0.5))));
        assert_eq!(core_float("1.2.3"), Ok(None));
        assert!(core_float("-.inf").is_err());
    }
}
