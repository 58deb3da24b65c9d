//! The suite's self-test by mutation: for every externally observable MUST of `spec/PROTOCOL.md`, a broken agent
//! (a fixture of `conformance/tests/conformance/broken.rs`, named by its `Fault`) that violates that requirement and
//! nothing else, and that the suite catches with exactly the checks the fixture's test names, one of which cites the
//! requirement. A test (`conformance/tests/conformance/mutation.rs`) parses the specification and fails when a MUST
//! has neither a fixture here nor a reason it is not checked ([`crate::coverage::NOT_CHECKED`], which says why each is
//! not observable from outside or needs a set-up the suite cannot make), when a fixture named here does not exist
//! or is not caught by a check citing the requirement, and when an entry is stale.
//!
//! [`AWAITING_FIXTURE`] lists the MUSTs that the suite checks and that are observable, but that no broken agent
//! exercises yet: the suite's checks for them have never been seen to fail. It may only shrink: the strict test
//! (`every_observable_must_has_a_fixture`, ignored until the list is empty) fails while it has entries.

/// Requirement id -> the broken agents (`Fault` names) that violate it, each caught by a check citing it.
pub const FIXTURES: &[(&str, &[&str])] = &[
    ("ANN-2", &["PublishesSkippedAnnounce"]),
    ("ANN-4", &["EventsIgnoreLastEventId"]),
    ("AUTH-1", &["AcceptsUnsigned"]),
    ("BR-5", &["CardSignedWithAnotherKey"]),
    ("BR-13", &["GetTaskAnswersAnotherTask"]),
    ("CAP-13", &["IgnoresRegion"]),
    ("CONF-2", &["ConfirmRunsTwice"]),
    ("DISC-5", &["PreflightWithoutAllowHeaders"]),
    ("EID-5", &["CounterExecutionIds"]),
    ("EID-11", &["LocationNotEncoded"]),
    ("ERR-1", &["HtmlNotFound"]),
    ("EXE-3", &["AcceptsInvalidPayloads"]),
    ("EXE-4", &["NoExecutionHeader", "LocationNotEncoded"]),
    ("EXE-7", &["IgnoresIdempotencyKey"]),
    ("HDR-2", &["ErrorsWithoutVersion"]),
    ("HDR-5", &["LenientVersion"]),
    ("HIS-4", &["NoRedaction"]),
    ("INT-9", &["NoReplayProtection"]),
    ("JCS-21", &["NonCanonicalResponseSignatures"]),
    ("JWS-2", &["NonCanonicalResponseSignatures"]),
    ("JWS-5", &["AcceptsExpiredSignatures"]),
    ("LIM-1", &["UnderstatesBodyLimit"]),
    ("POL-4", &["IgnoresHop"]),
    ("SCH-12", &["AcceptsNullable"]),
    ("SES-11", &["RegistersReservedKeys"]),
    ("SND-2", &["UnboundedAttachments"]),
    ("SND-8", &["FalseSessionTimeout"]),
    ("SND-10", &["DropsLateReply"]),
    ("SND-11", &["IgnoresContext"]),
    ("SND-13", &["IgnoresRunTimeout"]),
    ("ST-2", &["LateResultOverwritesCancel"]),
    ("ST-3", &["IgnoresDeadlines"]),
    ("STR-1", &["StreamWithoutNoStore"]),
    ("STR-2", &["LenientStreamHeader"]),
    ("STR-11", &["StreamResumesFromStart"]),
    ("TR-6", &["HtmlNotFound"]),
    ("HDR-7", &["ErrorsWithoutSenderId"]),
    ("DISC-1", &["DiscoverAnswers200", "DiscoverRequiresVersion"]),
    ("EID-9", &["MalformedIdsAre400"]),
    ("CAN-2", &["CancelOfTerminalAccepted"]),
    ("ST-4", &["ResultWithoutError"]),
    ("TR-5", &["ContentTypeIgnored"]),
    ("HDR-6", &["MissingSenderAccepted"]),
    ("INT-6", &["AcceptsExpiredSignatures"]),
    ("AUTH-4", &["AcceptsUnsigned"]),
    ("NEG-40", &["AcceptsInvalidPayloads"]),
    ("NEG-42", &["AcceptsInvalidPayloads"]),
    ("ERR-4", &["HtmlNotFound"]),
    ("HDR-4", &["LenientVersion"]),
    ("HDR-1", &["IgnoresIdempotencyKey"]),
    ("EXE-2", &["IgnoresRegion"]),
    ("SCH-1", &["AcceptsNullable"]),
    ("CONF-1", &["ConfirmAnswers200"]),
    ("CONF-4", &["UnknownConfirmIs400"]),
    ("EXE-1", &["MissingNegotiationIdIs404"]),
    ("DISC-2", &["DiscoverWithoutCapabilities"]),
    ("CAN-1", &["CancelAnswers202"]),
    ("INT-10", &["ResponsesSignedWithAnotherKey"]),
    ("KEY-8", &["ResponsesSignedWithAnotherKey"]),
    ("JWS-3", &["LenientTokenDecoding"]),
    ("TR-7", &["InvalidJsonWrongCode"]),
    ("RES-2", &["IgnoresWaitMs"]),
    ("EXE-6", &["ConfirmByOffByAnHour"]),
    ("NEG-2", &["IgnoresProposedTimeout"]),
    ("CONF-3", &["ConfirmAfterCancelAccepted"]),
    ("DISC-6", &["CorsMissingOnResponses"]),
    ("DISC-9", &["CapabilitiesReordered"]),
    ("SES-2", &["AcceptsUnsigned"]),
    ("HDR-8", &["AcceptsUnsigned"]),
    ("NEG-1", &["IgnoresRegion"]),
    ("ERR-3", &["MethodNotAllowedWithoutAllow"]),
    ("SCH-22", &["NonObjectSchemaIs400"]),
    ("SCH-6", &["NonObjectSchemaIs400"]),
];

/// MUSTs the suite checks, observable from outside, that no broken agent exercises yet (see the module doc).
pub const AWAITING_FIXTURE: &[&str] = &[
    "LIM-5", "DID-17", "DID-18", "NEG-43", "DISC-10", "HDR-3", "ANN-1", "ANN-3", "ANN-6", "AUTH-2", "AUTH-3", "AUTH-5",
    "AUTH-8", "BR-1", "BR-2", "BR-3", "BR-4", "BR-6", "BR-7", "BR-8", "BR-9", "BR-10", "BR-11", "BR-12", "BR-14",
    "BR-15", "BR-16", "BR-17", "BR-26", "CAP-1", "CAP-2", "CAP-3", "CAP-5", "CAP-7", "CAP-8", "CAP-9", "CAP-10",
    "CAP-11", "CAP-14", "CAP-17", "CAP-18", "CAP-19", "CAP-20", "DID-1", "DID-2", "DID-3", "DID-4", "DID-5", "DID-6",
    "DID-7", "DID-8", "DID-9", "DID-10", "DID-11", "DID-12", "DID-13", "DID-14", "DID-19", "DID-20", "DID-21",
    "DID-22", "DID-24", "DID-25", "DID-26", "DID-30", "DID-31", "DISC-3", "DISC-8", "EID-1", "EID-2", "EID-3", "EID-6",
    "EID-7", "EID-8", "EID-12", "EXE-5", "FB-1", "FB-2", "FB-3", "GW-2", "GW-3", "GW-6", "GW-8", "GW-9", "GW-11",
    "GW-16", "HIS-1", "HIS-2", "INT-1", "INT-2", "INT-3", "INT-4", "INT-5", "INT-7", "INT-8", "INT-12", "JCS-1",
    "JCS-2", "JCS-3", "JCS-4", "JCS-5", "JCS-6", "JCS-7", "JCS-8", "JCS-9", "JCS-10", "JCS-11", "JCS-13", "JCS-14",
    "JCS-15", "JCS-16", "JCS-17", "JCS-19", "JCS-22", "JCS-23", "JWS-1", "JWS-4", "JWS-6", "KEY-1", "KEY-2", "KEY-3",
    "KEY-9", "LIM-2", "NEG-3", "NEG-4", "NEG-5", "NEG-7", "NEG-8", "NEG-10", "NEG-11", "NEG-12", "NEG-13", "NEG-15",
    "NEG-16", "NEG-17", "NEG-18", "NEG-19", "NEG-20", "NEG-21", "NEG-22", "NEG-23", "NEG-24", "NEG-25", "NEG-26",
    "NEG-27", "NEG-28", "NEG-29", "NEG-30", "NEG-31", "NEG-41", "POL-3", "POL-5", "RES-1", "RES-3", "RES-4", "RES-5",
    "SCH-2", "SCH-3", "SCH-4", "SCH-5", "SCH-7", "SCH-9", "SCH-10", "SCH-11", "SCH-13", "SCH-14", "SCH-15", "SCH-16",
    "SCH-17", "SCH-18", "SES-1", "SES-3", "SES-4", "SES-5", "SES-7", "SES-8", "SND-1", "SND-4", "SND-5", "SND-6",
    "SND-7", "SND-9", "SND-14", "ST-1", "STR-4", "STR-6", "TR-1", "TR-3", "TR-8", "EXE-9", "DISC-13",
];

/// The fixtures of a requirement.
pub fn fixtures(id: &str) -> &'static [&'static str] {
    FIXTURES.iter().find(|(i, _)| *i == id).map_or(&[], |(_, f)| f)
}
