//! Which requirements of `spec/PROTOCOL.md` the suite checks, and why the others cannot be checked from outside.
//!
//! A test (`conformance/tests/it/coverage.rs`) parses the specification and fails when a requirement is neither the
//! requirement of a check nor listed here with a reason.

/// Requirements that cannot be observed by a party that only talks to the agent over HTTP, with the reason.
pub const NOT_OBSERVABLE: &[(&str, &str)] = &[];
