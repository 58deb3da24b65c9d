//! How an agent reconciles a proposal with what a capability requires (`spec/PROTOCOL.md` §6.3), and the validator of
//! the agreed schema that EXECUTE uses (§7).
//!
//! [`tighten`] computes the **agreed schema** G of a proposal P and a capability's `input_schema` C: G accepts exactly
//! the payloads valid under both P and C (their intersection), written in the keyword set of the schema rules, and
//! keeps P's shape so that every difference from P is listed as a [`SchemaChange`]. When no such schema exists the
//! result is the list of [`Conflict`]s (`409 schema_incompatible`).
//!
//! The seed's example (§3.1): the caller proposes `"required": ["title"]`, the capability needs a timestamp too.
//!
//! ```
//! use a2a_core::negotiation::tighten;
//! use serde_json::json;
//!
//! let proposed = json!({"type": "object", "properties": {"title": {"type": "string"}}, "required": ["title"]});
//! let capability = json!({"type": "object",
//!     "properties": {"title": {"type": "string"}, "timestamp": {"type": "string", "format": "date-time"}},
//!     "required": ["title", "timestamp"]});
//! let agreement = tighten(&proposed, &capability).expect("compatible");
//! assert_eq!(agreement.agreed_schema["required"], json!(["title", "timestamp"]));
//! ```
//!
//! [`AgreedSchema`] compiles an agreed schema once per negotiation (JSON Schema draft 2020-12, `format` asserted, no
//! remote references) and validates EXECUTE payloads against it.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::error::{A2aError, ErrorCode};
use crate::schema_rules::{
    self, Bound, Seg, as_count, compact, join, join_index, json_equal, lower_bound, number_text, parse_type,
    path_order, pointer, range_is_empty, stricter_lower, stricter_upper, upper_bound,
};
use crate::wire::{SchemaChange, SchemaChangeKind};

/// A successful reconciliation: the agreed schema and how it differs from the proposal.
#[derive(Debug, Clone, PartialEq)]
pub struct Agreement {
    /// The schema every EXECUTE payload of the negotiation must match.
    pub agreed_schema: Value,
    /// Every difference from the proposal that changes which payloads are accepted, sorted by path; empty when the
    /// agreed schema accepts exactly what the proposal accepts.
    pub changes: Vec<SchemaChange>,
}

impl Agreement {
    /// Whether the agent tightened the proposal (the `tightened` member of the response).
    pub fn tightened(&self) -> bool {
        !self.changes.is_empty()
    }
}

/// Why a proposal cannot be reconciled with the capability.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Conflict {
    /// JSON Pointer to the place of the conflict, in the structure of the proposed schema (where the agreed schema
    /// would have it), usually a keyword: `/properties/amount/type`.
    pub path: String,
    /// A message for people: what the proposal says and what the capability requires.
    pub message: String,
}

impl Conflict {
    /// The error code a proposal with conflicts is refused with: `schema_incompatible`.
    pub fn code(&self) -> ErrorCode {
        ErrorCode::SCHEMA_INCOMPATIBLE
    }
}

/// The `409 schema_incompatible` error for a list of conflicts, with `details.conflicts`; the caller (the server)
/// adds `fallback_options`.
pub fn incompatible_error(conflicts: &[Conflict]) -> A2aError {
    let n = conflicts.len();
    let first = conflicts.first().map_or(String::new(), |c| format!("; first, at `{}`: {}", c.path, c.message));
    let noun = if n == 1 { "conflict" } else { "conflicts" };
    A2aError::with_message(
        ErrorCode::SCHEMA_INCOMPATIBLE,
        format!(
            "the proposed schema cannot be reconciled with the capability ({n} {noun}{first}); see details.conflicts"
        ),
    )
    .details(serde_json::json!({ "conflicts": conflicts }))
}

/// The `409 tightening_refused` error of a strict request: `details.counter_proposal` is the schema the agent would
/// agree and `details.changes` why it differs from the proposal.
pub fn tightening_refused_error(agreement: &Agreement) -> A2aError {
    let n = agreement.changes.len();
    let noun = if n == 1 { "change" } else { "changes" };
    A2aError::with_message(
        ErrorCode::TIGHTENING_REFUSED,
        format!(
            "the capability needs {n} {noun} to the proposal but the request was strict; NEGOTIATE again with details.counter_proposal, or without strict"
        ),
    )
    .details(serde_json::json!({ "counter_proposal": agreement.agreed_schema, "changes": agreement.changes }))
}

/// Reconciles a proposal with a capability's input schema (`spec/PROTOCOL.md` §6.3).
///
/// Both schemas are expected to follow the schema rules ([`schema_rules::check`] returns nothing for them); for other
/// input the result is unspecified but the function does not panic. The output is deterministic: equal inputs give
/// equal agreed schemas, changes and conflicts, in the same order.
pub fn tighten(proposed: &Value, required: &Value) -> Result<Agreement, Vec<Conflict>> {
    let empty = Map::new();
    let p = proposed.as_object().unwrap_or(&empty);
    let c = required.as_object().unwrap_or(&empty);
    let mut m = Merger::default();
    let g = m.merge(p, c, &[], 0);
    if !m.conflicts.is_empty() {
        m.conflicts.sort_by(|a, b| path_order(&a.0, &b.0));
        m.conflicts.dedup();
        return Err(m
            .conflicts
            .into_iter()
            .map(|(path, message)| Conflict { path: pointer(&path), message })
            .collect());
    }
    m.changes.sort_by(|a, b| path_order(&a.0, &b.0).then_with(|| kind_rank(a.1).cmp(&kind_rank(b.1))));
    let changes =
        m.changes.into_iter().map(|(path, kind, message)| SchemaChange { path: pointer(&path), kind, message });
    Ok(Agreement { agreed_schema: Value::Object(g), changes: changes.collect() })
}

fn kind_rank(k: SchemaChangeKind) -> u8 {
    match k {
        SchemaChangeKind::AddedProperty => 0,
        SchemaChangeKind::AddedRequired => 1,
        SchemaChangeKind::NarrowedType => 2,
        SchemaChangeKind::TightenedConstraint => 3,
        SchemaChangeKind::ClosedAdditionalProperties => 4,
    }
}

/// Keywords [`Merger::merge`] reconciles one by one.
const CONSTRAINTS: &[&str] = &[
    "type",
    "enum",
    "const",
    "minimum",
    "exclusiveMinimum",
    "maximum",
    "exclusiveMaximum",
    "multipleOf",
    "minLength",
    "maxLength",
    "minItems",
    "maxItems",
    "uniqueItems",
    "pattern",
    "format",
    "items",
    "properties",
    "required",
    "additionalProperties",
];

/// The limit on nesting while merging (the schema rules allow 32; this only guards input that skipped them).
const MERGE_MAX_DEPTH: usize = 64;

/// What `additionalProperties` says.
enum Extra<'a> {
    /// Absent or `true`: any other property.
    Open,
    /// `false`: no other property.
    Closed,
    /// A schema every other property must match.
    Schema(&'a Map<String, Value>),
}

fn extra(s: &Map<String, Value>) -> Extra<'_> {
    match s.get("additionalProperties") {
        Some(Value::Bool(false)) => Extra::Closed,
        Some(Value::Object(o)) => Extra::Schema(o),
        _ => Extra::Open,
    }
}

fn required_names(s: &Map<String, Value>) -> Vec<&str> {
    s.get("required").and_then(Value::as_array).map_or_else(Vec::new, |a| a.iter().filter_map(Value::as_str).collect())
}

#[derive(Default)]
struct Merger {
    changes: Vec<(Vec<Seg>, SchemaChangeKind, String)>,
    conflicts: Vec<(Vec<Seg>, String)>,
}

impl Merger {
    fn change(&mut self, path: Vec<Seg>, kind: SchemaChangeKind, message: String) {
        self.changes.push((path, kind, message));
    }

    fn conflict(&mut self, path: Vec<Seg>, message: String) {
        self.conflicts.push((path, message));
    }

    /// Merges proposal node `p` with capability node `c`; `path` is where the node sits in the agreed schema.
    fn merge(
        &mut self,
        p: &Map<String, Value>,
        c: &Map<String, Value>,
        path: &[Seg],
        depth: usize,
    ) -> Map<String, Value> {
        let mut g: BTreeMap<String, Value> = BTreeMap::new();
        if depth > MERGE_MAX_DEPTH {
            self.conflict(path.to_vec(), "the schemas are nested too deeply to be reconciled".into());
            return Map::new();
        }

        // Annotations (description, title, default, examples, deprecated, readOnly, writeOnly, $comment, $schema),
        // `x-` extensions and anything else that is not a constraint: the proposal's, else the capability's.
        for (k, v) in p.iter().chain(c.iter()) {
            if !CONSTRAINTS.contains(&k.as_str()) && !g.contains_key(k) {
                g.insert(k.clone(), v.clone());
            }
        }

        // 1. Types.
        let gtype = match (p.get("type"), c.get("type")) {
            (Some(pt), Some(ct)) => match (parse_type(pt), parse_type(ct)) {
                (Some(a), Some(b)) if a.base != b.base => {
                    self.conflict(
                        join(path, "type"),
                        format!("proposed {}, the capability requires {}", a.base.name(), b.base.name()),
                    );
                    return p.clone();
                }
                (Some(a), Some(b)) => {
                    if a.nullable && !b.nullable {
                        let t = schema_rules::TypeSpec { base: a.base, nullable: false };
                        g.insert("type".into(), t.to_value());
                        self.change(
                            join(path, "type"),
                            SchemaChangeKind::NarrowedType,
                            format!("the capability does not accept null here: type narrowed to \"{}\"", a.base.name()),
                        );
                        Some(t)
                    } else {
                        g.insert("type".into(), pt.clone());
                        Some(a)
                    }
                }
                _ => {
                    g.insert("type".into(), pt.clone());
                    parse_type(pt)
                }
            },
            (Some(pt), None) => {
                g.insert("type".into(), pt.clone());
                parse_type(pt)
            }
            (None, Some(ct)) => {
                g.insert("type".into(), ct.clone());
                self.change(
                    join(path, "type"),
                    SchemaChangeKind::NarrowedType,
                    format!("the capability requires type {}", compact(ct)),
                );
                parse_type(ct)
            }
            (None, None) => None,
        };

        // 6. enum and const (first, because the type filters them).
        self.merge_enum_const(p, c, path, gtype, &mut g);

        // 4. Numbers.
        self.merge_bounds(p, c, path, &mut g);
        self.merge_multiple_of(p, c, path, &mut g);

        // 3 and 5. Lengths and counts.
        for (lo, hi) in [("minLength", "maxLength"), ("minItems", "maxItems")] {
            self.merge_counts(p, c, path, lo, hi, &mut g);
        }
        match (p.get("uniqueItems"), c.get("uniqueItems")) {
            (pv, Some(Value::Bool(true))) if pv != Some(&Value::Bool(true)) => {
                g.insert("uniqueItems".into(), Value::Bool(true));
                self.change(
                    join(path, "uniqueItems"),
                    SchemaChangeKind::TightenedConstraint,
                    "the capability requires unique items".into(),
                );
            }
            (Some(pv), _) => {
                g.insert("uniqueItems".into(), pv.clone());
            }
            (None, Some(cv)) => {
                g.insert("uniqueItems".into(), cv.clone());
            }
            (None, None) => {}
        }
        for k in ["pattern", "format"] {
            self.merge_equal_or_one(p, c, path, k, &mut g);
        }

        // 3. items.
        match (p.get("items"), c.get("items")) {
            (Some(Value::Object(pi)), Some(Value::Object(ci))) => {
                let gi = self.merge(pi, ci, &join(path, "items"), depth + 1);
                g.insert("items".into(), Value::Object(gi));
            }
            (Some(pi), _) => {
                g.insert("items".into(), pi.clone());
            }
            (None, Some(ci)) => {
                g.insert("items".into(), ci.clone());
                self.change(
                    join(path, "items"),
                    SchemaChangeKind::TightenedConstraint,
                    "the capability constrains the items of this array".into(),
                );
            }
            (None, None) => {}
        }

        // 2. Objects.
        self.merge_object(p, c, path, depth, &mut g);

        g.into_iter().collect()
    }

    fn merge_enum_const(
        &mut self,
        p: &Map<String, Value>,
        c: &Map<String, Value>,
        path: &[Seg],
        gtype: Option<schema_rules::TypeSpec>,
        g: &mut BTreeMap<String, Value>,
    ) {
        let pe = p.get("enum").and_then(Value::as_array);
        let ce = c.get("enum").and_then(Value::as_array);
        let merged: Option<Vec<Value>> = match (pe, ce) {
            (Some(a), Some(b)) => Some(a.iter().filter(|x| b.iter().any(|y| json_equal(x, y))).cloned().collect()),
            (Some(a), None) => Some(a.clone()),
            (None, Some(b)) => Some(b.clone()),
            (None, None) => None,
        };
        if let Some(mut values) = merged {
            if let Some(t) = gtype {
                values.retain(|v| t.admits(v));
            }
            if values.is_empty() {
                let what = match (pe, ce) {
                    (Some(a), Some(b)) => format!(
                        "no value is allowed by both: proposed enum {}, the capability allows {}",
                        compact(&Value::Array(a.clone())),
                        compact(&Value::Array(b.clone()))
                    ),
                    _ => "no value of the enum is allowed by the agreed type".into(),
                };
                self.conflict(join(path, "enum"), what);
            } else {
                let same = pe.is_some_and(|a| a.len() == values.len());
                if !same {
                    self.change(
                        join(path, "enum"),
                        SchemaChangeKind::TightenedConstraint,
                        format!("the capability allows only {}", compact(&Value::Array(values.clone()))),
                    );
                }
                g.insert("enum".into(), Value::Array(values));
            }
        }

        let gconst = match (p.get("const"), c.get("const")) {
            (Some(a), Some(b)) if !json_equal(a, b) => {
                self.conflict(
                    join(path, "const"),
                    format!("proposed const {}, the capability requires {}", compact(a), compact(b)),
                );
                return;
            }
            (Some(a), _) => a.clone(),
            (None, Some(b)) => {
                self.change(
                    join(path, "const"),
                    SchemaChangeKind::TightenedConstraint,
                    format!("the capability requires the value {}", compact(b)),
                );
                b.clone()
            }
            (None, None) => return,
        };
        if gtype.is_some_and(|t| !t.admits(&gconst)) {
            self.conflict(join(path, "const"), format!("const {} is not allowed by the agreed type", compact(&gconst)));
        } else if let Some(Value::Array(values)) = g.get("enum")
            && !values.iter().any(|v| json_equal(v, &gconst))
        {
            self.conflict(
                join(path, "const"),
                format!("const {} is not one of the allowed values of enum", compact(&gconst)),
            );
        }
        g.insert("const".into(), gconst);
    }

    fn merge_bounds(
        &mut self,
        p: &Map<String, Value>,
        c: &Map<String, Value>,
        path: &[Seg],
        g: &mut BTreeMap<String, Value>,
    ) {
        // Each side's effective bound; the agreed schema takes the capability's keyword only when it is stricter,
        // and otherwise keeps the proposal's keywords as they are.
        let mut lo: Option<(Bound, &'static str, bool)> = None; // (bound, keyword, from the proposal)
        let mut hi: Option<(Bound, &'static str, bool)> = None;
        let (pl, cl) = (lower_bound(p), lower_bound(c));
        match (pl, cl) {
            (pb, Some((cb, ck))) if pb.is_none_or(|(pb, _)| stricter_lower(cb, pb)) => {
                g.insert(ck.into(), c.get(ck).cloned().unwrap_or(Value::Null));
                let was = pb.map_or("no lower bound".to_owned(), |(b, k)| schema_rules::describe_bound(k, b));
                self.change(
                    join(path, ck),
                    SchemaChangeKind::TightenedConstraint,
                    format!("the capability requires {} (proposed {was})", schema_rules::describe_bound(ck, cb)),
                );
                lo = Some((cb, ck, false));
            }
            (Some((pb, pk)), _) => {
                copy(p, g, &["minimum", "exclusiveMinimum"]);
                lo = Some((pb, pk, true));
            }
            _ => {}
        }
        match (upper_bound(p), upper_bound(c)) {
            (pb, Some((cb, ck))) if pb.is_none_or(|(pb, _)| stricter_upper(cb, pb)) => {
                g.insert(ck.into(), c.get(ck).cloned().unwrap_or(Value::Null));
                let was = pb.map_or("no upper bound".to_owned(), |(b, k)| schema_rules::describe_bound(k, b));
                self.change(
                    join(path, ck),
                    SchemaChangeKind::TightenedConstraint,
                    format!("the capability requires {} (proposed {was})", schema_rules::describe_bound(ck, cb)),
                );
                hi = Some((cb, ck, false));
            }
            (Some((pb, pk)), _) => {
                copy(p, g, &["maximum", "exclusiveMaximum"]);
                hi = Some((pb, pk, true));
            }
            _ => {}
        }
        if let (Some((l, lk, lp)), Some((h, hk, _))) = (lo, hi)
            && range_is_empty(l, h)
        {
            let at = if lp { lk } else { hk };
            self.conflict(
                join(path, at),
                format!(
                    "no number satisfies both {} and {} (one from the proposal, one from the capability)",
                    schema_rules::describe_bound(lk, l),
                    schema_rules::describe_bound(hk, h)
                ),
            );
        }
    }

    fn merge_multiple_of(
        &mut self,
        p: &Map<String, Value>,
        c: &Map<String, Value>,
        path: &[Seg],
        g: &mut BTreeMap<String, Value>,
    ) {
        let key = "multipleOf";
        match (p.get(key), c.get(key)) {
            (Some(pv), Some(cv)) => {
                let (Some(a), Some(b)) = (pv.as_f64(), cv.as_f64()) else {
                    g.insert(key.into(), pv.clone());
                    return;
                };
                if a == b || (a > b && is_multiple(a, b)) {
                    g.insert(key.into(), pv.clone());
                } else if b > a && is_multiple(b, a) {
                    g.insert(key.into(), cv.clone());
                    self.change(
                        join(path, key),
                        SchemaChangeKind::TightenedConstraint,
                        format!(
                            "the capability requires multiples of {} (proposed {})",
                            number_text(b),
                            number_text(a)
                        ),
                    );
                } else {
                    self.conflict(
                        join(path, key),
                        format!(
                            "proposed multipleOf {}, the capability requires multipleOf {}; neither is a multiple of the other",
                            number_text(a),
                            number_text(b)
                        ),
                    );
                }
            }
            (Some(pv), None) => {
                g.insert(key.into(), pv.clone());
            }
            (None, Some(cv)) => {
                g.insert(key.into(), cv.clone());
                self.change(
                    join(path, key),
                    SchemaChangeKind::TightenedConstraint,
                    format!("the capability requires multiples of {}", compact(cv)),
                );
            }
            (None, None) => {}
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn merge_counts(
        &mut self,
        p: &Map<String, Value>,
        c: &Map<String, Value>,
        path: &[Seg],
        lo: &'static str,
        hi: &'static str,
        g: &mut BTreeMap<String, Value>,
    ) {
        // (value, from the proposal)
        let pick = |this: &mut Self, g: &mut BTreeMap<String, Value>, key: &'static str, larger: bool| {
            let pv = p.get(key).and_then(|v| as_count(v).map(|n| (n, v)));
            let cv = c.get(key).and_then(|v| as_count(v).map(|n| (n, v)));
            match (pv, cv) {
                (pn, Some((cn, cval))) if pn.is_none_or(|(pn, _)| if larger { cn > pn } else { cn < pn }) => {
                    g.insert(key.into(), cval.clone());
                    let was = pn.map_or_else(|| "none".to_owned(), |(n, _)| n.to_string());
                    this.change(
                        join(path, key),
                        SchemaChangeKind::TightenedConstraint,
                        format!("the capability requires {key} {cn} (proposed {was})"),
                    );
                    Some((cn, false))
                }
                (Some((pn, pval)), _) => {
                    g.insert(key.into(), pval.clone());
                    Some((pn, true))
                }
                _ => None,
            }
        };
        let l = pick(self, g, lo, true);
        let h = pick(self, g, hi, false);
        if let (Some((ln, lp)), Some((hn, _))) = (l, h)
            && ln > hn
        {
            self.conflict(
                join(path, if lp { lo } else { hi }),
                format!(
                    "no value satisfies both {lo} {ln} and {hi} {hn} (one from the proposal, one from the capability)"
                ),
            );
        }
    }

    fn merge_equal_or_one(
        &mut self,
        p: &Map<String, Value>,
        c: &Map<String, Value>,
        path: &[Seg],
        key: &str,
        g: &mut BTreeMap<String, Value>,
    ) {
        match (p.get(key), c.get(key)) {
            (Some(a), Some(b)) if a != b => self.conflict(
                join(path, key),
                format!("proposed {key} {}, the capability requires {key} {}", compact(a), compact(b)),
            ),
            (Some(a), _) => {
                g.insert(key.into(), a.clone());
            }
            (None, Some(b)) => {
                g.insert(key.into(), b.clone());
                self.change(
                    join(path, key),
                    SchemaChangeKind::TightenedConstraint,
                    format!("the capability requires {key} {}", compact(b)),
                );
            }
            (None, None) => {}
        }
    }

    fn merge_object(
        &mut self,
        p: &Map<String, Value>,
        c: &Map<String, Value>,
        path: &[Seg],
        depth: usize,
        g: &mut BTreeMap<String, Value>,
    ) {
        let empty = Map::new();
        let pp = p.get("properties").and_then(Value::as_object).unwrap_or(&empty);
        let cp = c.get("properties").and_then(Value::as_object).unwrap_or(&empty);
        let (pa, ca) = (extra(p), extra(c));
        let c_required = required_names(c);
        let props_path = join(path, "properties");

        let mut names: Vec<&String> = pp.keys().chain(cp.keys()).collect();
        names.sort();
        names.dedup();
        let mut gp: BTreeMap<String, Value> = BTreeMap::new();
        for name in names {
            let at = join(&props_path, name);
            match (pp.get(name.as_str()), cp.get(name.as_str())) {
                (Some(px), Some(cx)) => match (px.as_object(), cx.as_object()) {
                    (Some(a), Some(b)) => {
                        gp.insert(name.clone(), Value::Object(self.merge(a, b, &at, depth + 1)));
                    }
                    _ => {
                        gp.insert(name.clone(), px.clone());
                    }
                },
                (Some(px), None) => match (&ca, px.as_object()) {
                    (Extra::Closed, _) => self.conflict(
                        at,
                        format!(
                            "the capability does not accept property {} (its additionalProperties is false)",
                            compact(&Value::String(name.clone()))
                        ),
                    ),
                    (Extra::Schema(s), Some(a)) => {
                        gp.insert(name.clone(), Value::Object(self.merge(a, s, &at, depth + 1)));
                    }
                    _ => {
                        gp.insert(name.clone(), px.clone());
                    }
                },
                (None, Some(cx)) => match (&pa, cx.as_object()) {
                    (Extra::Closed, _) => {
                        if c_required.contains(&name.as_str()) {
                            self.conflict(
                                join(path, "additionalProperties"),
                                format!(
                                    "the capability requires property {}, which the proposal does not allow (additionalProperties: false)",
                                    compact(&Value::String(name.clone()))
                                ),
                            );
                        }
                        // Not required: payloads valid under the proposal never carry it; the agreed schema leaves
                        // it out, as the proposal does.
                    }
                    (Extra::Schema(s), Some(b)) => {
                        // The whole property is new; only conflicts of the merge matter.
                        let mut sub = Merger::default();
                        let merged = sub.merge(s, b, &at, depth + 1);
                        self.conflicts.extend(sub.conflicts);
                        gp.insert(name.clone(), Value::Object(merged));
                        self.change(
                            at,
                            SchemaChangeKind::AddedProperty,
                            format!("the capability defines property {}", compact(&Value::String(name.clone()))),
                        );
                    }
                    _ => {
                        gp.insert(name.clone(), cx.clone());
                        self.change(
                            at,
                            SchemaChangeKind::AddedProperty,
                            format!("the capability defines property {}", compact(&Value::String(name.clone()))),
                        );
                    }
                },
                (None, None) => {}
            }
        }
        if p.contains_key("properties") || !gp.is_empty() {
            g.insert("properties".into(), Value::Object(gp.into_iter().collect()));
        }

        // required: the proposal's, then the capability's additions in its order.
        let mut req: Vec<Value> = p.get("required").and_then(Value::as_array).cloned().unwrap_or_default();
        for name in &c_required {
            if req.iter().any(|r| r.as_str() == Some(name)) {
                continue;
            }
            if matches!(pa, Extra::Closed) && !pp.contains_key(*name) {
                continue; // reported above as a conflict
            }
            self.change(
                join_index(&join(path, "required"), req.len()),
                SchemaChangeKind::AddedRequired,
                format!("the capability requires property {}", compact(&Value::String((*name).to_owned()))),
            );
            req.push(Value::String((*name).to_owned()));
        }
        if p.contains_key("required") || !req.is_empty() {
            g.insert("required".into(), Value::Array(req));
        }

        // additionalProperties.
        let ap = join(path, "additionalProperties");
        match (&pa, &ca) {
            (Extra::Closed, _) => {
                g.insert("additionalProperties".into(), Value::Bool(false));
            }
            (_, Extra::Closed) => {
                g.insert("additionalProperties".into(), Value::Bool(false));
                self.change(
                    ap,
                    SchemaChangeKind::ClosedAdditionalProperties,
                    "the capability accepts no properties other than those listed".into(),
                );
            }
            (Extra::Schema(a), Extra::Schema(b)) => {
                let m = self.merge(a, b, &ap, depth + 1);
                g.insert("additionalProperties".into(), Value::Object(m));
            }
            (Extra::Schema(_), Extra::Open) => {
                copy(p, g, &["additionalProperties"]);
            }
            (Extra::Open, Extra::Schema(_)) => {
                copy(c, g, &["additionalProperties"]);
                self.change(
                    ap,
                    SchemaChangeKind::TightenedConstraint,
                    "the capability constrains properties other than those listed".into(),
                );
            }
            (Extra::Open, Extra::Open) => copy(p, g, &["additionalProperties"]),
        }
    }
}

/// Copies the given keywords of `from` that are present.
fn copy(from: &Map<String, Value>, g: &mut BTreeMap<String, Value>, keys: &[&str]) {
    for k in keys {
        if let Some(v) = from.get(*k) {
            g.insert((*k).to_owned(), v.clone());
        }
    }
}

/// Whether `big` is an integer multiple of `small` (`big / small` within 1e-9 of an integer, relative to the
/// quotient), both positive.
fn is_multiple(big: f64, small: f64) -> bool {
    if !(small > 0.0 && big > 0.0) {
        return false;
    }
    let r = big / small;
    r.is_finite() && (r - r.round()).abs() <= 1e-9 * r.max(1.0)
}

// ---------------------------------------------------------------------------------------------------------------------
// The agreed-schema validator

/// The most errors [`AgreedSchema::validate`] reports.
pub const MAX_PAYLOAD_ERRORS: usize = 32;

/// How many raw errors are read from the validator before sorting and cutting to [`MAX_PAYLOAD_ERRORS`].
const RAW_ERROR_BUDGET: usize = 1024;

/// The message of a property refused by `additionalProperties: false`.
const NOT_ALLOWED: &str = "property is not allowed by the agreed schema (additionalProperties is false)";

/// One reason a payload does not match the agreed schema.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PayloadError {
    /// JSON Pointer (RFC 6901) into the payload: the value at fault, or where a missing required property belongs.
    pub path: String,
    /// A message for people (the payload's values are not repeated in it).
    pub message: String,
}

impl PayloadError {
    /// The error code a payload with this error is refused with: `payload_invalid`.
    pub fn code(&self) -> ErrorCode {
        ErrorCode::PAYLOAD_INVALID
    }
}

/// The `422 payload_invalid` error for a list of payload errors, with `details.errors`.
pub fn payload_invalid_error(errors: &[PayloadError]) -> A2aError {
    let first = errors.first().map_or(String::new(), |e| {
        let at = if e.path.is_empty() { "the root".to_owned() } else { format!("`{}`", e.path) };
        format!(" (first, at {at}: {})", e.message)
    });
    A2aError::with_message(
        ErrorCode::PAYLOAD_INVALID,
        format!("the payload does not match the agreed schema{first}; see details.errors"),
    )
    .details(serde_json::json!({ "errors": errors }))
}

/// Why a schema could not be compiled.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the agreed schema cannot be compiled: {message}")]
pub struct CompileError {
    /// What the compiler said.
    pub message: String,
}

impl CompileError {
    /// The error code: `internal_error` (an agreed schema that follows the schema rules always compiles).
    pub fn code(&self) -> ErrorCode {
        ErrorCode::INTERNAL_ERROR
    }
}

/// An agreed schema compiled once, shared by every EXECUTE of its negotiation (cloning is cheap: an `Arc`).
#[derive(Clone)]
pub struct AgreedSchema {
    inner: Arc<Compiled>,
}

struct Compiled {
    schema: Value,
    validator: jsonschema::Validator,
}

impl std::fmt::Debug for AgreedSchema {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgreedSchema").field("schema", &self.inner.schema).finish_non_exhaustive()
    }
}

impl AgreedSchema {
    /// Compiles a schema as JSON Schema draft 2020-12 with `format` asserted and no remote references.
    pub fn compile(schema: &Value) -> Result<AgreedSchema, CompileError> {
        let validator = jsonschema::options()
            .with_draft(jsonschema::Draft::Draft202012)
            .should_validate_formats(true)
            .build(schema)
            .map_err(|e| CompileError { message: e.to_string() })?;
        Ok(AgreedSchema { inner: Arc::new(Compiled { schema: schema.clone(), validator }) })
    }

    /// The schema compiled.
    pub fn schema(&self) -> &Value {
        &self.inner.schema
    }

    /// Whether a payload matches, without collecting errors.
    pub fn is_valid(&self, payload: &Value) -> bool {
        self.inner.validator.is_valid(payload)
    }

    /// Validates a payload: every error (at most [`MAX_PAYLOAD_ERRORS`]), sorted by path then message.
    ///
    /// A missing required property is reported at the path where it belongs (`/title`); a property that
    /// `additionalProperties: false` refuses, at its own path, one error each.
    pub fn validate(&self, payload: &Value) -> Result<(), Vec<PayloadError>> {
        if self.inner.validator.is_valid(payload) {
            return Ok(());
        }
        let mut out: Vec<(Vec<Seg>, String)> = Vec::new();
        for e in self.inner.validator.iter_errors(payload).take(RAW_ERROR_BUDGET) {
            let base: Vec<Seg> = e
                .instance_path()
                .iter()
                .map(|s| match s {
                    jsonschema::paths::LocationSegment::Property(p) => Seg::Key(p.to_string()),
                    jsonschema::paths::LocationSegment::Index(i) => Seg::Index(i),
                })
                .collect();
            match e.kind() {
                jsonschema::error::ValidationErrorKind::Required { property } => {
                    let name = property.as_str().map_or_else(|| property.to_string(), str::to_owned);
                    let msg = format!("required property {} is missing", compact(&Value::String(name.clone())));
                    out.push((join(&base, &name), msg));
                }
                jsonschema::error::ValidationErrorKind::AdditionalProperties { unexpected } => {
                    for name in unexpected {
                        out.push((join(&base, name), NOT_ALLOWED.into()));
                    }
                }
                // `additionalProperties: false` without `properties` is reported once, at the object, for its first
                // member only: every member of that object is unexpected.
                jsonschema::error::ValidationErrorKind::FalseSchema
                    if e.schema_path().as_str().ends_with("/additionalProperties") =>
                {
                    match payload.pointer(e.instance_path().as_str()).and_then(Value::as_object) {
                        Some(obj) => {
                            for name in obj.keys() {
                                out.push((join(&base, name), NOT_ALLOWED.into()));
                            }
                        }
                        None => out.push((base, NOT_ALLOWED.into())),
                    }
                }
                jsonschema::error::ValidationErrorKind::Format { format } => {
                    out.push((base, format!("value is not a valid {}", compact(&Value::String(format.clone())))));
                }
                jsonschema::error::ValidationErrorKind::Type { .. } => {
                    let got = schema_rules::json_kind(e.instance().as_ref());
                    out.push((base, format!("{}, got {got}", e.masked())));
                }
                _ => out.push((base, e.masked().to_string())),
            }
        }
        out.sort_by(|a, b| path_order(&a.0, &b.0).then_with(|| a.1.cmp(&b.1)));
        out.dedup();
        out.truncate(MAX_PAYLOAD_ERRORS);
        if out.is_empty() {
            // is_valid and iter_errors disagree only if the validator is wrong; never accept silently.
            out.push((Vec::new(), "the payload does not match the agreed schema".into()));
        }
        Err(out.into_iter().map(|(p, message)| PayloadError { path: pointer(&p), message }).collect())
    }
}

// ---------------------------------------------------------------------------------------------------------------------
// NEGOTIATE in one call

/// A successful NEGOTIATE: the agreement and its compiled validator.
#[derive(Debug, Clone)]
pub struct Negotiated {
    /// The agreed schema and the changes (under `strict`, the proposal itself and no changes).
    pub agreement: Agreement,
    /// The agreed schema, compiled.
    pub validator: AgreedSchema,
}

/// The schema part of NEGOTIATE (`spec/PROTOCOL.md` NEG-1, §6.2, §6.3), in order: the proposal follows the schema
/// rules (`422 schema_rule_violation`), it can be reconciled with the capability (`409 schema_incompatible`, without
/// `fallback_options`: the server adds them), and under `strict` it needs no change (`409 tightening_refused`); then
/// the agreed schema is compiled once.
pub fn negotiate(proposed: &Value, capability_schema: &Value, strict: bool) -> Result<Negotiated, A2aError> {
    let violations = schema_rules::check(proposed);
    if !violations.is_empty() {
        return Err(schema_rules::violations_error(&violations));
    }
    if let Some(v) = schema_rules::check(capability_schema).first() {
        return Err(A2aError::with_message(
            ErrorCode::INTERNAL_ERROR,
            format!("the capability's input_schema breaks the schema rules at `{}`: {}", v.path, v.message),
        ));
    }
    let mut agreement = tighten(proposed, capability_schema).map_err(|c| incompatible_error(&c))?;
    if strict {
        if agreement.tightened() {
            return Err(tightening_refused_error(&agreement));
        }
        agreement.agreed_schema = proposed.clone();
    }
    let validator = AgreedSchema::compile(&agreement.agreed_schema)
        .map_err(|e| A2aError::with_message(ErrorCode::INTERNAL_ERROR, e.to_string()))?;
    Ok(Negotiated { agreement, validator })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn kinds(a: &Agreement) -> Vec<(String, SchemaChangeKind)> {
        a.changes.iter().map(|c| (c.path.clone(), c.kind)).collect()
    }

    #[test]
    fn agreed_schema_is_send_sync_and_cheap_to_clone() {
        fn assert_send_sync<T: Send + Sync + Clone>() {}
        assert_send_sync::<AgreedSchema>();
        let a = AgreedSchema::compile(&json!({"type":"object"})).unwrap_or_else(|e| panic!("{e}"));
        let b = a.clone();
        assert!(Arc::ptr_eq(&a.inner, &b.inner));
    }

    #[test]
    fn identical_schemas_agree_without_changes() {
        let s = json!({"type":"object","properties":{"a":{"type":"string","minLength":2}},"required":["a"]});
        let a = tighten(&s, &s).unwrap_or_else(|c| panic!("{c:?}"));
        assert_eq!(a.agreed_schema, s);
        assert!(!a.tightened());
    }

    #[test]
    fn capability_lower_bound_replaces_weaker_proposal_keywords() {
        let p = json!({"type":"object","properties":{"n":{"type":"number","minimum":0}}});
        let c = json!({"type":"object","properties":{"n":{"type":"number","exclusiveMinimum":0}}});
        let a = tighten(&p, &c).unwrap_or_else(|c| panic!("{c:?}"));
        assert_eq!(a.agreed_schema["properties"]["n"], json!({"type":"number","exclusiveMinimum":0}));
        assert_eq!(kinds(&a), [("/properties/n/exclusiveMinimum".to_owned(), SchemaChangeKind::TightenedConstraint)]);
    }

    #[test]
    fn multiple_of_decimal_multiples_are_recognised() {
        assert!(is_multiple(0.05, 0.01));
        assert!(is_multiple(6.0, 2.0));
        assert!(!is_multiple(3.0, 2.0));
        assert!(!is_multiple(0.0, 2.0));
    }

    #[test]
    fn non_object_inputs_do_not_panic() {
        for (p, c) in [(json!(1), json!(null)), (json!([]), json!({"type":"object"})), (json!({"type":5}), json!({}))] {
            let _ = tighten(&p, &c);
        }
    }

    #[test]
    fn negotiate_maps_each_failure_to_its_code() {
        let cap =
            json!({"type":"object","properties":{"a":{"type":"string"},"b":{"type":"number"}},"required":["a","b"]});
        let bad = negotiate(&json!({"type":"object","required":["x"]}), &cap, false).map(|_| ());
        assert_eq!(bad.map_err(|e| e.code), Err(ErrorCode::SCHEMA_RULE_VIOLATION));
        let clash = negotiate(&json!({"type":"object","properties":{"a":{"type":"number"}}}), &cap, false).map(|_| ());
        assert_eq!(clash.map_err(|e| e.code), Err(ErrorCode::SCHEMA_INCOMPATIBLE));
        let p = json!({"type":"object","properties":{"a":{"type":"string"}},"required":["a"]});
        let strict = negotiate(&p, &cap, true).map(|_| ());
        let err = strict.err().unwrap_or_else(|| A2aError::new(ErrorCode::INTERNAL_ERROR));
        assert_eq!(err.code, ErrorCode::TIGHTENING_REFUSED);
        let counter = err.details.unwrap_or_default()["counter_proposal"].clone();
        assert_eq!(counter["required"], json!(["a", "b"]));
        let ok = negotiate(&counter, &cap, true).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(ok.agreement.agreed_schema, counter);
        assert!(ok.validator.validate(&json!({"a":"x","b":1})).is_ok());
    }
}
