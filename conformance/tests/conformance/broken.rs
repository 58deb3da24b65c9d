//! The suite proves it can fail: deliberately broken agents, each the demo agent (the `a2a-server` library, real HTTP
//! on loopback) wrong in exactly one way on the wire, and for each the set of failed checks is exactly the expected
//! one. A middleware in front of the correct agent does the breaking; where the fault is "accepts what it must
//! refuse", the middleware re-signs with the caller's key or writes the execution to the agent's store, so that the
//! agent really accepts it.
//!
//! Each broken agent's run is the suite restricted (`--only`) to the areas of the checks that catch it ([`scope`]),
//! so that a fixture costs what its area costs; [`FULL_SUITE_SAMPLE`] runs the whole suite, and
//! `A2A_CONFORMANCE_FIXTURES_FULL=1` runs every fixture against the whole suite.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use a2a_core::execution_id::ExecutionId;
use a2a_core::integrity::{self, Coverage, MessageParts, SignatureClaims};
use a2a_core::jws;
use a2a_server::handler::ExecutionContext;
use a2a_server::store::{ExecutionRecord, Executions};
use axum::body::Body;
use axum::extract::Request;
use axum::http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use crate::common::{self, Caller, Running};

/// One fault each.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// Error responses lack A2A-Version.
    ErrorsWithoutVersion,
    /// Preflights below /a2a lack Access-Control-Allow-Headers (a browser cannot send the A2A headers).
    PreflightWithoutAllowHeaders,
    /// NEGOTIATE accepts `nullable` (the agent drops it from the proposal instead of refusing it).
    AcceptsNullable,
    /// A repeated CONFIRM is answered as a first one and runs the work again.
    ConfirmRunsTwice,
    /// Expired signatures are accepted.
    AcceptsExpiredSignatures,
    /// A replayed signed request is accepted.
    NoReplayProtection,
    /// Unsigned requests to the did_auth capability are accepted.
    AcceptsUnsigned,
    /// Payloads that do not match the agreed schema are accepted.
    AcceptsInvalidPayloads,
    /// EXECUTE responses lack A2A-Execution-ID.
    NoExecutionHeader,
    /// Unknown paths get an HTML page.
    HtmlNotFound,
    /// Any A2A-Version is taken as 0.3.
    LenientVersion,
    /// idempotency is advertised but Idempotency-Key is ignored.
    IgnoresIdempotencyKey,
    /// limits.max_body_bytes announces less than the agent enforces.
    UnderstatesBodyLimit,
    /// The region restriction is not enforced.
    IgnoresRegion,
    /// A send whose wait ended while the run was still within its run timeout is reported `timeout` instead of
    /// `accepted` (OpenClaw #43095).
    FalseSessionTimeout,
    /// A reply to a run whose requester stopped waiting is acknowledged but dropped (OpenClaw #148296).
    DropsLateReply,
    /// A stream resumed with Last-Event-ID is replayed from its first event (STR-11).
    StreamResumesFromStart,
    /// The sessions' event channel ignores Last-Event-ID: a reconnecting client gets a fresh stream (ANN-4).
    EventsIgnoreLastEventId,
    /// A2A-Hop is ignored: every send counts as hop 1 (POL-4).
    IgnoresHop,
    /// The history shows the messages as they were sent, secrets included (HIS-4).
    NoRedaction,
    /// Streams are sent without Cache-Control: no-store (STR-1).
    StreamWithoutNoStore,
    /// An A2A-Stream value other than true or false is taken as false (STR-2).
    LenientStreamHeader,
    /// More than 8 attachments are accepted (the ninth and later are dropped) (SND-2).
    UnboundedAttachments,
    /// context_mode and context are ignored: every delivery comes without context (SND-11).
    IgnoresContext,
    /// run_timeout_ms is ignored: every run gets the default (SND-13).
    IgnoresRunTimeout,
    /// The reserved keys send and spawn are registered (under another name) (SES-11).
    RegistersReservedKeys,
    /// An announce step answered ANNOUNCE_SKIP is published anyway (ANN-2).
    PublishesSkippedAnnounce,
    /// The A2A 1.x bridge signs its card with a key that is not in the agent's DID document (BR-5, BR-6).
    CardSignedWithAnotherKey,
    /// The A2A 1.x bridge's GetTask answers another task than the one asked for (BR-13).
    GetTaskAnswersAnotherTask,
    /// The random suffix of an execution id is a counter (EID-5): unique, well-formed, and predictable.
    CounterExecutionIds,
    /// Location carries the execution id as it is, not percent-encoded as a path segment (EID-11, EXE-4).
    LocationNotEncoded,
    /// Responses are signed over a pretty-printed (non-canonical) header and claims (JWS-2, JCS-21); the signatures
    /// verify.
    NonCanonicalResponseSignatures,
    /// Deadlines are never enforced (ST-3): an execution past its deadline runs on and ends succeeded.
    IgnoresDeadlines,
    /// A late result overwrites `canceled` (ST-2): once the handler would have finished, RESULT shows succeeded.
    LateResultOverwritesCancel,
    /// Error responses lack `A2A-Sender-ID` (HDR-7).
    ErrorsWithoutSenderId,
    /// `405` responses lack `Allow` (ERR-3); the body still names the methods.
    MethodNotAllowedWithoutAllow,
    /// A `proposed_schema` that is not a JSON object is answered `400 invalid_request` as a malformed request (TR-7's
    /// reading) instead of `422 schema_rule_violation` at `""` (SCH-22, SCH-6).
    NonObjectSchemaIs400,
    /// DISCOVER (`OPTIONS /a2a`) is answered `200` instead of `204` (DISC-1).
    DiscoverAnswers200,
    /// RESULT of an id that does not parse is `400 invalid_request` instead of `404 unknown_execution` (EID-9).
    MalformedIdsAre400,
    /// CANCEL of a terminal execution is answered `200` with its status instead of `409 invalid_state` (CAN-2).
    CancelOfTerminalAccepted,
    /// RESULT of a failed, timed out or canceled execution has no `error` (ST-4).
    ResultWithoutError,
    /// A body with another Content-Type than JSON is read as JSON instead of refused with `415` (TR-5).
    ContentTypeIgnored,
    /// A request without `A2A-Sender-ID` is served as if a default sender had sent it (HDR-6).
    MissingSenderAccepted,
    /// A first CONFIRM is answered `200` instead of `202` (CONF-1).
    ConfirmAnswers200,
    /// CONFIRM of an unknown execution is `400 invalid_request` instead of `404 unknown_execution` (CONF-4).
    UnknownConfirmIs400,
    /// EXECUTE without `A2A-Negotiation-ID` is `404 unknown_negotiation` instead of `400 negotiation_required` (EXE-1).
    MissingNegotiationIdIs404,
    /// DISCOVER lacks `A2A-Capabilities` (DISC-2).
    DiscoverWithoutCapabilities,
    /// CANCEL is answered `202` with an empty object instead of `200` with the canceled `ResultResponse` (CAN-1).
    CancelAnswers202,
    /// Responses are signed with a key that is not in the agent's DID document (INT-10, KEY-8).
    ResponsesSignedWithAnotherKey,
    /// `=` padding is stripped from `A2A-Signature` before it is decoded, so a padded token is accepted (JWS-3).
    LenientTokenDecoding,
    /// A body that is not JSON is `400 invalid_request` instead of `400 invalid_json` (TR-7).
    InvalidJsonWrongCode,
    /// RESULT ignores `wait_ms`: it always answers at once (RES-2).
    IgnoresWaitMs,
    /// EXECUTE answers a `confirm_by` an hour later than `created_at` plus the confirm window (EXE-6).
    ConfirmByOffByAnHour,
    /// NEGOTIATE ignores the proposed `timeout_ms`: every negotiation gets the default (NEG-2).
    IgnoresProposedTimeout,
    /// CONFIRM of a canceled execution is answered `202 accepted` (CONF-3).
    ConfirmAfterCancelAccepted,
    /// Responses other than preflights lack `Access-Control-Allow-Origin` (DISC-6).
    CorsMissingOnResponses,
    /// DISCOVER without `A2A-Version` is refused `400 version_required` (HDR-3).
    DiscoverRequiresVersion,
    /// `capabilities` of `GET /a2a/capabilities` is in the reverse order of `A2A-Capabilities` (DISC-9).
    CapabilitiesReordered,
    /// `details.errors` of `422 payload_invalid` is in the reverse order (NEG-43).
    UnsortedValidationErrors,
    /// CANCEL is served but `cancel` is not listed in `features` (DISC-10).
    CancelServedButNotListed,
    /// A request without `A2A-Version` is served as version 0.3 (HDR-3).
    MissingVersionAccepted,
    /// NEGOTIATE's `200` lacks `A2A-Negotiation-ID` (NEG-3).
    NegotiationIdHeaderMissing,
    /// NEGOTIATE answers another `auth_requirement` than the capability's (NEG-7).
    AuthRequirementMisreported,
    /// A repeated NEGOTIATE is answered with the first negotiation again (NEG-8).
    NegotiationReplayed,
    /// NEGOTIATE answers `tightened: false` whatever the changes (NEG-12).
    TightenedAlwaysFalse,
    /// `409 schema_incompatible` comes without `fallback_options` (NEG-11, FB-3).
    ConflictWithoutFallback,
    /// `strict: true` is ignored: the tightened schema is agreed (NEG-13).
    StrictIgnored,
    /// A negotiation serves one EXECUTE only: the next is `404 unknown_negotiation` (NEG-5).
    NegotiationSingleUse,
    /// EXECUTE accepts another sender's negotiation (NEG-4).
    NegotiationsNotSenderScoped,
    /// Unknown members of NegotiateRequest, ExecutionRef and FallbackRequest are ignored (TR-8).
    UnknownMembersIgnored,
    /// `POST /a2a/fallback` is not served (TR-1).
    FallbackNotServed,
    /// `A2A-Capabilities` names a capability twice (DISC-3).
    DuplicateCapabilityName,
    /// The capabilities document says `a2a_version: "0.2"` (DISC-8).
    WrongDocumentVersion,
    /// RESULT takes the sender from the execution id instead of `A2A-Sender-ID`: anyone reads anyone's result (RES-1).
    ResultTrustsIdSender,
    /// RESULT does not percent-decode its path segment: an encoded id is unknown (RES-5).
    ResultNotDecoded,
    /// A signature whose `s` is above `n/2` is refused (JWS-4).
    HighSRefused,
    /// A signature that does not verify is accepted (JWS-1).
    InvalidSignaturesAccepted,
    /// A `header_only` signature is accepted on a request with a body (AUTH-5).
    HeaderOnlyBodyAccepted,
    /// `integrity_mismatch` errors do not say which part did not match (INT-7).
    MismatchUnnamed,
    /// Stream event ids start at 0 (STR-4); `Last-Event-ID` is read in the same numbering.
    StreamIdsFromZero,
    /// The stream's `result` event carries a member the plain RESULT has not (STR-6).
    StreamResultDiffers,
    /// The timestamp of an execution id has a leading zero (EID-3).
    LeadingZeroTimestamps,
    /// An execution shows `running` before it is confirmed (EXE-5).
    WorkBeforeConfirm,
    /// A known `Idempotency-Key` is answered with the stored execution before the payload is validated (EXE-9).
    IdempotencyBeforeValidation,
    /// `OPTIONS` on a path below the endpoint sent as a client sends DISCOVER (with `A2A-Version`) is answered as
    /// DISCOVER (DISC-13); a bare one is answered right.
    OptionsBelowIsDiscover,
    /// Reading RESULT of a `received` execution confirms it: the first CONFIRM is answered as a repeated one (RES-4).
    ResultConfirms,
    /// The first RESULT after CONFIRM shows `received` again, a step backwards from CONFIRM's `accepted` (ST-1).
    ConfirmedShowsReceived,
    /// The body digest's canonical form sorts members by code point, not UTF-16 code unit (JCS-15).
    CanonKeysByCodePoint,
    /// The body digest's canonical form writes numbers as Rust does, not as ECMAScript (JCS-16).
    CanonNumbersAsRust,
    /// The body digest's canonical form escapes control characters with upper-case hex (JCS-17).
    CanonUpperCaseEscapes,
    /// The body digest's canonical form normalizes `e` + U+0301 to U+00E9 (JCS-10).
    CanonNormalizesStrings,
    /// A signed body holding a noncharacter (U+FDD0, U+FFFE) is refused `400 invalid_json` (JCS-9).
    CanonRefusesNoncharacters,
    /// The body digest's canonical form sorts arrays (JCS-14).
    CanonArraysSorted,
    /// A signed body holding the escape `\/` is refused `400 invalid_json` (JCS-5).
    CanonRefusesSolidusEscape,
    /// The body digest's canonical form writes a supplementary character as its `\u` surrogate pair (JCS-6).
    CanonSurrogatesEscaped,
    /// Numbers of signed bodies are read to 15 significant digits, not the nearest binary64 (JCS-4).
    CanonNumbersRounded,
    /// A signed body with a member given twice is read (the last wins) instead of refused (JCS-7).
    DuplicateMembersAccepted,
    /// A signed body with a number with a leading zero is read instead of refused (JCS-3).
    LeadingZerosAccepted,
    /// The body digest is computed over the raw bytes, not their canonical form (JCS-19).
    DigestOverRawBytes,
    /// A caller whose DID document publishes an RSA key is accepted (DID-26, KEY-2).
    ResolverAcceptsRsaKeys,
    /// A caller whose DID document publishes its private key is accepted (KEY-3).
    ResolverAcceptsPrivateKeys,
    /// A key listed only in `keyAgreement` verifies signatures (DID-25).
    ResolverAcceptsKeyAgreementKeys,
    /// A DID document whose `id` is another DID is accepted (DID-19).
    ResolverAcceptsOtherIds,
    /// A DID document that is not JSON is answered `401 unknown_key` instead of `did_resolution_failed` (DID-18, DID-31).
    ResolverMisnamesNonJson,
    /// A DID document over 65 536 bytes is accepted (DID-17).
    ResolverAcceptsHugeDocuments,
    /// A DID document with 65 verification methods is accepted (DID-20).
    ResolverAcceptsManyMethods,
    /// A verification method without `type` is accepted (DID-21).
    ResolverAcceptsUntypedMethods,
    /// The resolver follows a redirect to a valid document (DID-30).
    ResolverFollowsRedirects,
    /// A DID document with members the protocol does not use is refused (DID-22).
    ResolverRefusesUnusedMembers,
    /// `429 quota_exceeded` comes without `Retry-After` (LIM-5).
    QuotaWithoutRetryAfter,
    /// An EXECUTE identical to an earlier one (sender, negotiation, payload; no Idempotency-Key) is answered with the
    /// earlier execution and its id (EID-7).
    ExecuteDeduplicatedWithoutKey,
    /// The random suffix of an execution id is written in upper case (EID-1).
    UppercaseIdSuffix,
    /// NEGOTIATE's agreed schema drops the proposal's `enum` (NEG-16).
    TightenDropsEnum,
    /// NEGOTIATE's agreed schema drops the proposal's `const` (NEG-17).
    TightenDropsConst,
    /// NEGOTIATE's agreed schema drops the proposal's lower bounds (NEG-18).
    TightenDropsLowerBound,
    /// NEGOTIATE's agreed schema drops the proposal's upper bounds (NEG-19).
    TightenDropsUpperBound,
    /// NEGOTIATE's agreed schema drops the proposal's `multipleOf` (NEG-21).
    TightenDropsMultipleOf,
    /// NEGOTIATE's agreed schema drops the proposal's length bounds (NEG-22).
    TightenDropsLengths,
    /// NEGOTIATE's agreed schema drops the proposal's `pattern` (NEG-24).
    TightenDropsPattern,
    /// NEGOTIATE's agreed schema drops the proposal's annotations (NEG-29).
    TightenDropsAnnotations,
    /// NEGOTIATE's agreed schema drops the proposal's `additionalProperties` (NEG-28).
    TightenOpensClosedProposal,
    /// NEGOTIATE's agreed schema lacks the capability's `required` when the proposal has none (NEG-27).
    TightenSkipsCapabilityRequired,
    /// NEGOTIATE's `changes` are in the reverse order (NEG-31).
    ChangesUnsorted,
    /// NEGOTIATE's `changes` have no `message` (NEG-30).
    ChangesWithoutMessage,
    /// The first declaration of the capabilities document has a member the table does not have (CAP-1).
    DeclarationWithUnknownMember,
    /// The first declaration of the capabilities document has `description: null` (CAP-2).
    DeclarationWithNullRequired,
    /// The first declaration of the capabilities document has a blank `description` (CAP-3).
    BlankDescription,
    /// The first declaration of the capabilities document has no `auth_requirement` (CAP-8).
    DeclarationWithoutAuthRequirement,
    /// The first declaration of the capabilities document says `auth_requirement: "None"` (CAP-9).
    AuthRequirementCapitalized,
    /// The first declaration of the capabilities document has a region name with blanks (CAP-10).
    InvalidRegionName,
    /// The first declaration of the capabilities document lists itself in `sub_capabilities` (CAP-14).
    SubCapabilityOfItself,
    /// The first declaration of the capabilities document has `estimated_cost: -1` (CAP-17).
    NegativeCost,
    /// The first declaration of the capabilities document lists itself in `fallback_for` (CAP-18).
    FallbackForItself,
    /// The first declaration of the capabilities document has an `input_schema` with `nullable` (it breaks the schema rules) (CAP-19, SCH-18, CAP-20).
    InputSchemaBreaksRules,
    /// FALLBACK's `200` has no `fallback_options` (FB-1).
    FallbackWithoutOptions,
    /// FALLBACK leaves out the options of capabilities that declare `fallback_for` the requested one (FB-2).
    FallbackDropsDegraded,
    /// A send to an unknown session is `400 invalid_request` instead of `404 unknown_session` (SND-5).
    UnknownSessionIs400,
    /// `A2A-Wait-Chain` is ignored: a wait cycle is left to time out (POL-5).
    IgnoresWaitChain,
    /// History with `limit=0` is answered `200` with no message instead of `400` (HIS-2).
    HistoryAcceptsLimitZero,
    /// History lacks `truncated` (HIS-1).
    HistoryWithoutTruncated,
    /// A run ended `no_reply` does not keep the skip token as `reply` (SND-14).
    NoReplyWithoutToken,
    /// A send with `reply: false` is answered only after its `wait_ms` (SND-9).
    ReplyFalseWaits,
    /// A send that was only stored is answered `200 ok` instead of `202 accepted` (SND-7).
    SendAcceptedAsOk,
    /// Deliveries carry `provenance.is_user: true` (POL-3).
    ProvenanceClaimsUser,
    /// Registering an inbox session again (a refresh) is answered `201` instead of `200` (SES-4).
    RefreshAnswered201,
    /// An ended session is still listed (SES-7).
    EndedSessionStillListed,
    /// NEGOTIATE's schema check misses a rule: a `type` the rules refuse (`integer`, unions) is read as `string` (SCH-7).
    TypeNotAllowedAccepted,
    /// NEGOTIATE's schema check misses a rule: a subschema without `type` is read as `string` (SCH-9).
    TypeMissingAccepted,
    /// NEGOTIATE's schema check misses a rule: `required` names without a property are dropped (SCH-10).
    UndefinedRequiredAccepted,
    /// NEGOTIATE's schema check misses a rule: `format` on a non-string is dropped (SCH-11).
    FormatOnNonStringAccepted,
    /// NEGOTIATE's schema check misses a rule: `$ref` and the other reference keywords are dropped (SCH-13).
    RefsAccepted,
    /// NEGOTIATE's schema check misses a rule: unknown keywords are dropped (SCH-15).
    UnknownKeywordsIgnored,
    /// NEGOTIATE's schema check misses a rule: keywords with values the rules refuse (bounds that leave no value) are dropped (SCH-16).
    EmptyBoundsAccepted,
    /// `details.violations` of `422 schema_rule_violation` is in the reverse order (SCH-3).
    ViolationsUnsorted,
    /// Each violation carries a member beyond `{rule, path, message}` (SCH-2).
    ViolationsWithExtraMember,
    /// At most 32 violations are reported, not 256 (SCH-4).
    ViolationsCapped32,
    /// The rule `format_requires_string` is reported as `format_not_string` (SCH-5).
    RuleIdsRenamed,
    /// URLs in proposals (`$ref`) and payloads are fetched (SCH-14, NEG-41).
    FetchesReferences,
    /// `aud` is compared with the agent's DID ignoring case (JWS-6).
    AudienceCaseInsensitive,
    /// `aud` may be an array holding the agent's DID (INT-2: it is a string).
    AudienceArrayAccepted,
    /// Of two `A2A-Signature` headers the first is used (INT-1: refused `signature_malformed`).
    TwoSignaturesAccepted,
    /// A token whose header embeds a `jwk` is verified with that key (KEY-9).
    KeyFromEmbeddedJwk,
    /// DISCOVER has no `A2A-Region` although a capability is region-restricted (CAP-11).
    RegionHeaderMissing,
    /// The first capability is declared twice (in `A2A-Capabilities` and the document) (CAP-7).
    DuplicateDeclaration,
    /// The first capability is named by one word (`echo`), in `A2A-Capabilities` and the document (CAP-5).
    SingleWordCapabilityName,
    /// NEGOTIATE's agreed schema keeps a proposed `null` in a property's type the capability does not allow (NEG-15).
    TightenKeepsNullable,
    /// NEGOTIATE's agreed schema drops the properties only the proposal has, although the capability is open (NEG-26).
    TightenDropsProposedProperties,
    /// NEGOTIATE does not see that the agreed bounds leave no number: a proposed `minimum` above the capability's
    /// `maximum` is agreed (p's `minimum`, c's `maximum`) instead of a conflict (NEG-20).
    TightenAgreesEmptyRange,
    /// NEGOTIATE's agreed schema keeps the proposal's `uniqueItems: false` where the capability requires `true`
    /// (NEG-23).
    TightenKeepsProposedUniqueItems,
    /// NEGOTIATE's agreed schema takes the proposal's `items` as they are where both have `items`, instead of merging
    /// them with the capability's (NEG-25).
    TightenKeepsProposedItems,
    /// An inbox is served to any sender that names its key: the agent reads it as its owner's (SES-5).
    InboxServedToOthers,
    /// The DID resolver builds every document URL as the path segments then `/did.json`: a DID without a path is
    /// looked up at `/did.json` instead of `/.well-known/did.json` (DID-12).
    RootDocumentAtDidJson,
    /// The agent refuses a body over its limit correctly (`413`) and then falls over: every later connection is
    /// dropped without an answer, as when the process has crashed (LIM-2).
    DiesAfterOversizeBody,
    /// The A2A 1.x bridge does not carry `messageId` as the `Idempotency-Key` of its EXECUTE: a resent message
    /// runs again as a new task (BR-11).
    BridgeIgnoresMessageId,
    /// The A2A 1.x bridge serves a JSON-RPC batch as its first request instead of refusing it `-32600` (BR-9).
    BridgeServesFirstOfBatch,
    /// The agent answers in HTTP/1.0, not HTTP/1.1 (TR-3).
    SpeaksHttp10,
    /// The sender part of an execution id is the caller's DID with `%3A` decoded to `:` (EID-2).
    SenderDecodedInIds,
    /// NEGOTIATE's schema check has no depth bound: a schema object at depth 33 is checked, not `too_deep` (SCH-17).
    DepthUnbounded,
    /// A `payload_hash` digest computed with the seed's Python recipe is accepted besides the RFC 8785 one (JCS-23,
    /// INT-12).
    PythonRecipeAccepted,
    /// A covered (`a2a-*`) header the signature does not list is not refused (INT-4).
    UnsignedHeaderAccepted,
    /// The `payload_hash` body digest is not compared (INT-3).
    BodyDigestIgnored,
    /// The Agent Card lacks `Access-Control-Allow-Origin: *` (BR-3).
    CardWithoutCors,
    /// The Agent Card's first skill has no `tags` (BR-4); the card is signed as it is.
    SkillWithoutTags,
    /// The Agent Card carries `capabilities.pushNotifications: false` (BR-4, BR-6: no `false` member); signed as it is.
    CardWithFalseMember,
    /// The bridge takes any `A2A-Version` (BR-2).
    BridgeAnyVersion,
    /// The bridge's JSON-RPC errors have no `data` (no `ErrorInfo`) (BR-14).
    BridgeErrorsWithoutInfo,
    /// A message with two data parts is carried out with the first (BR-8: `-32602`).
    BridgeTakesFirstDataPart,
    /// `message.metadata.skill` is not read (BR-7).
    BridgeIgnoresMessageSkill,
    /// The bridge ignores `A2A-Sender-ID`: every message is the anonymous sender's (BR-10).
    BridgeIgnoresSender,
    /// The HTTP+JSON binding is not served (BR-1).
    HttpJsonNotServed,
    /// NEGOTIATE with `A2A-Bridges: a2a1x` has no `bridge_to` (BR-17).
    BridgeToMissing,
    /// A completed task has no `artifacts` (BR-12).
    CompletedTaskWithoutArtifact,
    /// `SendStreamingMessage` sends no `artifactUpdate` (BR-15).
    StreamWithoutArtifactUpdate,
    /// `SubscribeToTask` does not start with the task (BR-16).
    SubscribeWithoutTask,
    /// A sender DID of another method than `web` is served (DID-1).
    SenderAnyMethod,
    /// A sender DID whose port has a leading zero is served (DID-2).
    SenderLeadingZeroPort,
    /// A sender DID whose host has upper-case letters is served (DID-3).
    SenderHostCaseFolded,
    /// A sender DID whose host is an IP address is served (DID-4).
    SenderIpHost,
    /// A sender DID whose host is one label (not `localhost`) is served (DID-5).
    SenderSingleLabelHost,
    /// A sender DID whose host is not ASCII (not punycode) is served (DID-6).
    SenderUnicodeHost,
    /// A sender DID with a lower-case `%3a` is served (DID-7).
    SenderLowerCasePercent,
    /// A sender DID over 512 bytes is served (DID-8).
    SenderTooLong,
    /// A sender DID naming the default port (`%3A443`) is taken as the DID without it (DID-9).
    SenderDefaultPortDropped,
    /// An `A2A-Sender-ID` that is not a valid did:web DID is `400 invalid_request`, not `invalid_sender` (DID-11).
    InvalidSenderWrongCode,
    /// A `kid` whose key id has characters DID-10 does not allow is resolved, not refused as malformed (DID-10).
    KidFragmentUnchecked,
    /// A `kid` naming a key the caller's DID document lacks is verified with the document's key (DID-24).
    UnknownKeyFallsBack,
    /// The agent's DID document lists its key in `authentication` only, not `assertionMethod` (DID-14).
    DocumentWithoutAssertionMethod,
    /// Every response signature carries the same `jti` (INT-5: a jti is never reused).
    ResponseJtiReused,
    /// `A2A-Api-Key` is compared over the shorter of the two keys: a prefix of the key, or the key with more after
    /// it, is accepted (AUTH-2).
    ApiKeyPrefixAccepted,
    /// A RESULT path segment that is itself a valid id is percent-decoded anyway (EID-12): `%3A` becomes `:`.
    DecodesValidSegment,
    /// Execution ids are read from the left: an id whose sender DID has `_` is unknown (EID-8).
    IdParsedFromLeft,
    /// Every execution id of the agent has the same random suffix (EID-6: ids of two processes would collide).
    SuffixReused,
    /// A terminal execution is forgotten once read (RES-3).
    ForgetsTerminalAfterRead,
    /// A signed body nested deeper than 128 levels is read (JCS-8).
    DeepNestingAccepted,
    /// A body with something after its JSON value (a comment, a second value) is read as its first value (JCS-2).
    TrailingContentIgnored,
    /// A signed body that starts with a byte order mark is read (JCS-1).
    BomAccepted,
    /// The body digest's canonical form writes `true`, `false`, `null` as `True`, `False`, `None` (JCS-13).
    CanonLiteralsCapitalized,
    /// Unknown members of a session send are ignored (SND-1: `400 invalid_request` naming the member).
    SendUnknownMembersIgnored,
    /// The session endpoints answer a body that is not JSON with a plain-text page, not an `ErrorBody` (SES-1).
    SessionErrorsPlainText,
    /// `GET /a2a/sessions` lists the sender's own sessions without `include_self` (SES-8).
    IncludeSelfIgnored,
    /// The announce step's delivery lacks the instruction (ANN-1).
    AnnounceWithoutInstruction,
    /// A fresh event stream does not start with `: connected` (ANN-6).
    EventsWithoutConnected,
    /// `GET /a2a/sessions` lists the hosted sessions only, not the inbox sessions registered with it (SES-3).
    InboxSessionsUnlisted,
    /// The `announce` events of the channel carry no `provenance` (ANN-3).
    AnnounceEventWithoutProvenance,
    /// NEGOTIATE's `changes` come out in the order of the request's members: reversed when `target_capability` is
    /// written before `proposed_schema` (NEG-10: the answer does not depend on the order of members).
    ChangesInReceivedOrder,
    /// `A2A-Forwarded-Sender` from a sender that is not a trusted gateway is honoured: the request is served as the
    /// forwarded sender's instead of refused `403 forbidden` (GW-9).
    HonoursUntrustedForwardedSender,
    /// Bearer JWTs are decoded, not verified: an unexpired ES256 token addressed to the agent is accepted whoever
    /// signed it and whatever its issuer (AUTH-3).
    OAuth2TokenUnverified,
    /// A waiting send from a session to itself is served as a send without a wait instead of refused
    /// `409 wait_cycle` (SND-4).
    WaitsOnItself,
    /// The DID resolver tries `https` first and falls back to `http` (DID-13).
    ResolverFallsBackToHttp,
    /// A gateway deployment whose two gateways do not share their route records, NEGOTIATE reaching one and the
    /// steps naming its ids the other (GW-6, hence GW-2).
    GatewayRoutesNotShared,
    /// A gateway that verifies signatures as the audience of the agent behind it, not as its own DID: a caller's
    /// signature addressed to the gateway is refused `401 audience_mismatch` (GW-3).
    GatewayVerifiesAsAgent,
    /// A gateway that passes a caller's `A2A-Forwarded-Sender` and `A2A-Forwarded-Verified` on to its agents (GW-8).
    GatewayForwardsForwardingHeaders,
    /// A gateway that forwards a request of a version it neither speaks nor translates as 0.3 (GW-11).
    GatewayTakesAnyVersion,
    /// A gateway that reads a request delimited two ways one way (hyper's) and forwards it (GW-16).
    GatewayForwardsAmbiguousFraming,
    /// A gateway that passes on the `bridge_to` of the agent behind it, naming the agent's bridge (BR-26).
    GatewayPassesAgentBridgeTo,
    /// A known `Idempotency-Key` with the same negotiation and another valid payload is answered with the original
    /// execution, not `409 idempotency_conflict` (EXE-7).
    IdempotencyIgnoresPayload,
    /// A retry whose payload is equal but written differently (member order, spaces) is `409 idempotency_conflict`:
    /// payloads are compared byte for byte, not as canonical forms (EXE-7).
    IdempotencyComparesBytes,
    /// An unsigned step naming a real id of a did_auth capability is refused `401 signature_required`, one naming a
    /// made-up id `404`: the refusal tells a caller without the key which ids exist (AUTH-10).
    RefusalRevealsIds,
    /// A gateway that refuses an unsigned step naming an id it routes `401 signature_required`, and one naming a
    /// made-up id `404`: its refusals tell which ids exist (GW-21).
    GatewayRevealsIds,
    /// An MCP front (a gateway's `/mcp`) whose `server/discover` lists only the earlier revisions, not `2026-07-28`
    /// (MCP-2).
    McpOldRevisionOnly,
    /// An MCP front whose `tools/list` leaves out the last capability (MCP-5).
    McpToolMissing,
    /// An MCP front whose tools are marked read-only (`annotations.readOnlyHint: true`) and lose their
    /// `_meta.a2a/auth_requirement` (MCP-6).
    McpToolAnnotationsAltered,
    /// An MCP front that answers a `tools/call` naming no tool with a bare HTTP `400`, not the JSON-RPC error
    /// `-32602` (MCP-9).
    McpUnknownToolAsHttpError,
    /// An MCP front that wraps an object result in `{"result": ...}` in `structuredContent` (MCP-10: the result
    /// itself when it is an object, the same JSON as the text content).
    McpObjectResultWrapped,
    /// An MCP front that answers a refused step as a JSON-RPC error, not as a tool error carrying the §12 body
    /// (MCP-11).
    McpRefusalAsRpcError,
    /// An MCP front whose NEGOTIATE proposes the tool's schema serialized as a JSON string, not the schema (MCP-12);
    /// the agents behind the gateway see the broken proposal.
    McpProposalAsString,
    /// An MCP front that leaves the arguments to the agent's EXECUTE instead of validating them against the agreed
    /// schema: its `payload_invalid` is the agent's, without `details.agreed_schema` (MCP-13).
    McpArgumentsLeftToAgent,
    /// A streaming RESULT dropped before its `result` event cancels the execution (STR-12: it changes nothing).
    DroppedStreamCancels,
    /// DISCOVER carries `Access-Control-Allow-Origin` and `Access-Control-Expose-Headers` also without `Origin`
    /// (DISC-12: absent then).
    CorsOriginHeadersAlways,
    /// A request signature carrying `sts` (a response's claim) is accepted, not refused `integrity_mismatch` (INT-13).
    StatusClaimAccepted,
    /// The HTTP+JSON `message:stream` events are JSON-RPC responses wrapping the `StreamResponse`, as on the JSON-RPC
    /// binding, instead of the `StreamResponse` itself (BR-15).
    HttpJsonStreamEnveloped,
    /// `Idempotency-Key` is global, not the sender's: another sender's EXECUTE with a key already used is
    /// `409 idempotency_conflict` (EXE-7).
    IdempotencyKeyNotSenderScoped,
}

/// A broken agent, running.
pub struct Broken {
    pub running: Running,
    /// The caller identity whose key the middleware uses, for the signature faults.
    pub caller: Option<Caller>,
    /// Runs of the handler per execution id (ConfirmRunsTwice).
    pub runs: Arc<Mutex<HashMap<String, usize>>>,
    /// The identity the suite runs as instead of its served one (WaitsOnItself: the agent's own).
    pub run_as: Option<a2a_conformance::identity::Identity>,
    /// What must live as long as the broken agent (the gateways and agents behind a broken gateway's front).
    pub _keep: Vec<Box<dyn std::any::Any + Send>>,
}

type Runs = Arc<Mutex<HashMap<String, usize>>>;

async fn body_bytes(body: Body) -> Vec<u8> {
    axum::body::to_bytes(body, 64 * 1024 * 1024).await.map(|b| b.to_vec()).unwrap_or_default()
}

fn header<'a>(h: &'a HeaderMap, name: &str) -> Option<&'a str> {
    h.get(name).and_then(|v| v.to_str().ok())
}

/// Re-signs (or signs) a request with the caller's key, as a broken agent's "verification" lets it through.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Resign {
    /// An expired but otherwise valid signature is renewed.
    Expired,
    /// Every valid signature gets a fresh jti (so that replays look new).
    FreshJti,
    /// Unsigned requests from the caller are signed.
    Unsigned,
    /// A signature under the caller's kid that does not verify is replaced by one that does.
    Invalid,
    /// A valid `header_only` signature of a request with a body is replaced by a `payload_hash` one.
    HeaderOnly,
}

fn resign(
    req: &mut Request<Body>,
    body: &[u8],
    caller: &a2a_conformance::identity::Identity,
    agent_did: &str,
    policy: Resign,
) {
    let now = a2a_conformance::identity::unix_now();
    let token = header(req.headers(), "a2a-signature").map(str::to_owned);
    let new = match (token, policy) {
        (None, Resign::Unsigned) => {
            if header(req.headers(), "a2a-sender-id") != Some(caller.did.as_str()) {
                return;
            }
            let target = req.uri().path_and_query().map_or("/", |p| p.as_str()).to_owned();
            let method = req.method().as_str().to_owned();
            let headers: Vec<(String, String)> = req
                .headers()
                .iter()
                .filter_map(|(n, v)| v.to_str().ok().map(|v| (n.as_str().to_owned(), v.to_owned())))
                .collect();
            let hs: Vec<(&str, &str)> = headers.iter().map(|(n, v)| (n.as_str(), v.as_str())).collect();
            let parts = MessageParts { method: &method, target: &target, headers: &hs, body, status: None };
            let coverage = if method == "GET" { Coverage::HeaderOnly } else { Coverage::PayloadHash };
            match integrity::sign(&caller.key, &caller.key_id, &caller.did, agent_did, coverage, &parts, now, 60) {
                Ok(t) => t,
                Err(_) => return,
            }
        }
        (Some(token), Resign::Expired | Resign::FreshJti) => {
            let Ok(jws) = jws::decode_typed::<SignatureClaims>(&token) else { return };
            if jws.kid() != Some(caller.kid().as_str()) || jws.verify(caller.key.verifying_key()).is_err() {
                return;
            }
            // Everything but the time (Expired) or the memory of jtis (FreshJti) is still checked: steps 1-5 and 7-8
            // of INT-6 with the caller's key, as the correct agent would.
            let target = req.uri().path_and_query().map_or("/", |p| p.as_str()).to_owned();
            let method = req.method().as_str().to_owned();
            let headers: Vec<(String, String)> = req
                .headers()
                .iter()
                .filter_map(|(n, v)| v.to_str().ok().map(|v| (n.as_str().to_owned(), v.to_owned())))
                .collect();
            let hs: Vec<(&str, &str)> = headers.iter().map(|(n, v)| (n.as_str(), v.as_str())).collect();
            let parts = MessageParts { method: &method, target: &target, headers: &hs, body, status: None };
            let at = if policy == Resign::Expired { jws.claims().iat } else { now };
            let checked = integrity::prepare(&token, &parts, agent_did, at)
                .and_then(|p| p.finish(caller.key.verifying_key(), &parts));
            if checked.is_err() {
                return;
            }
            let mut claims = jws.claims().clone();
            match policy {
                Resign::Expired if claims.exp + 30 < now => {
                    claims.iat = now;
                    claims.exp = now + 60;
                }
                Resign::FreshJti => claims.jti = integrity::new_jti().unwrap_or_default(),
                _ => return,
            }
            match integrity::sign_claims(&caller.key, &claims) {
                Ok(t) => t,
                Err(_) => return,
            }
        }
        (Some(token), Resign::Invalid) => {
            let Ok(jws) = jws::decode_typed::<SignatureClaims>(&token) else { return };
            if jws.kid() != Some(caller.kid().as_str()) || jws.verify(caller.key.verifying_key()).is_ok() {
                return;
            }
            match integrity::sign_claims(&caller.key, jws.claims()) {
                Ok(t) => t,
                Err(_) => return,
            }
        }
        (Some(token), Resign::HeaderOnly) => {
            let Ok(jws) = jws::decode_typed::<SignatureClaims>(&token) else { return };
            if jws.kid() != Some(caller.kid().as_str())
                || jws.verify(caller.key.verifying_key()).is_err()
                || jws.claims().message_integrity.coverage != Coverage::HeaderOnly
                || body.is_empty()
            {
                return;
            }
            sign_anew(req, body, caller, agent_did);
            return;
        }
        _ => return,
    };
    if let Ok(v) = HeaderValue::from_str(&new) {
        req.headers_mut().insert("a2a-signature", v);
    }
}

/// Signs a request afresh with the caller's key (`payload_hash` over `body`), replacing its signature: a broken agent
/// that rewrites a request does so after its own checks, so the fault is in what it does, not in a signature.
fn sign_anew(req: &mut Request<Body>, body: &[u8], caller: &a2a_conformance::identity::Identity, agent_did: &str) {
    req.headers_mut().remove("a2a-signature");
    let target = req.uri().path_and_query().map_or("/", |p| p.as_str()).to_owned();
    let method = req.method().as_str().to_owned();
    let headers: Vec<(String, String)> = req
        .headers()
        .iter()
        .filter_map(|(n, v)| v.to_str().ok().map(|v| (n.as_str().to_owned(), v.to_owned())))
        .collect();
    let hs: Vec<(&str, &str)> = headers.iter().map(|(n, v)| (n.as_str(), v.as_str())).collect();
    let parts = MessageParts { method: &method, target: &target, headers: &hs, body, status: None };
    let now = a2a_conformance::identity::unix_now();
    if let Ok(t) =
        integrity::sign(&caller.key, &caller.key_id, &caller.did, agent_did, Coverage::PayloadHash, &parts, now, 60)
        && let Ok(v) = HeaderValue::from_str(&t)
    {
        req.headers_mut().insert("a2a-signature", v);
    }
}

/// The request with its JSON body rewritten by `edit` when `edit` changes it (and then signed anew); unchanged
/// otherwise (bodies that are not JSON included).
async fn edit_body(state: &State, req: Request<Body>, edit: impl FnOnce(&mut Value) -> bool) -> Request<Body> {
    let (mut parts, body) = req.into_parts();
    let bytes = body_bytes(body).await;
    let mut v = match serde_json::from_slice::<Value>(&bytes) {
        Ok(v) => v,
        Err(_) => return Request::from_parts(parts, Body::from(bytes)),
    };
    if !edit(&mut v) {
        return Request::from_parts(parts, Body::from(bytes));
    }
    let new = serde_json::to_vec(&v).unwrap_or_default();
    parts.headers.remove("content-length");
    let mut req = Request::from_parts(parts, Body::from(new.clone()));
    if let Some(caller) = &state.caller {
        sign_anew(&mut req, &new, caller, &state.agent_did);
    }
    req
}

fn strip_nullable(v: &mut Value) {
    match v {
        Value::Object(o) => {
            o.remove("nullable");
            o.values_mut().for_each(strip_nullable);
        }
        Value::Array(a) => a.iter_mut().for_each(strip_nullable),
        _ => {}
    }
}

/// The counting echo handler of the ConfirmRunsTwice agent.
fn counting_echo(runs: Runs) -> impl Fn(String, Value) -> Value + Clone + Send + Sync + 'static {
    move |id: String, payload: Value| {
        *runs.lock().unwrap_or_else(std::sync::PoisonError::into_inner).entry(id).or_insert(0) += 1;
        json!({"echo": payload})
    }
}

struct State {
    fault: Fault,
    agent_did: String,
    caller: Option<a2a_conformance::identity::Identity>,
    store: Arc<a2a_server::store::MemoryStore>,
    work: Option<Arc<dyn Fn(String, Value) -> Value + Send + Sync>>,
    /// Runs whose requester stopped waiting (DropsLateReply).
    waited_out: Mutex<std::collections::HashSet<String>>,
    /// The text sent in each run (NoRedaction).
    sent: Mutex<HashMap<String, String>>,
    /// Real suffix -> counter suffix of each execution id handed out (CounterExecutionIds).
    counters: Mutex<Vec<(String, String)>>,
    /// The slow executions (a payload with `seconds`): their run time, CONFIRM time and whether CANCEL canceled them
    /// (IgnoresDeadlines, LateResultOverwritesCancel).
    slow: Mutex<HashMap<String, SlowRun>>,
    /// The agent's key (NonCanonicalResponseSignatures).
    agent_key: Option<a2a_core::keys::SigningKey>,
    /// A key not in the agent's DID document (ResponsesSignedWithAnotherKey).
    other_key: Option<a2a_core::keys::SigningKey>,
    /// NEGOTIATE responses by sender and body (NegotiationReplayed), EXECUTE responses by sender and
    /// Idempotency-Key (IdempotencyBeforeValidation).
    negotiations: Mutex<HashMap<String, Kept>>,
    /// Negotiation ids that served an EXECUTE (NegotiationSingleUse); execution ids read while received
    /// (ResultConfirms) or confirmed and not read since (ConfirmedShowsReceived).
    used: Mutex<std::collections::HashSet<String>>,
    /// The input schema of each capability, by name (TightenDropsProposedProperties).
    caps: HashMap<String, Value>,
    /// The agent's DID document key id for its card signature (the `Card*` faults re-sign what they change).
    card_kid: String,
    /// Set once the agent has fallen over (DiesAfterOversizeBody).
    dead: std::sync::atomic::AtomicBool,
    /// The agent's base URL (DroppedStreamCancels sends it a CANCEL).
    base: String,
    /// The first EXECUTE of each `Idempotency-Key` (the `Idempotency*` faults).
    keys: Mutex<HashMap<String, FirstUse>>,
}

/// The first EXECUTE of an `Idempotency-Key`: its sender, negotiation and body.
type FirstUse = (String, String, Vec<u8>);

/// A response a broken agent keeps to answer again: status, headers, body.
type Kept = (StatusCode, HeaderMap, Vec<u8>);

/// A slow execution as the broken agent tracks it.
#[derive(Debug, Clone, Copy)]
struct SlowRun {
    seconds: f64,
    confirmed: Option<std::time::Instant>,
    canceled: bool,
}

impl SlowRun {
    /// Whether the handler would have finished by now.
    fn finished(&self) -> bool {
        self.confirmed.is_some_and(|c| c.elapsed().as_secs_f64() >= self.seconds)
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// `text` with every `from` suffix replaced by its `to` (CounterExecutionIds).
fn swap_suffixes(text: &str, pairs: &[(String, String)], to_fake: bool) -> String {
    let mut out = text.to_owned();
    for (real, fake) in pairs {
        let (from, to) = if to_fake { (real, fake) } else { (fake, real) };
        if out.contains(from.as_str()) {
            out = out.replace(from.as_str(), to);
        }
    }
    out
}

/// The agent whose execution id suffixes are a counter: it hands out `sender_time_<counter>` ids and maps them back
/// to its real ones on every request (unsigned requests only: a signed one cannot be rewritten).
async fn counter_ids(state: Arc<State>, req: Request<Body>, next: Next) -> Response {
    let signed = req.headers().contains_key("a2a-signature");
    let is_execute = req.method() == Method::POST && req.uri().path() == "/a2a/execute";
    let (mut parts, body) = req.into_parts();
    let mut bytes = body_bytes(body).await;
    if !signed {
        let pairs = lock(&state.counters).clone();
        let uri = swap_suffixes(&parts.uri.to_string(), &pairs, false);
        if let Ok(u) = uri.parse::<axum::http::Uri>() {
            // The agent reads the id from the URI as received (OriginalUri), which the router keeps.
            parts.extensions.insert(axum::extract::OriginalUri(u.clone()));
            parts.uri = u;
        }
        if let Ok(text) = std::str::from_utf8(&bytes) {
            bytes = swap_suffixes(text, &pairs, false).into_bytes();
        }
        parts.headers.remove("content-length");
    }
    let resp = next.run(Request::from_parts(parts, Body::from(bytes))).await;
    if signed {
        return resp;
    }
    let (parts, body) = resp.into_parts();
    if is_execute && let Some(id) = header(&parts.headers, "a2a-execution-id").and_then(|i| ExecutionId::parse(i).ok())
    {
        let mut counters = lock(&state.counters);
        if state.fault == Fault::UppercaseIdSuffix {
            let real = format!("_{}_{}", id.timestamp_ns(), id.suffix());
            if !counters.iter().any(|(r, _)| *r == real) {
                let fake = format!("_{}_{}", id.timestamp_ns(), id.suffix().to_ascii_uppercase());
                counters.push((real, fake));
            }
        } else if state.fault == Fault::SuffixReused {
            // `_<time>_<suffix>` with the suffix of the first id: the times keep the ids apart.
            let real = format!("_{}_{}", id.timestamp_ns(), id.suffix());
            let first = counters.first().and_then(|(_, f)| f.rsplit('_').next().map(str::to_owned));
            if !counters.iter().any(|(r, _)| *r == real) {
                let fake = format!("_{}_{}", id.timestamp_ns(), first.unwrap_or_else(|| id.suffix().to_owned()));
                counters.push((real, fake));
            }
        } else if state.fault == Fault::LeadingZeroTimestamps {
            // `_<time>_<suffix>` reads the same in an id and in its path segment.
            let real = format!("_{}_{}", id.timestamp_ns(), id.suffix());
            if !counters.iter().any(|(r, _)| *r == real) {
                let fake = format!("_0{}_{}", id.timestamp_ns(), id.suffix());
                counters.push((real, fake));
            }
        } else if !counters.iter().any(|(r, _)| r == id.suffix()) {
            let n = 1_000_000u128 + counters.len() as u128;
            let fake = ExecutionId::from_parts(id.sender(), id.timestamp_ns(), n.to_be_bytes());
            counters.push((id.suffix().to_owned(), fake.suffix().to_owned()));
        }
    }
    let pairs = lock(&state.counters).clone();
    swapped_response(Response::from_parts(parts, body), pairs)
}

/// A response with every real id of `pairs` replaced by its fake one, in headers and body (streams frame by frame:
/// an SSE event, and so an id, is written whole).
fn swapped_response(resp: Response, pairs: Vec<(String, String)>) -> Response {
    let (mut parts, body) = resp.into_parts();
    let names: Vec<HeaderName> = parts.headers.keys().cloned().collect();
    for name in names {
        if let Some(v) = parts.headers.get(&name).and_then(|v| v.to_str().ok()).map(str::to_owned) {
            let new = swap_suffixes(&v, &pairs, true);
            if new != v
                && let Ok(hv) = HeaderValue::from_str(&new)
            {
                parts.headers.insert(name, hv);
            }
        }
    }
    parts.headers.remove("content-length");
    let body = http_body_util::BodyExt::map_frame(body, move |frame| {
        frame.map_data(|d| match std::str::from_utf8(&d) {
            Ok(text) => bytes::Bytes::from(swap_suffixes(text, &pairs, true)),
            Err(_) => d,
        })
    });
    Response::from_parts(parts, Body::new(body))
}

/// The agent whose execution ids carry the caller's DID with `%3A` decoded to `:` (SenderDecodedInIds, EID-2): it
/// hands out such ids (and their path segments) and maps them back to its real ones on every request (unsigned
/// requests only: a signed one cannot be rewritten).
async fn decoded_sender_ids(state: Arc<State>, req: Request<Body>, next: Next) -> Response {
    if req.headers().contains_key("a2a-signature") {
        return next.run(req).await;
    }
    let is_execute = req.method() == Method::POST && req.uri().path() == "/a2a/execute";
    // (real id, fake id) and (real path segment, fake path segment = fake id: it has no `%`).
    let ids = lock(&state.counters).clone();
    let segs: Vec<(String, String)> =
        ids.iter().filter_map(|(r, f)| ExecutionId::parse(r).ok().map(|e| (e.to_path_segment(), f.clone()))).collect();
    let (mut parts, body) = req.into_parts();
    let uri = swap_suffixes(&parts.uri.to_string(), &segs, false);
    if let Ok(u) = uri.parse::<axum::http::Uri>() {
        parts.extensions.insert(axum::extract::OriginalUri(u.clone()));
        parts.uri = u;
    }
    let bytes = body_bytes(body).await;
    let bytes = match std::str::from_utf8(&bytes) {
        Ok(text) => swap_suffixes(text, &ids, false).into_bytes(),
        Err(_) => bytes,
    };
    parts.headers.remove("content-length");
    let resp = next.run(Request::from_parts(parts, Body::from(bytes))).await;
    if is_execute
        && let Some(id) = header(resp.headers(), "a2a-execution-id").filter(|i| i.contains("%3A")).map(str::to_owned)
    {
        let mut ids = lock(&state.counters);
        if !ids.iter().any(|(r, _)| *r == id) {
            let fake = id.replace("%3A", ":");
            ids.push((id, fake));
        }
    }
    let ids = lock(&state.counters).clone();
    let mut pairs: Vec<(String, String)> =
        ids.iter().filter_map(|(r, f)| ExecutionId::parse(r).ok().map(|e| (e.to_path_segment(), f.clone()))).collect();
    pairs.extend(ids);
    swapped_response(resp, pairs)
}

/// Re-signs a response's signature over pretty-printed JSON (NonCanonicalResponseSignatures).
fn pretty_resign(token: &str, key: &a2a_core::keys::SigningKey) -> Option<String> {
    let mut segs = token.split('.');
    let header: Value = serde_json::from_slice(&jws::base64url_decode(segs.next()?).ok()?).ok()?;
    let claims: Value = serde_json::from_slice(&jws::base64url_decode(segs.next()?).ok()?).ok()?;
    Some(a2a_conformance::identity::raw_token(
        key,
        &serde_json::to_vec_pretty(&header).ok()?,
        &serde_json::to_vec_pretty(&claims).ok()?,
    ))
}

/// Tracks slow executions and rewrites their RESULT as an agent that ignores deadlines, or lets a late result
/// overwrite a CANCEL, would answer (IgnoresDeadlines, LateResultOverwritesCancel).
async fn slow_runs(state: Arc<State>, req: Request<Body>, next: Next) -> Response {
    let path = req.uri().path().to_owned();
    let method = req.method().clone();
    let (parts, body) = req.into_parts();
    let bytes = body_bytes(body).await;
    let sent: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    let resp = next.run(Request::from_parts(parts, Body::from(bytes))).await;
    let is_stream = header(resp.headers(), "content-type") == Some("text/event-stream");
    if is_stream
        || !matches!(path.as_str(), "/a2a/execute" | "/a2a/confirm" | "/a2a/cancel")
            && !path.starts_with("/a2a/result/")
    {
        return resp;
    }
    let (mut parts, body) = resp.into_parts();
    let rbytes = body_bytes(body).await;
    let mut v: Value = serde_json::from_slice(&rbytes).unwrap_or(Value::Null);
    let id = v["execution_id"].as_str().unwrap_or("").to_owned();
    let mut slow = lock(&state.slow);
    match (method.as_str(), path.as_str()) {
        ("POST", "/a2a/execute") => {
            if let Some(seconds) = sent["seconds"].as_f64().filter(|s| *s > 0.0)
                && !id.is_empty()
            {
                slow.insert(id, SlowRun { seconds, confirmed: None, canceled: false });
            }
            return Response::from_parts(parts, Body::from(rbytes));
        }
        ("POST", "/a2a/confirm") => {
            if parts.status == StatusCode::ACCEPTED
                && let Some(run) = slow.get_mut(&id)
            {
                run.confirmed = Some(std::time::Instant::now());
            }
            return Response::from_parts(parts, Body::from(rbytes));
        }
        ("POST", "/a2a/cancel") => {
            if v["status"] == "canceled"
                && let Some(run) = slow.get_mut(&id)
            {
                run.canceled = true;
            }
            return Response::from_parts(parts, Body::from(rbytes));
        }
        _ => {}
    }
    let Some(run) = slow.get(&id).copied() else { return Response::from_parts(parts, Body::from(rbytes)) };
    drop(slow);
    let rewrite = match state.fault {
        Fault::IgnoresDeadlines => v["status"] == "timed_out",
        _ => v["status"] == "canceled" && run.canceled && run.finished(),
    };
    if !rewrite {
        return Response::from_parts(parts, Body::from(rbytes));
    }
    if let Some(o) = v.as_object_mut() {
        o.remove("error");
        if run.finished() {
            o.insert("status".into(), json!("succeeded"));
            o.insert("result".into(), json!({"slept_seconds": run.seconds}));
        } else {
            o.insert("status".into(), json!("running"));
        }
    }
    parts.headers.remove("content-length");
    Response::from_parts(parts, Body::from(serde_json::to_vec(&v).unwrap_or_default()))
}

async fn breaker(state: Arc<State>, req: Request<Body>, next: Next) -> Response {
    let path = req.uri().path().to_owned();
    let method = req.method().clone();
    if let Some(rw) = rewrite(state.fault).filter(|rw| rw.applies(&method, &path)) {
        return rw.run(&state, req, next).await;
    }
    match state.fault {
        Fault::DiesAfterOversizeBody => {
            use std::sync::atomic::Ordering;
            if state.dead.load(Ordering::SeqCst) {
                // The connection is dropped without an answer (an unwind without the panic hook: no noise).
                std::panic::resume_unwind(Box::new("the agent has fallen over (LIM-2)"));
            }
            let resp = next.run(req).await;
            if resp.status() == StatusCode::PAYLOAD_TOO_LARGE {
                state.dead.store(true, Ordering::SeqCst);
            }
            resp
        }
        Fault::SpeaksHttp10 => {
            let mut resp = next.run(req).await;
            *resp.version_mut() = axum::http::Version::HTTP_10;
            resp
        }
        Fault::ErrorsWithoutVersion => {
            let mut resp = next.run(req).await;
            if resp.status().as_u16() >= 400 {
                resp.headers_mut().remove("a2a-version");
            }
            resp
        }
        Fault::PreflightWithoutAllowHeaders => {
            let mut resp = next.run(req).await;
            if method == Method::OPTIONS && path != "/a2a" {
                resp.headers_mut().remove("access-control-allow-headers");
            }
            resp
        }
        Fault::AcceptsNullable if method == Method::POST && path == "/a2a/negotiate" => {
            let (parts, body) = req.into_parts();
            let mut bytes = body_bytes(body).await;
            if let Ok(mut v) = serde_json::from_slice::<Value>(&bytes)
                && let Some(schema) = v.get_mut("proposed_schema")
            {
                let before = schema.clone();
                strip_nullable(schema);
                if *schema != before {
                    bytes = serde_json::to_vec(&v).unwrap_or(bytes);
                }
            }
            let mut parts = parts;
            parts.headers.remove("content-length");
            next.run(Request::from_parts(parts, Body::from(bytes))).await
        }
        Fault::ConfirmRunsTwice if method == Method::POST && path == "/a2a/confirm" => {
            let resp = next.run(req).await;
            let (parts, body) = resp.into_parts();
            let bytes = body_bytes(body).await;
            let v: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
            if parts.status == StatusCode::OK && v["already_confirmed"] == true {
                let id = v["execution_id"].as_str().unwrap_or("").to_owned();
                if let (Ok(Some(rec)), Some(work)) = (state.store.get_execution(&id).await, state.work.clone()) {
                    // The work runs again, as for a first CONFIRM.
                    tokio::spawn(async move {
                        work(rec.id, rec.payload);
                    });
                }
                let mut out = Response::from_parts(
                    parts,
                    Body::from(
                        serde_json::to_vec(&json!({"execution_id": id, "status": "accepted"})).unwrap_or_default(),
                    ),
                );
                *out.status_mut() = StatusCode::ACCEPTED;
                out.headers_mut().remove("content-length");
                return out;
            }
            Response::from_parts(parts, Body::from(bytes))
        }
        Fault::AcceptsExpiredSignatures | Fault::NoReplayProtection | Fault::AcceptsUnsigned => {
            let policy = match state.fault {
                Fault::AcceptsExpiredSignatures => Resign::Expired,
                Fault::NoReplayProtection => Resign::FreshJti,
                _ => Resign::Unsigned,
            };
            let (parts, body) = req.into_parts();
            let bytes = body_bytes(body).await;
            let mut req = Request::from_parts(parts, Body::from(bytes.clone()));
            if let Some(caller) = &state.caller {
                resign(&mut req, &bytes, caller, &state.agent_did, policy);
            }
            next.run(req).await
        }
        Fault::AcceptsInvalidPayloads if method == Method::POST && path == "/a2a/execute" => {
            let (parts, body) = req.into_parts();
            let bytes = body_bytes(body).await;
            let headers = parts.headers.clone();
            let resp = next.run(Request::from_parts(parts, Body::from(bytes.clone()))).await;
            let (rparts, rbody) = resp.into_parts();
            let rbytes = body_bytes(rbody).await;
            let code = serde_json::from_slice::<Value>(&rbytes)
                .ok()
                .and_then(|v| v["error"]["code"].as_str().map(str::to_owned));
            if code.as_deref() == Some("payload_invalid")
                && let Some(r) = accept_anyway(&state, &headers, &bytes).await
            {
                return r;
            }
            Response::from_parts(rparts, Body::from(rbytes))
        }
        Fault::HtmlNotFound => {
            let resp = next.run(req).await;
            if header(resp.headers(), "content-type") == Some("text/event-stream") {
                // A stream is not an error page (and may never end).
                return resp;
            }
            let (mut parts, body) = resp.into_parts();
            let bytes = body_bytes(body).await;
            let code = serde_json::from_slice::<Value>(&bytes)
                .ok()
                .and_then(|v| v["error"]["code"].as_str().map(str::to_owned));
            if code.as_deref() == Some("not_found") {
                parts.headers.insert("content-type", HeaderValue::from_static("text/html"));
                parts.headers.remove("content-length");
                return Response::from_parts(parts, Body::from("<html><body><h1>404 Not Found</h1></body></html>"));
            }
            Response::from_parts(parts, Body::from(bytes))
        }
        Fault::LenientVersion => {
            let mut req = req;
            if req.headers().contains_key("a2a-version") {
                req.headers_mut().insert("a2a-version", HeaderValue::from_static("0.3"));
            }
            next.run(req).await
        }
        Fault::IgnoresRegion => {
            let mut req = req;
            if !req.headers().contains_key("a2a-region") && !req.headers().contains_key("a2a-signature") {
                req.headers_mut().insert(HeaderName::from_static("a2a-region"), HeaderValue::from_static("eu-west-1"));
            }
            next.run(req).await
        }
        Fault::FalseSessionTimeout | Fault::DropsLateReply
            if method == Method::POST && path == "/a2a/sessions/send" =>
        {
            let (parts, body) = req.into_parts();
            let bytes = body_bytes(body).await;
            let sent: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
            let waited = sent["wait_ms"].as_u64().unwrap_or(0) > 0 && sent["reply"] != false;
            let resp = next.run(Request::from_parts(parts, Body::from(bytes))).await;
            let (mut rparts, rbody) = resp.into_parts();
            let mut v: Value = serde_json::from_slice(&body_bytes(rbody).await).unwrap_or(Value::Null);
            if waited && v["status"] == "accepted" {
                if state.fault == Fault::FalseSessionTimeout {
                    v["status"] = json!("timeout");
                    rparts.status = StatusCode::OK;
                } else if let Some(id) = v["run_id"].as_str() {
                    state.waited_out.lock().unwrap_or_else(std::sync::PoisonError::into_inner).insert(id.to_owned());
                }
            }
            rparts.headers.remove("content-length");
            Response::from_parts(rparts, Body::from(serde_json::to_vec(&v).unwrap_or_default()))
        }
        Fault::InboxServedToOthers
            if method == Method::GET && path.starts_with("/a2a/sessions/") && path.ends_with("/inbox") =>
        {
            // Whoever asks is read as the owner (the test's caller, who registered the sessions).
            let Some(owner) = state.caller.as_ref() else { return next.run(req).await };
            if header(req.headers(), "a2a-sender-id") == Some(owner.did.as_str()) {
                return next.run(req).await;
            }
            let mut req = req;
            if let Ok(did) = HeaderValue::from_str(&owner.did) {
                req.headers_mut().insert("a2a-sender-id", did);
            }
            sign_anew(&mut req, &[], owner, &state.agent_did);
            next.run(req).await
        }
        Fault::DropsLateReply
            if method == Method::POST && path.starts_with("/a2a/runs/") && path.ends_with("/reply") =>
        {
            let id = path.trim_start_matches("/a2a/runs/").trim_end_matches("/reply").to_owned();
            let id = percent_decode(&id);
            let dropped = state.waited_out.lock().unwrap_or_else(std::sync::PoisonError::into_inner).contains(&id);
            if dropped {
                let mut out =
                    axum::Json(json!({"run_id": id, "status": "accepted", "state": "running"})).into_response();
                out.headers_mut().insert("a2a-version", HeaderValue::from_static("0.3"));
                if let Ok(did) = HeaderValue::from_str(&state.agent_did) {
                    out.headers_mut().insert("a2a-sender-id", did);
                }
                return out;
            }
            next.run(req).await
        }
        Fault::StreamWithoutNoStore if method == Method::GET && path.starts_with("/a2a/result/") => {
            let mut resp = next.run(req).await;
            if header(resp.headers(), "content-type") == Some("text/event-stream") {
                resp.headers_mut().remove("cache-control");
            }
            resp
        }
        Fault::LenientStreamHeader if method == Method::GET && path.starts_with("/a2a/result/") => {
            let mut req = req;
            let v = header(req.headers(), "a2a-stream").map(|v| v.trim().to_ascii_lowercase());
            if v.is_some_and(|v| v != "true" && v != "false") {
                req.headers_mut().remove("a2a-stream");
            }
            next.run(req).await
        }
        Fault::UnboundedAttachments | Fault::IgnoresContext | Fault::IgnoresRunTimeout
            if method == Method::POST && path == "/a2a/sessions/send" =>
        {
            let fault = state.fault;
            let req = edit_body(&state, req, |v| match fault {
                Fault::UnboundedAttachments => match v.get_mut("attachments").and_then(Value::as_array_mut) {
                    Some(a) if a.len() > 8 => {
                        a.truncate(8);
                        true
                    }
                    _ => false,
                },
                Fault::IgnoresContext => v.as_object_mut().is_some_and(|o| {
                    let had = o.remove("context").is_some();
                    o.remove("context_mode").is_some() || had
                }),
                _ => v.as_object_mut().is_some_and(|o| o.remove("run_timeout_ms").is_some()),
            })
            .await;
            next.run(req).await
        }
        Fault::RegistersReservedKeys if method == Method::POST && path == "/a2a/sessions" => {
            let req = edit_body(&state, req, |v| match v["session_key"].as_str() {
                Some(k @ ("send" | "spawn")) => {
                    v["session_key"] = json!(format!("{k}-registered"));
                    true
                }
                _ => false,
            })
            .await;
            next.run(req).await
        }
        Fault::PublishesSkippedAnnounce
            if method == Method::POST && path.starts_with("/a2a/runs/") && path.ends_with("/reply") =>
        {
            let req = edit_body(&state, req, |v| {
                let skip = v["reply"] == "ANNOUNCE_SKIP";
                if skip {
                    v["reply"] = json!("ANNOUNCE_SKIP was answered, published anyway");
                }
                skip
            })
            .await;
            next.run(req).await
        }
        Fault::NoRedaction if method == Method::POST && path == "/a2a/sessions/send" => {
            let (parts, body) = req.into_parts();
            let bytes = body_bytes(body).await;
            let text = serde_json::from_slice::<Value>(&bytes).ok().and_then(|v| v["text"].as_str().map(str::to_owned));
            let resp = next.run(Request::from_parts(parts, Body::from(bytes))).await;
            let (rparts, rbody) = resp.into_parts();
            let rbytes = body_bytes(rbody).await;
            let run =
                serde_json::from_slice::<Value>(&rbytes).ok().and_then(|v| v["run_id"].as_str().map(str::to_owned));
            if let (Some(run), Some(text)) = (run, text) {
                state.sent.lock().unwrap_or_else(std::sync::PoisonError::into_inner).insert(run, text);
            }
            Response::from_parts(rparts, Body::from(rbytes))
        }
        Fault::NoRedaction if method == Method::GET && path.ends_with("/history") => {
            let resp = next.run(req).await;
            let (mut parts, body) = resp.into_parts();
            let mut v: Value = serde_json::from_slice(&body_bytes(body).await).unwrap_or(Value::Null);
            let sent = state.sent.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone();
            if let Some(messages) = v.get_mut("messages").and_then(Value::as_array_mut) {
                for m in messages.iter_mut().filter(|m| m["role"] == "inter_session") {
                    if let Some(text) = m["run_id"].as_str().and_then(|r| sent.get(r)) {
                        m["text"] = json!(text);
                    }
                }
                v["redacted"] = json!(0);
            }
            parts.headers.remove("content-length");
            Response::from_parts(parts, Body::from(serde_json::to_vec(&v).unwrap_or_default()))
        }
        Fault::GetTaskAnswersAnotherTask if method == Method::POST && path == "/a2a1x/jsonrpc" => {
            let (parts, body) = req.into_parts();
            let bytes = body_bytes(body).await;
            let get_task = serde_json::from_slice::<Value>(&bytes).is_ok_and(|v| v["method"] == "GetTask");
            let resp = next.run(Request::from_parts(parts, Body::from(bytes))).await;
            if !get_task {
                return resp;
            }
            let (mut parts, body) = resp.into_parts();
            let bytes = body_bytes(body).await;
            let mut v: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
            let Some(id) = v["result"]["id"].as_str().map(str::to_owned) else {
                return Response::from_parts(parts, Body::from(bytes));
            };
            v["result"]["id"] = json!(format!("{id}0"));
            parts.headers.remove("content-length");
            Response::from_parts(parts, Body::from(serde_json::to_vec(&v).unwrap_or_default()))
        }
        Fault::CounterExecutionIds => counter_ids(state.clone(), req, next).await,
        Fault::LocationNotEncoded if method == Method::POST && path == "/a2a/execute" => {
            let mut resp = next.run(req).await;
            let raw = header(resp.headers(), "a2a-execution-id").map(|id| format!("/a2a/result/{id}"));
            if resp.headers().contains_key("location")
                && let Some(v) = raw.and_then(|l| HeaderValue::from_str(&l).ok())
            {
                resp.headers_mut().insert("location", v);
            }
            resp
        }
        Fault::NonCanonicalResponseSignatures => {
            let mut resp = next.run(req).await;
            let token = header(resp.headers(), "a2a-signature").map(str::to_owned);
            if let (Some(token), Some(key)) = (token, &state.agent_key)
                && let Some(v) = pretty_resign(&token, key).and_then(|t| HeaderValue::from_str(&t).ok())
            {
                resp.headers_mut().insert("a2a-signature", v);
            }
            resp
        }
        Fault::IgnoresDeadlines | Fault::LateResultOverwritesCancel => slow_runs(state.clone(), req, next).await,
        Fault::MethodNotAllowedWithoutAllow => {
            let mut resp = next.run(req).await;
            if resp.status() == StatusCode::METHOD_NOT_ALLOWED {
                resp.headers_mut().remove("allow");
            }
            resp
        }
        Fault::NonObjectSchemaIs400 if method == Method::POST && path == "/a2a/negotiate" => {
            let (parts, body) = req.into_parts();
            let bytes = body_bytes(body).await;
            let proposed = serde_json::from_slice::<Value>(&bytes).ok().and_then(|v| v.get("proposed_schema").cloned());
            if proposed.is_some_and(|p| !p.is_object()) {
                let body = json!({"error": {"code": "invalid_request", "message": "proposed_schema must be an object",
                                            "details": {"member": "proposed_schema"}}});
                let mut out = (StatusCode::BAD_REQUEST, axum::Json(body)).into_response();
                out.headers_mut().insert("a2a-version", HeaderValue::from_static("0.3"));
                if let Ok(did) = HeaderValue::from_str(&state.agent_did) {
                    out.headers_mut().insert("a2a-sender-id", did);
                }
                return out;
            }
            next.run(Request::from_parts(parts, Body::from(bytes))).await
        }
        Fault::ErrorsWithoutSenderId => {
            let mut resp = next.run(req).await;
            if resp.status().as_u16() >= 400 {
                resp.headers_mut().remove("a2a-sender-id");
            }
            resp
        }
        Fault::DiscoverAnswers200
            if method == Method::OPTIONS
                && path == "/a2a"
                && !req.headers().contains_key("access-control-request-method") =>
        {
            let mut resp = next.run(req).await;
            if resp.status() == StatusCode::NO_CONTENT {
                *resp.status_mut() = StatusCode::OK;
            }
            resp
        }
        Fault::MalformedIdsAre400 if method == Method::GET && path.starts_with("/a2a/result/") => {
            let seg = path.trim_start_matches("/a2a/result/").to_owned();
            let resp = next.run(req).await;
            let malformed = ExecutionId::parse(&seg).is_err() && ExecutionId::from_path_segment(&seg).is_err();
            if resp.status() != StatusCode::NOT_FOUND || !malformed {
                return resp;
            }
            let (mut parts, _) = resp.into_parts();
            parts.status = StatusCode::BAD_REQUEST;
            parts.headers.remove("content-length");
            let body = json!({"error": {"code": "invalid_request", "message": "the execution id does not parse"}});
            Response::from_parts(parts, Body::from(serde_json::to_vec(&body).unwrap_or_default()))
        }
        Fault::CancelOfTerminalAccepted if method == Method::POST && path == "/a2a/cancel" => {
            let (parts, body) = req.into_parts();
            let sent = body_bytes(body).await;
            let asked =
                serde_json::from_slice::<Value>(&sent).ok().and_then(|v| v["execution_id"].as_str().map(str::to_owned));
            let resp = next.run(Request::from_parts(parts, Body::from(sent))).await;
            let (mut parts, body) = resp.into_parts();
            let bytes = body_bytes(body).await;
            let v: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
            if parts.status != StatusCode::CONFLICT || v["error"]["code"] != "invalid_state" {
                return Response::from_parts(parts, Body::from(bytes));
            }
            let id = asked;
            parts.status = StatusCode::OK;
            parts.headers.remove("content-length");
            let body = json!({"execution_id": id, "status": v["error"]["details"]["status"]});
            Response::from_parts(parts, Body::from(serde_json::to_vec(&body).unwrap_or_default()))
        }
        Fault::ResultWithoutError if method == Method::GET && path.starts_with("/a2a/result/") => {
            let resp = next.run(req).await;
            if header(resp.headers(), "content-type") == Some("text/event-stream") {
                return resp;
            }
            let (mut parts, body) = resp.into_parts();
            let bytes = body_bytes(body).await;
            let mut v: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
            let ended_badly = matches!(v["status"].as_str(), Some("failed" | "timed_out" | "canceled"));
            if !ended_badly {
                return Response::from_parts(parts, Body::from(bytes));
            }
            if let Some(o) = v.as_object_mut() {
                o.remove("error");
            }
            parts.headers.remove("content-length");
            Response::from_parts(parts, Body::from(serde_json::to_vec(&v).unwrap_or_default()))
        }
        Fault::ContentTypeIgnored if method == Method::POST => {
            let mut req = req;
            let json = header(req.headers(), "content-type").is_some_and(|c| c.starts_with("application/json"));
            if !json {
                req.headers_mut().insert("content-type", HeaderValue::from_static("application/json"));
            }
            next.run(req).await
        }
        Fault::UnknownConfirmIs400 | Fault::MissingNegotiationIdIs404 | Fault::InvalidJsonWrongCode
            if method == Method::POST =>
        {
            let fault = state.fault;
            let resp = next.run(req).await;
            let (mut parts, body) = resp.into_parts();
            let bytes = body_bytes(body).await;
            let code = serde_json::from_slice::<Value>(&bytes)
                .ok()
                .and_then(|v| v["error"]["code"].as_str().map(str::to_owned))
                .unwrap_or_default();
            let new = match (fault, code.as_str()) {
                (Fault::UnknownConfirmIs400, "unknown_execution") if path == "/a2a/confirm" => {
                    Some((StatusCode::BAD_REQUEST, "invalid_request"))
                }
                (Fault::MissingNegotiationIdIs404, "negotiation_required") => {
                    Some((StatusCode::NOT_FOUND, "unknown_negotiation"))
                }
                (Fault::InvalidJsonWrongCode, "invalid_json") => Some((StatusCode::BAD_REQUEST, "invalid_request")),
                _ => None,
            };
            let Some((status, code)) = new else { return Response::from_parts(parts, Body::from(bytes)) };
            parts.status = status;
            parts.headers.remove("content-length");
            let body = json!({"error": {"code": code, "message": "refused"}});
            Response::from_parts(parts, Body::from(serde_json::to_vec(&body).unwrap_or_default()))
        }
        Fault::ResponsesSignedWithAnotherKey => {
            let mut resp = next.run(req).await;
            let token = header(resp.headers(), "a2a-signature").map(str::to_owned);
            if let (Some(token), Some(key)) = (token, &state.other_key)
                && let Ok(jws) = jws::decode_typed::<SignatureClaims>(&token)
                && let Ok(t) = integrity::sign_claims(key, jws.claims())
                && let Ok(v) = HeaderValue::from_str(&t)
            {
                resp.headers_mut().insert("a2a-signature", v);
            }
            resp
        }
        Fault::LenientTokenDecoding => {
            let mut req = req;
            let token = header(req.headers(), "a2a-signature").map(|t| t.trim_end_matches('=').to_owned());
            if let Some(v) = token.and_then(|t| HeaderValue::from_str(&t).ok()) {
                req.headers_mut().insert("a2a-signature", v);
            }
            next.run(req).await
        }
        Fault::IgnoresWaitMs if method == Method::GET && path.starts_with("/a2a/result/") => {
            let (mut parts, body) = req.into_parts();
            if parts.uri.query().is_some_and(|q| q.contains("wait_ms"))
                && let Ok(u) = parts.uri.path().parse::<axum::http::Uri>()
            {
                parts.extensions.insert(axum::extract::OriginalUri(u.clone()));
                parts.uri = u;
            }
            next.run(Request::from_parts(parts, body)).await
        }
        Fault::IgnoresProposedTimeout
            if method == Method::POST && path == "/a2a/negotiate" && !req.headers().contains_key("a2a-signature") =>
        {
            let req =
                edit_body(&state, req, |v| v.as_object_mut().is_some_and(|o| o.remove("timeout_ms").is_some())).await;
            next.run(req).await
        }
        Fault::CorsMissingOnResponses if method != Method::OPTIONS => {
            let mut resp = next.run(req).await;
            resp.headers_mut().remove("access-control-allow-origin");
            resp
        }
        Fault::DiscoverRequiresVersion
            if method == Method::OPTIONS
                && path == "/a2a"
                && !req.headers().contains_key("a2a-version")
                && !req.headers().contains_key("access-control-request-method") =>
        {
            let body = json!({"error": {"code": "version_required", "message": "A2A-Version is required"}});
            let mut out = (StatusCode::BAD_REQUEST, axum::Json(body)).into_response();
            out.headers_mut().insert("a2a-version", HeaderValue::from_static("0.3"));
            if let Ok(did) = HeaderValue::from_str(&state.agent_did) {
                out.headers_mut().insert("a2a-sender-id", did);
            }
            out
        }
        Fault::MissingSenderAccepted => {
            let mut req = req;
            if !req.headers().contains_key("a2a-sender-id") {
                req.headers_mut().insert("a2a-sender-id", HeaderValue::from_static("did:web:conformance.example"));
            }
            next.run(req).await
        }
        other => more_faults(other, state, req, next).await,
    }
}

fn percent_decode(s: &str) -> String {
    percent_encoding::percent_decode_str(s).decode_utf8_lossy().into_owned()
}

/// Stores the execution the agent refused, and answers as if it had been accepted.
async fn accept_anyway(state: &State, headers: &HeaderMap, body: &[u8]) -> Option<Response> {
    let sender = header(headers, "a2a-sender-id")?.trim().to_owned();
    let neg = state.store.get_negotiation(header(headers, "a2a-negotiation-id")?.trim()).await.ok()??;
    let did = a2a_core::did::Did::parse(&sender).ok()?;
    let id = ExecutionId::generate(&did).ok()?;
    let now = a2a_server::store::now_ms();
    let rec = ExecutionRecord {
        id: id.to_string(),
        negotiation_id: neg.id.clone(),
        sender,
        capability: neg.capability.clone(),
        payload: serde_json::from_slice(body).unwrap_or(Value::Null),
        status: a2a_core::wire::ExecutionStatus::Received,
        timeout_ms: neg.timeout_ms,
        created_at_ms: now,
        updated_at_ms: now,
        confirm_by_ms: now + neg.confirm_window_ms,
        deadline_ms: None,
        confirmed: false,
        attempts: 0,
        result: None,
        error: None,
        retain_until_ms: now + neg.confirm_window_ms + 3_600_000,
        idempotency_key: None,
        sender_verified: false,
        traceparent: None,
        rev: 0,
    };
    state.store.create_execution(rec, None).await.ok()?;
    let body = json!({"execution_id": id.to_string(), "negotiation_id": neg.id, "status": "received",
                      "created_at": a2a_server::store::timestamp(now), "confirm_by": a2a_server::store::timestamp(now + neg.confirm_window_ms)});
    let mut resp = (StatusCode::CREATED, axum::Json(body)).into_response();
    let h = resp.headers_mut();
    for (k, v) in [
        ("a2a-version", "0.3".to_owned()),
        ("a2a-sender-id", state.agent_did.clone()),
        ("a2a-execution-id", id.to_string()),
        ("a2a-negotiation-id", neg.id),
        ("location", format!("/a2a/result/{}", id.to_path_segment())),
    ] {
        if let Ok(v) = HeaderValue::from_str(&v) {
            h.insert(HeaderName::from_static(k), v);
        }
    }
    Some(resp)
}

/// Starts the agent with `fault`.
pub async fn start(fault: Fault) -> Broken {
    if gateway_fault(fault) {
        return start_gateway(fault).await;
    }
    let (l, port) = common::listener().await;
    let runs: Runs = Arc::new(Mutex::new(HashMap::new()));
    let needs_caller = matches!(
        fault,
        Fault::AcceptsExpiredSignatures
            | Fault::NoReplayProtection
            | Fault::AcceptsUnsigned
            | Fault::UnboundedAttachments
            | Fault::IgnoresContext
            | Fault::IgnoresRunTimeout
            | Fault::RegistersReservedKeys
            | Fault::PublishesSkippedAnnounce
            | Fault::InvalidSignaturesAccepted
            | Fault::HeaderOnlyBodyAccepted
            | Fault::DuplicateMembersAccepted
            | Fault::LeadingZerosAccepted
            | Fault::IgnoresWaitChain
            | Fault::PythonRecipeAccepted
            | Fault::UnsignedHeaderAccepted
            | Fault::BodyDigestIgnored
            | Fault::UnknownKeyFallsBack
            | Fault::DeepNestingAccepted
            | Fault::BomAccepted
            | Fault::SendUnknownMembersIgnored
            | Fault::InboxServedToOthers
    ) || resolver_fault(fault).is_some()
        || lenient_verifier(fault);
    let caller = if needs_caller { Some(common::caller().await) } else { None };
    let other_key = a2a_core::keys::SigningKey::generate().ok();
    let mut work: Option<Arc<dyn Fn(String, Value) -> Value + Send + Sync>> = None;
    let parts = if fault == Fault::ConfirmRunsTwice {
        // An agent whose only capability counts its runs, so that the test sees the work run twice.
        let echo = counting_echo(runs.clone());
        work = Some(Arc::new(echo.clone()));
        common::demo_parts_with(port, move |b, _| {
            let decl = a2a_core::capability::CapabilityDeclaration {
                name: "echo_message".into(),
                description: "Returns the payload it is given, counting its runs.".into(),
                auth_requirement: a2a_core::capability::AuthRequirement::None,
                sub_capabilities: vec![],
                region_restriction: vec![],
                input_schema: json!({"type": "object", "properties": {"message": {"type": "string"}}, "required": ["message"]}),
                output_schema: None,
                estimated_cost: None,
                estimated_latency_ms: None,
                fallback_for: vec![],
            };
            b.capability(decl, move |ctx: ExecutionContext, p: Value| {
                let echo = echo.clone();
                async move { Ok(echo(ctx.execution_id.clone(), p)) }
            })
        })
    } else if fault == Fault::RootDocumentAtDidJson {
        common::demo_parts_resolving(port, |b, _| a2a_agent::demo::capabilities(b), Some(Arc::new(NoWellKnown::new())))
    } else if fault == Fault::ResolverFallsBackToHttp {
        common::demo_parts_resolving(port, |b, _| a2a_agent::demo::capabilities(b), Some(Arc::new(HttpsFirst::new())))
    } else if fault == Fault::OAuth2TokenUnverified {
        // The demo agent with an oauth2 capability, its tokens issued by `other_key` (AUTH-3).
        let issuer = other_key.as_ref().map(|k| k.verifying_key().clone());
        common::demo_parts_with(port, move |b, _| {
            a2a_agent::demo::capabilities(b)
                .capability(oauth2_capability(), |_ctx: ExecutionContext, p: Value| async move { Ok(p) })
                .oauth2(a2a_server::OAuth2 {
                    issuer: OAUTH2_ISSUER.into(),
                    audience: None,
                    keys: issuer.into_iter().collect(),
                    required_scopes: HashMap::new(),
                })
        })
    } else if array_fault(fault) {
        // The demo agent with one more capability whose input has an array property (NEG-22/23/25).
        common::demo_parts_with(port, |b, _| {
            a2a_agent::demo::capabilities(b)
                .capability(array_capability(), |_ctx: ExecutionContext, p: Value| async move { Ok(p) })
        })
    } else if matches!(
        fault,
        Fault::NonCanonicalResponseSignatures | Fault::ResponsesSignedWithAnotherKey | Fault::ResponseJtiReused
    ) {
        // The demo agent signing its responses (INT-10), as a2a-server does with sign_responses.
        common::demo_parts_with(port, |b, key| a2a_agent::demo::capabilities(b).sign_responses("key-1", key.clone()))
    } else {
        common::demo_parts(port)
    };
    // SND-4 is seen only by a requester of the agent's own DID: the suite runs as the agent itself.
    let run_as = (fault == Fault::WaitsOnItself).then(|| a2a_conformance::identity::Identity {
        did: parts.agent.did().to_owned(),
        key_id: "key-1".into(),
        key: parts.key.clone().expect("the agent's key"),
    });
    let state = Arc::new(State {
        fault,
        agent_did: parts.agent.did().to_owned(),
        caller: caller.as_ref().map(|c| c.identity.clone()).or_else(|| run_as.clone()),
        store: parts.store.clone(),
        work,
        waited_out: Mutex::new(Default::default()),
        sent: Mutex::new(HashMap::new()),
        counters: Mutex::new(Vec::new()),
        slow: Mutex::new(HashMap::new()),
        agent_key: parts.key.clone(),
        other_key,
        negotiations: Mutex::new(HashMap::new()),
        used: Mutex::new(Default::default()),
        caps: parts
            .agent
            .engine()
            .capabilities()
            .iter()
            .map(|c| (c.decl.name.clone(), c.decl.input_schema.clone()))
            .collect(),
        card_kid: format!("{}#key-1", parts.agent.did()),
        dead: std::sync::atomic::AtomicBool::new(false),
        keys: Mutex::new(HashMap::new()),
        base: format!("http://127.0.0.1:{port}"),
    });
    let app = match fault {
        Fault::CardSignedWithAnotherKey => {
            common::bridged(&parts, a2a_core::keys::SigningKey::generate().expect("key"))
        }
        f if f == Fault::GetTaskAnswersAnotherTask || bridge_fault(f) => {
            common::bridged(&parts, parts.key.clone().expect("the agent's key"))
        }
        // axum's method router adds `Allow` to a 405 outside any layer of its routes: the breaker must wrap the
        // whole router to take it away.
        // axum routes before a router's layers run: a breaker that answers one path as another must wrap the router.
        Fault::MethodNotAllowedWithoutAllow | Fault::OptionsBelowIsDiscover => {
            axum::Router::new().fallback_service(parts.app.clone())
        }
        _ => parts.app.clone(),
    };
    let app =
        app.layer(axum::middleware::from_fn(move |req: Request<Body>, next: Next| breaker(state.clone(), req, next)));
    let running = common::serve(l, port, parts, app);
    Broken { running, caller, runs, run_as, _keep: Vec::new() }
}

/// Every broken agent and exactly the checks that catch it (the mutation table, `a2a_conformance::mutation`, maps
/// requirements to these).
pub const CAUGHT: &[(Fault, &[&str])] = &[
    (Fault::ErrorsWithoutVersion, &["responses/a2a-version"]),
    (Fault::PreflightWithoutAllowHeaders, &["cors/preflight"]),
    (Fault::AcceptsNullable, &["schema-rules/nullable", "schema-rules/worked-example"]),
    (Fault::ConfirmRunsTwice, &["confirm/again", "confirm/concurrent"]),
    (Fault::AcceptsExpiredSignatures, &["signature/expired"]),
    (Fault::NoReplayProtection, &["signature/replay"]),
    (
        Fault::AcceptsUnsigned,
        &["did-auth/no-existence-oracle", "did-auth/unsigned-refused", "sessions/auth-requirement"],
    ),
    (
        Fault::AcceptsInvalidPayloads,
        &[
            "execute/formats-asserted",
            "execute/idempotency-after-validation",
            "execute/payload-invalid",
            "schema-rules/no-fetch",
        ],
    ),
    (Fault::NoExecutionHeader, &["execute/happy-path"]),
    (
        Fault::HtmlNotFound,
        &["cors/options-below-endpoint", "errors/unknown-path", "responses/error-bodies", "responses/json"],
    ),
    (Fault::LenientVersion, &["version/syntax", "version/unsupported"]),
    (
        Fault::IgnoresIdempotencyKey,
        &["execute/idempotency", "execute/idempotency-after-validation", "headers/malformed-idempotency-key"],
    ),
    (Fault::UnderstatesBodyLimit, &["limits/oversize-body"]),
    (Fault::IgnoresRegion, &["execute/auth-before-payload", "negotiate/region-order", "region/enforced"]),
    (Fault::FalseSessionTimeout, &["sessions/wait-is-not-timeout"]),
    (Fault::InboxServedToOthers, &["sessions/wait-is-not-timeout"]),
    (Fault::BridgeIgnoresMessageId, &["bridge/send-message"]),
    (Fault::BridgeServesFirstOfBatch, &["bridge/errors"]),
    (Fault::SpeaksHttp10, &["discover/status-204"]),
    (Fault::DiesAfterOversizeBody, &["limits/still-alive"]),
    (Fault::RootDocumentAtDidJson, &["did-resolver/document-url"]),
    (Fault::DropsLateReply, &["sessions/wait-is-not-timeout"]),
    (Fault::StreamResumesFromStart, &["streaming/last-event-id", "streaming/resume-after-drop"]),
    (Fault::EventsIgnoreLastEventId, &["sessions/events-resume"]),
    (Fault::IgnoresHop, &["sessions/provenance-and-hops"]),
    (Fault::NoRedaction, &["sessions/history-redacted"]),
    (Fault::StreamWithoutNoStore, &["streaming/events"]),
    (Fault::LenientStreamHeader, &["streaming/header-values"]),
    (Fault::UnboundedAttachments, &["sessions/attachment-bounds"]),
    (Fault::IgnoresContext, &["sessions/context-mode"]),
    (Fault::IgnoresRunTimeout, &["sessions/run-deadline"]),
    (Fault::RegistersReservedKeys, &["sessions/from-and-reserved-keys"]),
    (Fault::PublishesSkippedAnnounce, &["sessions/announce"]),
    (Fault::CardSignedWithAnotherKey, &["bridge/agent-card"]),
    (Fault::GetTaskAnswersAnotherTask, &["bridge/send-message"]),
    (Fault::CounterExecutionIds, &["execute/id-randomness"]),
    (Fault::LocationNotEncoded, &["execute/location-encoded"]),
    (Fault::NonCanonicalResponseSignatures, &["responses/signatures-canonical"]),
    (Fault::IgnoresDeadlines, &["result/deadline-enforced"]),
    (Fault::LateResultOverwritesCancel, &["cancel/late-result"]),
    (Fault::ErrorsWithoutSenderId, &["responses/a2a-sender-id"]),
    (Fault::MethodNotAllowedWithoutAllow, &["errors/method-not-allowed", "responses/required-headers"]),
    (Fault::NonObjectSchemaIs400, &["schema-rules/non-object-proposal", "schema-rules/root"]),
    (Fault::DiscoverAnswers200, &["discover/any-version", "discover/status-204", "limits/still-alive"]),
    (Fault::MalformedIdsAre400, &["result/malformed-ids"]),
    (Fault::CancelOfTerminalAccepted, &["cancel/final-state", "cancel/terminal", "responses/result-shape"]),
    (Fault::ResultWithoutError, &["cancel/late-result", "responses/result-shape", "result/deadline-enforced"]),
    (Fault::ContentTypeIgnored, &["transport/content-type"]),
    (Fault::MissingSenderAccepted, &["sender/missing"]),
    (
        Fault::ConfirmAnswers200,
        &["confirm/concurrent", "confirm/first", "did-auth/handshake", "execute/no-work-before-confirm"],
    ),
    (Fault::UnknownConfirmIs400, &["confirm/unknown", "result/malformed-ids"]),
    (Fault::MissingNegotiationIdIs404, &["execute/no-negotiation"]),
    (Fault::DiscoverWithoutCapabilities, &["cors/preflight", "discover/capability-names", "discover/headers"]),
    (Fault::CancelAnswers202, &["cancel/late-result", "cancel/received"]),
    (Fault::ResponsesSignedWithAnotherKey, &["responses/signatures"]),
    (Fault::LenientTokenDecoding, &["signature/malformed"]),
    (
        Fault::InvalidJsonWrongCode,
        &[
            "execute/invalid-json",
            "signature/duplicate-member",
            "signature/non-json-body",
            "signature/non-json-reason",
            "transport/invalid-json",
        ],
    ),
    (Fault::IgnoresWaitMs, &["result/long-poll"]),
    (Fault::ConfirmByOffByAnHour, &["execute/confirm-window"]),
    (Fault::IgnoresProposedTimeout, &["negotiate/timeout"]),
    (Fault::ConfirmAfterCancelAccepted, &["cancel/confirm-after-cancel"]),
    (Fault::CorsMissingOnResponses, &["cors/actual-responses", "identity/agent-document-headers"]),
    (Fault::DiscoverRequiresVersion, &["discover/status-204"]),
    (Fault::CapabilitiesReordered, &["capabilities/order", "discover/capability-names"]),
    (Fault::UnsortedValidationErrors, &["execute/payload-invalid"]),
    (Fault::CancelServedButNotListed, &["capabilities/features"]),
    (Fault::MissingVersionAccepted, &["version/missing"]),
    (Fault::NegotiationIdHeaderMissing, &["negotiate/happy-path"]),
    (Fault::AuthRequirementMisreported, &["negotiate/happy-path"]),
    (Fault::NegotiationReplayed, &["negotiate/ids-unique"]),
    (Fault::TightenedAlwaysFalse, &["negotiate/tightening"]),
    (Fault::ConflictWithoutFallback, &["negotiate/conflict"]),
    (Fault::StrictIgnored, &["negotiate/strict"]),
    (Fault::NegotiationSingleUse, &["negotiate/usable-until-expiry"]),
    (Fault::NegotiationsNotSenderScoped, &["negotiate/sender-scoped"]),
    (Fault::UnknownMembersIgnored, &["transport/unknown-members"]),
    (
        Fault::FallbackNotServed,
        &[
            "transport/content-type",
            "transport/endpoints-served",
            "transport/invalid-json",
            "transport/invalid-request",
            "transport/unknown-members",
        ],
    ),
    (Fault::DuplicateCapabilityName, &["discover/capability-names"]),
    (Fault::WrongDocumentVersion, &["capabilities/document"]),
    (Fault::ResultTrustsIdSender, &["result/other-sender"]),
    (Fault::ResultNotDecoded, &["execute/location-encoded", "execute/sender-with-path-and-port"]),
    (Fault::InvalidSignaturesAccepted, &["signature/invalid"]),
    (Fault::HeaderOnlyBodyAccepted, &["did-auth/body-coverage"]),
    (Fault::MismatchUnnamed, &["signature/integrity"]),
    (Fault::StreamIdsFromZero, &["streaming/events", "streaming/last-event-id", "streaming/resume-after-drop"]),
    (Fault::StreamResultDiffers, &["streaming/events", "streaming/resume-after-drop"]),
    (
        Fault::LeadingZeroTimestamps,
        &["execute/happy-path", "execute/id-randomness", "execute/ids-unique", "execute/sender-with-path-and-port"],
    ),
    (Fault::HighSRefused, &["signature/high-s-accepted", "signature/replay"]),
    (Fault::OptionsBelowIsDiscover, &["cors/options-below-endpoint"]),
    (Fault::AudienceCaseInsensitive, &["signature/audience"]),
    (Fault::AudienceArrayAccepted, &["signature/audience"]),
    (Fault::TwoSignaturesAccepted, &["signature/malformed"]),
    (Fault::KeyFromEmbeddedJwk, &["signature/malformed"]),
    (Fault::InboxSessionsUnlisted, &["sessions/registry"]),
    (Fault::AnnounceEventWithoutProvenance, &["sessions/announce"]),
    (Fault::SendUnknownMembersIgnored, &["sessions/malformed"]),
    (Fault::SessionErrorsPlainText, &["sessions/malformed"]),
    (Fault::IncludeSelfIgnored, &["sessions/registry"]),
    (Fault::AnnounceWithoutInstruction, &["sessions/announce"]),
    (Fault::EventsWithoutConnected, &["sessions/events-resume"]),
    (Fault::DecodesValidSegment, &["execute/sender-with-path-and-port"]),
    (Fault::IdParsedFromLeft, &["execute/sender-with-path-and-port"]),
    (Fault::SuffixReused, &["execute/id-randomness", "execute/ids-unique"]),
    (Fault::ForgetsTerminalAfterRead, &["result/terminal-stays-readable"]),
    (Fault::DeepNestingAccepted, &["signature/non-json-body"]),
    (Fault::TrailingContentIgnored, &["transport/invalid-json"]),
    (Fault::BomAccepted, &["signature/non-json-body"]),
    (Fault::CanonLiteralsCapitalized, &["signature/canonical-json"]),
    (Fault::SenderAnyMethod, &["sender/invalid-dids"]),
    (Fault::SenderLeadingZeroPort, &["sender/invalid-dids"]),
    (Fault::SenderHostCaseFolded, &["sender/invalid-dids"]),
    (Fault::SenderIpHost, &["sender/invalid-dids"]),
    (Fault::SenderSingleLabelHost, &["sender/invalid-dids"]),
    (Fault::SenderUnicodeHost, &["sender/invalid-dids"]),
    (Fault::SenderLowerCasePercent, &["sender/invalid-dids"]),
    (Fault::SenderTooLong, &["sender/invalid-dids"]),
    (Fault::SenderDefaultPortDropped, &["sender/compared-byte-for-byte"]),
    (Fault::InvalidSenderWrongCode, &["sender/invalid-dids"]),
    (Fault::KidFragmentUnchecked, &["signature/malformed"]),
    (Fault::UnknownKeyFallsBack, &["signature/unknown-key"]),
    (Fault::DocumentWithoutAssertionMethod, &["identity/agent-document"]),
    (Fault::ResponseJtiReused, &["responses/signatures"]),
    (Fault::ApiKeyPrefixAccepted, &["auth/api-key"]),
    (Fault::RegionHeaderMissing, &["discover/region-header"]),
    (Fault::DuplicateDeclaration, &["discover/capability-names"]),
    (Fault::SingleWordCapabilityName, &["capabilities/declarations-valid", "discover/capability-names"]),
    (Fault::TightenKeepsNullable, &["negotiate/tightening"]),
    (Fault::TightenDropsProposedProperties, &["negotiate/tightening"]),
    (Fault::TightenAgreesEmptyRange, &["negotiate/tightening"]),
    (Fault::TightenKeepsProposedUniqueItems, &["negotiate/tightening"]),
    (Fault::TightenKeepsProposedItems, &["negotiate/tightening"]),
    (Fault::SenderDecodedInIds, &["execute/sender-with-path-and-port"]),
    (Fault::DepthUnbounded, &["schema-rules/limits"]),
    (Fault::PythonRecipeAccepted, &["signature/python-recipe-refused"]),
    (Fault::UnsignedHeaderAccepted, &["signature/integrity"]),
    (Fault::BodyDigestIgnored, &["signature/integrity", "signature/python-recipe-refused"]),
    (Fault::CardWithoutCors, &["bridge/agent-card"]),
    (Fault::SkillWithoutTags, &["bridge/agent-card"]),
    (Fault::CardWithFalseMember, &["bridge/agent-card"]),
    (Fault::BridgeAnyVersion, &["bridge/errors"]),
    (Fault::BridgeErrorsWithoutInfo, &["bridge/errors", "bridge/send-message"]),
    (Fault::BridgeTakesFirstDataPart, &["bridge/send-message"]),
    (Fault::BridgeIgnoresMessageSkill, &["bridge/send-message"]),
    (Fault::BridgeIgnoresSender, &["bridge/send-message"]),
    (Fault::HttpJsonNotServed, &["bridge/errors", "bridge/http-json"]),
    (Fault::BridgeToMissing, &["bridge/bridge-to"]),
    (Fault::CompletedTaskWithoutArtifact, &["bridge/http-json", "bridge/send-message"]),
    (Fault::StreamWithoutArtifactUpdate, &["bridge/streaming"]),
    (Fault::SubscribeWithoutTask, &["bridge/streaming"]),
    (Fault::WorkBeforeConfirm, &["execute/no-work-before-confirm"]),
    (Fault::IdempotencyBeforeValidation, &["execute/idempotency", "execute/idempotency-after-validation"]),
    (Fault::ResultConfirms, &["execute/no-work-before-confirm"]),
    (Fault::ConfirmedShowsReceived, &["result/happy-path", "result/long-poll"]),
    (Fault::CanonKeysByCodePoint, &["signature/canonical-json"]),
    (Fault::CanonNumbersAsRust, &["signature/canonical-json", "signature/python-recipe-refused"]),
    (Fault::CanonUpperCaseEscapes, &["signature/canonical-json"]),
    (Fault::CanonNormalizesStrings, &["signature/canonical-json"]),
    (Fault::CanonRefusesNoncharacters, &["signature/canonical-json"]),
    (Fault::CanonArraysSorted, &["signature/canonical-json"]),
    (Fault::CanonRefusesSolidusEscape, &["signature/canonical-json"]),
    (Fault::CanonSurrogatesEscaped, &["signature/canonical-json"]),
    (Fault::CanonNumbersRounded, &["signature/canonical-json"]),
    (Fault::DuplicateMembersAccepted, &["signature/duplicate-member", "signature/non-json-reason"]),
    (Fault::LeadingZerosAccepted, &["signature/non-json-body"]),
    (
        Fault::DigestOverRawBytes,
        &["signature/canonical-json", "signature/python-recipe-refused", "signature/reserialized-body"],
    ),
    (Fault::ResolverAcceptsRsaKeys, &["did-resolver/rsa-key"]),
    (Fault::ResolverAcceptsPrivateKeys, &["did-resolver/private-key"]),
    (Fault::ResolverAcceptsKeyAgreementKeys, &["did-resolver/key-agreement-only"]),
    (Fault::ResolverAcceptsOtherIds, &["did-resolver/id-mismatch"]),
    (Fault::ResolverMisnamesNonJson, &["did-resolver/not-json"]),
    (Fault::ResolverAcceptsHugeDocuments, &["did-resolver/too-large"]),
    (Fault::ResolverAcceptsManyMethods, &["did-resolver/too-many-methods"]),
    (Fault::ResolverAcceptsUntypedMethods, &["did-resolver/bad-method"]),
    (Fault::ResolverFollowsRedirects, &["did-resolver/redirect"]),
    (Fault::ResolverRefusesUnusedMembers, &["did-resolver/unused-members"]),
    (Fault::QuotaWithoutRetryAfter, &["limits/received-per-sender"]),
    (Fault::ExecuteDeduplicatedWithoutKey, &["execute/id-randomness", "execute/ids-unique"]),
    (Fault::UppercaseIdSuffix, &["execute/happy-path", "execute/id-randomness", "execute/sender-with-path-and-port"]),
    (Fault::TightenDropsEnum, &["negotiate/tightening"]),
    (Fault::TightenDropsConst, &["negotiate/tightening"]),
    (Fault::TightenDropsLowerBound, &["negotiate/tightening"]),
    (Fault::TightenDropsUpperBound, &["negotiate/tightening"]),
    (Fault::TightenDropsMultipleOf, &["negotiate/tightening"]),
    (Fault::TightenDropsLengths, &["negotiate/tightening"]),
    (Fault::TightenDropsPattern, &["negotiate/tightening"]),
    (Fault::TightenDropsAnnotations, &["negotiate/tightening"]),
    (Fault::TightenOpensClosedProposal, &["negotiate/tightening"]),
    (Fault::TightenSkipsCapabilityRequired, &["negotiate/tightening"]),
    (Fault::ChangesUnsorted, &["negotiate/tightening"]),
    (Fault::ChangesWithoutMessage, &["negotiate/tightening"]),
    (Fault::DeclarationWithUnknownMember, &["capabilities/declarations-valid"]),
    (
        Fault::DeclarationWithNullRequired,
        &["capabilities/declarations-valid", "capabilities/document", "capabilities/order"],
    ),
    (Fault::BlankDescription, &["capabilities/declarations-valid"]),
    (
        Fault::DeclarationWithoutAuthRequirement,
        &["capabilities/declarations-valid", "capabilities/document", "capabilities/order"],
    ),
    (
        Fault::AuthRequirementCapitalized,
        &["capabilities/declarations-valid", "capabilities/document", "capabilities/order"],
    ),
    (Fault::InvalidRegionName, &["capabilities/declarations-valid"]),
    (Fault::SubCapabilityOfItself, &["capabilities/declarations-valid"]),
    (Fault::NegativeCost, &["capabilities/declarations-valid"]),
    (Fault::FallbackForItself, &["capabilities/declarations-valid"]),
    (Fault::InputSchemaBreaksRules, &["capabilities/declarations-valid"]),
    (Fault::FallbackWithoutOptions, &["fallback/degraded-options", "fallback/response"]),
    (Fault::FallbackDropsDegraded, &["fallback/degraded-options"]),
    (Fault::UnknownSessionIs400, &["sessions/unknown"]),
    (Fault::IgnoresWaitChain, &["sessions/wait-cycle"]),
    (Fault::HistoryAcceptsLimitZero, &["sessions/history-bounds"]),
    (Fault::HistoryWithoutTruncated, &["sessions/history-bounds"]),
    (Fault::NoReplyWithoutToken, &["sessions/no-reply-ends-run"]),
    (Fault::ReplyFalseWaits, &["sessions/send-accepted-at-once"]),
    (Fault::SendAcceptedAsOk, &["sessions/send-accepted-at-once"]),
    (Fault::ProvenanceClaimsUser, &["sessions/provenance-and-hops"]),
    (Fault::RefreshAnswered201, &["sessions/registry"]),
    (Fault::EndedSessionStillListed, &["sessions/registry"]),
    (
        Fault::TypeNotAllowedAccepted,
        &[
            "schema-rules/format",
            "schema-rules/integer-message",
            "schema-rules/limits",
            "schema-rules/types",
            "schema-rules/worked-example",
        ],
    ),
    (Fault::TypeMissingAccepted, &["schema-rules/no-fetch", "schema-rules/references", "schema-rules/type-missing"]),
    (Fault::UndefinedRequiredAccepted, &["schema-rules/required", "schema-rules/worked-example"]),
    (Fault::FormatOnNonStringAccepted, &["schema-rules/format", "schema-rules/worked-example"]),
    (Fault::RefsAccepted, &["schema-rules/no-fetch", "schema-rules/references"]),
    (Fault::UnknownKeywordsIgnored, &["schema-rules/keywords"]),
    (Fault::EmptyBoundsAccepted, &["schema-rules/bounds", "schema-rules/keywords", "schema-rules/types"]),
    (
        Fault::ViolationsUnsorted,
        &[
            "schema-rules/format",
            "schema-rules/keywords",
            "schema-rules/limits",
            "schema-rules/no-fetch",
            "schema-rules/references",
            "schema-rules/required",
            "schema-rules/worked-example",
        ],
    ),
    (
        Fault::ViolationsWithExtraMember,
        &[
            "schema-rules/bounds",
            "schema-rules/format",
            "schema-rules/integer-message",
            "schema-rules/keywords",
            "schema-rules/limits",
            "schema-rules/no-fetch",
            "schema-rules/non-object-proposal",
            "schema-rules/nullable",
            "schema-rules/references",
            "schema-rules/required",
            "schema-rules/root",
            "schema-rules/type-missing",
            "schema-rules/types",
            "schema-rules/worked-example",
        ],
    ),
    (Fault::ViolationsCapped32, &["schema-rules/limits"]),
    (Fault::RuleIdsRenamed, &["schema-rules/format", "schema-rules/worked-example"]),
    (Fault::FetchesReferences, &["schema-rules/no-fetch"]),
    (Fault::ChangesInReceivedOrder, &["negotiate/tightening"]),
    (Fault::HonoursUntrustedForwardedSender, &["agent/forwarded-sender-refused"]),
    (Fault::OAuth2TokenUnverified, &["auth/oauth2"]),
    (Fault::WaitsOnItself, &["sessions/wait-cycle"]),
    (Fault::ResolverFallsBackToHttp, &["did-resolver/document-url"]),
    (Fault::GatewayRoutesNotShared, &["gateway/routes-follow"]),
    (Fault::GatewayVerifiesAsAgent, &["did-auth/handshake"]),
    (Fault::GatewayForwardsForwardingHeaders, &["gateway/forwarded-sender-removed"]),
    (Fault::GatewayTakesAnyVersion, &["gateway/unsupported-version"]),
    (Fault::GatewayForwardsAmbiguousFraming, &["gateway/ambiguous-framing"]),
    (Fault::GatewayPassesAgentBridgeTo, &["bridge/bridge-to"]),
    (Fault::IdempotencyIgnoresPayload, &["execute/idempotency"]),
    (Fault::IdempotencyComparesBytes, &["execute/idempotency"]),
    (Fault::IdempotencyKeyNotSenderScoped, &["execute/idempotency"]),
    (Fault::HttpJsonStreamEnveloped, &["bridge/http-json"]),
    (Fault::StatusClaimAccepted, &["signature/integrity"]),
    (Fault::CorsOriginHeadersAlways, &["cors/discover-headers"]),
    (Fault::DroppedStreamCancels, &["streaming/drop-keeps-running"]),
    (Fault::RefusalRevealsIds, &["did-auth/no-existence-oracle"]),
    (Fault::GatewayRevealsIds, &["did-auth/no-existence-oracle"]),
    (Fault::McpOldRevisionOnly, &["mcp/revisions"]),
    (Fault::McpToolMissing, &["mcp/tools-list"]),
    (Fault::McpToolAnnotationsAltered, &["mcp/tools-list"]),
    (Fault::McpUnknownToolAsHttpError, &["mcp/malformed"]),
    (Fault::McpObjectResultWrapped, &["mcp/call"]),
    (Fault::McpRefusalAsRpcError, &["mcp/refusal"]),
    // The refused NEGOTIATE is the answer of every call: the valid one and the one with bad arguments.
    (Fault::McpProposalAsString, &["mcp/call", "mcp/refusal"]),
    (Fault::McpArgumentsLeftToAgent, &["mcp/refusal"]),
];

/// The checks that catch `fault`, as [`CAUGHT`] lists them.
pub fn expected(fault: Fault) -> &'static [&'static str] {
    CAUGHT.iter().find(|(f, _)| *f == fault).map_or(&[], |(_, c)| c)
}

/// The fixture run against the whole suite, the sample that shows that a fault is caught by no check outside the
/// areas of the checks that catch it: error responses without `A2A-Version` are sent by nearly every area.
pub const FULL_SUITE_SAMPLE: Fault = Fault::ErrorsWithoutVersion;

/// Fixtures whose catching checks read what checks of other areas sent (the `responses/*` checks read the run's
/// transcript): the `--only` of their run.
const SCOPE: &[(Fault, &str)] = &[
    (Fault::ErrorsWithoutSenderId, "responses/,errors/,version/"),
    (Fault::ResponsesSignedWithAnotherKey, "responses/,negotiate/,errors/"),
    (Fault::NonCanonicalResponseSignatures, "responses/,negotiate/,errors/"),
    (Fault::ResponseJtiReused, "responses/,negotiate/,errors/"),
    // The result area waits for executions; this fault is seen by the one check that reads a terminal result again.
    (Fault::ForgetsTerminalAfterRead, "result/terminal-stays-readable"),
    // The session faults run only the check that catches them: the sessions area waits on runs and inboxes.
    (Fault::UnknownSessionIs400, "sessions/unknown"),
    (Fault::IgnoresWaitChain, "sessions/wait-cycle"),
    (Fault::HistoryAcceptsLimitZero, "sessions/history-bounds"),
    (Fault::HistoryWithoutTruncated, "sessions/history-bounds"),
    (Fault::NoReplyWithoutToken, "sessions/no-reply-ends-run"),
    (Fault::ReplyFalseWaits, "sessions/send-accepted-at-once"),
    (Fault::SendAcceptedAsOk, "sessions/send-accepted-at-once"),
    (Fault::ProvenanceClaimsUser, "sessions/provenance-and-hops"),
    (Fault::RefreshAnswered201, "sessions/registry"),
    (Fault::EndedSessionStillListed, "sessions/registry"),
    (Fault::InboxSessionsUnlisted, "sessions/registry"),
    (Fault::InboxServedToOthers, "sessions/wait-is-not-timeout"),
    // The one check that reads the HTTP version of an answer.
    (Fault::SpeaksHttp10, "discover/status-204"),
    // The oversize body that kills the agent, then the check that finds it dead.
    (Fault::DiesAfterOversizeBody, "limits/oversize-body,limits/still-alive"),
    (Fault::AnnounceEventWithoutProvenance, "sessions/announce"),
    (Fault::SendUnknownMembersIgnored, "sessions/malformed"),
    (Fault::SessionErrorsPlainText, "sessions/malformed"),
    (Fault::IncludeSelfIgnored, "sessions/registry"),
    (Fault::AnnounceWithoutInstruction, "sessions/announce"),
    (Fault::EventsWithoutConnected, "sessions/events-resume"),
    // The resolver faults run with the test's caller identity (whose key the breaker signs with) beside --serve-did:
    // the checks of the primary served identity (did-resolver/document-url, did-resolver/cache) do not apply.
    (Fault::ResolverAcceptsRsaKeys, "did-resolver/rsa-key"),
    (Fault::ResolverAcceptsPrivateKeys, "did-resolver/private-key"),
    (Fault::ResolverAcceptsKeyAgreementKeys, "did-resolver/key-agreement-only"),
    (Fault::ResolverAcceptsOtherIds, "did-resolver/id-mismatch"),
    (Fault::ResolverMisnamesNonJson, "did-resolver/not-json"),
    (Fault::ResolverAcceptsHugeDocuments, "did-resolver/too-large"),
    (Fault::ResolverAcceptsManyMethods, "did-resolver/too-many-methods"),
    (Fault::ResolverAcceptsUntypedMethods, "did-resolver/bad-method"),
    (Fault::ResolverFollowsRedirects, "did-resolver/redirect"),
    (Fault::ResolverRefusesUnusedMembers, "did-resolver/unused-members"),
    // SND-4, run as the agent itself.
    (Fault::WaitsOnItself, "sessions/wait-cycle"),
    // The steps of a handshake reach the gateway that did not see its NEGOTIATE.
    (Fault::GatewayRoutesNotShared, "gateway/routes-follow"),
    // Every signed request is refused: the one check of a signed handshake through the gateway.
    (Fault::GatewayVerifiesAsAgent, "did-auth/handshake"),
    (Fault::GatewayRevealsIds, "did-auth/no-existence-oracle"),
    // The one check that drops a stream while its execution runs.
    (Fault::DroppedStreamCancels, "streaming/drop-keeps-running"),
];

/// The `--only` of `fault`'s run: its entry of [`SCOPE`], else the areas (`negotiate/`) of the checks that catch it.
/// A fixture's run is the suite restricted to these (the whole suite for [`FULL_SUITE_SAMPLE`], and for every
/// fixture when `A2A_CONFORMANCE_FIXTURES_FULL=1`).
pub fn scope(fault: Fault) -> Option<String> {
    if fault == FULL_SUITE_SAMPLE || std::env::var("A2A_CONFORMANCE_FIXTURES_FULL").is_ok_and(|v| v == "1") {
        return None;
    }
    if let Some((_, only)) = SCOPE.iter().find(|(f, _)| *f == fault) {
        return Some((*only).to_owned());
    }
    let mut areas: Vec<&str> = expected(fault).iter().map(|c| c.find('/').map_or(*c, |i| &c[..=i])).collect();
    areas.sort_unstable();
    areas.dedup();
    Some(areas.join(","))
}

/// Runs the suite against the agent with `fault` and checks that exactly the checks of [`CAUGHT`] fail.
async fn caught(fault: Fault) -> Broken {
    let expected = expected(fault);
    assert!(!expected.is_empty(), "{fault:?} is not in CAUGHT");
    caught_by(fault, expected).await
}

/// Runs the suite (restricted to [`scope`]) against the agent with `fault` and checks that exactly `expected` fail.
async fn caught_by(fault: Fault, expected: &[&str]) -> Broken {
    let agent = start(fault).await;
    let report = run_scoped(fault, &agent).await;
    let mut want: Vec<String> = expected.iter().map(|s| (*s).to_owned()).collect();
    want.sort();
    assert_eq!(
        common::failed(&report),
        want,
        "{fault:?} must be caught by exactly these checks (run with --only {:?}):\n{}",
        report.run.only,
        common::explain(&report)
    );
    agent
}

/// The suite's run against a broken agent, restricted to [`scope`]; every check that catches it must have run.
async fn run_scoped(fault: Fault, agent: &Broken) -> a2a_conformance::Report {
    let identity = agent.caller.as_ref().map(|c| &c.identity).or(agent.run_as.as_ref());
    let mut opts = common::options(&agent.running.base, identity);
    opts.only = scope(fault);
    opts.gateway = gateway_fault(fault);
    if resolver_fault(fault).is_some() {
        // The suite's wrongly published documents, beside the caller identity the breaker signs with.
        opts.serve_did = Some("127.0.0.1:0".into());
    }
    if matches!(fault, Fault::TightenDropsLowerBound | Fault::TightenDropsUpperBound | Fault::TightenDropsMultipleOf) {
        // The tightening variants of numeric keywords need a capability with numbers.
        opts.capability = Some("add_numbers".into());
    }
    if fault == Fault::InboxServedToOthers {
        // The second sender that reads the owner's inbox: the suite's served identity beside the caller.
        opts.serve_did = Some("127.0.0.1:0".into());
    }
    if fault == Fault::TightenAgreesEmptyRange {
        // NEG-20 shows only where the capability bounds a number: run_slow_task's `seconds` (0 to 600).
        opts.capability = Some("run_slow_task".into());
    }
    if array_fault(fault) {
        // NEG-23 and NEG-25 show only on a capability with an array property (ARRAY_CAPABILITY).
        opts.capability = Some(ARRAY_CAPABILITY.into());
    }
    if fault == Fault::UnsortedValidationErrors {
        // NEG-43 shows only on payloads with several errors: a capability with two required members.
        opts.capability = Some("submit_report".into());
    }
    let report = common::run(opts).await;
    for want in expected(fault) {
        assert!(
            report.checks.iter().any(|c| c.id == *want),
            "{fault:?}: {want} did not run with --only {:?}",
            report.run.only
        );
    }
    report
}

#[test]
fn every_fixture_runs_only_the_areas_of_its_checks_but_one_runs_the_whole_suite() {
    let all = a2a_conformance::checks::all();
    let mut full = 0;
    for (fault, checks) in CAUGHT {
        let Some(only) = scope(*fault) else {
            full += 1;
            continue;
        };
        let selected: Vec<&str> =
            all.iter().filter(|c| a2a_conformance::check::selected(c, Some(&only))).map(|c| c.id).collect();
        for c in *checks {
            assert!(selected.contains(c), "{fault:?}: --only {only} does not select {c}");
        }
        assert!(selected.len() < all.len(), "{fault:?}: --only {only} selects the whole suite");
    }
    assert!(full >= 1, "no fixture runs the whole suite (FULL_SUITE_SAMPLE)");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_unbroken_agent_fails_no_check() {
    let agent = common::demo().await;
    let report = common::run(common::options(&agent.base, None)).await;
    assert_eq!(common::failed(&report), Vec::<String>::new(), "{}", common::explain(&report));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn error_responses_without_a2a_version_are_caught() {
    caught(Fault::ErrorsWithoutVersion).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn preflights_without_allow_headers_are_caught() {
    caught(Fault::PreflightWithoutAllowHeaders).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn accepting_nullable_schemas_is_caught() {
    caught(Fault::AcceptsNullable).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn running_the_work_again_on_a_second_confirm_is_caught() {
    let agent = caught(Fault::ConfirmRunsTwice).await;
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    let runs = agent.runs.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone();
    assert!(runs.values().any(|n| *n >= 2), "the broken agent really ran an execution twice: {runs:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn accepting_expired_signatures_is_caught() {
    caught(Fault::AcceptsExpiredSignatures).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn accepting_replays_is_caught() {
    caught(Fault::NoReplayProtection).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn accepting_unsigned_requests_to_a_did_auth_capability_is_caught() {
    caught(Fault::AcceptsUnsigned).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn accepting_payloads_that_break_the_agreed_schema_is_caught() {
    caught(Fault::AcceptsInvalidPayloads).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_execution_header_is_caught() {
    caught(Fault::NoExecutionHeader).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn html_error_pages_are_caught() {
    caught(Fault::HtmlNotFound).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn accepting_any_version_is_caught() {
    caught(Fault::LenientVersion).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn advertising_idempotency_without_honouring_it_is_caught() {
    caught(Fault::IgnoresIdempotencyKey).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn announcing_a_body_limit_that_is_not_enforced_is_caught() {
    caught(Fault::UnderstatesBodyLimit).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn not_enforcing_a_region_restriction_is_caught() {
    caught(Fault::IgnoresRegion).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_false_timeout_for_a_delivered_message_is_caught() {
    caught(Fault::FalseSessionTimeout).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_a_late_reply_is_caught() {
    caught(Fault::DropsLateReply).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resumed_stream_replayed_from_the_start_is_caught() {
    caught(Fault::StreamResumesFromStart).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_event_channel_that_ignores_last_event_id_is_caught() {
    caught(Fault::EventsIgnoreLastEventId).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ignoring_a2a_hop_is_caught() {
    caught(Fault::IgnoresHop).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_history_that_shows_secrets_is_caught() {
    caught(Fault::NoRedaction).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_without_no_store_is_caught() {
    caught(Fault::StreamWithoutNoStore).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lenient_a2a_stream_header_is_caught() {
    caught(Fault::LenientStreamHeader).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn accepting_more_than_eight_attachments_is_caught() {
    caught(Fault::UnboundedAttachments).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ignoring_context_mode_is_caught() {
    caught(Fault::IgnoresContext).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ignoring_run_timeout_ms_is_caught() {
    caught(Fault::IgnoresRunTimeout).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn registering_the_reserved_keys_is_caught() {
    caught(Fault::RegistersReservedKeys).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn publishing_a_skipped_announce_is_caught() {
    caught(Fault::PublishesSkippedAnnounce).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_card_signed_with_another_key_is_caught() {
    caught(Fault::CardSignedWithAnotherKey).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_task_answering_another_task_is_caught() {
    caught(Fault::GetTaskAnswersAnotherTask).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn execution_ids_with_a_counter_for_a_suffix_are_caught() {
    caught(Fault::CounterExecutionIds).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_location_that_does_not_encode_the_id_is_caught() {
    caught(Fault::LocationNotEncoded).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn responses_signed_over_non_canonical_json_are_caught() {
    caught(Fault::NonCanonicalResponseSignatures).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deadlines_that_are_never_enforced_are_caught() {
    caught(Fault::IgnoresDeadlines).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_late_result_overwriting_canceled_is_caught() {
    caught(Fault::LateResultOverwritesCancel).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn errors_without_a2a_sender_id_are_caught() {
    caught(Fault::ErrorsWithoutSenderId).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn method_not_allowed_without_allow_is_caught() {
    caught(Fault::MethodNotAllowedWithoutAllow).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_non_object_proposed_schema_answered_400_is_caught() {
    caught(Fault::NonObjectSchemaIs400).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn discover_answered_200_is_caught() {
    caught(Fault::DiscoverAnswers200).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_ids_answered_400_are_caught() {
    caught(Fault::MalformedIdsAre400).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_of_a_terminal_execution_accepted_is_caught() {
    caught(Fault::CancelOfTerminalAccepted).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_result_without_error_for_a_failed_execution_is_caught() {
    // The checks in CAUGHT always read a failed, timed-out or canceled result. On a loaded machine other checks may
    // too (a 2 s handler of `result/timeout` or `cancel/*` that reaches its deadline before the check's request): they
    // catch the same fault, so they may fail beside them, never instead of them.
    const MAY_ALSO_READ_A_FAILED_RESULT: &[&str] = &[
        "cancel/final-state",
        "cancel/received",
        "cancel/terminal",
        "result/deadline",
        "result/happy-path",
        "result/long-poll",
        "result/terminal-stays-readable",
        "result/timeout",
    ];
    let fault = Fault::ResultWithoutError;
    let agent = start(fault).await;
    let report = run_scoped(fault, &agent).await;
    let failed = common::failed(&report);
    for want in expected(fault) {
        assert!(failed.iter().any(|f| f == want), "{fault:?} was not caught by {want}:\n{}", common::explain(&report));
    }
    for f in &failed {
        assert!(
            expected(fault).contains(&f.as_str()) || MAY_ALSO_READ_A_FAILED_RESULT.contains(&f.as_str()),
            "{fault:?} made {f} fail, which does not read results:\n{}",
            common::explain(&report)
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_of_another_content_type_read_as_json_is_caught() {
    caught(Fault::ContentTypeIgnored).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_without_a_sender_served_is_caught() {
    caught(Fault::MissingSenderAccepted).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_first_confirm_answered_200_is_caught() {
    caught(Fault::ConfirmAnswers200).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn confirm_of_an_unknown_execution_answered_400_is_caught() {
    caught(Fault::UnknownConfirmIs400).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn execute_without_a_negotiation_id_answered_404_is_caught() {
    caught(Fault::MissingNegotiationIdIs404).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn discover_without_a2a_capabilities_is_caught() {
    caught(Fault::DiscoverWithoutCapabilities).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_answered_202_is_caught() {
    caught(Fault::CancelAnswers202).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn responses_signed_with_a_key_not_in_the_document_are_caught() {
    caught(Fault::ResponsesSignedWithAnotherKey).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_padded_token_accepted_is_caught() {
    caught(Fault::LenientTokenDecoding).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_json_answered_with_another_code_is_caught() {
    caught(Fault::InvalidJsonWrongCode).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ignoring_wait_ms_is_caught() {
    caught(Fault::IgnoresWaitMs).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_confirm_by_is_caught() {
    caught(Fault::ConfirmByOffByAnHour).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ignoring_a_proposed_timeout_is_caught() {
    caught(Fault::IgnoresProposedTimeout).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn confirm_after_cancel_accepted_is_caught() {
    caught(Fault::ConfirmAfterCancelAccepted).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn responses_without_allow_origin_are_caught() {
    caught(Fault::CorsMissingOnResponses).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn discover_requiring_a_version_is_caught() {
    caught(Fault::DiscoverRequiresVersion).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn capabilities_in_another_order_are_caught() {
    caught(Fault::CapabilitiesReordered).await;
}

/// An error response as the agent would write it (its A2A headers included).
fn error_response(state: &State, status: StatusCode, code: &str, message: &str) -> Response {
    let body = json!({"error": {"code": code, "message": message}});
    let mut out = (status, axum::Json(body)).into_response();
    out.headers_mut().insert("a2a-version", HeaderValue::from_static("0.3"));
    if let Ok(did) = HeaderValue::from_str(&state.agent_did) {
        out.headers_mut().insert("a2a-sender-id", did);
    }
    out
}

/// The response with its JSON body rewritten by `edit` when `when` holds for its status and body.
async fn edit_response(
    resp: Response,
    when: impl FnOnce(StatusCode, &Value) -> bool,
    edit: impl FnOnce(&mut Value),
) -> Response {
    let (mut parts, body) = resp.into_parts();
    let bytes = body_bytes(body).await;
    let mut v: Value = match serde_json::from_slice(&bytes) {
        Ok(v) if when(parts.status, &v) => v,
        _ => return Response::from_parts(parts, Body::from(bytes)),
    };
    edit(&mut v);
    parts.headers.remove("content-length");
    Response::from_parts(parts, Body::from(serde_json::to_vec(&v).unwrap_or_default()))
}

/// "Answer this route, change this one thing": the shape of most faults. `method` and `path` name the route (a
/// `path` ending in `/` is a prefix); the agent answers, and `change` alters one thing of the request or the answer.
struct Rewrite {
    method: Method,
    path: &'static str,
    change: Change,
}

/// The one thing a [`Rewrite`] changes.
enum Change {
    /// A header of the answer is left out.
    DropHeader(&'static str),
    /// A header of the request is left out before the agent sees it.
    DropRequestHeader(&'static str),
    /// The JSON answer (a stream is left alone) is edited: its status and body; `false` leaves it as it is.
    Answer(fn(&mut StatusCode, &mut Value) -> bool),
    /// The Agent Card (JSON) is edited and signed anew with the agent's key when it was signed (BR-5); `false`
    /// leaves it as it is.
    Card(fn(&mut Value) -> bool),
    /// The JSON request body is edited before the agent sees it (signed anew when the caller's key is known);
    /// `false` leaves it as it is.
    Request(fn(&mut Value) -> bool),
}

impl Rewrite {
    fn new(method: Method, path: &'static str, change: Change) -> Option<Rewrite> {
        Some(Rewrite { method, path, change })
    }

    fn applies(&self, method: &Method, path: &str) -> bool {
        *method == self.method && if self.path.ends_with('/') { path.starts_with(self.path) } else { path == self.path }
    }

    async fn run(&self, state: &State, req: Request<Body>, next: Next) -> Response {
        match self.change {
            Change::DropHeader(name) => {
                let mut resp = next.run(req).await;
                resp.headers_mut().remove(name);
                resp
            }
            Change::DropRequestHeader(name) => {
                let mut req = req;
                req.headers_mut().remove(name);
                next.run(req).await
            }
            Change::Answer(edit) => {
                let resp = next.run(req).await;
                if header(resp.headers(), "content-type") == Some("text/event-stream") {
                    return resp;
                }
                let (mut parts, body) = resp.into_parts();
                let bytes = body_bytes(body).await;
                let mut status = parts.status;
                let mut v: Value = match serde_json::from_slice(&bytes) {
                    Ok(v) => v,
                    Err(_) => return Response::from_parts(parts, Body::from(bytes)),
                };
                if !edit(&mut status, &mut v) {
                    return Response::from_parts(parts, Body::from(bytes));
                }
                parts.status = status;
                parts.headers.remove("content-length");
                Response::from_parts(parts, Body::from(serde_json::to_vec(&v).unwrap_or_default()))
            }
            Change::Card(edit) => {
                let resp = next.run(req).await;
                let (mut parts, body) = resp.into_parts();
                let bytes = body_bytes(body).await;
                let mut card: Value = match serde_json::from_slice::<Value>(&bytes) {
                    Ok(v) if edit(&mut v.clone()) => v,
                    _ => return Response::from_parts(parts, Body::from(bytes)),
                };
                edit(&mut card);
                let signed = card.as_object_mut().and_then(|o| o.remove("signatures")).is_some();
                if let (true, Some(key)) = (signed, &state.agent_key)
                    && let Ok(sig) = a2a_core::a2a1x::sign_card(&card, &state.card_kid, key)
                {
                    card["signatures"] = json!([sig]);
                }
                parts.headers.remove("content-length");
                Response::from_parts(parts, Body::from(serde_json::to_vec(&card).unwrap_or_default()))
            }
            Change::Request(edit) => {
                let req = edit_body(state, req, edit).await;
                next.run(req).await
            }
        }
    }
}

/// The faults that are one [`Rewrite`] each.
fn rewrite(fault: Fault) -> Option<Rewrite> {
    use Change::{Answer, Card, DropHeader, DropRequestHeader, Request as Sent};
    const CAPS: &str = "/a2a/capabilities";
    const NEG: &str = "/a2a/negotiate";
    const JSONRPC: &str = "/a2a1x/jsonrpc";
    const CARD: &str = "/.well-known/agent-card.json";
    let (get, post, options) = (Method::GET, Method::POST, Method::OPTIONS);
    match fault {
        Fault::NoExecutionHeader => Rewrite::new(post, "/a2a/execute", DropHeader("a2a-execution-id")),
        Fault::DiscoverWithoutCapabilities => Rewrite::new(options, "/a2a", DropHeader("a2a-capabilities")),
        Fault::RegionHeaderMissing => Rewrite::new(options, "/a2a", DropHeader("a2a-region")),
        Fault::IgnoresIdempotencyKey => Rewrite::new(post, "/a2a/execute", DropRequestHeader("idempotency-key")),
        Fault::StreamResumesFromStart => Rewrite::new(get, "/a2a/result/", DropRequestHeader("last-event-id")),
        Fault::EventsIgnoreLastEventId => Rewrite::new(get, "/a2a/events", DropRequestHeader("last-event-id")),
        Fault::IgnoresHop => Rewrite::new(post, "/a2a/sessions/send", DropRequestHeader("a2a-hop")),
        Fault::UnderstatesBodyLimit => Rewrite::new(
            get,
            CAPS,
            Answer(|_, v| {
                v["limits"]["max_body_bytes"] = json!(65_536);
                true
            }),
        ),
        Fault::CapabilitiesReordered => Rewrite::new(
            get,
            CAPS,
            Answer(|_, v| v.get_mut("capabilities").and_then(Value::as_array_mut).map(|c| c.reverse()).is_some()),
        ),
        Fault::WrongDocumentVersion => Rewrite::new(
            get,
            CAPS,
            Answer(|st, v| {
                v["a2a_version"] = json!("0.2");
                *st == StatusCode::OK
            }),
        ),
        Fault::CancelServedButNotListed => Rewrite::new(
            get,
            CAPS,
            Answer(|st, v| {
                *st == StatusCode::OK && v["features"].as_array_mut().map(|f| f.retain(|x| x != "cancel")).is_some()
            }),
        ),
        Fault::AuthRequirementMisreported => Rewrite::new(
            post,
            NEG,
            Answer(|st, v| {
                let other = if v["auth_requirement"] == "none" { "api_key" } else { "none" };
                v["auth_requirement"] = json!(other);
                *st == StatusCode::OK
            }),
        ),
        Fault::TightenedAlwaysFalse => Rewrite::new(
            post,
            NEG,
            Answer(|st, v| {
                v["tightened"] = json!(false);
                *st == StatusCode::OK
            }),
        ),
        Fault::ConflictWithoutFallback => Rewrite::new(
            post,
            NEG,
            Answer(|_, v| {
                v["error"]["code"] == "schema_incompatible"
                    && v.as_object_mut().and_then(|o| o.remove("fallback_options")).is_some()
            }),
        ),
        Fault::StrictIgnored => {
            Rewrite::new(post, NEG, Sent(|v| v.as_object_mut().is_some_and(|o| o.remove("strict").is_some())))
        }
        Fault::ConfirmByOffByAnHour => Rewrite::new(
            post,
            "/a2a/execute",
            Answer(|_, v| {
                let later = v["confirm_by"]
                    .as_str()
                    .and_then(a2a_core::wire::parse_timestamp)
                    .map(|t| a2a_core::wire::format_timestamp(t + std::time::Duration::from_secs(3600)));
                later.map(|l| v["confirm_by"] = json!(l)).is_some()
            }),
        ),
        Fault::UnsortedValidationErrors => Rewrite::new(
            post,
            "/a2a/execute",
            Answer(|st, v| {
                *st == StatusCode::UNPROCESSABLE_ENTITY
                    && v["error"]["details"]["errors"].as_array_mut().map(|a| a.reverse()).is_some()
            }),
        ),
        Fault::ConfirmAnswers200 => Rewrite::new(
            post,
            "/a2a/confirm",
            Answer(|st, _| {
                let first = *st == StatusCode::ACCEPTED;
                if first {
                    *st = StatusCode::OK;
                }
                first
            }),
        ),
        Fault::ConfirmAfterCancelAccepted => Rewrite::new(
            post,
            "/a2a/confirm",
            Answer(|st, v| {
                if *st != StatusCode::CONFLICT || v["error"]["details"]["status"] != "canceled" {
                    return false;
                }
                *st = StatusCode::ACCEPTED;
                *v = json!({"execution_id": v["error"]["details"]["execution_id"].clone(), "status": "accepted"});
                true
            }),
        ),
        Fault::CancelAnswers202 => Rewrite::new(
            post,
            "/a2a/cancel",
            Answer(|st, v| {
                if *st != StatusCode::OK {
                    return false;
                }
                *st = StatusCode::ACCEPTED;
                *v = json!({});
                true
            }),
        ),
        Fault::WorkBeforeConfirm => Rewrite::new(
            get,
            "/a2a/result/",
            Answer(|st, v| {
                let received = *st == StatusCode::OK && v["status"] == "received";
                if received {
                    v["status"] = json!("running");
                }
                received
            }),
        ),
        Fault::FallbackWithoutOptions => Rewrite::new(
            post,
            "/a2a/fallback",
            Answer(|st, v| *st == StatusCode::OK && v.as_object_mut().map(|o| o.remove("fallback_options")).is_some()),
        ),
        Fault::FallbackDropsDegraded => Rewrite::new(
            post,
            "/a2a/fallback",
            Answer(|st, v| {
                *st == StatusCode::OK
                    && v["fallback_options"].as_array_mut().map(|a| a.retain(|o| o["relation"] != "degraded")).is_some()
            }),
        ),
        Fault::UnknownSessionIs400 => Rewrite::new(
            post,
            "/a2a/sessions/send",
            Answer(|st, v| {
                if v["error"]["code"] != "unknown_session" {
                    return false;
                }
                *st = StatusCode::BAD_REQUEST;
                *v = json!({"error": {"code": "invalid_request", "message": "no such target"}});
                true
            }),
        ),
        Fault::NoReplyWithoutToken => Rewrite::new(
            get,
            "/a2a/runs/",
            Answer(|st, v| {
                *st == StatusCode::OK
                    && v["status"] == "no_reply"
                    && v.as_object_mut().and_then(|o| o.remove("reply")).is_some()
            }),
        ),
        Fault::RefreshAnswered201 => Rewrite::new(
            post,
            "/a2a/sessions",
            Answer(|st, _| {
                let refresh = *st == StatusCode::OK;
                if refresh {
                    *st = StatusCode::CREATED;
                }
                refresh
            }),
        ),
        Fault::InboxSessionsUnlisted => Rewrite::new(
            get,
            "/a2a/sessions",
            Answer(|st, v| {
                *st == StatusCode::OK
                    && v["sessions"].as_array_mut().map(|l| l.retain(|s| s["handler"] != "inbox")).is_some()
            }),
        ),
        Fault::DocumentWithoutAssertionMethod => Rewrite::new(
            get,
            "/.well-known/did.json",
            Answer(|_, v| v.as_object_mut().and_then(|o| o.remove("assertionMethod")).is_some()),
        ),
        // The A2A 1.x bridge (§20).
        Fault::CardWithoutCors => Rewrite::new(get, CARD, DropHeader("access-control-allow-origin")),
        Fault::SkillWithoutTags => Rewrite::new(
            get,
            CARD,
            Card(|v| v["skills"].get_mut(0).and_then(Value::as_object_mut).and_then(|s| s.remove("tags")).is_some()),
        ),
        Fault::CardWithFalseMember => Rewrite::new(
            get,
            CARD,
            Card(|v| {
                let caps = v["capabilities"].is_object();
                if caps {
                    v["capabilities"]["pushNotifications"] = json!(false);
                }
                caps
            }),
        ),
        Fault::BridgeAnyVersion => Rewrite::new(post, JSONRPC, DropRequestHeader("a2a-version")),
        Fault::BridgeErrorsWithoutInfo => Rewrite::new(
            post,
            JSONRPC,
            Answer(|_, v| v["error"].as_object_mut().and_then(|e| e.remove("data")).is_some()),
        ),
        Fault::BridgeTakesFirstDataPart => Rewrite::new(
            post,
            JSONRPC,
            Sent(|v| {
                let Some(parts) = v.pointer_mut("/params/message/parts").and_then(Value::as_array_mut) else {
                    return false;
                };
                let data = parts.iter().filter(|p| p.get("data").is_some()).count();
                if data < 2 {
                    return false;
                }
                let first = parts.iter().position(|p| p.get("data").is_some()).unwrap_or(0);
                let keep = parts[first].clone();
                parts.retain(|p| p.get("data").is_none());
                parts.insert(0, keep);
                true
            }),
        ),
        Fault::BridgeIgnoresMessageSkill => Rewrite::new(
            post,
            JSONRPC,
            Sent(|v| {
                let metadata = v.pointer_mut("/params/message/metadata").and_then(Value::as_object_mut);
                metadata.and_then(|m| m.remove("skill")).is_some()
            }),
        ),
        Fault::BridgeIgnoresSender => Rewrite::new(post, JSONRPC, DropRequestHeader("a2a-sender-id")),
        Fault::BridgeServesFirstOfBatch => Rewrite::new(
            post,
            JSONRPC,
            Sent(|v| {
                let first = v.as_array().and_then(|b| b.first()).cloned();
                first.map(|f| *v = f).is_some()
            }),
        ),
        Fault::BridgeIgnoresMessageId => Rewrite::new(
            post,
            JSONRPC,
            Sent(|v| {
                // Every message reaches the bridge with a messageId of its own: no two share an Idempotency-Key.
                static SEEN: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
                let Some(id) = v.pointer_mut("/params/message/messageId") else { return false };
                let n = SEEN.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                *id = json!(format!("{}-{n}", id.as_str().unwrap_or("m")));
                true
            }),
        ),
        Fault::BridgeToMissing => {
            Rewrite::new(post, NEG, Answer(|_, v| v.as_object_mut().and_then(|o| o.remove("bridge_to")).is_some()))
        }
        _ => None,
    }
}

/// The faults of the A2A 1.x bridge (§20): their agent serves it, its card signed with its key.
fn bridge_fault(fault: Fault) -> bool {
    matches!(
        fault,
        Fault::CardWithoutCors
            | Fault::SkillWithoutTags
            | Fault::CardWithFalseMember
            | Fault::BridgeAnyVersion
            | Fault::BridgeErrorsWithoutInfo
            | Fault::BridgeTakesFirstDataPart
            | Fault::BridgeIgnoresMessageSkill
            | Fault::BridgeIgnoresSender
            | Fault::BridgeIgnoresMessageId
            | Fault::BridgeServesFirstOfBatch
            | Fault::HttpJsonNotServed
            | Fault::BridgeToMissing
            | Fault::CompletedTaskWithoutArtifact
            | Fault::StreamWithoutArtifactUpdate
            | Fault::SubscribeWithoutTask
            | Fault::HttpJsonStreamEnveloped
    )
}

/// Half the order of P-256, big-endian: a signature's `s` above it is "high" (JWS-4).
const HALF_N: [u8; 32] = [
    0x7f, 0xff, 0xff, 0xff, 0x80, 0x00, 0x00, 0x00, 0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xde, 0x73, 0x7d,
    0x56, 0xd3, 0x8b, 0xcf, 0x42, 0x79, 0xdc, 0xe5, 0x61, 0x7e, 0x31, 0x92, 0xa8,
];

/// Whether a compact JWS carries a 64-byte ES256 signature whose `s` is above `n/2`.
fn high_s(token: &str) -> bool {
    let Some(sig) = token.rsplit('.').next() else { return false };
    match jws::base64url_decode(sig) {
        Ok(b) if b.len() == 64 => b[32..] > HALF_N[..],
        _ => false,
    }
}

/// The known members of the request bodies TR-8 names, by path.
fn known_members(path: &str) -> Option<&'static [&'static str]> {
    match path {
        "/a2a/negotiate" => Some(&["target_capability", "proposed_schema", "timeout_ms", "strict"]),
        "/a2a/confirm" | "/a2a/cancel" => Some(&["execution_id"]),
        "/a2a/fallback" => Some(&["target_capability", "reason"]),
        _ => None,
    }
}

/// Rewrites the `id:` lines of an SSE chunk by `delta` (StreamIdsFromZero).
fn shift_event_ids(text: &str, delta: i64) -> String {
    text.split_inclusive('\n')
        .map(|line| match line.strip_prefix("id:").map(str::trim).and_then(|n| n.parse::<i64>().ok()) {
            Some(n) => format!("id: {}\n", n + delta),
            None => line.to_owned(),
        })
        .collect()
}

/// Adds a member to the data of a `result` event in an SSE chunk (StreamResultDiffers).
fn alter_result_event(text: &str) -> String {
    if !text.lines().any(|l| l.trim() == "event: result" || l.trim() == "event:result") {
        return text.to_owned();
    }
    text.split_inclusive('\n')
        .map(|line| {
            let Some(data) = line.strip_prefix("data:") else { return line.to_owned() };
            match serde_json::from_str::<Value>(data.trim()) {
                Ok(mut v) if v.is_object() => {
                    v["streamed"] = json!(true);
                    format!("data: {}\n", serde_json::to_string(&v).unwrap_or_default())
                }
                _ => line.to_owned(),
            }
        })
        .collect()
}

/// The body of an event stream rewritten whole event by whole event: `f` is given every complete event a frame
/// ends (up to its last blank line), and the bytes after it wait for the next frame, so an event written in two
/// frames (as a loaded agent may) is still rewritten as one.
fn map_stream(resp: Response, f: impl Fn(&str) -> String + Send + Sync + 'static) -> Response {
    let (mut parts, body) = resp.into_parts();
    parts.headers.remove("content-length");
    let held = Mutex::new(Vec::<u8>::new());
    let body = http_body_util::BodyExt::map_frame(body, move |frame| {
        frame.map_data(|d| {
            let mut held = held.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            held.extend_from_slice(&d);
            let Some(end) = held.windows(2).rposition(|w| w == b"\n\n").map(|i| i + 2) else {
                return bytes::Bytes::new();
            };
            let whole: Vec<u8> = held.drain(..end).collect();
            match std::str::from_utf8(&whole) {
                Ok(text) => bytes::Bytes::from(f(text)),
                Err(_) => bytes::Bytes::from(whole),
            }
        })
    });
    Response::from_parts(parts, Body::new(body))
}

/// A canonical form (RFC 8785, as `a2a_core::canonical` writes it) with one deliberate mistake, for the `Canon*`
/// faults; `None` when the body is not JSON.
fn buggy_canonical(fault: Fault, body: &[u8]) -> Option<Vec<u8>> {
    let v: Value = serde_json::from_slice(body).ok()?;
    let mut out = Vec::new();
    write_buggy(fault, &v, &mut out);
    Some(out)
}

fn write_buggy(fault: Fault, v: &Value, out: &mut Vec<u8>) {
    match v {
        Value::Bool(b) if fault == Fault::CanonLiteralsCapitalized => {
            out.extend(if *b { &b"True"[..] } else { &b"False"[..] });
        }
        Value::Null if fault == Fault::CanonLiteralsCapitalized => out.extend(b"None"),
        Value::Number(n) => match (fault, n.as_f64()) {
            (Fault::CanonNumbersAsRust, Some(f)) if !n.is_i64() && !n.is_u64() => out.extend(f.to_string().bytes()),
            (Fault::CanonNumbersRounded, Some(f)) => {
                let rounded: f64 = format!("{f:.14e}").parse().unwrap_or(f);
                a2a_core::canonical::write_canonical(&json!(rounded), out);
            }
            _ => a2a_core::canonical::write_canonical(v, out),
        },
        Value::String(text) => {
            let text =
                if fault == Fault::CanonNormalizesStrings { text.replace("e\u{301}", "\u{e9}") } else { text.clone() };
            let mut canon = Vec::new();
            a2a_core::canonical::write_canonical(&Value::String(text.clone()), &mut canon);
            let mut canon = String::from_utf8(canon).unwrap_or_default();
            match fault {
                Fault::CanonUpperCaseEscapes => {
                    for c in (0u8..0x20).map(char::from) {
                        let lower = format!("\\u{:04x}", c as u32);
                        canon = canon.replace(&lower, &lower.to_ascii_uppercase().replacen("\\U", "\\u", 1));
                    }
                }
                Fault::CanonSurrogatesEscaped => {
                    canon = canon
                        .chars()
                        .map(|c| {
                            if (c as u32) < 0x10000 {
                                return c.to_string();
                            }
                            let mut units = [0u16; 2];
                            c.encode_utf16(&mut units).iter().map(|u| format!("\\u{u:04x}")).collect()
                        })
                        .collect();
                }
                _ => {}
            }
            out.extend(canon.bytes());
        }
        Value::Array(items) => {
            let mut items: Vec<Vec<u8>> = items
                .iter()
                .map(|i| {
                    let mut b = Vec::new();
                    write_buggy(fault, i, &mut b);
                    b
                })
                .collect();
            if fault == Fault::CanonArraysSorted {
                items.sort();
            }
            out.push(b'[');
            out.extend(items.join(&b',')[..].iter());
            out.push(b']');
        }
        Value::Object(members) => {
            let mut keys: Vec<&String> = members.keys().collect();
            if fault != Fault::CanonKeysByCodePoint {
                keys.sort_by(|a, b| a.encode_utf16().cmp(b.encode_utf16()));
            }
            out.push(b'{');
            for (i, k) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_buggy(fault, &Value::String(k.clone()), out);
                out.push(b':');
                write_buggy(fault, &members[k], out);
            }
            out.push(b'}');
        }
        _ => a2a_core::canonical::write_canonical(v, out),
    }
}

/// The claims of a request's `payload_hash` signature, when it has one.
fn payload_hash_claims(headers: &HeaderMap) -> Option<SignatureClaims> {
    let jws = jws::decode_typed::<SignatureClaims>(header(headers, "a2a-signature")?).ok()?;
    let claims = jws.claims().clone();
    (claims.message_integrity.coverage == Coverage::PayloadHash && claims.message_integrity.body.is_some())
        .then_some(claims)
}

fn digest(bytes: &[u8]) -> String {
    jws::base64url_encode(<sha2::Sha256 as sha2::Digest>::digest(bytes))
}

/// A `Canon*` fault, `DigestOverRawBytes` and the refusing ones: what the agent answers a signed `payload_hash`
/// request whose digest is right (by RFC 8785) but not by its own mistaken reading, or `None` to serve it.
fn canon_refusal(state: &State, headers: &HeaderMap, body: &[u8]) -> Option<Response> {
    let claims = payload_hash_claims(headers)?;
    let want = claims.message_integrity.body.as_deref()?;
    let correct = a2a_core::canonical::canonicalize(body).ok()?;
    if digest(&correct) != want {
        return None; // the agent refuses it anyway
    }
    let text = String::from_utf8_lossy(body);
    let refuse_json = match state.fault {
        Fault::CanonRefusesNoncharacters => {
            text.contains("\\uFDD0") || text.contains("\\uFFFE") || text.contains('\u{fdd0}')
        }
        Fault::CanonRefusesSolidusEscape => text.contains("\\/"),
        _ => false,
    };
    if refuse_json {
        return Some(error_response(state, StatusCode::BAD_REQUEST, "invalid_json", "the body is not JSON"));
    }
    let mine = match state.fault {
        Fault::DigestOverRawBytes => body.to_vec(),
        Fault::CanonRefusesNoncharacters | Fault::CanonRefusesSolidusEscape => return None,
        f => buggy_canonical(f, body)?,
    };
    if digest(&mine) == want {
        return None;
    }
    let body = json!({"error": {"code": "integrity_mismatch", "message": "the body does not match the signature",
                                "details": {"mismatch": "body"}}});
    let mut out = (StatusCode::UNAUTHORIZED, axum::Json(body)).into_response();
    out.headers_mut().insert("a2a-version", HeaderValue::from_static("0.3"));
    if let Ok(did) = HeaderValue::from_str(&state.agent_did) {
        out.headers_mut().insert("a2a-sender-id", did);
    }
    Some(out)
}

/// What a faulty DID resolver does with one of the suite's deliberately wrong documents (`--serve-did`'s
/// `...:fault:<case>` DIDs).
#[derive(Clone, Copy, PartialEq, Eq)]
enum ResolverMistake {
    /// It accepts the caller (here: the request is served as if the caller's own valid identity had sent it).
    Accepts,
    /// It refuses with another error code than `did_resolution_failed`.
    Misnames,
    /// It refuses a document it must accept.
    Refuses,
}

/// The fault case (`didhost::FAULTS`) a resolver fault concerns, and what it does with it.
fn resolver_fault(fault: Fault) -> Option<(&'static str, ResolverMistake)> {
    match fault {
        Fault::ResolverAcceptsRsaKeys => Some(("rsa", ResolverMistake::Accepts)),
        Fault::ResolverAcceptsPrivateKeys => Some(("private", ResolverMistake::Accepts)),
        Fault::ResolverAcceptsKeyAgreementKeys => Some(("keyagreement", ResolverMistake::Accepts)),
        Fault::ResolverAcceptsOtherIds => Some(("mismatch", ResolverMistake::Accepts)),
        Fault::ResolverMisnamesNonJson => Some(("notjson", ResolverMistake::Misnames)),
        Fault::ResolverAcceptsHugeDocuments => Some(("huge", ResolverMistake::Accepts)),
        Fault::ResolverAcceptsManyMethods => Some(("toomany", ResolverMistake::Accepts)),
        Fault::ResolverAcceptsUntypedMethods => Some(("badmethod", ResolverMistake::Accepts)),
        Fault::ResolverFollowsRedirects => Some(("redirect", ResolverMistake::Accepts)),
        Fault::ResolverRefusesUnusedMembers => Some(("extras", ResolverMistake::Refuses)),
        _ => None,
    }
}

/// A did:web resolver that does not special-case DIDs without a path (DID-12): it appends `/did.json` to the joined
/// path segments, so `did:web:localhost%3A<port>` is looked up at `/did.json`. DIDs with a path resolve correctly.
struct NoWellKnown {
    inner: a2a_core::resolver::HttpResolver,
    client: reqwest::Client,
}

impl NoWellKnown {
    fn new() -> NoWellKnown {
        let inner =
            a2a_core::resolver::HttpResolver::new(a2a_core::resolver::ResolverOptions::loopback()).expect("resolver");
        NoWellKnown { inner, client: reqwest::Client::new() }
    }
}

#[async_trait::async_trait]
impl a2a_core::resolver::DidResolver for NoWellKnown {
    async fn resolve_key(
        &self,
        did: &str,
        key_id: &str,
    ) -> Result<a2a_core::keys::VerifyingKey, a2a_core::error::A2aError> {
        use a2a_core::error::ErrorCode;
        let failed = |m: String| a2a_core::error::A2aError::with_message(ErrorCode::DID_RESOLUTION_FAILED, m);
        let parsed = a2a_core::did::Did::parse(did).map_err(|e| failed(e.to_string()))?;
        if !parsed.path_segments().is_empty() {
            return self.inner.resolve_key(did, key_id).await;
        }
        let port = parsed.port().map_or_else(String::new, |p| format!(":{p}"));
        let url = format!("http://{}{port}/did.json", parsed.host());
        let resp = self.client.get(&url).send().await.map_err(|e| failed(format!("GET {url}: {e}")))?;
        if !resp.status().is_success() {
            return Err(failed(format!("GET {url} answered {}", resp.status())));
        }
        let body = resp.bytes().await.map_err(|e| failed(e.to_string()))?;
        let doc = a2a_core::did::DidDocument::parse(&body, &parsed).map_err(|e| failed(e.to_string()))?;
        let jwk = doc
            .find_signing_jwk(key_id)
            .map_err(|e| a2a_core::error::A2aError::with_message(e.code(), e.to_string()))?;
        a2a_core::keys::VerifyingKey::from_jwk(jwk)
            .map_err(|e| a2a_core::error::A2aError::with_message(e.code(), e.to_string()))
    }
}

/// A streaming RESULT's watch (DroppedStreamCancels): dropped before the stream's `result` event went out, it
/// CANCELs the execution, as an agent that ties the work to the caller's connection does (STR-12).
struct CancelOnDrop {
    ended: bool,
    base: String,
    id: String,
    sender: String,
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        if self.ended {
            return;
        }
        let Ok(rt) = tokio::runtime::Handle::try_current() else { return };
        let (url, sender) = (format!("{}/a2a/cancel", self.base), self.sender.clone());
        let body = json!({"execution_id": self.id}).to_string();
        rt.spawn(async move {
            let Ok(client) = reqwest::Client::builder().no_proxy().build() else { return };
            let _ = client
                .post(url)
                .header("A2A-Version", "0.3")
                .header("A2A-Sender-ID", sender)
                .header("Content-Type", "application/json")
                .body(body)
                .send()
                .await;
        });
    }
}

/// The issuer the oauth2 agent of OAuth2TokenUnverified is configured with (AUTH-3).
const OAUTH2_ISSUER: &str = "https://issuer.broken.example";

/// The oauth2 capability of OAuth2TokenUnverified's agent.
fn oauth2_capability() -> a2a_core::capability::CapabilityDeclaration {
    a2a_core::capability::CapabilityDeclaration {
        name: "read_private_report".into(),
        description: "Returns the report it is given; needs an OAuth 2.0 bearer token of the agent's issuer.".into(),
        auth_requirement: a2a_core::capability::AuthRequirement::Oauth2,
        sub_capabilities: vec![],
        region_restriction: vec![],
        input_schema: json!({"type": "object", "properties": {"topic": {"type": "string"}}, "required": ["topic"]}),
        output_schema: None,
        estimated_cost: None,
        estimated_latency_ms: None,
        fallback_for: vec![],
    }
}

/// What an agent that decodes bearer JWTs without verifying them accepts, written as a token the real check accepts:
/// an ES256 JWT, whoever signed it, with `iss` set to the configured issuer and signed again with the issuer's key
/// (AUTH-3). `None` for anything else (not a JWT, another `alg`: those are refused as before).
fn unverified_token(token: &str, issuer: &a2a_core::keys::SigningKey) -> Option<String> {
    use base64::Engine as _;
    let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    let mut it = token.split('.');
    let header: Value = serde_json::from_slice(&b64.decode(it.next()?).ok()?).ok()?;
    let mut claims: Value = serde_json::from_slice(&b64.decode(it.next()?).ok()?).ok()?;
    if header["alg"] != "ES256" || !claims.is_object() {
        return None;
    }
    claims["iss"] = json!(OAUTH2_ISSUER);
    let (h, c) = (serde_json::to_vec(&header).ok()?, serde_json::to_vec(&claims).ok()?);
    Some(a2a_conformance::identity::raw_token(issuer, &h, &c))
}

/// A did:web resolver that tries `https` first and, when that fails, fetches the document over `http` (DID-13: a
/// resolver never falls back from https to http): its https attempt is a TLS ClientHello sent to the document's
/// host and port, then the correct loopback resolver does the rest.
struct HttpsFirst {
    inner: a2a_core::resolver::HttpResolver,
}

impl HttpsFirst {
    fn new() -> HttpsFirst {
        let inner =
            a2a_core::resolver::HttpResolver::new(a2a_core::resolver::ResolverOptions::loopback()).expect("resolver");
        HttpsFirst { inner }
    }
}

/// The first bytes of a TLS 1.2/1.3 ClientHello: a handshake record (0x16), then the start of the message.
const CLIENT_HELLO_START: [u8; 11] = [0x16, 0x03, 0x01, 0x00, 0x2f, 0x01, 0x00, 0x00, 0x2b, 0x03, 0x03];

#[async_trait::async_trait]
impl a2a_core::resolver::DidResolver for HttpsFirst {
    async fn resolve_key(
        &self,
        did: &str,
        key_id: &str,
    ) -> Result<a2a_core::keys::VerifyingKey, a2a_core::error::A2aError> {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        if let Ok(parsed) = a2a_core::did::Did::parse(did) {
            let addr = (parsed.host().to_owned(), parsed.port().unwrap_or(443));
            let wait = std::time::Duration::from_secs(2);
            if let Ok(Ok(mut s)) = tokio::time::timeout(wait, tokio::net::TcpStream::connect(addr)).await {
                let _ = s.write_all(&CLIENT_HELLO_START).await;
                let mut answer = [0u8; 64];
                let _ = tokio::time::timeout(wait, s.read(&mut answer)).await;
            }
        }
        self.inner.resolve_key(did, key_id).await
    }
}

/// The capability the array faults' agent has beside the demo's: its `tags` are an array with `items`,
/// `uniqueItems` and `maxItems` (NEG-22, NEG-23, NEG-25).
const ARRAY_CAPABILITY: &str = "label_items";

/// The declaration of [`ARRAY_CAPABILITY`].
fn array_capability() -> a2a_core::capability::CapabilityDeclaration {
    a2a_core::capability::CapabilityDeclaration {
        name: ARRAY_CAPABILITY.into(),
        description: "Returns the labels it is given: at most 8, distinct, each at most 32 characters.".into(),
        auth_requirement: a2a_core::capability::AuthRequirement::None,
        sub_capabilities: vec![],
        region_restriction: vec![],
        input_schema: json!({"type": "object",
                             "properties": {"tags": {"type": "array", "items": {"type": "string", "maxLength": 32},
                                                     "uniqueItems": true, "maxItems": 8}},
                             "required": ["tags"]}),
        output_schema: None,
        estimated_cost: None,
        estimated_latency_ms: None,
        fallback_for: vec![],
    }
}

/// The faults whose agent has [`ARRAY_CAPABILITY`].
fn array_fault(fault: Fault) -> bool {
    matches!(fault, Fault::TightenKeepsProposedUniqueItems | Fault::TightenKeepsProposedItems)
}

/// Whether a conflict's path is at a numeric bound keyword (NEG-20).
fn bound_keyword(path: &str) -> bool {
    ["/minimum", "/maximum", "/exclusiveMinimum", "/exclusiveMaximum"].iter().any(|k| path.ends_with(k))
}

/// The schema keywords a `Tighten*` fault drops from the agreed schema wherever the proposal has them.
fn dropped_keywords(fault: Fault) -> Option<&'static [&'static str]> {
    match fault {
        Fault::TightenDropsEnum => Some(&["enum"]),
        Fault::TightenDropsConst => Some(&["const"]),
        Fault::TightenDropsLowerBound => Some(&["minimum", "exclusiveMinimum"]),
        Fault::TightenDropsUpperBound => Some(&["maximum", "exclusiveMaximum"]),
        Fault::TightenDropsMultipleOf => Some(&["multipleOf"]),
        Fault::TightenDropsLengths => Some(&["minLength", "maxLength"]),
        Fault::TightenDropsPattern => Some(&["pattern"]),
        Fault::TightenDropsAnnotations => Some(&["title", "description"]),
        Fault::TightenOpensClosedProposal => Some(&["additionalProperties"]),
        _ => None,
    }
}

/// The subschemas of a schema object (the values of `properties`, `items`, an `additionalProperties` schema).
fn subschemas(schema: &mut Value) -> Vec<&mut Value> {
    let Some(o) = schema.as_object_mut() else { return Vec::new() };
    let mut out = Vec::new();
    for (k, v) in o.iter_mut() {
        match k.as_str() {
            "properties" => out.extend(v.as_object_mut().into_iter().flat_map(|p| p.values_mut())),
            "items" | "additionalProperties" if v.is_object() => out.push(v),
            _ => {}
        }
    }
    out
}

/// Whether a schema (or one of its subschemas) has one of `keys` as a keyword.
fn has_keyword(schema: &Value, keys: &[&str]) -> bool {
    let mut copy = schema.clone();
    let here = schema.as_object().is_some_and(|o| keys.iter().any(|k| o.contains_key(*k)));
    here || subschemas(&mut copy).into_iter().any(|s| has_keyword(s, keys))
}

/// Removes `keys` from a schema and its subschemas.
fn drop_keywords(schema: &mut Value, keys: &[&str]) {
    if let Some(o) = schema.as_object_mut() {
        for k in keys {
            o.remove(*k);
        }
    }
    for s in subschemas(schema) {
        drop_keywords(s, keys);
    }
}

/// Rewrites a declaration as the `Declaration*` faults publish it; `false` for the other faults.
fn break_declaration(fault: Fault, d: &mut Value) -> bool {
    match fault {
        Fault::DeclarationWithUnknownMember => {
            d["probe_member"] = json!(1);
        }
        Fault::DeclarationWithNullRequired => {
            d["description"] = Value::Null;
        }
        Fault::BlankDescription => {
            d["description"] = json!("   ");
        }
        Fault::DeclarationWithoutAuthRequirement => {
            if let Some(o) = d.as_object_mut() {
                o.remove("auth_requirement");
            };
        }
        Fault::AuthRequirementCapitalized => {
            d["auth_requirement"] = json!("None");
        }
        Fault::InvalidRegionName => {
            d["region_restriction"] = json!(["eu west 1"]);
        }
        Fault::SubCapabilityOfItself => {
            d["sub_capabilities"] = json!([d["name"].clone()]);
        }
        Fault::NegativeCost => {
            d["estimated_cost"] = json!(-1);
        }
        Fault::FallbackForItself => {
            d["fallback_for"] = json!([d["name"].clone()]);
        }
        Fault::InputSchemaBreaksRules => {
            d["input_schema"]["properties"]["probe_nullable"] = json!({"type": "string", "nullable": true});
        }
        _ => return false,
    }
    true
}

/// The schema rule (`a2a_core::schema_rules` id) a `*Accepted`/`*Ignored` schema fault misses.
fn missed_rule(fault: Fault) -> Option<&'static str> {
    match fault {
        Fault::TypeNotAllowedAccepted => Some("type_not_allowed"),
        Fault::TypeMissingAccepted => Some("type_missing"),
        Fault::UndefinedRequiredAccepted => Some("required_not_defined"),
        Fault::FormatOnNonStringAccepted => Some("format_requires_string"),
        Fault::RefsAccepted => Some("ref_not_allowed"),
        Fault::UnknownKeywordsIgnored => Some("unknown_keyword"),
        Fault::EmptyBoundsAccepted => Some("invalid_keyword_value"),
        Fault::DepthUnbounded => Some("too_deep"),
        _ => None,
    }
}

/// The proposal as an agent that misses `rule` reads it: each violation of that rule (by the reference checker)
/// is taken away (the keyword dropped, a missing type read as `string`, a refused type as `string`).
fn without_violations(proposal: &Value, rule: &str) -> Option<Value> {
    let mut paths: Vec<String> =
        a2a_core::schema_rules::check(proposal).into_iter().filter(|v| v.rule == rule).map(|v| v.path).collect();
    if paths.is_empty() {
        return None;
    }
    paths.sort();
    let mut fixed = proposal.clone();
    for path in paths.into_iter().rev() {
        match rule {
            "type_missing" if !path.is_empty() => {
                if let Some(o) = fixed.pointer_mut(&path).and_then(Value::as_object_mut) {
                    o.insert("type".into(), json!("string"));
                }
            }
            "type_not_allowed" => {
                let at = if path.ends_with("/type") { path.clone() } else { format!("{path}/type") };
                if let Some(t) = fixed.pointer_mut(&at) {
                    *t = json!("string");
                }
            }
            _ => {
                let Some((parent, last)) = path.rsplit_once('/') else { continue };
                let last = last.replace("~1", "/").replace("~0", "~");
                match fixed.pointer_mut(parent) {
                    Some(Value::Object(o)) => {
                        o.remove(&last);
                    }
                    Some(Value::Array(a)) => {
                        if let Ok(i) = last.parse::<usize>()
                            && i < a.len()
                        {
                            a.remove(i);
                        }
                    }
                    _ => {}
                }
            }
        }
    }
    Some(fixed)
}

/// The `http://` URLs a JSON value holds as strings (FetchesReferences).
fn urls_in(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::String(s) if s.starts_with("http://") => out.push(s.clone()),
        Value::Array(a) => a.iter().for_each(|x| urls_in(x, out)),
        Value::Object(o) => o.values().for_each(|x| urls_in(x, out)),
        _ => {}
    }
}

/// The faults added after the first `breaker` arms (same contract: one fault each, everything else unchanged).
async fn more_faults(fault: Fault, state: Arc<State>, req: Request<Body>, next: Next) -> Response {
    let path = req.uri().path().to_owned();
    let method = req.method().clone();
    let result_path = method == Method::GET && path.starts_with("/a2a/result/");
    match fault {
        Fault::MissingVersionAccepted if method != Method::OPTIONS => {
            let mut req = req;
            if !req.headers().contains_key("a2a-version") {
                req.headers_mut().insert("a2a-version", HeaderValue::from_static("0.3"));
            }
            next.run(req).await
        }
        Fault::NegotiationIdHeaderMissing if method == Method::POST && path == "/a2a/negotiate" => {
            let mut resp = next.run(req).await;
            if resp.status() == StatusCode::OK {
                resp.headers_mut().remove("a2a-negotiation-id");
            }
            resp
        }
        Fault::NegotiationReplayed if method == Method::POST && path == "/a2a/negotiate" => {
            let (parts, body) = req.into_parts();
            let bytes = body_bytes(body).await;
            let key = format!(
                "{} {}",
                header(&parts.headers, "a2a-sender-id").unwrap_or(""),
                String::from_utf8_lossy(&bytes)
            );
            if let Some((status, headers, body)) = lock(&state.negotiations).get(&key).cloned() {
                let mut out = Response::new(Body::from(body));
                *out.status_mut() = status;
                *out.headers_mut() = headers;
                return out;
            }
            let resp = next.run(Request::from_parts(parts, Body::from(bytes))).await;
            let (parts, body) = resp.into_parts();
            let rbytes = body_bytes(body).await;
            if parts.status == StatusCode::OK {
                lock(&state.negotiations).insert(key, (parts.status, parts.headers.clone(), rbytes.clone()));
            }
            Response::from_parts(parts, Body::from(rbytes))
        }
        Fault::NegotiationSingleUse if method == Method::POST && path == "/a2a/execute" => {
            let neg = header(req.headers(), "a2a-negotiation-id").map(|n| n.trim().to_owned());
            if let Some(n) = &neg
                && lock(&state.used).contains(n)
            {
                return error_response(&state, StatusCode::NOT_FOUND, "unknown_negotiation", "negotiation used up");
            }
            let resp = next.run(req).await;
            if resp.status() == StatusCode::CREATED
                && let Some(n) = neg
            {
                lock(&state.used).insert(n);
            }
            resp
        }
        Fault::NegotiationsNotSenderScoped if method == Method::POST && path == "/a2a/execute" => {
            let (parts, body) = req.into_parts();
            let bytes = body_bytes(body).await;
            let headers = parts.headers.clone();
            let resp = next.run(Request::from_parts(parts, Body::from(bytes.clone()))).await;
            let (rparts, rbody) = resp.into_parts();
            let rbytes = body_bytes(rbody).await;
            let code = serde_json::from_slice::<Value>(&rbytes)
                .ok()
                .and_then(|v| v["error"]["code"].as_str().map(str::to_owned));
            if code.as_deref() == Some("unknown_negotiation")
                && let Some(r) = accept_anyway(&state, &headers, &bytes).await
            {
                return r;
            }
            Response::from_parts(rparts, Body::from(rbytes))
        }
        Fault::UnknownMembersIgnored if method == Method::POST && known_members(&path).is_some() => {
            let known = known_members(&path).unwrap_or(&[]);
            let req = edit_body(&state, req, |v| {
                let Some(o) = v.as_object_mut() else { return false };
                let before = o.len();
                o.retain(|k, _| known.contains(&k.as_str()));
                o.len() != before
            })
            .await;
            next.run(req).await
        }
        Fault::FallbackNotServed if path == "/a2a/fallback" && method != Method::OPTIONS => {
            error_response(&state, StatusCode::NOT_FOUND, "not_found", "no such endpoint")
        }
        Fault::DuplicateCapabilityName
            if method == Method::OPTIONS
                && path == "/a2a"
                && !req.headers().contains_key("access-control-request-method") =>
        {
            let mut resp = next.run(req).await;
            let names = header(resp.headers(), "a2a-capabilities")
                .and_then(|v| serde_json::from_str::<Vec<String>>(v).ok())
                .unwrap_or_default();
            if let Some(first) = names.first().cloned() {
                let mut names = names;
                names.push(first);
                if let Ok(v) = HeaderValue::from_str(&serde_json::to_string(&names).unwrap_or_default()) {
                    resp.headers_mut().insert("a2a-capabilities", v);
                }
            }
            resp
        }
        Fault::ResultTrustsIdSender if result_path && !req.headers().contains_key("a2a-signature") => {
            let mut req = req;
            let seg = path.trim_start_matches("/a2a/result/");
            let id = ExecutionId::parse(seg).or_else(|_| ExecutionId::from_path_segment(seg));
            if let Ok(id) = id
                && let Ok(v) = HeaderValue::from_str(id.sender().as_ref())
            {
                req.headers_mut().insert("a2a-sender-id", v);
            }
            next.run(req).await
        }
        Fault::ResultNotDecoded if result_path && path.contains('%') => {
            error_response(&state, StatusCode::NOT_FOUND, "unknown_execution", "no such execution")
        }
        Fault::HighSRefused if header(req.headers(), "a2a-signature").is_some_and(high_s) => {
            error_response(&state, StatusCode::UNAUTHORIZED, "signature_invalid", "the signature does not verify")
        }
        Fault::InvalidSignaturesAccepted | Fault::HeaderOnlyBodyAccepted => {
            let policy = if fault == Fault::InvalidSignaturesAccepted { Resign::Invalid } else { Resign::HeaderOnly };
            let (parts, body) = req.into_parts();
            let bytes = body_bytes(body).await;
            let mut req = Request::from_parts(parts, Body::from(bytes.clone()));
            if let Some(caller) = &state.caller {
                resign(&mut req, &bytes, caller, &state.agent_did, policy);
            }
            next.run(req).await
        }
        Fault::MismatchUnnamed => {
            let resp = next.run(req).await;
            edit_response(
                resp,
                |_, v| v["error"]["code"] == "integrity_mismatch",
                |v| {
                    if let Some(d) = v["error"]["details"].as_object_mut() {
                        d.remove("mismatch");
                        d.remove("header");
                    }
                },
            )
            .await
        }
        Fault::StreamIdsFromZero if result_path => {
            let mut req = req;
            let last = header(req.headers(), "last-event-id").and_then(|v| v.trim().parse::<u64>().ok());
            if let Some(v) = last.and_then(|l| HeaderValue::from_str(&(l + 1).to_string()).ok()) {
                req.headers_mut().insert("last-event-id", v);
            }
            let resp = next.run(req).await;
            if header(resp.headers(), "content-type") != Some("text/event-stream") {
                return resp;
            }
            map_stream(resp, |t| shift_event_ids(t, -1))
        }
        Fault::StreamResultDiffers if result_path => {
            let resp = next.run(req).await;
            if header(resp.headers(), "content-type") != Some("text/event-stream") {
                return resp;
            }
            map_stream(resp, alter_result_event)
        }
        Fault::LeadingZeroTimestamps | Fault::UppercaseIdSuffix | Fault::SuffixReused => {
            counter_ids(state.clone(), req, next).await
        }
        Fault::SenderDecodedInIds => decoded_sender_ids(state.clone(), req, next).await,
        Fault::QuotaWithoutRetryAfter => {
            let mut resp = next.run(req).await;
            if resp.status() == StatusCode::TOO_MANY_REQUESTS {
                resp.headers_mut().remove("retry-after");
            }
            resp
        }
        Fault::ExecuteDeduplicatedWithoutKey
            if method == Method::POST && path == "/a2a/execute" && !req.headers().contains_key("idempotency-key") =>
        {
            let (parts, body) = req.into_parts();
            let bytes = body_bytes(body).await;
            let key = format!(
                "{} {} {}",
                header(&parts.headers, "a2a-sender-id").unwrap_or("").trim(),
                header(&parts.headers, "a2a-negotiation-id").unwrap_or("").trim(),
                String::from_utf8_lossy(&bytes)
            );
            if let Some((status, headers, body)) = lock(&state.negotiations).get(&key).cloned() {
                let mut out = Response::new(Body::from(body));
                *out.status_mut() = status;
                *out.headers_mut() = headers;
                return out;
            }
            let resp = next.run(Request::from_parts(parts, Body::from(bytes))).await;
            let (parts, body) = resp.into_parts();
            let rbytes = body_bytes(body).await;
            if parts.status == StatusCode::CREATED {
                lock(&state.negotiations).insert(key, (parts.status, parts.headers.clone(), rbytes.clone()));
            }
            Response::from_parts(parts, Body::from(rbytes))
        }
        Fault::CanonKeysByCodePoint
        | Fault::CanonNumbersAsRust
        | Fault::CanonUpperCaseEscapes
        | Fault::CanonNormalizesStrings
        | Fault::CanonRefusesNoncharacters
        | Fault::CanonArraysSorted
        | Fault::CanonRefusesSolidusEscape
        | Fault::CanonSurrogatesEscaped
        | Fault::CanonNumbersRounded
        | Fault::CanonLiteralsCapitalized
        | Fault::DigestOverRawBytes
            if method == Method::POST =>
        {
            let (parts, body) = req.into_parts();
            let bytes = body_bytes(body).await;
            if let Some(refused) = canon_refusal(&state, &parts.headers, &bytes) {
                return refused;
            }
            next.run(Request::from_parts(parts, Body::from(bytes))).await
        }
        Fault::DuplicateMembersAccepted
        | Fault::LeadingZerosAccepted
        | Fault::DeepNestingAccepted
        | Fault::BomAccepted
            if method == Method::POST && req.headers().contains_key("a2a-signature") =>
        {
            // A lenient parser: the body is read as it understands it, and served as if that had been sent.
            let (mut parts, body) = req.into_parts();
            let bytes = body_bytes(body).await;
            let text = String::from_utf8_lossy(&bytes).into_owned();
            let deep = ("[".repeat(129), "]".repeat(129));
            let lenient = if fault == Fault::LeadingZerosAccepted {
                let fixed = text.replace(":01", ":1");
                (fixed != text).then_some(fixed)
            } else if fault == Fault::DeepNestingAccepted {
                // Read without a depth bound (here: the deep value as the parser would hold it, made shallow).
                text.contains(&deep.0).then(|| text.replace(&deep.0, "[").replace(&deep.1, "]"))
            } else if fault == Fault::BomAccepted {
                text.strip_prefix('\u{feff}').map(str::to_owned)
            } else {
                // serde_json keeps the last of a repeated member, as such a parser does.
                serde_json::from_str::<Value>(&text)
                    .ok()
                    .and_then(|v| serde_json::to_string(&v).ok())
                    .filter(|_| text.matches("\"probe_twice\"").count() > 1)
            };
            let Some(fixed) = lenient else {
                return next.run(Request::from_parts(parts, Body::from(bytes))).await;
            };
            parts.headers.remove("content-length");
            let mut req = Request::from_parts(parts, Body::from(fixed.clone()));
            if let Some(caller) = &state.caller {
                sign_anew(&mut req, fixed.as_bytes(), caller, &state.agent_did);
            }
            next.run(req).await
        }
        f if resolver_fault(f).is_some() => {
            let Some((case, mistake)) = resolver_fault(f) else { return next.run(req).await };
            let sender = header(req.headers(), "a2a-sender-id").unwrap_or("").trim().to_owned();
            if !sender.ends_with(&format!(":fault:{case}")) {
                return next.run(req).await;
            }
            match mistake {
                ResolverMistake::Accepts => {
                    let Some(caller) = &state.caller else { return next.run(req).await };
                    let (mut parts, body) = req.into_parts();
                    let bytes = body_bytes(body).await;
                    if let Ok(v) = HeaderValue::from_str(&caller.did) {
                        parts.headers.insert("a2a-sender-id", v);
                    }
                    let mut req = Request::from_parts(parts, Body::from(bytes.clone()));
                    sign_anew(&mut req, &bytes, caller, &state.agent_did);
                    next.run(req).await
                }
                ResolverMistake::Misnames => {
                    let resp = next.run(req).await;
                    edit_response(
                        resp,
                        |_, v| v["error"]["code"] == "did_resolution_failed",
                        |v| {
                            v["error"]["code"] = json!("unknown_key");
                        },
                    )
                    .await
                }
                ResolverMistake::Refuses => error_response(
                    &state,
                    StatusCode::UNAUTHORIZED,
                    "did_resolution_failed",
                    "the DID document is invalid",
                ),
            }
        }
        Fault::TightenAgreesEmptyRange if method == Method::POST && path == "/a2a/negotiate" => {
            // The agent merges the bounds (NEG-18, NEG-19) but never asks whether a number is left (NEG-20): it is
            // the correct agent answering the proposal without its conflicting bounds, with them put back into the
            // agreed schema.
            let (parts, body) = req.into_parts();
            let bytes = body_bytes(body).await;
            let sent = serde_json::from_slice::<Value>(&bytes).unwrap_or(Value::Null);
            let capability = sent["target_capability"].as_str().and_then(|c| state.caps.get(c)).cloned();
            let empty_range =
                capability.and_then(|c| match a2a_core::negotiation::tighten(&sent["proposed_schema"], &c) {
                    Err(conflicts) if conflicts.iter().all(|c| bound_keyword(&c.path)) => {
                        Some(conflicts.into_iter().map(|c| c.path).collect::<Vec<_>>())
                    }
                    _ => None,
                });
            let Some(paths) = empty_range else {
                return next.run(Request::from_parts(parts, Body::from(bytes))).await;
            };
            let mut relaxed = sent.clone();
            let mut put_back = Vec::new();
            for at in &paths {
                let (parent, key) = at.rsplit_once('/').unwrap_or(("", at));
                if let Some(o) = relaxed["proposed_schema"].pointer_mut(parent).and_then(Value::as_object_mut)
                    && let Some(value) = o.remove(key)
                {
                    put_back.push((parent.to_owned(), key.to_owned(), value));
                }
            }
            let body = serde_json::to_vec(&relaxed).unwrap_or_default();
            let mut parts = parts;
            parts.headers.remove("content-length");
            let mut req = Request::from_parts(parts, Body::from(body.clone()));
            if let Some(caller) = &state.caller {
                sign_anew(&mut req, &body, caller, &state.agent_did);
            }
            let resp = next.run(req).await;
            edit_response(
                resp,
                |st, _| st == StatusCode::OK,
                |v| {
                    for (parent, key, value) in put_back {
                        if let Some(o) = v["agreed_schema"].pointer_mut(&parent).and_then(Value::as_object_mut) {
                            o.insert(key.clone(), value);
                        }
                        let at = format!("{parent}/{key}");
                        if let Some(c) = v["changes"].as_array_mut() {
                            c.retain(|c| c["path"] != at.as_str());
                        }
                    }
                    v["tightened"] = json!(v["changes"].as_array().is_some_and(|c| !c.is_empty()));
                },
            )
            .await
        }
        f if method == Method::POST
            && path == "/a2a/negotiate"
            && (dropped_keywords(f).is_some()
                || matches!(
                    f,
                    Fault::TightenSkipsCapabilityRequired
                        | Fault::ChangesUnsorted
                        | Fault::ChangesWithoutMessage
                        | Fault::TightenKeepsNullable
                        | Fault::TightenDropsProposedProperties
                        | Fault::TightenKeepsProposedUniqueItems
                        | Fault::TightenKeepsProposedItems
                )) =>
        {
            let (parts, body) = req.into_parts();
            let bytes = body_bytes(body).await;
            let sent = serde_json::from_slice::<Value>(&bytes).unwrap_or(Value::Null);
            let proposal = sent["proposed_schema"].clone();
            let capability = sent["target_capability"].as_str().and_then(|c| state.caps.get(c)).cloned();
            let resp = next.run(Request::from_parts(parts, Body::from(bytes))).await;
            edit_response(
                resp,
                |st, _| st == StatusCode::OK,
                |v| match f {
                    Fault::TightenSkipsCapabilityRequired => {
                        if proposal.get("required").is_none()
                            && let Some(g) = v["agreed_schema"].as_object_mut()
                        {
                            g.remove("required");
                            if let Some(c) = v["changes"].as_array_mut() {
                                c.retain(|c| c["kind"] != "added_required");
                            }
                        }
                    }
                    Fault::ChangesUnsorted => {
                        if let Some(c) = v["changes"].as_array_mut() {
                            c.reverse();
                        }
                    }
                    Fault::ChangesWithoutMessage => {
                        for c in v["changes"].as_array_mut().into_iter().flatten() {
                            if let Some(o) = c.as_object_mut() {
                                o.remove("message");
                            }
                        }
                    }
                    Fault::TightenKeepsNullable => {
                        // The proposal's type is taken as it is wherever it admits null.
                        for (name, p) in proposal["properties"].as_object().into_iter().flatten() {
                            let nullable = p["type"].as_array().is_some_and(|t| t.iter().any(|x| x == "null"));
                            if nullable && v["agreed_schema"]["properties"][name].is_object() {
                                v["agreed_schema"]["properties"][name]["type"] = p["type"].clone();
                            }
                        }
                    }
                    Fault::TightenDropsProposedProperties => {
                        // Only the capability's own properties are kept (as if every capability were closed).
                        let Some(c) = &capability else { return };
                        let open = c.get("additionalProperties").is_none_or(|a| *a == true);
                        let own = c["properties"].as_object().cloned().unwrap_or_default();
                        if let (true, Some(g)) = (open, v["agreed_schema"]["properties"].as_object_mut()) {
                            g.retain(|name, _| own.contains_key(name));
                        }
                    }
                    Fault::TightenKeepsProposedUniqueItems | Fault::TightenKeepsProposedItems => {
                        // The proposal's keyword is taken as it is, and the change it would make is not reported.
                        let key = if f == Fault::TightenKeepsProposedItems { "items" } else { "uniqueItems" };
                        for (name, p) in proposal["properties"].as_object().into_iter().flatten() {
                            let g = &mut v["agreed_schema"]["properties"][name];
                            let (Some(own), true) = (p.get(key), g.get(key).is_some()) else { continue };
                            g[key] = own.clone();
                            let at = format!("/properties/{name}/{key}");
                            let below = format!("{at}/");
                            if let Some(c) = v["changes"].as_array_mut() {
                                c.retain(|c| c["path"].as_str().is_none_or(|p| p != at && !p.starts_with(&below)));
                            }
                            v["tightened"] = json!(v["changes"].as_array().is_some_and(|c| !c.is_empty()));
                        }
                    }
                    _ => {
                        let keys = dropped_keywords(f).unwrap_or(&[]);
                        if has_keyword(&proposal, keys) {
                            drop_keywords(&mut v["agreed_schema"], keys);
                        }
                    }
                },
            )
            .await
        }
        f if method == Method::GET && path == "/a2a/capabilities" && break_declaration(f, &mut json!({})) => {
            let resp = next.run(req).await;
            edit_response(
                resp,
                |st, _| st == StatusCode::OK,
                |v| {
                    if let Some(d) = v["capabilities"].get_mut(0) {
                        break_declaration(f, d);
                    }
                },
            )
            .await
        }
        Fault::IgnoresWaitChain if method == Method::POST && path == "/a2a/sessions/send" => {
            if !req.headers().contains_key("a2a-wait-chain") {
                return next.run(req).await;
            }
            let (mut parts, body) = req.into_parts();
            let bytes = body_bytes(body).await;
            parts.headers.remove("a2a-wait-chain");
            let mut req = Request::from_parts(parts, Body::from(bytes.clone()));
            if let Some(caller) = &state.caller {
                sign_anew(&mut req, &bytes, caller, &state.agent_did);
            }
            next.run(req).await
        }
        Fault::HistoryAcceptsLimitZero | Fault::HistoryWithoutTruncated
            if method == Method::GET && path.starts_with("/a2a/sessions/") && path.ends_with("/history") =>
        {
            let limit_zero = req.uri().query().is_some_and(|q| q.split('&').any(|p| p == "limit=0"));
            let resp = next.run(req).await;
            if fault == Fault::HistoryWithoutTruncated {
                return edit_response(
                    resp,
                    |st, _| st == StatusCode::OK,
                    |v| {
                        if let Some(o) = v.as_object_mut() {
                            o.remove("truncated");
                        }
                    },
                )
                .await;
            }
            if !limit_zero || resp.status() != StatusCode::BAD_REQUEST {
                return resp;
            }
            let (mut parts, _) = resp.into_parts();
            parts.status = StatusCode::OK;
            parts.headers.remove("content-length");
            let session = path.trim_start_matches("/a2a/sessions/").trim_end_matches("/history");
            let body =
                json!({"session": session, "messages": [], "truncated": true, "bytes_capped": false, "redacted": 0});
            Response::from_parts(parts, Body::from(serde_json::to_vec(&body).unwrap_or_default()))
        }
        Fault::ReplyFalseWaits | Fault::SendAcceptedAsOk if method == Method::POST && path == "/a2a/sessions/send" => {
            let (parts, body) = req.into_parts();
            let bytes = body_bytes(body).await;
            let sent: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
            let resp = next.run(Request::from_parts(parts, Body::from(bytes))).await;
            if fault == Fault::ReplyFalseWaits {
                if sent["reply"] == false
                    && let Some(ms) = sent["wait_ms"].as_u64()
                {
                    tokio::time::sleep(std::time::Duration::from_millis(ms.min(10_000))).await;
                }
                return resp;
            }
            let (mut parts, body) = resp.into_parts();
            let rbytes = body_bytes(body).await;
            let mut v: Value = serde_json::from_slice(&rbytes).unwrap_or(Value::Null);
            if parts.status != StatusCode::ACCEPTED || v["status"] != "accepted" {
                return Response::from_parts(parts, Body::from(rbytes));
            }
            v["status"] = json!("ok");
            parts.status = StatusCode::OK;
            parts.headers.remove("content-length");
            Response::from_parts(parts, Body::from(serde_json::to_vec(&v).unwrap_or_default()))
        }
        Fault::ProvenanceClaimsUser if method == Method::GET && path.ends_with("/inbox") => {
            let resp = next.run(req).await;
            edit_response(
                resp,
                |st, _| st == StatusCode::OK,
                |v| {
                    for d in v["deliveries"].as_array_mut().into_iter().flatten() {
                        if d["provenance"].is_object() {
                            d["provenance"]["is_user"] = json!(true);
                        }
                    }
                },
            )
            .await
        }
        Fault::EndedSessionStillListed if path == "/a2a/sessions" || path.starts_with("/a2a/sessions/") => {
            // Sessions as registered are remembered; an ended one is put back into every list that includes the
            // sender's own sessions (the agent "forgets" to drop it).
            let query = req.uri().query().unwrap_or("").to_owned();
            let is_list = method == Method::GET && path == "/a2a/sessions";
            let ended = (method == Method::DELETE).then(|| path.trim_start_matches("/a2a/sessions/").to_owned());
            let resp = next.run(req).await;
            if let Some(key) = ended {
                if resp.status() == StatusCode::OK {
                    lock(&state.used).insert(key);
                }
                return resp;
            }
            if method == Method::POST && path == "/a2a/sessions" {
                let (parts, body) = resp.into_parts();
                let rbytes = body_bytes(body).await;
                if let Ok(v) = serde_json::from_slice::<Value>(&rbytes)
                    && let Some(key) = v["session_key"].as_str()
                {
                    let entry = (StatusCode::OK, HeaderMap::new(), rbytes.clone());
                    lock(&state.negotiations).insert(key.to_owned(), entry);
                }
                return Response::from_parts(parts, Body::from(rbytes));
            }
            if !is_list || !query.contains("include_self=true") {
                return resp;
            }
            let ended: Vec<Value> = lock(&state.used)
                .iter()
                .filter(|k| query.contains(k.as_str()))
                .filter_map(|k| lock(&state.negotiations).get(k).and_then(|(_, _, b)| serde_json::from_slice(b).ok()))
                .collect();
            edit_response(
                resp,
                |st, _| st == StatusCode::OK,
                |v| {
                    if let Some(list) = v["sessions"].as_array_mut() {
                        for e in ended {
                            if !list.iter().any(|s| s["session_key"] == e["session_key"]) {
                                list.push(e);
                            }
                        }
                    }
                },
            )
            .await
        }
        f if method == Method::POST && path == "/a2a/negotiate" && missed_rule(f).is_some() => {
            let rule = missed_rule(f).unwrap_or("");
            let req =
                edit_body(&state, req, |v| match v.get("proposed_schema").and_then(|p| without_violations(p, rule)) {
                    Some(fixed) => {
                        v["proposed_schema"] = fixed;
                        true
                    }
                    None => false,
                })
                .await;
            next.run(req).await
        }
        Fault::ViolationsUnsorted
        | Fault::ViolationsWithExtraMember
        | Fault::ViolationsCapped32
        | Fault::RuleIdsRenamed
            if method == Method::POST && path == "/a2a/negotiate" =>
        {
            let resp = next.run(req).await;
            edit_response(
                resp,
                |_, v| v["error"]["code"] == "schema_rule_violation",
                |v| {
                    let Some(list) = v["error"]["details"]["violations"].as_array_mut() else { return };
                    match fault {
                        Fault::ViolationsUnsorted => list.reverse(),
                        Fault::ViolationsCapped32 => list.truncate(32),
                        Fault::ViolationsWithExtraMember => {
                            for x in list.iter_mut() {
                                x["severity"] = json!("error");
                            }
                        }
                        _ => {
                            for x in list.iter_mut().filter(|x| x["rule"] == "format_requires_string") {
                                x["rule"] = json!("format_not_string");
                            }
                        }
                    }
                },
            )
            .await
        }
        Fault::FetchesReferences if method == Method::POST => {
            let (parts, body) = req.into_parts();
            let bytes = body_bytes(body).await;
            let mut urls = Vec::new();
            if let Ok(v) = serde_json::from_slice::<Value>(&bytes) {
                urls_in(&v, &mut urls);
            }
            for url in urls {
                let _ = reqwest::Client::new().get(&url).timeout(std::time::Duration::from_secs(2)).send().await;
            }
            next.run(Request::from_parts(parts, Body::from(bytes))).await
        }
        Fault::IdempotencyBeforeValidation if method == Method::POST && path == "/a2a/execute" => {
            let key = header(req.headers(), "idempotency-key")
                .map(|k| format!("{} {}", header(req.headers(), "a2a-sender-id").unwrap_or("").trim(), k.trim()));
            if let Some(k) = &key
                && let Some((_, headers, body)) = lock(&state.negotiations).get(k).cloned()
            {
                let mut out = Response::new(Body::from(body));
                *out.headers_mut() = headers;
                out.headers_mut().remove("content-length");
                return out;
            }
            let resp = next.run(req).await;
            let (parts, body) = resp.into_parts();
            let rbytes = body_bytes(body).await;
            if parts.status == StatusCode::CREATED
                && let Some(k) = key
            {
                lock(&state.negotiations).insert(k, (parts.status, parts.headers.clone(), rbytes.clone()));
            }
            Response::from_parts(parts, Body::from(rbytes))
        }
        Fault::OptionsBelowIsDiscover
            if method == Method::OPTIONS
                && path.starts_with("/a2a/")
                && req.headers().contains_key("a2a-version")
                && !req.headers().contains_key("access-control-request-method") =>
        {
            let (mut parts, body) = req.into_parts();
            if let Ok(u) = "/a2a".parse::<axum::http::Uri>() {
                parts.extensions.insert(axum::extract::OriginalUri(u.clone()));
                parts.uri = u;
            }
            next.run(Request::from_parts(parts, body)).await
        }
        Fault::ResultConfirms if result_path => {
            let resp = next.run(req).await;
            if header(resp.headers(), "content-type") == Some("text/event-stream") {
                return resp;
            }
            let (parts, body) = resp.into_parts();
            let rbytes = body_bytes(body).await;
            let v: Value = serde_json::from_slice(&rbytes).unwrap_or(Value::Null);
            if v["status"] == "received"
                && let Some(id) = v["execution_id"].as_str()
            {
                lock(&state.used).insert(id.to_owned());
            }
            Response::from_parts(parts, Body::from(rbytes))
        }
        Fault::ResultConfirms if method == Method::POST && path == "/a2a/confirm" => {
            let resp = next.run(req).await;
            let (mut parts, body) = resp.into_parts();
            let rbytes = body_bytes(body).await;
            let mut v: Value = serde_json::from_slice(&rbytes).unwrap_or(Value::Null);
            let read = v["execution_id"].as_str().is_some_and(|id| lock(&state.used).contains(id));
            if parts.status != StatusCode::ACCEPTED || !read {
                return Response::from_parts(parts, Body::from(rbytes));
            }
            // The read confirmed it: this CONFIRM is answered as a repeated one.
            v["already_confirmed"] = json!(true);
            parts.status = StatusCode::OK;
            parts.headers.remove("content-length");
            Response::from_parts(parts, Body::from(serde_json::to_vec(&v).unwrap_or_default()))
        }
        Fault::ConfirmedShowsReceived if method == Method::POST && path == "/a2a/confirm" => {
            let resp = next.run(req).await;
            let (parts, body) = resp.into_parts();
            let rbytes = body_bytes(body).await;
            let v: Value = serde_json::from_slice(&rbytes).unwrap_or(Value::Null);
            if parts.status == StatusCode::ACCEPTED
                && let Some(id) = v["execution_id"].as_str()
            {
                lock(&state.used).insert(id.to_owned());
            }
            Response::from_parts(parts, Body::from(rbytes))
        }
        Fault::ConfirmedShowsReceived if result_path => {
            let resp = next.run(req).await;
            if header(resp.headers(), "content-type") == Some("text/event-stream") {
                return resp;
            }
            let st = &state;
            edit_response(
                resp,
                |status, v| {
                    status == StatusCode::OK && v["execution_id"].as_str().is_some_and(|id| lock(&st.used).remove(id))
                },
                |v| {
                    if let Some(o) = v.as_object_mut() {
                        o.remove("result");
                        o.remove("error");
                        o.insert("status".into(), json!("received"));
                    }
                },
            )
            .await
        }
        f if lenient_sender(f, &raw_sender(req.headers())).is_some() => {
            let mut req = req;
            let sender = raw_sender(req.headers());
            if let Some(v) = lenient_sender(f, &sender).and_then(|s| HeaderValue::from_str(&s).ok()) {
                req.headers_mut().insert("a2a-sender-id", v);
            }
            next.run(req).await
        }
        Fault::InvalidSenderWrongCode => {
            let resp = next.run(req).await;
            edit_response(
                resp,
                |_, v| v["error"]["code"] == "invalid_sender",
                |v| v["error"]["code"] = json!("invalid_request"),
            )
            .await
        }
        Fault::KidFragmentUnchecked
            if header(req.headers(), "a2a-signature").is_some_and(|t| {
                jws::decode(t).ok().and_then(|j| j.kid().map(str::to_owned)).is_some_and(|kid| {
                    kid.split_once('#').is_some_and(|(_, frag)| {
                        !frag.bytes().all(|b| b.is_ascii_alphanumeric() || b".-_~".contains(&b))
                    })
                })
            }) =>
        {
            // The key id is taken as it is and looked up: the caller's document has no such key.
            error_response(&state, StatusCode::UNAUTHORIZED, "unknown_key", "the DID document has no such key")
        }
        Fault::ResponseJtiReused => {
            let mut resp = next.run(req).await;
            let token = header(resp.headers(), "a2a-signature").map(str::to_owned);
            if let (Some(token), Some(key)) = (token, &state.agent_key)
                && let Ok(jws) = jws::decode_typed::<SignatureClaims>(&token)
            {
                let mut claims = jws.claims().clone();
                claims.jti = "conformance-fixed-jti-0000".into();
                if let Ok(t) = integrity::sign_claims(key, &claims)
                    && let Ok(v) = HeaderValue::from_str(&t)
                {
                    resp.headers_mut().insert("a2a-signature", v);
                }
            }
            resp
        }
        Fault::ApiKeyPrefixAccepted => {
            let mut req = req;
            let real = a2a_agent::demo::DEMO_API_KEY;
            let sent = header(req.headers(), "a2a-api-key").map(str::trim).unwrap_or("").to_owned();
            let zipped = !sent.is_empty() && sent != real && (real.starts_with(&sent) || sent.starts_with(real));
            if zipped {
                req.headers_mut().insert("a2a-api-key", HeaderValue::from_static(a2a_agent::demo::DEMO_API_KEY));
            }
            next.run(req).await
        }
        Fault::DuplicateDeclaration | Fault::SingleWordCapabilityName
            if (method == Method::OPTIONS && path == "/a2a")
                || (method == Method::GET && path == "/a2a/capabilities") =>
        {
            let resp = next.run(req).await;
            declarations_changed(fault, resp).await
        }
        Fault::PythonRecipeAccepted | Fault::BodyDigestIgnored | Fault::UnsignedHeaderAccepted
            if method == Method::POST && req.headers().contains_key("a2a-signature") =>
        {
            let (parts, body) = req.into_parts();
            let bytes = body_bytes(body).await;
            let mut req = Request::from_parts(parts, Body::from(bytes.clone()));
            if let Some(caller) = &state.caller
                && lets_integrity_pass(fault, req.headers(), &bytes, caller)
            {
                sign_anew(&mut req, &bytes, caller, &state.agent_did);
            }
            next.run(req).await
        }
        Fault::HttpJsonNotServed if path.starts_with("/a2a1x/") && path != "/a2a1x/jsonrpc" => {
            error_response(&state, StatusCode::NOT_FOUND, "not_found", "no such endpoint")
        }
        Fault::CompletedTaskWithoutArtifact if path.starts_with("/a2a1x/") => {
            let resp = next.run(req).await;
            if header(resp.headers(), "content-type") == Some("text/event-stream") {
                return resp;
            }
            edit_response(
                resp,
                |_, _| true,
                |v| {
                    for at in ["/result/task", "/result", "/task", ""] {
                        if let Some(task) = v.pointer_mut(at)
                            && task["status"]["state"] == "TASK_STATE_COMPLETED"
                            && let Some(o) = task.as_object_mut()
                        {
                            o.remove("artifacts");
                        }
                    }
                },
            )
            .await
        }
        Fault::StreamWithoutArtifactUpdate | Fault::SubscribeWithoutTask if path.starts_with("/a2a1x/") => {
            let (parts, body) = req.into_parts();
            let bytes = body_bytes(body).await;
            let subscribe = path.ends_with(":subscribe")
                || serde_json::from_slice::<Value>(&bytes).is_ok_and(|v| v["method"] == "SubscribeToTask");
            let resp = next.run(Request::from_parts(parts, Body::from(bytes))).await;
            if header(resp.headers(), "content-type") != Some("text/event-stream") {
                return resp;
            }
            if fault == Fault::StreamWithoutArtifactUpdate {
                map_stream(resp, |t| drop_events(t, |data| data.contains("\"artifactUpdate\"")))
            } else if subscribe {
                map_stream(resp, |t| {
                    drop_events(t, |data| data.contains("\"result\":{\"task\":") || data.starts_with("{\"task\":"))
                })
            } else {
                resp
            }
        }
        Fault::RefusalRevealsIds if !req.headers().contains_key("a2a-signature") => {
            // The id is looked up before the credentials are checked.
            let known = if result_path {
                let id = percent_decode(path.trim_start_matches("/a2a/result/"));
                state.store.get_execution(&id).await.ok().flatten().is_some()
            } else if method == Method::POST && path == "/a2a/execute" {
                let id = header(req.headers(), "a2a-negotiation-id").unwrap_or("").trim().to_owned();
                state.store.get_negotiation(&id).await.ok().flatten().is_some()
            } else {
                false
            };
            if known {
                return error_response(
                    &state,
                    StatusCode::UNAUTHORIZED,
                    "signature_required",
                    "this step needs an A2A-Signature",
                );
            }
            next.run(req).await
        }
        Fault::DroppedStreamCancels if result_path && header(req.headers(), "a2a-stream") == Some("true") => {
            let id = percent_decode(path.trim_start_matches("/a2a/result/"));
            let sender = header(req.headers(), "a2a-sender-id").unwrap_or("").to_owned();
            let resp = next.run(req).await;
            if !header(resp.headers(), "content-type").is_some_and(|c| c.starts_with("text/event-stream")) {
                return resp;
            }
            let guard = CancelOnDrop { ended: false, base: state.base.clone(), id, sender };
            let (parts, body) = resp.into_parts();
            // The stream owns the watch, and writes a comment every 100 ms so that a caller gone is noticed (as an
            // agent with a short heartbeat notices it): the watch is dropped when the stream ends or the caller goes.
            let frames = futures_util::stream::unfold(
                (http_body_util::BodyStream::new(body), guard),
                |(mut body, mut guard)| async move {
                    use futures_util::StreamExt as _;
                    tokio::select! {
                        f = body.next() => match f {
                            Some(Ok(frame)) => {
                                let d = frame.into_data().unwrap_or_default();
                                if d.windows(13).any(|w| w == b"event: result")
                                    || d.windows(12).any(|w| w == b"event:result")
                                {
                                    guard.ended = true;
                                }
                                Some((Ok(d), (body, guard)))
                            }
                            Some(Err(e)) => Some((Err(e), (body, guard))),
                            None => {
                                guard.ended = true;
                                drop(guard);
                                None
                            }
                        },
                        () = tokio::time::sleep(std::time::Duration::from_millis(100)) => {
                            Some((Ok(bytes::Bytes::from_static(b": ping\n\n")), (body, guard)))
                        }
                    }
                },
            );
            Response::from_parts(parts, Body::from_stream(frames))
        }
        Fault::CorsOriginHeadersAlways
            if method == Method::OPTIONS && path == "/a2a" && !req.headers().contains_key("origin") =>
        {
            let mut resp = next.run(req).await;
            let h = resp.headers_mut();
            h.insert("access-control-allow-origin", HeaderValue::from_static("*"));
            h.insert(
                "access-control-expose-headers",
                HeaderValue::from_static(
                    "A2A-Version, A2A-Sender-ID, A2A-Capabilities, A2A-Region, A2A-Negotiation-ID, A2A-Execution-ID, \
                     A2A-Signature, Location, Retry-After",
                ),
            );
            resp
        }
        Fault::HttpJsonStreamEnveloped if method == Method::POST && path == "/a2a1x/message:stream" => {
            let resp = next.run(req).await;
            if header(resp.headers(), "content-type") != Some("text/event-stream") {
                return resp;
            }
            map_stream(resp, |text| {
                text.split_inclusive('\n')
                    .map(|line| match line.strip_prefix("data:") {
                        Some(d) => format!("data: {{\"jsonrpc\":\"2.0\",\"id\":null,\"result\":{}}}\n", d.trim()),
                        None => line.to_owned(),
                    })
                    .collect()
            })
        }
        Fault::TrailingContentIgnored if method == Method::POST && !req.headers().contains_key("a2a-signature") => {
            // A streaming parser that stops after the first value.
            let (mut parts, body) = req.into_parts();
            let bytes = body_bytes(body).await;
            let first = serde_json::Deserializer::from_slice(&bytes).into_iter::<Value>().next();
            let body = match first {
                Some(Ok(v)) if serde_json::from_slice::<Value>(&bytes).is_err() => {
                    parts.headers.remove("content-length");
                    serde_json::to_vec(&v).unwrap_or_default()
                }
                _ => bytes,
            };
            next.run(Request::from_parts(parts, Body::from(body))).await
        }
        Fault::ForgetsTerminalAfterRead if result_path => {
            let resp = next.run(req).await;
            if header(resp.headers(), "content-type") == Some("text/event-stream") {
                return resp;
            }
            let (parts, body) = resp.into_parts();
            let bytes = body_bytes(body).await;
            let v: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
            let terminal = matches!(v["status"].as_str(), Some("succeeded" | "failed" | "timed_out" | "canceled"));
            if let (true, Some(id)) = (terminal, v["execution_id"].as_str())
                && !lock(&state.used).insert(id.to_owned())
            {
                return error_response(&state, StatusCode::NOT_FOUND, "unknown_execution", "no such execution");
            }
            Response::from_parts(parts, Body::from(bytes))
        }
        Fault::DecodesValidSegment | Fault::IdParsedFromLeft if result_path => {
            let seg = path.trim_start_matches("/a2a/result/").to_owned();
            let id = ExecutionId::parse(&seg).ok().or_else(|| ExecutionId::from_path_segment(&seg).ok());
            match (fault, id) {
                (Fault::IdParsedFromLeft, Some(id)) if id.sender().as_str().contains('_') => {
                    // sender_ts_suffix split at the first `_`: the DID is cut short and the id is no id.
                    error_response(&state, StatusCode::NOT_FOUND, "unknown_execution", "no such execution")
                }
                (Fault::DecodesValidSegment, Some(_)) if ExecutionId::parse(&seg).is_ok() && seg.contains('%') => {
                    let (mut parts, body) = req.into_parts();
                    let decoded = format!("/a2a/result/{}", percent_decode(&seg));
                    let query = parts.uri.query().map(|q| format!("?{q}")).unwrap_or_default();
                    if let Ok(u) = format!("{decoded}{query}").parse::<axum::http::Uri>() {
                        parts.extensions.insert(axum::extract::OriginalUri(u.clone()));
                        parts.uri = u;
                    }
                    next.run(Request::from_parts(parts, body)).await
                }
                _ => next.run(req).await,
            }
        }
        Fault::SendUnknownMembersIgnored if method == Method::POST && path == "/a2a/sessions/send" => {
            const KNOWN: &[&str] = &[
                "target",
                "target_label",
                "text",
                "from",
                "from_endpoint",
                "reply",
                "announce",
                "wait_ms",
                "run_timeout_ms",
                "max_turns",
                "attachments",
                "metadata",
                "priority",
                "context_mode",
                "context",
                "trace_id",
                "max_tokens",
            ];
            let req = edit_body(&state, req, |v| {
                let Some(o) = v.as_object_mut() else { return false };
                let before = o.len();
                o.retain(|k, _| KNOWN.contains(&k.as_str()));
                o.len() != before
            })
            .await;
            next.run(req).await
        }
        Fault::SessionErrorsPlainText if path.starts_with("/a2a/sessions") => {
            let resp = next.run(req).await;
            let (mut parts, body) = resp.into_parts();
            let bytes = body_bytes(body).await;
            let code = serde_json::from_slice::<Value>(&bytes).ok().map(|v| v["error"]["code"].clone());
            if code.is_none_or(|c| c != "invalid_json") {
                return Response::from_parts(parts, Body::from(bytes));
            }
            parts.headers.insert("content-type", HeaderValue::from_static("text/plain; charset=utf-8"));
            parts.headers.remove("content-length");
            Response::from_parts(parts, Body::from("Failed to parse the request body as JSON"))
        }
        Fault::IncludeSelfIgnored if path == "/a2a/sessions" => {
            // The sessions each sender registered are remembered, and put back into its lists without include_self.
            let sender = header(req.headers(), "a2a-sender-id").unwrap_or("").trim().to_owned();
            let listing = method == Method::GET && !req.uri().query().unwrap_or("").contains("include_self=true");
            let resp = next.run(req).await;
            if method == Method::POST {
                let (parts, body) = resp.into_parts();
                let rbytes = body_bytes(body).await;
                if let Ok(v) = serde_json::from_slice::<Value>(&rbytes)
                    && let Some(key) = v["session_key"].as_str()
                {
                    let entry = (StatusCode::OK, HeaderMap::new(), rbytes.clone());
                    lock(&state.negotiations).insert(format!("{sender} {key}"), entry);
                }
                return Response::from_parts(parts, Body::from(rbytes));
            }
            if !listing {
                return resp;
            }
            let own: Vec<Value> = lock(&state.negotiations)
                .iter()
                .filter(|(k, _)| k.starts_with(&format!("{sender} ")))
                .filter_map(|(_, (_, _, b))| serde_json::from_slice(b).ok())
                .collect();
            edit_response(
                resp,
                |st, _| st == StatusCode::OK,
                |v| {
                    if let Some(list) = v["sessions"].as_array_mut() {
                        for s in own {
                            if !list.iter().any(|x| x["session_key"] == s["session_key"]) {
                                list.push(s);
                            }
                        }
                    }
                },
            )
            .await
        }
        Fault::AnnounceWithoutInstruction if method == Method::GET && path.ends_with("/inbox") => {
            let resp = next.run(req).await;
            edit_response(
                resp,
                |st, _| st == StatusCode::OK,
                |v| {
                    for d in v["deliveries"].as_array_mut().into_iter().flatten() {
                        if d["step"] == "announce"
                            && let Some(o) = d.as_object_mut()
                        {
                            o.remove("instruction");
                        }
                    }
                },
            )
            .await
        }
        Fault::AnnounceEventWithoutProvenance if method == Method::GET && path == "/a2a/events" => {
            let resp = next.run(req).await;
            if header(resp.headers(), "content-type") != Some("text/event-stream") {
                return resp;
            }
            map_stream(resp, |t| {
                if !t.lines().any(|l| l.trim() == "event: announce" || l.trim() == "event:announce") {
                    return t.to_owned();
                }
                t.split_inclusive('\n')
                    .map(|line| match line.strip_prefix("data:").map(|d| serde_json::from_str::<Value>(d.trim())) {
                        Some(Ok(mut v)) if v.get("provenance").is_some() => {
                            if let Some(o) = v.as_object_mut() {
                                o.remove("provenance");
                            }
                            format!("data: {}\n", serde_json::to_string(&v).unwrap_or_default())
                        }
                        _ => line.to_owned(),
                    })
                    .collect()
            })
        }
        Fault::EventsWithoutConnected if method == Method::GET && path == "/a2a/events" => {
            let resp = next.run(req).await;
            if header(resp.headers(), "content-type") != Some("text/event-stream") {
                return resp;
            }
            map_stream(resp, |t| t.split_inclusive('\n').filter(|l| l.trim() != ": connected").collect())
        }
        Fault::TwoSignaturesAccepted if req.headers().get_all("a2a-signature").iter().count() > 1 => {
            let mut req = req;
            if let Some(first) = req.headers().get("a2a-signature").cloned() {
                req.headers_mut().insert("a2a-signature", first);
            }
            next.run(req).await
        }
        Fault::IdempotencyIgnoresPayload | Fault::IdempotencyComparesBytes | Fault::IdempotencyKeyNotSenderScoped
            if method == Method::POST && path == "/a2a/execute" && req.headers().contains_key("idempotency-key") =>
        {
            let (mut parts, body) = req.into_parts();
            let bytes = body_bytes(body).await;
            let field = |name: &str| header(&parts.headers, name).unwrap_or("").trim().to_owned();
            let (key, sender, neg) = (field("idempotency-key"), field("a2a-sender-id"), field("a2a-negotiation-id"));
            let seen = lock(&state.keys).get(&key).cloned();
            let Some((first_sender, first_neg, first_body)) = seen else {
                lock(&state.keys).insert(key, (sender, neg, bytes.clone()));
                return next.run(Request::from_parts(parts, Body::from(bytes))).await;
            };
            let conflict = |why: &str| error_response(&state, StatusCode::CONFLICT, "idempotency_conflict", why);
            let same_use = first_sender == sender && first_neg == neg;
            // The key is looked up once the payload is valid (EXE-9 is kept).
            let agreed = state.store.get_negotiation(&neg).await.ok().flatten().map(|n| n.agreed_schema.clone());
            let payload = serde_json::from_slice::<Value>(&bytes).unwrap_or(Value::Null);
            let valid = agreed
                .and_then(|g| a2a_core::negotiation::AgreedSchema::compile(&g).ok())
                .is_some_and(|g| g.is_valid(&payload));
            match fault {
                Fault::IdempotencyKeyNotSenderScoped if first_sender != sender && valid => {
                    return conflict("this Idempotency-Key was used with another negotiation");
                }
                Fault::IdempotencyComparesBytes if same_use && first_body != bytes && valid => {
                    return conflict("this Idempotency-Key was used with another payload");
                }
                Fault::IdempotencyIgnoresPayload if same_use && first_body != bytes && valid => {
                    // The record of (sender, key, negotiation) answers.
                    parts.headers.remove("content-length");
                    let mut req = Request::from_parts(parts, Body::from(first_body.clone()));
                    if let Some(caller) = &state.caller {
                        sign_anew(&mut req, &first_body, caller, &state.agent_did);
                    }
                    return next.run(req).await;
                }
                _ => {}
            }
            next.run(Request::from_parts(parts, Body::from(bytes))).await
        }
        Fault::ChangesInReceivedOrder if method == Method::POST && path == "/a2a/negotiate" => {
            let (parts, body) = req.into_parts();
            let bytes = body_bytes(body).await;
            let text = String::from_utf8_lossy(&bytes);
            let reordered = matches!(
                (text.find("\"target_capability\""), text.find("\"proposed_schema\"")),
                (Some(t), Some(p)) if t < p
            );
            let resp = next.run(Request::from_parts(parts, Body::from(bytes))).await;
            if !reordered {
                return resp;
            }
            edit_response(
                resp,
                |st, _| st == StatusCode::OK,
                |v| {
                    if let Some(c) = v["changes"].as_array_mut() {
                        c.reverse();
                    }
                },
            )
            .await
        }
        Fault::HonoursUntrustedForwardedSender if req.headers().contains_key("a2a-forwarded-sender") => {
            let mut req = req;
            if let Some(v) = req.headers_mut().remove("a2a-forwarded-sender") {
                req.headers_mut().insert("a2a-sender-id", v);
            }
            req.headers_mut().remove("a2a-forwarded-verified");
            next.run(req).await
        }
        Fault::OAuth2TokenUnverified if req.headers().contains_key("authorization") => {
            let mut req = req;
            let token =
                header(req.headers(), "authorization").and_then(|v| v.strip_prefix("Bearer ")).map(str::to_owned);
            let accepted = token
                .zip(state.other_key.as_ref())
                .and_then(|(t, issuer)| unverified_token(&t, issuer))
                .and_then(|t| HeaderValue::from_str(&format!("Bearer {t}")).ok());
            if let Some(v) = accepted {
                req.headers_mut().insert("authorization", v);
            }
            next.run(req).await
        }
        Fault::WaitsOnItself
            if method == Method::POST
                && path == "/a2a/sessions/send"
                && header(req.headers(), "a2a-sender-id") == Some(state.agent_did.as_str()) =>
        {
            let req = edit_body(&state, req, |v| {
                let waits = v["wait_ms"].as_u64().is_some_and(|w| w > 0);
                if waits && v["from"].is_string() && v["from"] == v["target"] {
                    v["wait_ms"] = json!(0);
                    true
                } else {
                    false
                }
            })
            .await;
            next.run(req).await
        }
        f if lenient_verifier(f) => {
            let mut req = req;
            let fixed = header(req.headers(), "a2a-signature")
                .zip(state.caller.as_ref())
                .and_then(|(token, caller)| leniently_verified(f, token, caller, &state.agent_did))
                .and_then(|t| HeaderValue::from_str(&t).ok());
            if let Some(v) = fixed {
                req.headers_mut().insert("a2a-signature", v);
            }
            next.run(req).await
        }
        _ => next.run(req).await,
    }
}

/// The faults of a verifier that lets one wrong thing in a token pass ([`leniently_verified`]).
fn lenient_verifier(fault: Fault) -> bool {
    matches!(
        fault,
        Fault::AudienceCaseInsensitive
            | Fault::AudienceArrayAccepted
            | Fault::KeyFromEmbeddedJwk
            | Fault::UnknownKeyFallsBack
            | Fault::StatusClaimAccepted
    )
}

/// The header and claims of a compact JWS, when its 64-byte signature verifies with `key`.
fn verified_raw(token: &str, key: &a2a_core::keys::VerifyingKey) -> Option<(Value, Value)> {
    let mut segs = token.trim().split('.');
    let (h, c, sig) = (segs.next()?, segs.next()?, segs.next()?);
    if segs.next().is_some() {
        return None;
    }
    key.verify(format!("{h}.{c}").as_bytes(), &jws::base64url_decode(sig).ok()?).ok()?;
    let json = |seg: &str| serde_json::from_slice::<Value>(&jws::base64url_decode(seg).ok()?).ok();
    Some((json(h)?, json(c)?))
}

/// What a lenient verifier makes of a caller's token: the one thing it lets pass (an `aud` of another case, an
/// `aud` array, a key embedded as `jwk`) taken as right, and the token signed afresh as the caller would have signed
/// it right, so that the agent serves the request; `None` when the token has nothing the fault lets pass.
fn leniently_verified(
    fault: Fault,
    token: &str,
    caller: &a2a_conformance::identity::Identity,
    agent_did: &str,
) -> Option<String> {
    let (h, mut c) = match fault {
        Fault::KeyFromEmbeddedJwk => {
            let (h, _) = verified_raw(token, caller.key.verifying_key())?;
            let key = a2a_core::keys::VerifyingKey::from_jwk(h.get("jwk")?).ok()?;
            verified_raw(token, &key)?
        }
        _ => verified_raw(token, caller.key.verifying_key())?,
    };
    let kid = h["kid"].as_str().unwrap_or("");
    let own_kid = kid == caller.kid();
    // UnknownKeyFallsBack: another key id of the caller's DID, verified with the key the document has.
    let other_key_id = kid.split_once('#').is_some_and(|(did, frag)| {
        did == caller.did && !frag.is_empty() && frag.bytes().all(|b| b.is_ascii_alphanumeric() || b".-_~".contains(&b))
    }) && !own_kid;
    // Each fault lets exactly one wrong thing pass; a token without it is left to the agent.
    let aud = c["aud"].clone();
    let lets_pass = match fault {
        Fault::UnknownKeyFallsBack => other_key_id,
        Fault::AudienceCaseInsensitive => {
            own_kid && aud.as_str().is_some_and(|a| a != agent_did && a.eq_ignore_ascii_case(agent_did))
        }
        Fault::AudienceArrayAccepted => own_kid && aud.as_array().is_some_and(|a| a.iter().any(|x| x == agent_did)),
        Fault::StatusClaimAccepted => own_kid && c.get("sts").is_some_and(|s| !s.is_null()),
        _ => own_kid,
    };
    if !lets_pass {
        return None;
    }
    if fault == Fault::StatusClaimAccepted
        && let Some(o) = c.as_object_mut()
    {
        // The claim a request signature must not carry is read past (INT-13).
        o.remove("sts");
    }
    if fault == Fault::UnknownKeyFallsBack {
        c["message_integrity"]["key_id"] = json!(caller.key_id);
    }
    c["aud"] = json!(agent_did);
    let claims: SignatureClaims = serde_json::from_value(c).ok()?;
    integrity::sign_claims(&caller.key, &claims).ok().map(|t| a2a_conformance::identity::low_s(&t))
}

/// `A2A-Sender-ID` as UTF-8 (a header value need not be ASCII: DID-6's probe is not).
fn raw_sender(headers: &HeaderMap) -> String {
    headers.get("a2a-sender-id").map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned()).unwrap_or_default()
}

/// The sender a lenient DID parser serves in place of `sender`, when the fault lets it pass: a valid stand-in for the
/// DIDs it should refuse (DID-1..DID-8), the DID without its default port (DID-9); `None` otherwise.
fn lenient_sender(fault: Fault, sender: &str) -> Option<String> {
    const STAND_IN: &str = "did:web:lenient-parser.example";
    let sender = sender.trim();
    let rest = sender.strip_prefix("did:web:");
    let host = rest.map(|r| r.split(':').next().unwrap_or("").split("%3").next().unwrap_or(""));
    let lets_pass = match fault {
        Fault::SenderAnyMethod => sender.starts_with("did:") && rest.is_none(),
        Fault::SenderLeadingZeroPort => sender.contains("%3A0"),
        Fault::SenderHostCaseFolded => host.is_some_and(|h| h.bytes().any(|b| b.is_ascii_uppercase())),
        Fault::SenderIpHost => host.is_some_and(|h| {
            h.rsplit('.').next().is_some_and(|l| !l.is_empty() && l.bytes().all(|b| b.is_ascii_digit()))
        }),
        Fault::SenderSingleLabelHost => host.is_some_and(|h| !h.is_empty() && !h.contains('.') && h != "localhost"),
        Fault::SenderUnicodeHost => host.is_some_and(|h| !h.is_ascii()),
        Fault::SenderLowerCasePercent => sender.contains("%3a"),
        Fault::SenderTooLong => sender.len() > 512,
        Fault::SenderDefaultPortDropped => {
            return rest
                .is_some_and(|r| r.split(':').next().is_some_and(|h| h.ends_with("%3A443")))
                .then(|| sender.replacen("%3A443", "", 1));
        }
        _ => return None,
    };
    lets_pass.then(|| STAND_IN.to_owned())
}

/// The SSE events of a chunk without those whose `data` matches `drop`.
fn drop_events(text: &str, drop: impl Fn(&str) -> bool) -> String {
    text.split_inclusive("\n\n")
        .filter(|event| !event.lines().any(|l| l.strip_prefix("data:").is_some_and(|d| drop(d.trim()))))
        .collect()
}

/// DISCOVER's `A2A-Capabilities` and the capabilities document with the first capability declared twice
/// (DuplicateDeclaration) or named by its first word (SingleWordCapabilityName).
async fn declarations_changed(fault: Fault, resp: Response) -> Response {
    let rename = |name: &str| name.split('_').next().unwrap_or(name).to_owned();
    let mut resp = resp;
    let names = header(resp.headers(), "a2a-capabilities").and_then(|v| serde_json::from_str::<Vec<String>>(v).ok());
    if let Some(mut names) = names.filter(|n| !n.is_empty()) {
        if fault == Fault::DuplicateDeclaration {
            names.push(names[0].clone());
        } else {
            names[0] = rename(&names[0]);
        }
        if let Ok(v) = HeaderValue::from_str(&serde_json::to_string(&names).unwrap_or_default()) {
            resp.headers_mut().insert("a2a-capabilities", v);
        }
        return resp;
    }
    edit_response(
        resp,
        |st, v| st == StatusCode::OK && v["capabilities"].as_array().is_some_and(|c| !c.is_empty()),
        |v| {
            let Some(caps) = v["capabilities"].as_array_mut() else { return };
            if fault == Fault::DuplicateDeclaration {
                let first = caps[0].clone();
                caps.push(first);
            } else {
                let name = rename(caps[0]["name"].as_str().unwrap_or(""));
                caps[0]["name"] = json!(name);
            }
        },
    )
    .await
}

/// Whether an integrity fault lets a caller's signed request pass that the agent must refuse: its signature
/// verifies with the caller's key and is wrong only in what the fault does not check (a Python-recipe digest, a body
/// digest that does not match, an `a2a-*` header the signature does not list).
fn lets_integrity_pass(
    fault: Fault,
    headers: &HeaderMap,
    body: &[u8],
    caller: &a2a_conformance::identity::Identity,
) -> bool {
    let Some(jws) = header(headers, "a2a-signature").and_then(|t| jws::decode_typed::<SignatureClaims>(t).ok()) else {
        return false;
    };
    if jws.kid() != Some(caller.kid().as_str()) || jws.verify(caller.key.verifying_key()).is_err() {
        return false;
    }
    let mi = &jws.claims().message_integrity;
    let Ok(canonical) = a2a_core::canonical::canonicalize(body) else { return false };
    let canonical_ok = mi.body.as_deref() == Some(digest(&canonical).as_str());
    let payload_hash = mi.coverage == Coverage::PayloadHash;
    match fault {
        Fault::PythonRecipeAccepted => {
            let mut recipe = String::new();
            if let Ok(v) = serde_json::from_slice::<Value>(body) {
                a2a_conformance::checks::python_dumps(&v, &mut recipe);
            }
            payload_hash && !canonical_ok && mi.body.as_deref() == Some(digest(recipe.as_bytes()).as_str())
        }
        Fault::BodyDigestIgnored => payload_hash && !canonical_ok,
        _ => {
            let listed = |name: &str| mi.headers.contains_key(name);
            let unlisted = headers.keys().any(|n| {
                let n = n.as_str();
                (n.starts_with("a2a-") && n != "a2a-signature" || n == "idempotency-key") && !listed(n)
            });
            let listed_match = mi.headers.iter().all(|(n, v)| header(headers, n).map(str::trim) == Some(v.as_str()));
            // Step 3 (INT-6) still holds: the list names a2a-version and a2a-sender-id.
            let required = listed("a2a-version") && listed("a2a-sender-id");
            payload_hash && canonical_ok && unlisted && listed_match && required
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn audience_compared_ignoring_case_is_caught() {
    caught(Fault::AudienceCaseInsensitive).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_audience_array_accepted_is_caught() {
    caught(Fault::AudienceArrayAccepted).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_signature_headers_accepted_are_caught() {
    caught(Fault::TwoSignaturesAccepted).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_taken_from_the_token_is_caught() {
    caught(Fault::KeyFromEmbeddedJwk).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn validation_errors_out_of_order_are_caught() {
    caught(Fault::UnsortedValidationErrors).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_served_but_not_listed_in_features_is_caught() {
    caught(Fault::CancelServedButNotListed).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_without_a2a_version_served_is_caught() {
    caught(Fault::MissingVersionAccepted).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn negotiate_without_a2a_negotiation_id_is_caught() {
    caught(Fault::NegotiationIdHeaderMissing).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn negotiate_misreporting_auth_requirement_is_caught() {
    caught(Fault::AuthRequirementMisreported).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_repeated_negotiate_answered_with_the_same_negotiation_is_caught() {
    caught(Fault::NegotiationReplayed).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tightened_false_despite_changes_is_caught() {
    caught(Fault::TightenedAlwaysFalse).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn schema_incompatible_without_fallback_options_is_caught() {
    caught(Fault::ConflictWithoutFallback).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ignoring_strict_is_caught() {
    caught(Fault::StrictIgnored).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_negotiation_that_serves_one_execute_is_caught() {
    caught(Fault::NegotiationSingleUse).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn executing_another_senders_negotiation_is_caught() {
    caught(Fault::NegotiationsNotSenderScoped).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ignoring_unknown_request_members_is_caught() {
    caught(Fault::UnknownMembersIgnored).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_endpoint_not_served_is_caught() {
    caught(Fault::FallbackNotServed).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_capability_named_twice_in_discover_is_caught() {
    caught(Fault::DuplicateCapabilityName).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_capabilities_document_of_another_version_is_caught() {
    caught(Fault::WrongDocumentVersion).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn result_readable_by_another_sender_is_caught() {
    caught(Fault::ResultTrustsIdSender).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn result_that_does_not_decode_its_path_segment_is_caught() {
    caught(Fault::ResultNotDecoded).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refusing_high_s_signatures_is_caught() {
    caught(Fault::HighSRefused).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn accepting_signatures_that_do_not_verify_is_caught() {
    caught(Fault::InvalidSignaturesAccepted).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn accepting_header_only_signatures_on_bodies_is_caught() {
    caught(Fault::HeaderOnlyBodyAccepted).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn integrity_mismatch_without_the_part_is_caught() {
    caught(Fault::MismatchUnnamed).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stream_event_ids_from_zero_are_caught() {
    caught(Fault::StreamIdsFromZero).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_streamed_result_unlike_the_plain_result_is_caught() {
    caught(Fault::StreamResultDiffers).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn execution_ids_with_a_leading_zero_timestamp_are_caught() {
    caught(Fault::LeadingZeroTimestamps).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn work_started_before_confirm_is_caught() {
    caught(Fault::WorkBeforeConfirm).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idempotency_key_looked_up_before_validation_is_caught() {
    caught(Fault::IdempotencyBeforeValidation).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn options_below_the_endpoint_answered_as_discover_is_caught() {
    caught(Fault::OptionsBelowIsDiscover).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_result_that_confirms_is_caught() {
    caught(Fault::ResultConfirms).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_status_moving_backwards_is_caught() {
    caught(Fault::ConfirmedShowsReceived).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_digest_with_members_in_code_point_order_is_caught() {
    caught(Fault::CanonKeysByCodePoint).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_digest_with_rust_number_spelling_is_caught() {
    caught(Fault::CanonNumbersAsRust).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_digest_with_upper_case_escapes_is_caught() {
    caught(Fault::CanonUpperCaseEscapes).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_digest_over_normalized_strings_is_caught() {
    caught(Fault::CanonNormalizesStrings).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refusing_noncharacters_is_caught() {
    caught(Fault::CanonRefusesNoncharacters).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_digest_over_sorted_arrays_is_caught() {
    caught(Fault::CanonArraysSorted).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refusing_the_solidus_escape_is_caught() {
    caught(Fault::CanonRefusesSolidusEscape).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_digest_with_escaped_surrogates_is_caught() {
    caught(Fault::CanonSurrogatesEscaped).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn numbers_read_to_fifteen_digits_are_caught() {
    caught(Fault::CanonNumbersRounded).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn accepting_duplicate_members_is_caught() {
    caught(Fault::DuplicateMembersAccepted).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn accepting_leading_zeros_is_caught() {
    caught(Fault::LeadingZerosAccepted).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_digest_over_the_raw_body_is_caught() {
    caught(Fault::DigestOverRawBytes).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resolver_accepting_rsa_keys_is_caught() {
    caught(Fault::ResolverAcceptsRsaKeys).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resolver_accepting_private_keys_is_caught() {
    caught(Fault::ResolverAcceptsPrivateKeys).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resolver_accepting_key_agreement_keys_is_caught() {
    caught(Fault::ResolverAcceptsKeyAgreementKeys).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resolver_accepting_a_document_of_another_did_is_caught() {
    caught(Fault::ResolverAcceptsOtherIds).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resolver_misnaming_a_non_json_document_is_caught() {
    caught(Fault::ResolverMisnamesNonJson).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resolver_accepting_huge_documents_is_caught() {
    caught(Fault::ResolverAcceptsHugeDocuments).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resolver_accepting_65_methods_is_caught() {
    caught(Fault::ResolverAcceptsManyMethods).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resolver_accepting_untyped_methods_is_caught() {
    caught(Fault::ResolverAcceptsUntypedMethods).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resolver_following_redirects_is_caught() {
    caught(Fault::ResolverFollowsRedirects).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resolver_refusing_unused_members_is_caught() {
    caught(Fault::ResolverRefusesUnusedMembers).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_quota_refusal_without_retry_after_is_caught() {
    caught(Fault::QuotaWithoutRetryAfter).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_execution_id_issued_twice_is_caught() {
    caught(Fault::ExecuteDeduplicatedWithoutKey).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_execution_id_with_an_upper_case_suffix_is_caught() {
    caught(Fault::UppercaseIdSuffix).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tightening_that_drops_the_proposed_enum_is_caught() {
    caught(Fault::TightenDropsEnum).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tightening_that_drops_the_proposed_const_is_caught() {
    caught(Fault::TightenDropsConst).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tightening_that_drops_the_proposed_lower_bound_is_caught() {
    caught(Fault::TightenDropsLowerBound).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tightening_that_drops_the_proposed_upper_bound_is_caught() {
    caught(Fault::TightenDropsUpperBound).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tightening_that_drops_the_proposed_multiple_of_is_caught() {
    caught(Fault::TightenDropsMultipleOf).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tightening_that_drops_the_proposed_lengths_is_caught() {
    caught(Fault::TightenDropsLengths).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tightening_that_drops_the_proposed_pattern_is_caught() {
    caught(Fault::TightenDropsPattern).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tightening_that_drops_the_proposed_annotations_is_caught() {
    caught(Fault::TightenDropsAnnotations).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resolver_that_looks_up_a_root_did_at_did_json_is_caught() {
    caught(Fault::RootDocumentAtDidJson).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_that_falls_over_after_an_oversize_body_is_caught() {
    caught(Fault::DiesAfterOversizeBody).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bridge_that_ignores_message_ids_is_caught() {
    caught(Fault::BridgeIgnoresMessageId).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bridge_that_serves_a_batch_is_caught() {
    caught(Fault::BridgeServesFirstOfBatch).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_that_answers_in_http_1_0_is_caught() {
    caught(Fault::SpeaksHttp10).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_inbox_served_to_another_sender_is_caught() {
    caught(Fault::InboxServedToOthers).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tightening_that_agrees_an_empty_range_is_caught() {
    caught(Fault::TightenAgreesEmptyRange).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tightening_that_keeps_the_proposed_unique_items_is_caught() {
    caught(Fault::TightenKeepsProposedUniqueItems).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tightening_that_does_not_merge_items_is_caught() {
    caught(Fault::TightenKeepsProposedItems).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tightening_that_opens_a_closed_proposal_is_caught() {
    caught(Fault::TightenOpensClosedProposal).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tightening_that_skips_the_capabilitys_required_is_caught() {
    caught(Fault::TightenSkipsCapabilityRequired).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn changes_out_of_order_are_caught() {
    caught(Fault::ChangesUnsorted).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn changes_without_a_message_are_caught() {
    caught(Fault::ChangesWithoutMessage).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_declaration_with_an_unknown_member_is_caught() {
    caught(Fault::DeclarationWithUnknownMember).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_declaration_with_a_null_required_member_is_caught() {
    caught(Fault::DeclarationWithNullRequired).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_blank_description_is_caught() {
    caught(Fault::BlankDescription).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_declaration_without_auth_requirement_is_caught() {
    caught(Fault::DeclarationWithoutAuthRequirement).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_capitalized_auth_requirement_is_caught() {
    caught(Fault::AuthRequirementCapitalized).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_invalid_region_name_is_caught() {
    caught(Fault::InvalidRegionName).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_capability_that_is_its_own_sub_capability_is_caught() {
    caught(Fault::SubCapabilityOfItself).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_negative_estimated_cost_is_caught() {
    caught(Fault::NegativeCost).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_capability_that_is_its_own_fallback_is_caught() {
    caught(Fault::FallbackForItself).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_input_schema_that_breaks_the_rules_is_caught() {
    caught(Fault::InputSchemaBreaksRules).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fallback_without_options_is_caught() {
    caught(Fault::FallbackWithoutOptions).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fallback_without_the_degraded_options_is_caught() {
    caught(Fault::FallbackDropsDegraded).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_send_to_an_unknown_session_answered_400_is_caught() {
    caught(Fault::UnknownSessionIs400).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ignoring_the_wait_chain_is_caught() {
    caught(Fault::IgnoresWaitChain).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn history_with_limit_zero_accepted_is_caught() {
    caught(Fault::HistoryAcceptsLimitZero).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn history_without_truncated_is_caught() {
    caught(Fault::HistoryWithoutTruncated).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_no_reply_run_without_its_token_is_caught() {
    caught(Fault::NoReplyWithoutToken).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_send_without_reply_that_waits_is_caught() {
    caught(Fault::ReplyFalseWaits).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stored_send_answered_ok_is_caught() {
    caught(Fault::SendAcceptedAsOk).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn provenance_claiming_a_user_is_caught() {
    caught(Fault::ProvenanceClaimsUser).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refresh_answered_201_is_caught() {
    caught(Fault::RefreshAnswered201).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ended_session_still_listed_is_caught() {
    caught(Fault::EndedSessionStillListed).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_type_the_rules_refuse_accepted_is_caught() {
    caught(Fault::TypeNotAllowedAccepted).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subschema_without_type_accepted_is_caught() {
    caught(Fault::TypeMissingAccepted).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn required_names_without_properties_accepted_are_caught() {
    caught(Fault::UndefinedRequiredAccepted).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn format_on_a_non_string_accepted_is_caught() {
    caught(Fault::FormatOnNonStringAccepted).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn references_accepted_are_caught() {
    caught(Fault::RefsAccepted).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_keywords_ignored_are_caught() {
    caught(Fault::UnknownKeywordsIgnored).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bounds_that_leave_no_value_accepted_are_caught() {
    caught(Fault::EmptyBoundsAccepted).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn violations_out_of_order_are_caught() {
    caught(Fault::ViolationsUnsorted).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn violations_with_an_extra_member_are_caught() {
    caught(Fault::ViolationsWithExtraMember).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn violations_capped_at_32_are_caught() {
    caught(Fault::ViolationsCapped32).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_renamed_rule_id_is_caught() {
    caught(Fault::RuleIdsRenamed).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fetching_references_is_caught() {
    caught(Fault::FetchesReferences).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn discover_without_a2a_region_is_caught() {
    caught(Fault::RegionHeaderMissing).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_capability_declared_twice_is_caught() {
    caught(Fault::DuplicateDeclaration).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_one_word_capability_name_is_caught() {
    caught(Fault::SingleWordCapabilityName).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tightening_that_keeps_a_proposed_null_is_caught() {
    caught(Fault::TightenKeepsNullable).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tightening_that_drops_proposed_properties_is_caught() {
    caught(Fault::TightenDropsProposedProperties).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn execution_ids_with_a_decoded_sender_are_caught() {
    caught(Fault::SenderDecodedInIds).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_schema_check_without_a_depth_bound_is_caught() {
    caught(Fault::DepthUnbounded).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_python_recipe_digest_accepted_is_caught() {
    caught(Fault::PythonRecipeAccepted).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unsigned_a2a_header_accepted_is_caught() {
    caught(Fault::UnsignedHeaderAccepted).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unchecked_body_digest_is_caught() {
    caught(Fault::BodyDigestIgnored).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_card_without_cors_is_caught() {
    caught(Fault::CardWithoutCors).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_skill_without_tags_is_caught() {
    caught(Fault::SkillWithoutTags).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_card_with_a_false_member_is_caught() {
    caught(Fault::CardWithFalseMember).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bridge_taking_any_version_is_caught() {
    caught(Fault::BridgeAnyVersion).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bridge_errors_without_error_info_are_caught() {
    caught(Fault::BridgeErrorsWithoutInfo).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bridge_taking_the_first_of_two_data_parts_is_caught() {
    caught(Fault::BridgeTakesFirstDataPart).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bridge_ignoring_the_message_skill_is_caught() {
    caught(Fault::BridgeIgnoresMessageSkill).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bridge_ignoring_the_sender_is_caught() {
    caught(Fault::BridgeIgnoresSender).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bridge_without_http_json_is_caught() {
    caught(Fault::HttpJsonNotServed).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn negotiate_without_bridge_to_is_caught() {
    caught(Fault::BridgeToMissing).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_completed_task_without_its_artifact_is_caught() {
    caught(Fault::CompletedTaskWithoutArtifact).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_stream_without_artifact_update_is_caught() {
    caught(Fault::StreamWithoutArtifactUpdate).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subscription_not_starting_with_the_task_is_caught() {
    caught(Fault::SubscribeWithoutTask).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sender_of_another_did_method_served_is_caught() {
    caught(Fault::SenderAnyMethod).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sender_port_with_a_leading_zero_served_is_caught() {
    caught(Fault::SenderLeadingZeroPort).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sender_host_in_upper_case_served_is_caught() {
    caught(Fault::SenderHostCaseFolded).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sender_with_an_ip_host_served_is_caught() {
    caught(Fault::SenderIpHost).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sender_with_a_one_label_host_served_is_caught() {
    caught(Fault::SenderSingleLabelHost).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sender_with_a_unicode_host_served_is_caught() {
    caught(Fault::SenderUnicodeHost).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sender_with_a_lower_case_percent_served_is_caught() {
    caught(Fault::SenderLowerCasePercent).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sender_over_512_bytes_served_is_caught() {
    caught(Fault::SenderTooLong).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sender_compared_without_its_default_port_is_caught() {
    caught(Fault::SenderDefaultPortDropped).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_invalid_sender_answered_invalid_request_is_caught() {
    caught(Fault::InvalidSenderWrongCode).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kid_fragment_not_checked_is_caught() {
    caught(Fault::KidFragmentUnchecked).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_key_id_verified_with_another_key_is_caught() {
    caught(Fault::UnknownKeyFallsBack).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_document_without_assertion_method_is_caught() {
    caught(Fault::DocumentWithoutAssertionMethod).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn response_signatures_sharing_a_jti_are_caught() {
    caught(Fault::ResponseJtiReused).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_api_key_compared_as_a_prefix_is_caught() {
    caught(Fault::ApiKeyPrefixAccepted).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_valid_segment_decoded_again_is_caught() {
    caught(Fault::DecodesValidSegment).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ids_parsed_from_the_left_are_caught() {
    caught(Fault::IdParsedFromLeft).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_suffix_for_every_id_is_caught() {
    caught(Fault::SuffixReused).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_terminal_execution_forgotten_once_read_is_caught() {
    caught(Fault::ForgetsTerminalAfterRead).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nesting_deeper_than_128_accepted_is_caught() {
    caught(Fault::DeepNestingAccepted).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn content_after_the_json_value_ignored_is_caught() {
    caught(Fault::TrailingContentIgnored).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_byte_order_mark_accepted_is_caught() {
    caught(Fault::BomAccepted).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_digest_with_python_literals_is_caught() {
    caught(Fault::CanonLiteralsCapitalized).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_members_of_a_send_ignored_are_caught() {
    caught(Fault::SendUnknownMembersIgnored).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_errors_in_plain_text_are_caught() {
    caught(Fault::SessionErrorsPlainText).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn own_sessions_listed_without_include_self_are_caught() {
    caught(Fault::IncludeSelfIgnored).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_announce_step_without_its_instruction_is_caught() {
    caught(Fault::AnnounceWithoutInstruction).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_event_stream_without_connected_is_caught() {
    caught(Fault::EventsWithoutConnected).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inbox_sessions_left_out_of_the_list_are_caught() {
    caught(Fault::InboxSessionsUnlisted).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_announce_event_without_provenance_is_caught() {
    caught(Fault::AnnounceEventWithoutProvenance).await;
}

/// Whether `fault` is a gateway's: the suite runs against a broken gateway (`--gateway`, [`start_gateway`]).
fn gateway_fault(fault: Fault) -> bool {
    matches!(
        fault,
        Fault::GatewayRoutesNotShared
            | Fault::GatewayVerifiesAsAgent
            | Fault::GatewayForwardsForwardingHeaders
            | Fault::GatewayTakesAnyVersion
            | Fault::GatewayForwardsAmbiguousFraming
            | Fault::GatewayPassesAgentBridgeTo
            | Fault::GatewayRevealsIds
    ) || mcp_fault(fault)
}

/// The broken MCP fronts (§21): a real gateway's `/mcp` behind the front that breaks it.
fn mcp_fault(fault: Fault) -> bool {
    matches!(
        fault,
        Fault::McpOldRevisionOnly
            | Fault::McpToolMissing
            | Fault::McpToolAnnotationsAltered
            | Fault::McpUnknownToolAsHttpError
            | Fault::McpObjectResultWrapped
            | Fault::McpRefusalAsRpcError
            | Fault::McpProposalAsString
            | Fault::McpArgumentsLeftToAgent
    )
}

/// The names a caller's forwarding headers travel under through the broken gateway of
/// GatewayForwardsForwardingHeaders (a2a-gateway removes the real ones, GW-8); a layer in front of each agent restores
/// them, so that together the two pass them on.
const SMUGGLED: [(&str, &str); 2] = [
    ("a2a-forwarded-sender", "x-conformance-forwarded-sender"),
    ("a2a-forwarded-verified", "x-conformance-forwarded-verified"),
];

/// Fields of one connection, never forwarded by the front.
const HOP_BY_HOP: [&str; 9] = [
    "connection",
    "keep-alive",
    "proxy-connection",
    "transfer-encoding",
    "te",
    "trailer",
    "upgrade",
    "content-length",
    "proxy-authorization",
];

/// A broken gateway: real `a2a-gateway`s (one; two for GatewayRoutesNotShared) in front of two demo agents that
/// serve the A2A 1.x bridge and trust the gateway, behind a front (a proxy: the address the suite is given) that does
/// the breaking. The gateway's DID is the front's, `did:web:localhost%3A<front port>`, and its document the
/// gateway's own, served through the front; the front passes `Host` on, so that the gateway names the front's origin
/// in its card and `bridge_to`. The front is served like an agent (its head guard refuses ambiguous framing), but
/// by hyper alone for GatewayForwardsAmbiguousFraming.
async fn start_gateway(fault: Fault) -> Broken {
    let (fl, fport) = common::listener().await;
    let gw_did = a2a_core::did::Did::for_host_port("localhost", Some(fport), &[]).expect("did").to_string();
    let mut keep: Vec<Box<dyn std::any::Any + Send>> = Vec::new();
    let mut agents = Vec::new();
    let mut limits = None;
    for _ in 0..2 {
        let (l, port) = common::listener().await;
        let trusted = gw_did.clone();
        let parts =
            common::demo_parts_with(port, move |b, _| a2a_agent::demo::capabilities(b).trusted_gateways(vec![trusted]));
        limits.get_or_insert_with(|| parts.agent.engine().limits().clone());
        let mut app = common::bridged(&parts, parts.key.clone().expect("the agent's key"));
        if fault == Fault::GatewayForwardsForwardingHeaders {
            app = app.layer(axum::middleware::from_fn(|mut req: Request<Body>, next: Next| async move {
                for (real, smuggled) in SMUGGLED {
                    if let Some(v) = req.headers_mut().remove(smuggled) {
                        req.headers_mut().insert(HeaderName::from_static(real), v);
                    }
                }
                next.run(req).await
            }));
        }
        if fault == Fault::McpProposalAsString {
            app = app.layer(axum::middleware::from_fn(proposal_as_string));
        }
        agents.push(format!("http://127.0.0.1:{port}"));
        keep.push(Box::new(common::serve(l, port, parts, app)));
    }
    let key = a2a_core::keys::SigningKey::generate().expect("key");
    let mut text =
        format!("[gateway]\ndid = \"{gw_did}\"\nkey_file = \"unused.pem\"\n[edge]\nallow_http_loopback_dids = true\n");
    for a in &agents {
        text.push_str(&format!("[[agents]]\nurl = \"{a}/a2a\"\n"));
    }
    let cfg = a2a_gateway::config::Config::parse(&text, std::path::Path::new("gateway.toml")).expect("config");
    let mut upstreams = Vec::new();
    for _ in 0..if fault == Fault::GatewayRoutesNotShared { 2 } else { 1 } {
        let (gl, gport) = common::listener().await;
        let options = a2a_gateway::Options::default().with_key(key.clone());
        let gateway = a2a_gateway::Gateway::from_config(&cfg, std::path::Path::new("."), options).expect("gateway");
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        tokio::spawn(async move {
            let _ = gateway
                .serve(gl, async {
                    let _ = rx.await;
                })
                .await;
        });
        keep.push(Box::new(tx));
        upstreams.push(format!("http://127.0.0.1:{gport}"));
    }
    let client =
        reqwest::Client::builder().no_proxy().redirect(reqwest::redirect::Policy::none()).build().expect("client");
    let front =
        Arc::new(Front { fault, did: gw_did, upstreams, agent: agents[0].clone(), client, ids: Mutex::default() });
    let app = axum::Router::new().fallback(move |req: Request<Body>| {
        let front = front.clone();
        async move { front.forward(req).await }
    });
    let limits = if fault == Fault::GatewayForwardsAmbiguousFraming { None } else { limits };
    let running = common::serve_front(fl, fport, limits, app);
    Broken { running, caller: None, runs: Arc::default(), run_as: None, _keep: keep }
}

/// The front of a broken gateway: forwards every request to a gateway, breaking one thing.
struct Front {
    fault: Fault,
    /// The gateway's DID.
    did: String,
    /// The gateways' base URLs.
    upstreams: Vec<String>,
    /// The base URL of the first agent behind the gateway (GatewayPassesAgentBridgeTo names its bridge).
    agent: String,
    client: reqwest::Client,
    /// The negotiation and execution ids the gateway has answered (GatewayRevealsIds).
    ids: Mutex<std::collections::HashSet<String>>,
}

impl Front {
    /// An error the broken gateway answers itself.
    fn refusal(&self, status: StatusCode, code: &str, message: String) -> Response {
        let mut out = (status, axum::Json(json!({"error": {"code": code, "message": message}}))).into_response();
        let h = out.headers_mut();
        h.insert("a2a-version", HeaderValue::from_static("0.3"));
        h.insert("access-control-allow-origin", HeaderValue::from_static("*"));
        if let Ok(did) = HeaderValue::from_str(&self.did) {
            h.insert("a2a-sender-id", did);
        }
        out
    }

    async fn forward(&self, req: Request<Body>) -> Response {
        let (mut parts, body) = req.into_parts();
        let path = parts.uri.path().to_owned();
        let step = (parts.method == Method::POST
            && matches!(path.as_str(), "/a2a/execute" | "/a2a/confirm" | "/a2a/cancel"))
            || path.starts_with("/a2a/result/");
        match self.fault {
            Fault::GatewayVerifiesAsAgent if signature_audience(&parts.headers).is_some_and(|aud| aud == self.did) => {
                return self.refusal(
                    StatusCode::UNAUTHORIZED,
                    "audience_mismatch",
                    format!("the signature is addressed to {}, not to the agent behind this gateway", self.did),
                );
            }
            Fault::GatewayForwardsForwardingHeaders => {
                for (real, smuggled) in SMUGGLED {
                    if let Some(v) = parts.headers.remove(real) {
                        parts.headers.insert(HeaderName::from_static(smuggled), v);
                    }
                }
            }
            Fault::GatewayTakesAnyVersion if header(&parts.headers, "a2a-version").is_some_and(|v| v != "0.3") => {
                parts.headers.insert("a2a-version", HeaderValue::from_static("0.3"));
            }
            _ => {}
        }
        if self.fault == Fault::GatewayRevealsIds && !parts.headers.contains_key("a2a-signature") {
            let named = if path.starts_with("/a2a/result/") {
                percent_decode(path.trim_start_matches("/a2a/result/"))
            } else {
                header(&parts.headers, "a2a-negotiation-id").unwrap_or("").trim().to_owned()
            };
            if lock(&self.ids).contains(&named) {
                return self.refusal(
                    StatusCode::UNAUTHORIZED,
                    "signature_required",
                    "this step needs an A2A-Signature".into(),
                );
            }
        }
        if path == "/mcp" && parts.method == Method::POST && mcp_fault(self.fault) {
            return self.mcp(parts, body_bytes(body).await).await;
        }
        let upstream =
            if self.fault == Fault::GatewayRoutesNotShared && step { &self.upstreams[1] } else { &self.upstreams[0] };
        let bytes = body_bytes(body).await;
        let target = parts.uri.path_and_query().map_or("/", |p| p.as_str());
        let mut rb = self.client.request(parts.method.clone(), format!("{upstream}{target}"));
        for (k, v) in &parts.headers {
            if !HOP_BY_HOP.contains(&k.as_str()) {
                rb = rb.header(k, v);
            }
        }
        if !bytes.is_empty() || parts.method == Method::POST {
            rb = rb.body(bytes);
        }
        let resp = match rb.send().await {
            Ok(r) => r,
            Err(e) => return self.refusal(StatusCode::BAD_GATEWAY, "agent_unavailable", e.to_string()),
        };
        let status = resp.status();
        let mut headers = HeaderMap::new();
        for (k, v) in resp.headers() {
            if !HOP_BY_HOP.contains(&k.as_str()) || k == "content-length" {
                headers.append(k, v.clone());
            }
        }
        if self.fault == Fault::GatewayRevealsIds
            && parts.method == Method::POST
            && matches!(path.as_str(), "/a2a/negotiate" | "/a2a/execute")
        {
            let bytes = resp.bytes().await.unwrap_or_default();
            let v: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
            for k in ["negotiation_id", "execution_id"] {
                if let Some(id) = v[k].as_str() {
                    lock(&self.ids).insert(id.to_owned());
                }
            }
            let mut out = Response::new(Body::from(bytes));
            *out.status_mut() = status;
            *out.headers_mut() = headers;
            return out;
        }
        if self.fault == Fault::GatewayPassesAgentBridgeTo && parts.method == Method::POST && path == "/a2a/negotiate" {
            let bytes = resp.bytes().await.unwrap_or_default();
            let mut v: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
            let body = if v["bridge_to"].is_object() {
                // The agent's own bridge_to, as the agent behind the gateway writes it (BR-17).
                v["bridge_to"]["url"] = json!(format!("{}/a2a1x/jsonrpc", self.agent));
                v["bridge_to"]["agent_card"] = json!(format!("{}/.well-known/agent-card.json", self.agent));
                headers.remove("content-length");
                // A signature over the gateway's answer does not cover this one (the agents here do not sign, so
                // neither does the gateway, GW-15; removed in case).
                headers.remove("a2a-signature");
                serde_json::to_vec(&v).unwrap_or_default()
            } else {
                bytes.to_vec()
            };
            let mut out = Response::new(Body::from(body));
            *out.status_mut() = status;
            *out.headers_mut() = headers;
            return out;
        }
        let chunks = futures_util::stream::unfold(resp, |mut r| async move {
            match r.chunk().await {
                Ok(Some(c)) => Some((Ok::<_, reqwest::Error>(c), r)),
                _ => None,
            }
        });
        let mut out = Response::new(Body::from_stream(chunks));
        *out.status_mut() = status;
        *out.headers_mut() = headers;
        out
    }
}

impl Front {
    /// A POST to the gateway's `/mcp`, its JSON-RPC answer (a JSON body, or the `data:` lines of an SSE stream)
    /// rewritten by the MCP fault (§21).
    async fn mcp(&self, parts: axum::http::request::Parts, bytes: Vec<u8>) -> Response {
        let request: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        let method = request["method"].as_str().unwrap_or("").to_owned();
        let mut rb = self.client.post(format!("{}/mcp", self.upstreams[0]));
        for (k, v) in &parts.headers {
            if !HOP_BY_HOP.contains(&k.as_str()) {
                rb = rb.header(k, v);
            }
        }
        let resp = match rb.body(bytes).send().await {
            Ok(r) => r,
            Err(e) => return self.refusal(StatusCode::BAD_GATEWAY, "agent_unavailable", e.to_string()),
        };
        let status = resp.status();
        let mut headers = HeaderMap::new();
        for (k, v) in resp.headers() {
            if !HOP_BY_HOP.contains(&k.as_str()) {
                headers.append(k, v.clone());
            }
        }
        let text = resp.text().await.unwrap_or_default();
        let mut bare = None;
        let mut edit = |v: &mut Value| {
            if v.get("id").is_none() {
                return;
            }
            match self.fault {
                // MCP-2: the current revision left out of supportedVersions.
                Fault::McpOldRevisionOnly if method == "server/discover" => {
                    if let Some(list) = v["result"]["supportedVersions"].as_array_mut() {
                        list.retain(|x| x != "2026-07-28");
                    }
                }
                // MCP-5: the last capability is no tool.
                Fault::McpToolMissing if method == "tools/list" => {
                    if let Some(list) = v["result"]["tools"].as_array_mut() {
                        list.pop();
                    }
                }
                // MCP-6: the tools' annotations and _meta are not those of their capabilities.
                Fault::McpToolAnnotationsAltered if method == "tools/list" => {
                    for tool in v["result"]["tools"].as_array_mut().into_iter().flatten() {
                        tool["annotations"]["readOnlyHint"] = json!(true);
                        if let Some(m) = tool.get_mut("_meta").and_then(Value::as_object_mut) {
                            m.remove("a2a/auth_requirement");
                        }
                    }
                }
                // MCP-9: an unknown tool is a bare HTTP error.
                Fault::McpUnknownToolAsHttpError if method == "tools/call" && v["error"]["code"] == -32602 => {
                    bare = Some((StatusCode::BAD_REQUEST, "no such tool".to_owned()));
                }
                // MCP-10: an object result wrapped as if it were not one.
                Fault::McpObjectResultWrapped if method == "tools/call" && v["result"]["isError"] == false => {
                    let result = v["result"]["structuredContent"].take();
                    v["result"]["structuredContent"] = json!({ "result": result });
                }
                // MCP-11: a refusal as a JSON-RPC error, its body in `data`.
                Fault::McpRefusalAsRpcError if method == "tools/call" && v["result"]["isError"] == true => {
                    let body = v["result"]["structuredContent"].take();
                    let message = body["error"]["message"].as_str().unwrap_or("refused").to_owned();
                    v.as_object_mut().map(|o| o.remove("result"));
                    v["error"] = json!({"code": -32603, "message": message, "data": body});
                }
                // MCP-13: the agent's EXECUTE refusal passed on: no agreed_schema.
                Fault::McpArgumentsLeftToAgent
                    if method == "tools/call"
                        && v["result"]["structuredContent"]["error"]["code"] == "payload_invalid" =>
                {
                    if let Some(d) = v["result"]["structuredContent"]["error"]["details"].as_object_mut() {
                        d.remove("agreed_schema");
                    }
                }
                _ => {}
            }
        };
        let body = if let Ok(mut v) = serde_json::from_str::<Value>(&text) {
            edit(&mut v);
            v.to_string()
        } else {
            text.split('\n')
                .map(|line| match line.strip_prefix("data:").map(|d| serde_json::from_str::<Value>(d.trim())) {
                    Some(Ok(mut v)) => {
                        edit(&mut v);
                        format!("data: {v}")
                    }
                    _ => line.to_owned(),
                })
                .collect::<Vec<_>>()
                .join("\n")
        };
        if let Some((status, message)) = bare {
            return (status, message).into_response();
        }
        let mut out = Response::new(Body::from(body));
        *out.status_mut() = status;
        *out.headers_mut() = headers;
        out
    }
}

/// The agents' side of McpProposalAsString: a NEGOTIATE of the gateway's MCP front (its DID ends in `:mcp`, MCP-18)
/// proposes the tool's schema serialized as a JSON string, not the schema (MCP-12).
async fn proposal_as_string(req: Request<Body>, next: Next) -> Response {
    let from_front = ["a2a-forwarded-sender", "a2a-sender-id"]
        .iter()
        .any(|h| header(req.headers(), h).is_some_and(|d| d.ends_with(":mcp")));
    if req.method() != Method::POST || req.uri().path() != "/a2a/negotiate" || !from_front {
        return next.run(req).await;
    }
    let (mut parts, body) = req.into_parts();
    let mut v: Value = serde_json::from_slice(&body_bytes(body).await).unwrap_or(Value::Null);
    let schema = v["proposed_schema"].take();
    v["proposed_schema"] = json!(schema.to_string());
    parts.headers.remove("content-length");
    next.run(Request::from_parts(parts, Body::from(v.to_string()))).await
}

/// The `aud` of a request's `A2A-Signature`, read without verifying it.
fn signature_audience(headers: &HeaderMap) -> Option<String> {
    use base64::Engine as _;
    let token = header(headers, "a2a-signature")?;
    let claims = token.split('.').nth(1)?;
    let claims: Value =
        serde_json::from_slice(&base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(claims).ok()?).ok()?;
    claims["aud"].as_str().map(str::to_owned)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn changes_in_the_order_of_the_received_members_are_caught() {
    caught(Fault::ChangesInReceivedOrder).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_untrusted_forwarded_sender_honoured_is_caught() {
    caught(Fault::HonoursUntrustedForwardedSender).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bearer_tokens_decoded_without_verification_are_caught() {
    caught(Fault::OAuth2TokenUnverified).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_waiting_on_itself_is_caught() {
    caught(Fault::WaitsOnItself).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resolver_falling_back_from_https_to_http_is_caught() {
    caught(Fault::ResolverFallsBackToHttp).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gateways_that_do_not_share_their_routes_are_caught() {
    caught(Fault::GatewayRoutesNotShared).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gateway_verifying_as_its_agent_is_caught() {
    caught(Fault::GatewayVerifiesAsAgent).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gateway_passing_forwarding_headers_on_is_caught() {
    caught(Fault::GatewayForwardsForwardingHeaders).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gateway_taking_any_version_is_caught() {
    caught(Fault::GatewayTakesAnyVersion).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gateway_forwarding_ambiguous_framing_is_caught() {
    caught(Fault::GatewayForwardsAmbiguousFraming).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gateway_passing_the_agents_bridge_to_is_caught() {
    caught(Fault::GatewayPassesAgentBridgeTo).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idempotency_key_answering_another_payload_is_caught() {
    caught(Fault::IdempotencyIgnoresPayload).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idempotent_payloads_compared_byte_for_byte_are_caught() {
    caught(Fault::IdempotencyComparesBytes).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idempotency_key_shared_by_every_sender_is_caught() {
    caught(Fault::IdempotencyKeyNotSenderScoped).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http_json_stream_in_json_rpc_envelopes_is_caught() {
    caught(Fault::HttpJsonStreamEnveloped).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_signature_with_a_status_accepted_is_caught() {
    caught(Fault::StatusClaimAccepted).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn origin_headers_without_an_origin_are_caught() {
    caught(Fault::CorsOriginHeadersAlways).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_stream_that_cancels_the_work_is_caught() {
    caught(Fault::DroppedStreamCancels).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refusal_that_tells_real_ids_from_made_up_ones_is_caught() {
    caught(Fault::RefusalRevealsIds).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gateway_whose_refusals_tell_real_ids_is_caught() {
    caught(Fault::GatewayRevealsIds).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_mcp_front_without_the_current_revision_is_caught() {
    caught(Fault::McpOldRevisionOnly).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_mcp_front_missing_a_tool_is_caught() {
    caught(Fault::McpToolMissing).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_mcp_front_altering_the_tools_annotations_is_caught() {
    caught(Fault::McpToolAnnotationsAltered).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_mcp_front_answering_an_unknown_tool_with_an_http_error_is_caught() {
    caught(Fault::McpUnknownToolAsHttpError).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_mcp_front_wrapping_an_object_result_is_caught() {
    caught(Fault::McpObjectResultWrapped).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_mcp_front_answering_a_refusal_as_a_json_rpc_error_is_caught() {
    caught(Fault::McpRefusalAsRpcError).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_mcp_front_proposing_its_schema_as_a_string_is_caught() {
    caught(Fault::McpProposalAsString).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_mcp_front_leaving_the_arguments_to_the_agent_is_caught() {
    caught(Fault::McpArgumentsLeftToAgent).await;
}

/// The control of the MCP fixtures: the same real gateway behind the same front, with a fault that touches no `/mcp`
/// request (GatewayTakesAnyVersion rewrites only an `A2A-Version` other than 0.3, which the MCP checks never send),
/// passes every mcp/* check, none skipped: the fixtures' checks fail for their fault, not for the gateway.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unbroken_mcp_front_passes_every_mcp_check() {
    let gateway = start_gateway(Fault::GatewayTakesAnyVersion).await;
    let mut opts = common::options(&gateway.running.base, None);
    opts.only = Some("mcp/".into());
    opts.gateway = true;
    let report = common::run(opts).await;
    let mcp: Vec<_> = report.checks.iter().filter(|c| c.id.starts_with("mcp/")).collect();
    assert!(
        mcp.len() == 5 && mcp.iter().all(|c| c.status == a2a_conformance::Status::Pass),
        "every mcp/* check passes: {:?}\n{}",
        mcp.iter().map(|c| (c.id.clone(), c.status.as_str(), c.message.clone())).collect::<Vec<_>>(),
        common::explain(&report)
    );
}
