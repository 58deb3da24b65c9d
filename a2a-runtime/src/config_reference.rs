//! The configuration reference: the JSON Schema of a configuration type (`schemars`, from the types serde reads the
//! TOML with, so that the schema cannot say other than the parser) and a Markdown page generated from that schema:
//! every section, key, type, default and description. `docs/config-agent.md` and `docs/config-gateway.md` are such
//! pages; a test regenerates them and fails when the checked-in copies differ.

use serde_json::{Map, Value};

/// A Markdown reference of the configuration `schema` describes: `title`, then `intro` (Markdown), then one table
/// per section (`[section]`, `[[list]]`, `handler = { type = ... }` variants) with every key's type, default and
/// description.
pub fn markdown(title: &str, intro: &str, schema: &Value) -> String {
    let mut out = format!("# {title}\n\n{intro}\n");
    let defs = schema.get("$defs").and_then(Value::as_object).cloned().unwrap_or_default();
    let r = Renderer { defs };
    r.object(&mut out, "", schema, false);
    out
}

struct Renderer {
    defs: Map<String, Value>,
}

impl Renderer {
    /// `s` with a `$ref` followed (and `allOf: [one]` unwrapped).
    fn resolve<'a>(&'a self, s: &'a Value) -> &'a Value {
        if let Some(r) = s.get("$ref").and_then(Value::as_str) {
            let name = r.trim_start_matches("#/$defs/");
            return self.defs.get(name).map_or(s, |d| self.resolve(d));
        }
        if let Some([one]) = s.get("allOf").and_then(Value::as_array).map(Vec::as_slice) {
            return self.resolve(one);
        }
        s
    }

    /// The schema of an `Option<T>` as `T` (`anyOf: [T, null]`).
    fn non_null<'a>(&'a self, s: &'a Value) -> &'a Value {
        if let Some(any) = s.get("anyOf").and_then(Value::as_array) {
            let rest: Vec<&Value> = any.iter().filter(|v| v.get("type") != Some(&Value::from("null"))).collect();
            if let [one] = rest.as_slice() {
                return self.resolve(one);
            }
        }
        self.resolve(s)
    }

    fn is_section(&self, s: &Value) -> bool {
        let s = self.non_null(s);
        s.get("properties").is_some() || s.get("oneOf").is_some()
    }

    fn type_name(&self, s: &Value) -> String {
        let s = self.non_null(s);
        if let Some(values) = s.get("enum").and_then(Value::as_array) {
            return values.iter().map(|v| format!("`{v}`")).collect::<Vec<_>>().join(" \\| ");
        }
        if let Some(one) = s.get("oneOf").and_then(Value::as_array) {
            let consts: Option<Vec<String>> = one
                .iter()
                .map(|v| v.get("const").or_else(|| v.get("enum")?.get(0)).map(|c| format!("`{c}`")))
                .collect();
            if let Some(c) = consts {
                return c.join(" \\| ");
            }
            return "table (see below)".into();
        }
        let ty = match s.get("type") {
            Some(Value::String(t)) => t.clone(),
            Some(Value::Array(ts)) => {
                ts.iter().filter_map(Value::as_str).filter(|t| *t != "null").collect::<Vec<_>>().join(" or ")
            }
            _ => return "any".into(),
        };
        match ty.as_str() {
            "array" => match s.get("items") {
                Some(items) => format!("array of {}", self.type_name(items)),
                None => "array".into(),
            },
            "object" => match s.get("additionalProperties") {
                Some(Value::Bool(false)) | None => "table".into(),
                Some(Value::Bool(true)) => "table".into(),
                Some(v) => format!("table of {}", self.type_name(v)),
            },
            "integer" => match s.get("minimum").and_then(Value::as_i64) {
                Some(0) => "integer ≥ 0".into(),
                _ => "integer".into(),
            },
            t => t.to_owned(),
        }
    }

    fn description(s: &Value) -> String {
        s.get("description")
            .and_then(Value::as_str)
            .unwrap_or("")
            .replace("\n\n", " ")
            .replace('\n', " ")
            .replace('|', "\\|")
    }

    /// One table of `schema`'s properties under the heading `path`, then a section per nested table.
    fn object(&self, out: &mut String, path: &str, schema: &Value, list: bool) {
        let schema = self.non_null(schema);
        let Some(props) = schema.get("properties").and_then(Value::as_object) else { return };
        let required: Vec<&str> =
            schema.get("required").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str).collect();
        let mut nested = Vec::new();
        if !path.is_empty() {
            let heading = if list { format!("[[{path}]]") } else { format!("[{path}]") };
            out.push_str(&format!("\n## `{heading}`\n\n"));
            if let Some(d) = schema.get("description").and_then(Value::as_str) {
                out.push_str(d.trim());
                out.push_str("\n\n");
            }
        }
        let mut rows = String::new();
        for (key, prop) in props {
            let resolved = self.non_null(prop);
            let items = resolved.get("items").map(|i| self.non_null(i));
            if self.is_section(prop) && resolved.get("oneOf").is_none() {
                nested.push((key.clone(), prop.clone(), false));
                continue;
            }
            if let Some(items) = items.filter(|i| i.get("properties").is_some()) {
                nested.push((key.clone(), items.clone(), true));
                continue;
            }
            if resolved
                .get("oneOf")
                .is_some_and(|o| o.as_array().is_some_and(|a| a.iter().any(|v| v.get("properties").is_some())))
            {
                nested.push((key.clone(), prop.clone(), false));
            }
            let default = match prop.get("default") {
                Some(Value::Null) | None if required.contains(&key.as_str()) => "required".to_owned(),
                Some(Value::Null) | None => "—".to_owned(),
                Some(d) => format!("`{}`", toml_value(d)),
            };
            let desc = Self::description(prop);
            let desc = if desc.is_empty() { Self::description(resolved) } else { desc };
            rows.push_str(&format!("| `{key}` | {} | {default} | {desc} |\n", self.type_name(prop)));
        }
        if !rows.is_empty() {
            out.push_str("| key | type | default | description |\n|---|---|---|---|\n");
            out.push_str(&rows);
        }
        let additional = schema.get("additionalProperties");
        if additional.is_some_and(|a| a != &Value::Bool(false)) {
            out.push_str(
                "\nOther keys of this table are the capability declaration's fields (`spec/PROTOCOL.md` §4.2): \
                 `name`, `description`, `auth_requirement`, `input_schema`, `output_schema`, ...\n",
            );
        }
        for (key, prop, is_list) in nested {
            let sub = if path.is_empty() { key.clone() } else { format!("{path}.{key}") };
            let resolved = self.non_null(&prop);
            match resolved.get("oneOf").and_then(Value::as_array) {
                Some(variants) => self.variants(out, &sub, resolved, variants),
                None => self.object(out, &sub, &prop, is_list),
            }
        }
    }

    /// A tagged enum (`handler = { type = "command", ... }`): a table per variant.
    fn variants(&self, out: &mut String, path: &str, schema: &Value, variants: &[Value]) {
        out.push_str(&format!("\n## `{path}`\n\n"));
        if let Some(d) = schema.get("description").and_then(Value::as_str) {
            out.push_str(d.trim());
            out.push_str("\n\n");
        }
        for v in variants {
            let v = self.resolve(v);
            let Some(props) = v.get("properties").and_then(Value::as_object) else { continue };
            let tag = props.iter().find_map(|(k, p)| Some((k.clone(), p.get("const")?.clone())));
            let Some((tag_key, tag_value)) = tag else { continue };
            out.push_str(&format!("### `{path} = {{ {tag_key} = {tag_value}, ... }}`\n\n"));
            let d = Self::description(v);
            if !d.is_empty() {
                out.push_str(&d);
                out.push_str("\n\n");
            }
            let required: Vec<&str> =
                v.get("required").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str).collect();
            let mut rows = String::new();
            for (key, prop) in props.iter().filter(|(k, _)| **k != tag_key) {
                let default = match prop.get("default") {
                    Some(Value::Null) | None if required.contains(&key.as_str()) => "required".to_owned(),
                    Some(Value::Null) | None => "—".to_owned(),
                    Some(d) => format!("`{}`", toml_value(d)),
                };
                rows.push_str(&format!(
                    "| `{key}` | {} | {default} | {} |\n",
                    self.type_name(prop),
                    Self::description(prop)
                ));
            }
            if !rows.is_empty() {
                out.push_str("| key | type | default | description |\n|---|---|---|---|\n");
                out.push_str(&rows);
                out.push('\n');
            }
        }
    }
}

/// A JSON default written as TOML.
fn toml_value(v: &Value) -> String {
    match v {
        Value::Array(a) => format!("[{}]", a.iter().map(toml_value).collect::<Vec<_>>().join(", ")),
        Value::Object(o) if o.is_empty() => "{}".into(),
        Value::Object(o) => {
            format!(
                "{{ {} }}",
                o.iter().map(|(k, v)| format!("{k} = {}", toml_value(v))).collect::<Vec<_>>().join(", ")
            )
        }
        other => other.to_string(),
    }
}

/// The command that regenerates the reference pages and schemas from the configuration types.
pub const REGENERATE: &str = "A2A_UPDATE_CONFIG_DOCS=1 cargo test -p a2a-tests --test config_reference";

/// The opening of `docs/config-agent.md`.
pub const AGENT_INTRO: &str = "\
Generated from the types `a2a-server` reads `agent.toml` with (`a2a_server::config::Config`), through their JSON \
Schema (`docs/schema/agent.schema.json`). Do not edit by hand: after changing a configuration type, run\n\n\
```sh\n\
A2A_UPDATE_CONFIG_DOCS=1 cargo test -p a2a-tests --test config_reference\n\
```\n\n\
(the same test, without the variable, fails when this page or the schema differs from the types).\n\n\
- **Validate** a file without starting the agent: `a2a-server check --config agent.toml`. Exit status `0`: valid; \
`1`: refused (the message names `file:line:column`, the key and what to write instead); `2`: valid but with \
warnings, settings under which something can never work (an `api_key` capability when `[[auth.api_keys]]` \
configures no key, an `oauth2` one without `[auth.oauth2]`, a command handler whose program is not found or whose \
`cwd` is not a folder) or a deprecated spelling. The agent logs the same warnings when it starts.\n\
- **Relative paths** (`agent.key_file`, `auth.oauth2.key_files`, `input_schema_file`, a handler's `cwd`, and a \
handler program written with a `/`, such as `./report.py`) are relative to the folder of the configuration file, \
not to the directory the agent is started from. A program without a `/` (`python3`) is looked up on `PATH`.\n\
- **Handlers** of capabilities and of sessions use one syntax: `handler = { type = \"command\", argv = [\"python3\", \
\"report.py\"] }` (`type = \"echo\"`, `type = \"http\", url = ...`; sessions also `openai` and `inbox`). The older \
capability spelling `{ kind = \"command\", program = \"python3\", args = [\"report.py\"] }` is still read, with a \
deprecation warning.\n\
- **Durations** are in milliseconds (`_ms`) or seconds (`_s`), sizes in bytes, as the key's name says.\n\
- **Complete examples**, one per use case, are in `examples/` (each is loaded and checked by the tests).";

/// The opening of `docs/config-gateway.md`.
pub const GATEWAY_INTRO: &str = "\
Generated from the types `a2a-gateway` reads `gateway.toml` with (`a2a_gateway::config::Config`), through their \
JSON Schema (`docs/schema/gateway.schema.json`). Do not edit by hand: after changing a configuration type, run\n\n\
```sh\n\
A2A_UPDATE_CONFIG_DOCS=1 cargo test -p a2a-tests --test config_reference\n\
```\n\n\
(the same test, without the variable, fails when this page or the schema differs from the types).\n\n\
- **Validate** a file without starting the gateway: `a2a-gateway check --config gateway.toml`. Exit status `0`: \
valid; `1`: refused (the message says which key and why: a bad DID or agent URL, an unreadable `gateway.key_file`, \
`edge.verify_signatures` without a key, an unset `admin.token_env` variable, ...); `2`: valid but with warnings, \
settings under which the gateway can never work as meant (no `[[agents]]` and no registry to find agents in, an \
audit file in a folder that does not exist, ...).\n\
- **Relative paths** (`gateway.key_file`, `audit.file`) are relative to the folder of the configuration file.\n\
- **Durations** are in milliseconds (`_ms`) or seconds (`_s`), sizes in bytes, as the key's name says.\n\
- **Complete examples** are in `examples/` (each is loaded and checked by the tests).";
