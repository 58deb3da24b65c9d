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
        // MCP-33: the tool's inputSchema must follow the schema rules, as any capability's input_schema.
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
        let bad = json!({"type": "object", "properties": {"n": {"anyOf": [{"type": "integer"}, {"type": "null"}]}}});
        let out = import_tools([("add_numbers", Some("Adds"), &good), ("maybe_count", None, &bad)], &opts());
        assert_eq!(out.tools.len(), 1);
        assert_eq!(out.tools[0].declaration.name, "add_numbers");
        assert_eq!(out.tools[0].declaration.input_schema, good);
        assert_eq!(out.skipped.len(), 1, "{:?}", out.skipped);
        let s = &out.skipped[0];
        assert_eq!(s.tool, "maybe_count");
        assert!(s.reason.contains("unknown_keyword at `/properties/n/anyOf`"), "{}", s.reason);
        assert!(s.violations.iter().any(|v| v.rule == "unknown_keyword"), "{:?}", s.violations);
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
