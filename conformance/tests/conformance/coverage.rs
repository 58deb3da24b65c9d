//! Every requirement of `spec/PROTOCOL.md` is checked by the suite or listed, with its reason, as not checked.

use std::collections::{BTreeMap, BTreeSet};

use a2a_conformance::coverage::NOT_CHECKED;

/// Every requirement of the spec: `**[ID] LEVEL**` in prose or a table row `| ID | LEVEL | ... |`, as
/// `a2a-core/tests/spec.rs` finds them.
pub fn requirements() -> BTreeMap<String, String> {
    let spec = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../spec/PROTOCOL.md")).expect("spec");
    const LEVELS: [&str; 5] = ["MUST NOT", "MUST", "SHOULD NOT", "SHOULD", "MAY"];
    let is_id = |s: &str| {
        s.split_once('-').is_some_and(|(p, n)| {
            !p.is_empty()
                && p.bytes().all(|b| b.is_ascii_uppercase())
                && !n.is_empty()
                && n.bytes().all(|b| b.is_ascii_digit())
        })
    };
    let mut out = BTreeMap::new();
    for (i, _) in spec.match_indices("**[") {
        let rest = &spec[i + 3..];
        let Some(end) = rest.find(']') else { continue };
        let id = &rest[..end];
        if is_id(id) {
            let after = rest[end + 1..].trim_start();
            let level = LEVELS.iter().find(|l| after.starts_with(&format!("{l}**"))).map_or("", |l| *l);
            out.insert(id.to_owned(), level.to_owned());
        }
    }
    for line in spec.lines() {
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        if cells.len() > 3 && cells[0].is_empty() && is_id(cells[1]) {
            let level = LEVELS.iter().find(|l| cells[2] == **l).map_or("", |l| *l);
            out.insert(cells[1].to_owned(), level.to_owned());
        }
    }
    out
}

fn checked() -> BTreeSet<String> {
    a2a_conformance::checks::all().iter().flat_map(|c| c.requirements.iter().map(|r| (*r).to_owned())).collect()
}

#[test]
fn every_requirement_is_checked_or_listed_as_not_checked_with_a_reason() {
    let reqs = requirements();
    assert!(reqs.len() > 200, "only {} requirements found", reqs.len());
    let checked = checked();
    let listed: BTreeSet<String> = NOT_CHECKED.iter().map(|(id, _)| (*id).to_owned()).collect();
    let missing: Vec<&String> = reqs.keys().filter(|id| !checked.contains(*id) && !listed.contains(*id)).collect();
    assert!(missing.is_empty(), "requirements neither checked nor listed in coverage::NOT_CHECKED: {missing:?}");
    for (id, why) in NOT_CHECKED {
        assert!(reqs.contains_key(*id), "coverage::NOT_CHECKED lists {id}, which spec/PROTOCOL.md does not have");
        assert!(!checked.contains(*id), "{id} is checked now: remove it from coverage::NOT_CHECKED");
        assert!(why.len() > 20, "{id}: give a real reason");
    }
    let mut seen = BTreeSet::new();
    for (id, _) in NOT_CHECKED {
        assert!(seen.insert(*id), "{id} listed twice");
    }
}

#[test]
fn checks_name_only_real_requirements_and_carry_their_strongest_level() {
    let reqs = requirements();
    let mut ids = BTreeSet::new();
    for c in a2a_conformance::checks::all() {
        assert!(ids.insert(c.id), "check id {} used twice", c.id);
        assert!(
            c.id.contains('/')
                && c.id.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'/' || b == b'-'),
            "{}",
            c.id
        );
        assert!(!c.requirements.is_empty(), "{} names no requirement", c.id);
        let mut strongest = a2a_conformance::Level::May;
        for r in c.requirements {
            let level =
                reqs.get(*r).unwrap_or_else(|| panic!("{} names {r}, which spec/PROTOCOL.md does not have", c.id));
            let l = match level.as_str() {
                "MUST" | "MUST NOT" => a2a_conformance::Level::Must,
                "SHOULD" | "SHOULD NOT" => a2a_conformance::Level::Should,
                _ => a2a_conformance::Level::May,
            };
            strongest = strongest.min(l);
        }
        assert_eq!(c.level, strongest, "{}: its level must be the strongest of {:?}", c.id, c.requirements);
    }
}
