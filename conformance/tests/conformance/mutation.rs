//! The mutation table (`a2a_conformance::mutation`) against the specification and the broken agents: every MUST has a
//! broken agent that the suite catches with a check citing it, or a stated reason it is not checked; the broken
//! agents named exist, and each is caught by exactly the checks its test names (`broken::CAUGHT`, run by the tests
//! in `broken.rs`).

use std::collections::{BTreeMap, BTreeSet};

use a2a_conformance::coverage;
use a2a_conformance::mutation::{AWAITING_FIXTURE, FIXTURES};

use crate::broken::CAUGHT;
use crate::coverage::requirements;

fn musts() -> BTreeSet<String> {
    requirements().into_iter().filter(|(_, l)| l == "MUST" || l == "MUST NOT").map(|(id, _)| id).collect()
}

/// Check id -> the requirements it cites.
fn cited() -> BTreeMap<&'static str, &'static [&'static str]> {
    a2a_conformance::checks::all().into_iter().map(|c| (c.id, c.requirements)).collect()
}

/// `Fault` name -> the checks that catch it.
fn caught() -> BTreeMap<String, &'static [&'static str]> {
    CAUGHT.iter().map(|(f, c)| (format!("{f:?}"), *c)).collect()
}

#[test]
fn every_must_has_a_fixture_a_reason_or_is_listed_as_awaiting_one() {
    let musts = musts();
    assert!(musts.len() > 150, "only {} MUSTs found", musts.len());
    let fixtures: BTreeSet<&str> = FIXTURES.iter().map(|(id, _)| *id).collect();
    let awaiting: BTreeSet<&str> = AWAITING_FIXTURE.iter().copied().collect();
    let unaccounted: Vec<&String> = musts
        .iter()
        .filter(|id| {
            !fixtures.contains(id.as_str()) && !awaiting.contains(id.as_str()) && coverage::reason(id).is_none()
        })
        .collect();
    assert!(
        unaccounted.is_empty(),
        "MUSTs with neither a broken-agent fixture (mutation::FIXTURES) nor a reason they are not checked \
         (coverage::NOT_CHECKED): {unaccounted:?}"
    );
    for id in fixtures.iter().chain(awaiting.iter()) {
        assert!(musts.contains(*id), "{id} is in the mutation table but is not a MUST of spec/PROTOCOL.md");
        assert!(coverage::reason(id).is_none(), "{id} is listed as not checked: it cannot have a fixture");
    }
    for id in &awaiting {
        assert!(!fixtures.contains(id), "{id} has a fixture now: remove it from AWAITING_FIXTURE");
    }
    assert_eq!(awaiting.len(), AWAITING_FIXTURE.len(), "an id listed twice in AWAITING_FIXTURE");
    assert_eq!(fixtures.len(), FIXTURES.len(), "an id listed twice in FIXTURES");
}

#[test]
fn every_fixture_named_exists_and_is_caught_by_a_check_citing_its_requirement() {
    let caught = caught();
    let cited = cited();
    for (id, faults) in FIXTURES {
        assert!(!faults.is_empty(), "{id}: no fixture named");
        for fault in *faults {
            let checks =
                caught.get(*fault).unwrap_or_else(|| panic!("{id}: no broken agent {fault} in broken::CAUGHT"));
            assert!(
                checks.iter().any(|c| cited.get(c).is_some_and(|r| r.contains(id))),
                "{id}: {fault} is caught by {checks:?}, none of which cites {id}"
            );
        }
    }
    // Every broken agent proves some MUST (a fixture that proves nothing is not in the table).
    let used: BTreeSet<&str> = FIXTURES.iter().flat_map(|(_, f)| f.iter().copied()).collect();
    for name in caught.keys() {
        assert!(used.contains(name.as_str()), "broken agent {name} proves no requirement in mutation::FIXTURES");
    }
    for (fault, checks) in CAUGHT {
        for c in *checks {
            assert!(cited.contains_key(c), "{fault:?} expects {c}, which is not a check");
        }
    }
}

#[test]
fn every_observable_must_has_a_fixture() {
    assert!(
        AWAITING_FIXTURE.is_empty(),
        "{} observable MUSTs are checked by the suite but no broken agent shows the check failing: {AWAITING_FIXTURE:?}",
        AWAITING_FIXTURE.len()
    );
}
