//! Checking a composite's declaration (CMP-2 to CMP-6) and that its schemas chain (CMP-7).
//!
//! The chain check works on schemas, not on values: a mapping's JSON Pointer is followed through the `properties`
//! of the schema it points into (the composite's agreed input schema, or a step's `output_schema`), noting whether
//! every member on the way is `required`. A step's input is refused when it can be shown not to satisfy the step's
//! input schema: a required member the mapping does not give, or takes from a place that may be absent or can never
//! be present, or a member whose source has a `type` the step does not accept. A source whose schema is unknown (a
//! step without `output_schema`) is checked when the pipeline runs: the step's input is validated before it runs
//! (CMP-10).

use std::collections::{BTreeSet, HashMap, HashSet};

use a2a_core::capability::{self, AuthRequirement, CapabilityDeclaration};
use serde_json::Value;

use super::{MAX_STEPS, Mapping, Pipeline, Source};

/// Where a step runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Location {
    /// This agent's own handler.
    Local,
    /// Another agent, by its A2A endpoint.
    Remote {
        /// The endpoint URL (ending in `/a2a`).
        endpoint: String,
        /// The DID the agent must answer with, when the step named it by DID.
        did: Option<String>,
    },
}

impl Location {
    /// The agent as written in reports: its DID when known, else its endpoint; `None` for this agent.
    pub fn label(&self) -> Option<String> {
        match self {
            Location::Local => None,
            Location::Remote { endpoint, did } => Some(did.clone().unwrap_or_else(|| endpoint.clone())),
        }
    }
}

/// A capability a step runs, where, and with which input mapping.
#[derive(Debug, Clone, PartialEq)]
pub struct Target {
    /// The capability.
    pub capability: String,
    /// Where it runs.
    pub location: Location,
    /// The input mapping (`None`: the previous output, whole).
    pub input: Option<Mapping>,
}

/// A checked step.
#[derive(Debug, Clone, PartialEq)]
pub struct PlannedStep {
    /// The step id.
    pub id: String,
    /// The step itself.
    pub target: Target,
    /// Its time limit.
    pub timeout_ms: Option<u64>,
    /// Its fallback.
    pub fallback: Option<Target>,
}

/// What an agent knows about one of its own capabilities, for checking the composites that use it.
#[derive(Debug, Clone)]
pub struct LocalInfo {
    /// The input schema.
    pub input_schema: Value,
    /// The output schema, when declared.
    pub output_schema: Option<Value>,
    /// Its `auth_requirement`.
    pub auth: AuthRequirement,
    /// Whether it is itself a composite (not allowed as a step, CMP-3).
    pub composite: bool,
}

/// A composite declaration that breaks CMP-2 to CMP-7; the agent refuses to start (CAP-20).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("composite capability {capability:?}: {path}: {message}")]
pub struct DeclarationError {
    /// The composite capability.
    pub capability: String,
    /// A JSON Pointer into the declaration (`/composite/steps/1/input/title`).
    pub path: String,
    /// What is wrong and what to write instead.
    pub message: String,
}

/// A pipeline whose schemas do not chain (CMP-7): NEGOTIATE answers `composite_unsatisfiable` with these details.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("step `{step}` ({capability}{}): {reason}", agent.as_ref().map(|a| format!(" at {a}")).unwrap_or_default())]
pub struct ChainError {
    /// The step's id.
    pub step: String,
    /// The capability it runs (its fallback's when the fallback is at fault).
    pub capability: String,
    /// The agent, for a remote step.
    pub agent: Option<String>,
    /// The member of the step's input at fault, when one is.
    pub member: Option<String>,
    /// The mapping's source of that member (its JSON Pointer), when it has one.
    pub taken_from: Option<String>,
    /// What is wrong.
    pub reason: String,
}

/// Parses a JSON Pointer (RFC 6901) into its unescaped tokens.
pub fn parse_pointer(p: &str) -> Result<Vec<String>, String> {
    let Some(rest) = p.strip_prefix('/') else {
        return Err(format!("{p:?} is not a JSON Pointer: it must start with `/` (e.g. \"/input/text\")"));
    };
    rest.split('/')
        .map(|t| {
            let mut out = String::with_capacity(t.len());
            let mut chars = t.chars();
            while let Some(c) = chars.next() {
                if c == '~' {
                    match chars.next() {
                        Some('0') => out.push('~'),
                        Some('1') => out.push('/'),
                        _ => return Err(format!("{p:?} is not a JSON Pointer: `~` must be followed by 0 or 1")),
                    }
                } else {
                    out.push(c);
                }
            }
            Ok(out)
        })
        .collect()
}

/// Reads the value at a JSON Pointer's tokens.
pub fn lookup<'a>(doc: &'a Value, tokens: &[String]) -> Option<&'a Value> {
    let mut v = doc;
    for t in tokens {
        v = match v {
            Value::Object(m) => m.get(t)?,
            Value::Array(a) => a.get(t.parse::<usize>().ok()?)?,
            _ => return None,
        };
    }
    Some(v)
}

fn valid_step_id(id: &str) -> bool {
    let b = id.as_bytes();
    !b.is_empty()
        && b.len() <= 64
        && b[0].is_ascii_lowercase()
        && b.iter().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'_')
}

/// Parses a step's `agent`: an `http(s)` endpoint URL or a did:web DID (whose endpoint is `https://<host>/<path>/a2a`,
/// `http` for a loopback host).
pub fn parse_agent(agent: &str) -> Result<Location, String> {
    if agent.starts_with("did:") {
        let did = a2a_core::did::Did::parse(agent).map_err(|e| format!("{agent:?} is not a did:web DID: {e}"))?;
        let scheme = if did.is_loopback() { "http" } else { "https" };
        let mut url = format!("{scheme}://{}", did.host());
        if let Some(p) = did.port() {
            url.push_str(&format!(":{p}"));
        }
        for seg in did.path_segments() {
            url.push('/');
            url.push_str(seg);
        }
        let ep = a2a_core::remote::endpoint_url(&url)?;
        return Ok(Location::Remote { endpoint: ep.as_str().to_owned(), did: Some(did.as_str().to_owned()) });
    }
    let ep = a2a_core::remote::endpoint_url(agent)
        .map_err(|e| format!("{e}; `agent` is an A2A endpoint URL or a did:web DID"))?;
    Ok(Location::Remote { endpoint: ep.as_str().to_owned(), did: None })
}

/// Checks a mapping's pointers (CMP-4): each starts with `/input` or `/steps/<id>` of a step in `visible`.
fn check_mapping(
    mapping: &Mapping,
    visible: &HashSet<&str>,
    at: &str,
    err: &dyn Fn(String, String) -> DeclarationError,
) -> Result<(), DeclarationError> {
    for (member, source) in mapping {
        let Source::Pointer(p) = source else { continue };
        let path = format!("{at}/{}", member.replace('~', "~0").replace('/', "~1"));
        let tokens = parse_pointer(p).map_err(|m| err(path.clone(), m))?;
        match tokens.first().map(String::as_str) {
            Some("input") => {}
            Some("steps") => match tokens.get(1) {
                Some(id) if visible.contains(id.as_str()) => {}
                Some(id) => {
                    return Err(err(
                        path,
                        format!(
                            "{p:?} names step `{id}`, which is not an earlier step; a mapping reads the outputs of earlier steps only"
                        ),
                    ));
                }
                None => return Err(err(path, format!("{p:?} must name a step: /steps/<id>/..."))),
            },
            _ => {
                return Err(err(
                    path,
                    format!(
                        "{p:?} must start with /input (the composite's input) or /steps/<id> (an earlier step's output)"
                    ),
                ));
            }
        }
    }
    Ok(())
}

/// Checks a composite declaration (CMP-2 to CMP-6) against this agent's own capabilities (`local`), and the chain
/// of schemas as far as it is known without asking other agents (CMP-7).
pub fn validate(
    decl: &CapabilityDeclaration,
    pipeline: &Pipeline,
    local: &dyn Fn(&str) -> Option<LocalInfo>,
) -> Result<Vec<PlannedStep>, DeclarationError> {
    let err = |path: String, message: String| DeclarationError { capability: decl.name.clone(), path, message };
    if pipeline.steps.is_empty() || pipeline.steps.len() > MAX_STEPS {
        return Err(err(
            "/composite/steps".into(),
            format!("a pipeline has 1 to {MAX_STEPS} steps; this one has {}", pipeline.steps.len()),
        ));
    }
    let mut seen: HashSet<&str> = HashSet::new();
    let mut planned = Vec::with_capacity(pipeline.steps.len());
    for (i, step) in pipeline.steps.iter().enumerate() {
        let at = format!("/composite/steps/{i}");
        if !valid_step_id(&step.id) {
            return Err(err(
                format!("{at}/id"),
                format!(
                    "step id {:?} is invalid: use 1-64 of a-z 0-9 _, starting with a letter (e.g. \"summarize\")",
                    step.id
                ),
            ));
        }
        if seen.contains(step.id.as_str()) {
            return Err(err(format!("{at}/id"), format!("step id {:?} is used twice; ids are unique", step.id)));
        }
        if step.timeout_ms == Some(0) {
            return Err(err(format!("{at}/timeout_ms"), "timeout_ms must be at least 1".into()));
        }
        let target =
            check_target(decl, &step.capability, step.agent.as_deref(), step.input.as_ref(), &at, &seen, local)?;
        let fallback = match &step.fallback {
            None => None,
            Some(f) => Some(check_target(
                decl,
                &f.capability,
                f.agent.as_deref(),
                f.input.as_ref().or(step.input.as_ref()),
                &format!("{at}/fallback"),
                &seen,
                local,
            )?),
        };
        planned.push(PlannedStep { id: step.id.clone(), target, timeout_ms: step.timeout_ms, fallback });
        seen.insert(step.id.as_str());
    }
    if let Some(out) = &pipeline.output {
        check_mapping(out, &seen, "/composite/output", &err)?;
    }
    let schemas = known_schemas(&planned, local);
    check_chain(&decl.input_schema, &planned, &schemas)
        .map_err(|e| err(format!("/composite/steps/{}", index_of(&planned, &e.step)), e.to_string()))?;
    Ok(planned)
}

fn index_of(steps: &[PlannedStep], id: &str) -> usize {
    steps.iter().position(|s| s.id == id).unwrap_or(0)
}

fn check_target(
    decl: &CapabilityDeclaration,
    capability: &str,
    agent: Option<&str>,
    input: Option<&Mapping>,
    at: &str,
    seen: &HashSet<&str>,
    local: &dyn Fn(&str) -> Option<LocalInfo>,
) -> Result<Target, DeclarationError> {
    let err = |path: String, message: String| DeclarationError { capability: decl.name.clone(), path, message };
    capability::validate_name(capability).map_err(|e| err(format!("{at}/capability"), e.to_string()))?;
    let location = match agent {
        None => {
            if capability == decl.name {
                return Err(err(format!("{at}/capability"), "a composite cannot run itself".into()));
            }
            let Some(info) = local(capability) else {
                return Err(err(
                    format!("{at}/capability"),
                    format!(
                        "this agent does not offer `{capability}`; declare it, or set `agent` to the agent that offers it"
                    ),
                ));
            };
            if info.composite {
                return Err(err(
                    format!("{at}/capability"),
                    format!("`{capability}` is a composite; a step runs an atomic capability (list its steps instead)"),
                ));
            }
            // CMP-6: a composite never lowers the authentication its local steps require.
            if info.auth != AuthRequirement::None && info.auth != decl.auth_requirement {
                return Err(err(
                    format!("{at}/capability"),
                    format!(
                        "`{capability}` requires auth_requirement `{}`; the composite must require the same (it has `{}`)",
                        info.auth.as_str(),
                        decl.auth_requirement.as_str()
                    ),
                ));
            }
            Location::Local
        }
        Some(a) => parse_agent(a).map_err(|m| err(format!("{at}/agent"), m))?,
    };
    if let Some(m) = input {
        check_mapping(m, seen, &format!("{at}/input"), &err)?;
    }
    Ok(Target { capability: capability.to_owned(), location, input: input.cloned() })
}

/// The schemas of a step's capability and of its fallback; `None` where unknown (a remote step before NEGOTIATE
/// fetched its declaration, or a capability without `output_schema`).
#[derive(Debug, Clone, Default)]
pub struct StepSchemas {
    /// The step's input schema.
    pub input: Option<Value>,
    /// The step's output schema.
    pub output: Option<Value>,
    /// The fallback's input schema.
    pub fallback_input: Option<Value>,
    /// The fallback's output schema.
    pub fallback_output: Option<Value>,
}

/// The schemas of the local steps; remote ones unknown.
pub fn known_schemas(steps: &[PlannedStep], local: &dyn Fn(&str) -> Option<LocalInfo>) -> Vec<StepSchemas> {
    let of = |t: &Target| match t.location {
        Location::Local => local(&t.capability).map(|i| (Some(i.input_schema), i.output_schema)),
        Location::Remote { .. } => None,
    };
    steps
        .iter()
        .map(|s| {
            let (input, output) = of(&s.target).unwrap_or((None, None));
            let (fallback_input, fallback_output) = s.fallback.as_ref().and_then(of).unwrap_or((None, None));
            StepSchemas { input, output, fallback_input, fallback_output }
        })
        .collect()
}

enum Found<'a> {
    Known {
        schema: &'a Value,
        guaranteed: bool,
    },
    /// The schema allows it but does not describe it: it may be absent, of any type.
    Maybe,
    Unknown,
    Absent,
}

fn types(s: &Value) -> Option<BTreeSet<String>> {
    match s.get("type") {
        Some(Value::String(t)) => Some([t.clone()].into()),
        Some(Value::Array(a)) => Some(a.iter().filter_map(|t| t.as_str().map(str::to_owned)).collect()),
        _ => s.get("const").map(|c| [value_type(c).to_owned()].into()),
    }
}

fn value_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn accepts(target: &BTreeSet<String>, t: &str) -> bool {
    target.contains(t) || (t == "integer" && target.contains("number"))
}

/// Whether every type the source may have is accepted by the target; `Err` names both.
fn compatible(source: &Value, target: &Value) -> Result<(), String> {
    match (types(source), types(target)) {
        (Some(s), Some(t)) if !s.iter().all(|x| accepts(&t, x)) => Err(format!(
            "the source is of type {} but the step accepts {}",
            s.into_iter().collect::<Vec<_>>().join(" or "),
            t.into_iter().collect::<Vec<_>>().join(" or ")
        )),
        _ => Ok(()),
    }
}

fn walk<'a>(mut schema: &'a Value, mut guaranteed: bool, tokens: &[String]) -> Found<'a> {
    for t in tokens {
        let props = schema.get("properties").and_then(Value::as_object);
        if let Some(sub) = props.and_then(|p| p.get(t)) {
            let required = schema
                .get("required")
                .and_then(Value::as_array)
                .is_some_and(|r| r.iter().any(|x| x.as_str() == Some(t.as_str())));
            guaranteed &= required;
            schema = sub;
            continue;
        }
        if let Some(ty) = types(schema)
            && !ty.contains("object")
            && !ty.contains("array")
        {
            return Found::Absent;
        }
        match schema.get("additionalProperties") {
            Some(Value::Bool(false)) => return Found::Absent,
            Some(sub @ Value::Object(_)) => {
                schema = sub;
                guaranteed = false;
                continue;
            }
            _ => {}
        }
        match schema.get("items") {
            Some(sub @ Value::Object(_)) if t.parse::<usize>().is_ok() => {
                schema = sub;
                guaranteed = false;
            }
            _ => return Found::Maybe,
        }
    }
    Found::Known { schema, guaranteed }
}

/// The schema at a mapping's source, in the pipeline document.
fn source_schema<'a>(input: &'a Value, outputs: &HashMap<&str, Option<&'a Value>>, tokens: &[String]) -> Found<'a> {
    match tokens.first().map(String::as_str) {
        Some("input") => walk(input, true, &tokens[1..]),
        Some("steps") => match tokens.get(1).and_then(|id| outputs.get(id.as_str())) {
            Some(Some(out)) => walk(out, true, &tokens[2..]),
            _ => Found::Unknown,
        },
        _ => Found::Absent,
    }
}

fn required_of(schema: &Value) -> Vec<&str> {
    schema
        .get("required")
        .and_then(Value::as_array)
        .map_or(Vec::new(), |r| r.iter().filter_map(Value::as_str).collect())
}

/// Checks that every step's input schema is satisfied by its mapping (CMP-7), given the composite's input schema
/// and what is known of each step's schemas. The first broken step is reported.
pub fn check_chain(input: &Value, steps: &[PlannedStep], schemas: &[StepSchemas]) -> Result<(), Box<ChainError>> {
    let mut outputs: HashMap<&str, Option<&Value>> = HashMap::new();
    let mut previous: Option<&Value> = Some(input);
    let none = StepSchemas::default();
    for (i, step) in steps.iter().enumerate() {
        let s = schemas.get(i).unwrap_or(&none);
        let targets = [(Some(&step.target), s.input.as_ref()), (step.fallback.as_ref(), s.fallback_input.as_ref())];
        for (target, target_schema) in targets {
            let (Some(target), Some(target_schema)) = (target, target_schema) else { continue };
            let fail = |member: Option<&str>, source: Option<&str>, reason: String| {
                Box::new(ChainError {
                    step: step.id.clone(),
                    capability: target.capability.clone(),
                    agent: target.location.label(),
                    member: member.map(str::to_owned),
                    taken_from: source.map(str::to_owned),
                    reason,
                })
            };
            check_input(target_schema, target.input.as_ref(), previous, input, &outputs)
                .map_err(|(m, src, reason)| fail(m.as_deref(), src.as_deref(), reason))?;
        }
        // A step's output is known only when its fallback (if any) promises the same schema.
        let out = match (&step.fallback, s.output.as_ref()) {
            (None, o) => o,
            (Some(_), Some(o)) if s.fallback_output.as_ref() == Some(o) => Some(o),
            _ => None,
        };
        outputs.insert(step.id.as_str(), out);
        previous = out;
    }
    Ok(())
}

type InputFault = (Option<String>, Option<String>, String);

fn check_input(
    target: &Value,
    mapping: Option<&Mapping>,
    previous: Option<&Value>,
    input: &Value,
    outputs: &HashMap<&str, Option<&Value>>,
) -> Result<(), InputFault> {
    let props = target.get("properties").and_then(Value::as_object);
    let Some(mapping) = mapping else {
        // The previous output, whole.
        let Some(prev) = previous else { return Ok(()) };
        for r in required_of(target) {
            match walk(prev, true, &[r.to_owned()]) {
                Found::Known { guaranteed: true, schema } => {
                    if let Some(tp) = props.and_then(|p| p.get(r)) {
                        compatible(schema, tp).map_err(|m| (Some(r.to_owned()), None, m))?;
                    }
                }
                Found::Unknown => {}
                _ => {
                    return Err((
                        Some(r.to_owned()),
                        None,
                        format!(
                            "input member `{r}` is required, but the previous output does not always have it; give the step an `input` mapping"
                        ),
                    ));
                }
            }
        }
        return Ok(());
    };
    let closed = target.get("additionalProperties") == Some(&Value::Bool(false));
    for (member, source) in mapping {
        let tp = props.and_then(|p| p.get(member));
        if closed && tp.is_none() {
            return Err((
                Some(member.clone()),
                None,
                format!(
                    "input member `{member}` is not accepted by the step's input schema (additionalProperties is false)"
                ),
            ));
        }
        match source {
            Source::Const(c) => {
                if let Some(tp) = tp
                    && let Some(t) = types(tp)
                    && !accepts(&t, value_type(&c.value))
                {
                    return Err((
                        Some(member.clone()),
                        None,
                        format!(
                            "input member `{member}` is a constant of type {} but the step accepts {}",
                            value_type(&c.value),
                            t.into_iter().collect::<Vec<_>>().join(" or ")
                        ),
                    ));
                }
            }
            Source::Pointer(p) => {
                let tokens = parse_pointer(p).map_err(|m| (Some(member.clone()), Some(p.clone()), m))?;
                match source_schema(input, outputs, &tokens) {
                    Found::Absent => {
                        return Err((
                            Some(member.clone()),
                            Some(p.clone()),
                            format!(
                                "input member `{member}` is taken from {p}, which the schema at the source says can never be present"
                            ),
                        ));
                    }
                    Found::Known { schema, .. } => {
                        if let Some(tp) = tp {
                            compatible(schema, tp).map_err(|m| {
                                (
                                    Some(member.clone()),
                                    Some(p.clone()),
                                    format!("input member `{member}` from {p}: {m}"),
                                )
                            })?;
                        }
                    }
                    Found::Unknown | Found::Maybe => {}
                }
            }
        }
    }
    for r in required_of(target) {
        match mapping.get(r) {
            None => {
                return Err((
                    Some(r.to_owned()),
                    None,
                    format!(
                        "input member `{r}` is required by the step's input schema but the mapping does not give it"
                    ),
                ));
            }
            Some(Source::Pointer(p)) => {
                let tokens = parse_pointer(p).map_err(|m| (Some(r.to_owned()), Some(p.clone()), m))?;
                if let Found::Known { guaranteed: false, .. } | Found::Maybe = source_schema(input, outputs, &tokens) {
                    return Err((
                        Some(r.to_owned()),
                        Some(p.clone()),
                        format!(
                            "input member `{r}` is required, but {p} may be absent: the schema at the source does not require it"
                        ),
                    ));
                }
            }
            Some(Source::Const(_)) => {}
        }
    }
    Ok(())
}

/// Builds an object from a mapping over the pipeline document (CMP-4): members whose source is absent are left out.
pub fn apply_mapping(mapping: &Mapping, doc: &Value) -> Value {
    let mut out = serde_json::Map::new();
    for (member, source) in mapping {
        let v = match source {
            Source::Const(c) => Some(c.value.clone()),
            Source::Pointer(p) => parse_pointer(p).ok().and_then(|t| lookup(doc, &t).cloned()),
        };
        if let Some(v) = v {
            out.insert(member.clone(), v);
        }
    }
    Value::Object(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn decl(input: Value) -> CapabilityDeclaration {
        CapabilityDeclaration {
            name: "file_brief_report".into(),
            description: "d".into(),
            auth_requirement: AuthRequirement::None,
            sub_capabilities: vec![],
            region_restriction: vec![],
            input_schema: input,
            output_schema: None,
            estimated_cost: None,
            estimated_latency_ms: None,
            fallback_for: vec![],
        }
    }

    fn local(name: &str) -> Option<LocalInfo> {
        match name {
            "make_summary" => Some(LocalInfo {
                input_schema: json!({"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}),
                output_schema: Some(
                    json!({"type":"object","properties":{"summary":{"type":"string"},"words":{"type":"integer"},"note":{"type":"string"}},"required":["summary","words"]}),
                ),
                auth: AuthRequirement::None,
                composite: false,
            }),
            "file_report" => Some(LocalInfo {
                input_schema: json!({"type":"object","properties":{"title":{"type":"string"},"size":{"type":"number"}},"required":["title"],"additionalProperties":false}),
                output_schema: None,
                auth: AuthRequirement::None,
                composite: false,
            }),
            "sign_message" => Some(LocalInfo {
                input_schema: json!({"type":"object"}),
                output_schema: None,
                auth: AuthRequirement::DidAuth,
                composite: false,
            }),
            _ => None,
        }
    }

    fn input() -> Value {
        json!({"type":"object","properties":{"text":{"type":"string"},"n":{"type":"integer"}},"required":["text"]})
    }

    fn pipeline(v: Value) -> Pipeline {
        serde_json::from_value(v).expect("present")
    }

    #[test]
    fn a_chaining_pipeline_is_accepted() {
        let p = pipeline(json!({"steps":[
            {"id":"sum","capability":"make_summary","input":{"text":"/input/text"}},
            {"id":"file","capability":"file_report","input":{"title":"/steps/sum/summary","size":"/steps/sum/words"}}]}));
        let planned = validate(&decl(input()), &p, &local).expect("present");
        assert_eq!(planned.len(), 2);
        assert_eq!(planned[1].target.location, Location::Local);
    }

    #[test]
    fn broken_chains_name_the_step_and_the_member() {
        let cases = [
            // a required member not given
            (
                json!({"id":"file","capability":"file_report","input":{"size":"/steps/sum/words"}}),
                "title",
                "does not give it",
            ),
            // taken from a member the source does not require
            (
                json!({"id":"file","capability":"file_report","input":{"title":"/steps/sum/note"}}),
                "title",
                "may be absent",
            ),
            // a type the step does not accept
            (
                json!({"id":"file","capability":"file_report","input":{"title":"/steps/sum/words"}}),
                "title",
                "type integer",
            ),
            // a member the closed schema does not accept
            (
                json!({"id":"file","capability":"file_report","input":{"title":"/steps/sum/summary","extra":"/input/text"}}),
                "extra",
                "not accepted",
            ),
            // a constant of the wrong type
            (json!({"id":"file","capability":"file_report","input":{"title":{"const":3}}}), "title", "constant"),
        ];
        for (second, member, needle) in cases {
            let p = pipeline(
                json!({"steps":[{"id":"sum","capability":"make_summary","input":{"text":"/input/text"}}, second]}),
            );
            let e = validate(&decl(input()), &p, &local).expect_err("refused");
            assert_eq!(e.path, "/composite/steps/1", "{e}");
            assert!(e.message.contains("step `file` (file_report)"), "{e}");
            assert!(e.message.contains(&format!("`{member}`")), "{e}");
            assert!(e.message.contains(needle), "{needle}: {e}");
        }
    }

    #[test]
    fn the_first_step_reads_the_composite_input() {
        // `n` is optional in the composite's input but `text` of make_summary is required.
        let p = pipeline(json!({"steps":[{"id":"sum","capability":"make_summary","input":{"text":"/input/n"}}]}));
        let e = validate(&decl(input()), &p, &local).expect_err("refused");
        assert!(e.message.contains("may be absent") || e.message.contains("type integer"), "{e}");
        // Whole previous output: the composite's input has `text`, required.
        let p = pipeline(json!({"steps":[{"id":"sum","capability":"make_summary"}]}));
        validate(&decl(input()), &p, &local).expect("present");
        let p = pipeline(json!({"steps":[{"id":"sum","capability":"make_summary"}]}));
        let e = validate(&decl(json!({"type":"object"})), &p, &local).expect_err("refused");
        assert!(e.message.contains("`text`"), "{e}");
    }

    #[test]
    fn structural_errors_point_at_the_member() {
        let d = decl(input());
        let cases = [
            (json!({"steps":[]}), "/composite/steps", "1 to 32"),
            (json!({"steps":[{"id":"Sum","capability":"make_summary"}]}), "/composite/steps/0/id", "invalid"),
            (
                json!({"steps":[{"id":"a","capability":"make_summary"},{"id":"a","capability":"make_summary"}]}),
                "/composite/steps/1/id",
                "twice",
            ),
            (json!({"steps":[{"id":"a","capability":"nope_nope"}]}), "/composite/steps/0/capability", "does not offer"),
            (json!({"steps":[{"id":"a","capability":"sign_message"}]}), "/composite/steps/0/capability", "did_auth"),
            (
                json!({"steps":[{"id":"a","capability":"make_summary","input":{"text":"/steps/b/x"}}]}),
                "/composite/steps/0/input/text",
                "not an earlier step",
            ),
            (
                json!({"steps":[{"id":"a","capability":"make_summary","input":{"text":"text"}}]}),
                "/composite/steps/0/input/text",
                "must start with `/`",
            ),
            (
                json!({"steps":[{"id":"a","capability":"make_summary","input":{"text":"/output/x"}}]}),
                "/composite/steps/0/input/text",
                "must start with /input",
            ),
            (
                json!({"steps":[{"id":"a","capability":"make_summary","agent":"ftp://x"}]}),
                "/composite/steps/0/agent",
                "http",
            ),
            (
                json!({"steps":[{"id":"a","capability":"make_summary","timeout_ms":0}]}),
                "/composite/steps/0/timeout_ms",
                "at least 1",
            ),
            (
                json!({"steps":[{"id":"a","capability":"make_summary"}],"output":{"x":"/steps/z"}}),
                "/composite/output/x",
                "not an earlier step",
            ),
        ];
        for (p, path, needle) in cases {
            let e = validate(&d, &pipeline(p.clone()), &local).expect_err("refused");
            assert_eq!(e.path, path, "{p}: {e}");
            assert!(e.message.contains(needle), "{p}: {needle}: {e}");
        }
    }

    #[test]
    fn agents_by_url_or_did() {
        assert_eq!(
            parse_agent("did:web:localhost%3A9001").expect("present"),
            Location::Remote {
                endpoint: "http://localhost:9001/a2a".into(),
                did: Some("did:web:localhost%3A9001".into())
            }
        );
        assert_eq!(
            parse_agent("did:web:agents.example.com:desk").expect("present"),
            Location::Remote {
                endpoint: "https://agents.example.com/desk/a2a".into(),
                did: Some("did:web:agents.example.com:desk".into())
            }
        );
        assert_eq!(
            parse_agent("http://127.0.0.1:9001").expect("present"),
            Location::Remote { endpoint: "http://127.0.0.1:9001/a2a".into(), did: None }
        );
    }

    #[test]
    fn mappings_build_objects_and_skip_absent_sources() {
        let m: Mapping =
            serde_json::from_value(json!({"a":"/input/x","b":"/steps/s/y~1z","c":{"const":[1]},"d":"/input/missing"}))
                .expect("present");
        let doc = json!({"input":{"x":1},"steps":{"s":{"y/z":"q"}}});
        assert_eq!(apply_mapping(&m, &doc), json!({"a":1,"b":"q","c":[1]}));
        assert!(parse_pointer("/a~2").is_err());
    }
}
