//! Which tools of an MCP server become capabilities, under which names and schemas (MCP-31..MCP-34).

use std::collections::BTreeMap;

use a2a_core::capability::{CapabilityDeclaration, parse_declaration, validate_name};
use a2a_core::schema_rules::{Violation, check};
use serde_json::{Map, Value};

/// How the tools of one MCP server are imported (the `mcp` handler's `tools`, `prefix` and `rename`).
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct ImportOptions {
    /// Import only these tools (by their MCP names); `None`: every tool the server lists (MCP-31).
    pub tools: Option<Vec<String>>,
    /// Prepended with `_` to each capability name (MCP-32).
    pub prefix: Option<String>,
    /// Capability names chosen for some tools, by tool name (instead of the derived name, prefix included).
    pub rename: BTreeMap<String, String>,
    /// The declaration fields every imported capability carries (`auth_requirement`, `region_restriction`,
    /// `estimated_cost`, ...); `description` is used for a tool that has none.
    pub declaration: Map<String, Value>,
}

impl ImportOptions {
    /// Options with these shared declaration fields and no filter, prefix or renaming.
    pub fn new(declaration: Map<String, Value>) -> Self {
        ImportOptions { declaration, ..Default::default() }
    }

    /// Imports only `tools`.
    #[must_use]
    pub fn with_tools(mut self, tools: Option<Vec<String>>) -> Self {
        self.tools = tools;
        self
    }

    /// Prefixes every capability name with `prefix` and `_`.
    #[must_use]
    pub fn with_prefix(mut self, prefix: Option<String>) -> Self {
        self.prefix = prefix;
        self
    }

    /// Names some capabilities explicitly, by tool name.
    #[must_use]
    pub fn with_rename(mut self, rename: BTreeMap<String, String>) -> Self {
        self.rename = rename;
        self
    }
}

/// A tool imported as a capability.
#[derive(Debug, Clone)]
pub struct ImportedTool {
    /// The tool's MCP name (what `tools/call` names).
    pub tool: String,
    /// The capability's declaration (its `input_schema` is the tool's `inputSchema`).
    pub declaration: CapabilityDeclaration,
}

/// A tool that was not imported, and why (MCP-33).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct SkippedTool {
    /// The tool's MCP name.
    pub tool: String,
    /// The capability name it would have had, when one could be derived.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub capability: Option<String>,
    /// Why, for people: the first broken rule with its JSON Pointer, or the naming or declaration problem.
    pub reason: String,
    /// Every schema rule its `inputSchema` breaks (§6.2), when that is why.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub violations: Vec<Violation>,
}

/// The outcome of importing a server's tools.
#[derive(Debug, Clone, Default)]
pub struct Imported {
    /// The tools that became capabilities, in the server's order.
    pub tools: Vec<ImportedTool>,
    /// The tools that did not, with the reason.
    pub skipped: Vec<SkippedTool>,
}

/// `getWeather`, `get-weather`, `get.weather` → `get_weather` (MCP-32): lower case, a `_` at each case change from
/// lower to upper and for every character other than a letter, no `_` doubled or at either end.
pub fn snake_case(name: &str) -> String {
    let mut out = String::with_capacity(name.len() + 4);
    let mut prev_lower = false;
    for c in name.chars() {
        if c.is_ascii_alphabetic() {
            if c.is_ascii_uppercase() && prev_lower {
                out.push('_');
            }
            out.push(c.to_ascii_lowercase());
            prev_lower = c.is_ascii_lowercase();
        } else if c.is_ascii_digit() {
            // Digits are kept: the name is then refused with a reason naming `rename` (MCP-32).
            out.push(c);
            prev_lower = false;
        } else {
            if !out.ends_with('_') {
                out.push('_');
            }
            prev_lower = false;
        }
    }
    out.trim_matches('_').to_owned()
}

/// The capability name of `tool` under `opts` (MCP-32): its `rename` entry, else `prefix_` + the snake-cased tool
/// name.
pub fn capability_name(tool: &str, opts: &ImportOptions) -> String {
    if let Some(n) = opts.rename.get(tool) {
        return n.clone();
    }
    let base = snake_case(tool);
    match opts.prefix.as_deref().filter(|p| !p.is_empty()) {
        Some(p) => format!("{p}_{base}"),
        None => base,
    }
}

/// Imports the tools a server lists (`(name, description, inputSchema)`), under `opts` (MCP-31..MCP-34).
///
/// A tool becomes a capability when its capability name is valid, its `inputSchema` follows the schema rules and
/// its declaration is valid; otherwise it is in [`Imported::skipped`] with the reason. A tool of `opts.tools`
/// that the server does not list is skipped too ("not served"), and so is the second tool of a name already taken.
pub fn import_tools<'a>(
    listed: impl IntoIterator<Item = (&'a str, Option<&'a str>, &'a Value)>,
    opts: &ImportOptions,
) -> Imported {
    let mut out = Imported::default();
    let mut seen_tools = Vec::new();
    for (tool, description, schema) in listed {
        seen_tools.push(tool.to_owned());
        if opts.tools.as_ref().is_some_and(|allow| !allow.iter().any(|t| t == tool)) {
            continue;
        }
        let name = capability_name(tool, opts);
        let skip = |reason: String, violations: Vec<Violation>| SkippedTool {
            tool: tool.to_owned(),
            capability: Some(name.clone()),
            reason,
            violations,
        };
        if let Err(e) = validate_name(&name) {
            out.skipped.push(skip(
                format!(
                    "{e}; choose the capability's name with the handler's `rename = {{ {tool:?} = \"some_name\" }}` \
                     or `prefix`"
                ),
                Vec::new(),
            ));
            continue;
        }
        if out.tools.iter().any(|t| t.declaration.name == name) {
            out.skipped.push(skip(format!("the capability name {name:?} is already another tool's"), Vec::new()));
            continue;
        }
        // MCP-34: only rewrites that accept exactly the same values; MCP-33: the result must follow the schema
        // rules, as any capability's input_schema.
        let schema = &equivalent_schema(schema);
        let violations = check(schema);
        if let Some(first) = violations.first() {
            let all: Vec<String> = violations
                .iter()
                .map(|v| format!("{} at `{}`", v.rule, if v.path.is_empty() { "" } else { &v.path }))
                .collect();
            out.skipped.push(skip(
                format!(
                    "its inputSchema breaks {} schema rule(s) (§6.2): {}; first: {}",
                    violations.len(),
                    all.join(", "),
                    first.message
                ),
                violations,
            ));
            continue;
        }
        let mut decl = opts.declaration.clone();
        decl.insert("name".into(), Value::String(name.clone()));
        let description = description
            .filter(|d| !d.trim().is_empty())
            .map(str::to_owned)
            .or_else(|| decl.get("description").and_then(Value::as_str).map(str::to_owned));
        decl.insert(
            "description".into(),
            Value::String(description.unwrap_or_else(|| format!("The MCP tool `{tool}`"))),
        );
        decl.insert("input_schema".into(), schema.clone());
        match parse_declaration(&Value::Object(decl)) {
            Ok(declaration) => out.tools.push(ImportedTool { tool: tool.to_owned(), declaration }),
            Err(e) => out.skipped.push(skip(format!("its declaration is refused: {e}"), Vec::new())),
        }
    }
    for wanted in opts.tools.iter().flatten() {
        if !seen_tools.contains(wanted) {
            out.skipped.push(SkippedTool {
                tool: wanted.clone(),
                capability: None,
                reason: "listed in `tools` but not served by the MCP server".into(),
                violations: Vec::new(),
            });
        }
    }
    out
}

/// The limit on nesting of [`equivalent_schema`] (the schema rules allow 32; deeper input is left as it is, for the
/// rules to report).
const MAX_REWRITE_DEPTH: usize = 40;

/// `schema` with the rewrites of MCP-34 applied, each of which accepts exactly the same values, so that the schemas
/// MCP servers commonly write follow the schema rules (§6.2). In every schema object (the root, `properties/*`,
/// `items`, an object `additionalProperties`):
///
/// - `"type": "integer"` becomes `"type": "number"` with `"multipleOf": 1` (SCH-8), and `["integer", "null"]` becomes
///   `["number", "null"]` with it; an existing `multipleOf` that is a positive whole number is kept (every multiple of
///   it is whole); any other `multipleOf` leaves `integer` as it is;
/// - `anyOf` (or `oneOf`) of exactly two schemas, one of them `{"type": "null"}` and the other with a single type
///   and no `enum` or `const` (the null schema is then disjoint from it, and no keyword of it constrains null), is
///   replaced by that schema's keywords with the type made nullable (`Optional[...]` of pydantic), when the schema
///   holding it has no `type` and no keyword of the same name.
///
/// Anything else is left as it is, for [`check`] to report.
pub fn equivalent_schema(schema: &Value) -> Value {
    let mut out = schema.clone();
    rewrite(&mut out, 0);
    out
}

fn rewrite(schema: &mut Value, depth: usize) {
    let Some(obj) = schema.as_object_mut() else { return };
    if depth > MAX_REWRITE_DEPTH {
        return;
    }
    for key in ["anyOf", "oneOf"] {
        if let Some(merged) = nullable_union(obj, key) {
            obj.remove(key);
            obj.extend(merged);
        }
    }
    integer_as_number(obj);
    if let Some(Value::Object(props)) = obj.get_mut("properties") {
        for sub in props.values_mut() {
            rewrite(sub, depth + 1);
        }
    }
    for key in ["items", "additionalProperties"] {
        if let Some(sub) = obj.get_mut(key) {
            rewrite(sub, depth + 1);
        }
    }
}

/// `"integer"` → `"number"` with `"multipleOf": 1`, in a single type or a nullable pair.
fn integer_as_number(obj: &mut Map<String, Value>) {
    let nullable = match obj.get("type") {
        Some(Value::String(t)) if t == "integer" => false,
        Some(Value::Array(ts))
            if ts.len() == 2 && ts.iter().any(|t| t == "integer") && ts.iter().any(|t| t == "null") =>
        {
            true
        }
        _ => return,
    };
    match obj.get("multipleOf") {
        None => {
            obj.insert("multipleOf".into(), Value::from(1));
        }
        // A positive whole step keeps only whole numbers: the same values as `integer` with it.
        Some(Value::Number(n)) if n.as_f64().is_some_and(|f| f >= 1.0 && f.fract() == 0.0) => {}
        Some(_) => return,
    }
    let number = Value::String("number".into());
    let ty = if nullable { Value::Array(vec![number, Value::String("null".into())]) } else { number };
    obj.insert("type".into(), ty);
}

/// The keywords that replace `obj[key]` when it is `[S, {"type": "null"}]` (either order) as [`equivalent_schema`]
/// says; `None` when it is not.
fn nullable_union(obj: &Map<String, Value>, key: &str) -> Option<Map<String, Value>> {
    let Some(Value::Array(members)) = obj.get(key) else { return None };
    if members.len() != 2 || obj.contains_key("type") {
        return None;
    }
    let is_null =
        |v: &Value| v.as_object().is_some_and(|o| o.len() == 1 && o.get("type") == Some(&Value::from("null")));
    let other = match (is_null(&members[0]), is_null(&members[1])) {
        (true, false) => &members[1],
        (false, true) => &members[0],
        _ => return None,
    };
    let other = other.as_object()?;
    let Some(Value::String(ty)) = other.get("type") else { return None };
    if ty == "null" || other.contains_key("enum") || other.contains_key("const") {
        return None;
    }
    if other.keys().any(|k| k != "type" && obj.contains_key(k)) {
        return None;
    }
    let mut merged = other.clone();
    merged.insert("type".into(), Value::Array(vec![Value::String(ty.clone()), Value::String("null".into())]));
    Some(merged)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn opts() -> ImportOptions {
        let mut decl = Map::new();
        decl.insert("auth_requirement".into(), json!("none"));
        ImportOptions::new(decl)
    }

    #[test]
    fn camel_and_dashed_tool_names_become_snake_case_capability_names() {
        assert_eq!(snake_case("getWeather"), "get_weather");
        assert_eq!(snake_case("get-weather.now"), "get_weather_now");
        assert_eq!(snake_case("__add__"), "add");
        assert_eq!(capability_name("add", &opts().with_prefix(Some("calc".into()))), "calc_add");
    }

    #[test]
    fn tool_whose_schema_breaks_a_rule_is_skipped_with_the_rule_and_pointer() {
        let good = json!({"type": "object", "properties": {"a": {"type": "number", "title": "A"}}, "required": ["a"]});
        let bad = json!({"type": "object", "properties": {"v": {"anyOf": [{"type": "string"}, {"type": "number"}]}}});
        let out = import_tools([("add_numbers", Some("Adds"), &good), ("either_value", None, &bad)], &opts());
        assert_eq!(out.tools.len(), 1);
        assert_eq!(out.tools[0].declaration.name, "add_numbers");
        assert_eq!(out.tools[0].declaration.input_schema, good);
        assert_eq!(out.skipped.len(), 1, "{:?}", out.skipped);
        let s = &out.skipped[0];
        assert_eq!(s.tool, "either_value");
        assert!(s.reason.contains("unknown_keyword at `/properties/v/anyOf`"), "{}", s.reason);
        assert!(s.violations.iter().any(|v| v.rule == "unknown_keyword"), "{:?}", s.violations);
    }

    #[test]
    fn integers_and_optional_values_are_rewritten_to_schemas_that_accept_the_same_values() {
        // What pydantic writes for `count: int` and `n: int | None = None` (MCP-34).
        let pydantic = json!({"type": "object", "title": "maybe_countArguments",
            "properties": {"count": {"type": "integer", "title": "Count"},
                           "n": {"anyOf": [{"type": "integer", "minimum": 0}, {"type": "null"}], "default": null, "title": "N"},
                           "tags": {"type": "array", "items": {"type": ["null", "integer"]}}},
            "required": ["count"]});
        let out = equivalent_schema(&pydantic);
        assert_eq!(out["properties"]["count"], json!({"type": "number", "multipleOf": 1, "title": "Count"}));
        assert_eq!(
            out["properties"]["n"],
            json!({"type": ["number", "null"], "minimum": 0, "multipleOf": 1, "default": null, "title": "N"})
        );
        assert_eq!(out["properties"]["tags"]["items"], json!({"type": ["number", "null"], "multipleOf": 1}));
        assert!(check(&out).is_empty(), "{:?}", check(&out));
        let imported = import_tools([("maybe_count", None, &pydantic)], &opts());
        assert_eq!(imported.tools[0].declaration.input_schema, out);
    }

    /// MCP-34, differentially: a JSON Schema validator (draft 2020-12) accepts exactly the same values under the
    /// rewritten schema as under the original, for every schema and value of a grid of edge cases.
    #[test]
    fn rewritten_schemas_accept_exactly_what_the_originals_accept() {
        let schemas = [
            json!({"type": "integer"}),
            json!({"type": "integer", "minimum": 2, "maximum": 10}),
            json!({"type": "integer", "multipleOf": 3}),
            json!({"type": ["integer", "null"]}),
            json!({"type": ["null", "integer"], "exclusiveMaximum": 4}),
            json!({"anyOf": [{"type": "integer"}, {"type": "null"}], "default": null}),
            json!({"oneOf": [{"type": "null"}, {"type": "string", "maxLength": 2}]}),
            json!({"anyOf": [{"type": "array", "items": {"type": "integer"}}, {"type": "null"}]}),
            json!({"anyOf": [{"type": "number", "minimum": 0.5}, {"type": "null"}], "title": "T"}),
        ];
        let values = [
            json!(0),
            json!(1),
            json!(-7),
            json!(2.0),
            json!(1.5),
            json!(3),
            json!(9),
            json!(12),
            json!(1e300),
            json!(0.25),
            json!(null),
            json!("a"),
            json!("abc"),
            json!(true),
            json!([]),
            json!([1, 2]),
            json!([1.5]),
            json!([null]),
            json!({}),
        ];
        for schema in schemas {
            let before = json!({"type": "object", "properties": {"p": schema}, "required": ["p"]});
            let after = equivalent_schema(&before);
            assert!(check(&after).is_empty(), "{after}: {:?}", check(&after));
            let compile = |s: &Value| {
                jsonschema::options().with_draft(jsonschema::Draft::Draft202012).build(s).expect("compiles")
            };
            let (old, new) = (compile(&before), compile(&after));
            for v in &values {
                let payload = json!({"p": v});
                assert_eq!(old.is_valid(&payload), new.is_valid(&payload), "{before} vs {after} on {payload}");
            }
        }
    }

    #[test]
    fn rewrites_that_would_change_the_accepted_values_are_not_made() {
        for (schema, why) in [
            (json!({"type": "integer", "multipleOf": 0.5}), "a step that is not whole"),
            (json!({"anyOf": [{"type": "string", "enum": ["a"]}, {"type": "null"}]}), "an enum would refuse null"),
            (json!({"anyOf": [{"type": "string"}, {"type": "number"}]}), "no null member"),
            (json!({"type": "string", "anyOf": [{"type": "string"}, {"type": "null"}]}), "a type beside the union"),
            (
                json!({"anyOf": [{"type": "string", "title": "x"}, {"type": "null"}], "title": "y"}),
                "a clashing keyword",
            ),
        ] {
            let root = json!({"type": "object", "properties": {"p": schema}});
            assert_eq!(equivalent_schema(&root), root, "{why}");
        }
    }

    #[test]
    fn single_word_tool_name_is_skipped_naming_rename_and_allow_list_misses_are_reported() {
        let schema = json!({"type": "object"});
        let out = import_tools(
            [("add", None, &schema), ("sub", None, &schema)],
            &opts().with_tools(Some(vec!["add".into(), "mul".into()])),
        );
        assert!(out.tools.is_empty());
        let reasons: Vec<(&str, &str)> = out.skipped.iter().map(|s| (s.tool.as_str(), s.reason.as_str())).collect();
        assert_eq!(reasons.len(), 2, "{reasons:?}");
        assert!(reasons[0].1.contains("rename"), "{reasons:?}");
        assert_eq!(reasons[1].0, "mul");
        assert!(reasons[1].1.contains("not served"), "{reasons:?}");
    }

    #[test]
    fn rename_and_shared_declaration_fields_apply() {
        let schema = json!({"type": "object"});
        let mut o = opts();
        o.rename.insert("add".into(), "add_numbers".into());
        o.declaration.insert("estimated_latency_ms".into(), json!(50));
        let out = import_tools([("add", Some(""), &schema)], &o);
        let d = &out.tools[0].declaration;
        assert_eq!((d.name.as_str(), d.estimated_latency_ms), ("add_numbers", Some(50)));
        assert_eq!(d.description, "The MCP tool `add`");
    }
}
