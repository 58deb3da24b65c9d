//! Which requirements of `spec/PROTOCOL.md` the suite checks, and why the others are not checked.
//!
//! A test (`conformance/tests/conformance/coverage.rs`) parses the specification and fails when a requirement is neither a
//! requirement of some check nor listed here with a reason, and when an entry here is stale (the id is checked, or
//! no longer in the specification).

/// Requirements the suite does not check, with the reason. Most bind a caller, a tool or the agent's internals, which
/// a party that only talks to the agent over HTTP cannot see; a few are observable only with set-ups the suite does
/// not make (a public DNS name, a 30 s wait), and say so.
pub const NOT_CHECKED: &[(&str, &str)] = &[
    (
        "AUTH-9",
        "a forwarded sender is honoured only from a gateway the agent trusts (GW-9): needs a gateway the agent is configured to trust; checked in a2a-gateway's tests (demo.rs)",
    ),
    (
        "HDL-4",
        "whether a handler's processes outlive their agent is not visible over HTTP; a2a-server's handler_isolation.rs kills the agent with kill -9 and looks for the program (a capability's and a session's)",
    ),
    (
        "ST-6",
        "what survives an agent's restart depends on its store's persistence, which a caller can neither set up nor see",
    ),
    (
        "LIM-4",
        "filling an agent's negotiations to its bound, or a sender's share of them (1 000 here), means many NEGOTIATEs the suite does not make; a2a-server's steady-state tests cover it",
    ),
    (
        "DID-33",
        "the order matters only for a DID or document that fails several checks at once, which the suite would have to publish under a DID the agent resolves and then sign with; a2a-server's resolve.rs and a2a-core's did tests check it with the real resolver",
    ),
    ("LIM-6", "a cost that does not grow with the state held is a benchmark figure (docs/BENCHMARKS.md), not a check"),
    (
        "LIM-14",
        "seeing a sender held to its share of requests in progress needs more requests in flight at once than the share, each held long enough to overlap, which the suite's one-at-a-time client does not make; a2a-server's e2e tests cover it (steady_state: sender_share_*)",
    ),
    (
        "LIM-15",
        "a queue filled past max_queued_per_sender needs the share's requests held in progress while more wait; a2a-server's e2e tests fill it on memory and Redis (steady_state: sender_share_*)",
    ),
    (
        "LIM-16",
        "a long-poll's slot given back is visible only with the sender's share filled by long-polls; a2a-server's e2e tests check it (steady_state: sender_share_long_polls_do_not_hold_the_share)",
    ),
    (
        "LIM-17",
        "how the share compares with the agent's capacity is a deployment choice and a benchmark figure (docs/BENCHMARKS.md)",
    ),
    (
        "BR-27",
        "where a message that names no skill goes depends on the agent's skills and its configured default skill; checked with the official a2a-sdk client in a2a-server's tests (a2a1x_sdk.rs)",
    ),
    (
        "BR-29",
        "where a gateway sends a message that names no skill depends on its agents' skills and its configured default skill; checked with the official a2a-sdk client through a gateway in a2a-gateway's tests (bridge.rs)",
    ),
    (
        "BR-28",
        "which member a text becomes depends on the skill's schema; checked with the official a2a-sdk client in a2a-server's tests (a2a1x_sdk.rs)",
    ),
    (
        "AUTH-8",
        "which services an agent contacts while it verifies a signature is not visible to its caller; did-auth/handshake shows verification succeed with only the DID documents the suite serves",
    ),
    (
        "BR-6",
        "binds a verifier of an Agent Card (a client such as a2a-client or a2a-sdk), not the agent that serves it; the suite verifies agents' cards that way in bridge/agent-card (BR-5), and a2a-core's a2a1x tests check the verifier",
    ),
    (
        "GW-18",
        "needs an agent behind a transparent gateway configured to trust it, which a caller cannot see; checked in a2a-gateway's tests (demo.rs)",
    ),
    (
        "GW-19",
        "which features a gateway lists depends on its agents' features, which a caller of the gateway cannot see; checked in a2a-gateway's tests (demo.rs)",
    ),
    // Gateway translation (§15.4): the gateway checks (`--gateway`) cover routing, forwarding, edge policy and the
    // versions refused; a translation itself is configuration the suite cannot learn from outside.
    ("GW-12", "needs a version translation table configured at the gateway, which a caller cannot see"),
    ("GW-13", "needs a version translation table configured at the gateway, which a caller cannot see"),
    // The A2A 1.x bridge (§20): the bridge checks cover what an agent serves (BR-1..BR-17) and a gateway's bridge_to
    // (BR-26); these bind its callers, or are a gateway's internals checked by its own tests.
    (
        "BR-18",
        "binds a caller of the A2A 1.x bridge (ignoring a bridge_to it did not ask for); that an agent without the bridge sends none is checked by a2a-server's a2a1x tests",
    ),
    (
        "BR-19",
        "binds a client calling an A2A 1.x agent (outbound); checked by a2a-client's a2a1x tests and the a2a-sdk interop tests",
    ),
    ("BR-20", "the A2A 1.x bridge at a gateway (§20.10); checked by a2a-gateway's integration tests (bridge)"),
    ("BR-21", "the A2A 1.x bridge at a gateway (§20.10); checked by a2a-gateway's integration tests (bridge)"),
    ("BR-22", "the A2A 1.x bridge at a gateway (§20.10); checked by a2a-gateway's integration tests (bridge)"),
    ("BR-23", "the A2A 1.x bridge at a gateway (§20.10); checked by a2a-gateway's integration tests (bridge)"),
    ("BR-24", "the A2A 1.x bridge at a gateway (§20.10); checked by a2a-gateway's integration tests (bridge)"),
    ("BR-25", "the A2A 1.x bridge at a gateway (§20.10); checked by a2a-gateway's integration tests (bridge)"),
    ("GW-14", "streaming RESULT through a gateway; checked by a2a-gateway's integration tests (bridge, signing)"),
    (
        "GW-15",
        "a gateway's verification of its agents' signed answers needs an agent behind it that signs wrongly; checked by a2a-gateway's integration tests (signing); with --gateway, responses/signatures checks the gateway's own signatures",
    ),
    (
        "GW-17",
        "needs a caller that stops reading an answer larger than the socket buffers hold; checked by a2a-gateway's unit tests (h1::server)",
    ),
    (
        "GW-20",
        "strict HTTP/1.1 framing needs raw malformed bytes on a socket, which the suite's HTTP client cannot send; checked by a2a-gateway's integration tests (h1, h1_diff against hyper, h1_fuzz)",
    ),
    (
        "GW-22",
        "the operator surface is configuration the suite cannot learn (a token, a listener); checked by a2a-gateway's integration tests (security)",
    ),
    (
        "GW-23",
        "memory under a slow-body attack needs thousands of stalled connections and the process's RSS; checked by a2a-gateway's integration tests (h1: the body budget, the connection cap) and measured in docs/BENCHMARKS.md",
    ),
    (
        "SES-12",
        "observable only by shutting down one process of an agent that shares a store with others; a2a-server's multi-process tests cover it",
    ),
    // Sessions and conversations (§17, the optional `sessions` feature): the sessions/* checks drive the suite's own
    // inbox session; these need set-ups it does not make, or are not visible to a caller (each says which).
    (
        "SES-10",
        "reaching an agent's session limit (10 000 here) means filling an unknown agent with registrations, which the suite does not do (as CONF-5)",
    ),
    (
        "PP-7",
        "observable only with a requester agent the suite hosts for ping-pong turns; the suite's inbox session names no from, so no ping-pong runs (a2a-server's e2e tests cover it)",
    ),
    ("SPN-5", "spawn needs a spawn template configured at the agent, which the suite cannot learn"),
    (
        "POL-7",
        "observable only with an agent whose allow list the suite knows; the suite cannot learn an agent's allow list",
    ),
    // Session handlers (§17.10): what a handler does inside the agent (a program's process and environment, the
    // request to a backend) is not observable by a party that only talks to the agent; a2a-server's
    // tests/e2e/session_handlers.rs covers them with real programs and local services.
    ("HDL-1", "a command handler's process and environment are internal to the agent"),
    ("HDL-2", "an http handler's request goes to the agent's backend, which the suite does not see"),
    ("HDL-3", "handler limits are configuration internal to the agent"),
    (
        "HDL-5",
        "a capability's command handler's environment, stderr and process group are internal to the agent (a2a-server's tests/e2e/handler_isolation.rs covers them)",
    ),
    (
        "LIM-7",
        "memory per stalled body and the body budget need thousands of connections held open against the agent; a2a-server's tests and benches/stall_attack.rs cover them",
    ),
    ("LIM-8", "reaching the connection limit means holding thousands of connections open; a2a-server's tests cover it"),
    (
        "LIM-9",
        "the suite speaks HTTP through a client library that does not send malformed heads; a2a-server's tests/e2e/hardening.rs sends them over raw sockets",
    ),
    ("OPS-1", "the operator surface is not part of the protocol a caller sees; a2a-server's tests cover it"),
    (
        "OPS-2",
        "readiness follows the agent's store, which the suite cannot stop; a2a-server tests/e2e/operations.rs and a2a-gateway tests/it/operations.rs kill a real Redis under the probes",
    ),
    ("OPS-3", "the probes are outside the protocol a caller sees; a2a-server tests/e2e/operations.rs covers them"),
    (
        "OPS-4",
        "reloading is an operator's signal to the process, which the suite cannot send; the operations tests of a2a-server and a2a-gateway send SIGHUP to real processes",
    ),
    (
        "OPS-5",
        "log files are on the agent's disk, out of the suite's reach; a2a-gateway tests/it/operations.rs rotates the audit file",
    ),
    (
        "OPS-6",
        "span export is the operator's; a2a-gateway's test otel::one_handshake_through_the_gateway_is_one_trace_with_a_span_per_step_at_each_hop receives the spans",
    ),
    ("SES-6", "staleness follows 24 hours without refresh; the suite keeps runs short and does not wait"),
    ("SES-9", "what a session handler is given is internal to the agent (a2a-server's tests cover it)"),
    ("SND-3", "observable only through a wait longer than max_wait_ms (600 s here); the suite keeps runs short"),
    (
        "SND-12",
        "the order in which an agent serves waiting deliveries is a SHOULD about its scheduling, not reliably observable from one caller",
    ),
    (
        "PP-1",
        "observable only with a requester agent the suite hosts for ping-pong turns; the suite's inbox session names no from, so no ping-pong runs (a2a-server's e2e tests cover it)",
    ),
    (
        "PP-2",
        "observable only with a requester agent the suite hosts for ping-pong turns; the suite's inbox session names no from, so no ping-pong runs (a2a-server's e2e tests cover it)",
    ),
    (
        "PP-3",
        "observable only with a requester agent the suite hosts for ping-pong turns; the suite's inbox session names no from, so no ping-pong runs (a2a-server's e2e tests cover it)",
    ),
    (
        "PP-4",
        "observable only with a requester agent the suite hosts for ping-pong turns; the suite's inbox session names no from, so no ping-pong runs (a2a-server's e2e tests cover it)",
    ),
    (
        "PP-5",
        "observable only with a requester agent the suite hosts for ping-pong turns; the suite's inbox session names no from, so no ping-pong runs (a2a-server's e2e tests cover it)",
    ),
    (
        "PP-6",
        "observable only with a requester agent the suite hosts for ping-pong turns; the suite's inbox session names no from, so no ping-pong runs (a2a-server's e2e tests cover it)",
    ),
    (
        "ANN-5",
        "webhooks post to URLs configured at the agent, which the suite neither knows nor receives; a2a-agent/tests/e2e/sessions*.rs tests them with a real receiver",
    ),
    ("HIS-3", "observable only with tool messages in a transcript, which an inbox session the suite drives never has"),
    (
        "HIS-5",
        "reaching the per-session transcript cap (1000 here) means writing that many messages to an unknown agent, which the suite does not do",
    ),
    ("SPN-1", "spawn needs a spawn template configured at the agent, which the suite cannot learn"),
    ("SPN-2", "spawn needs a spawn template configured at the agent, which the suite cannot learn"),
    ("SPN-3", "spawn needs a spawn template configured at the agent, which the suite cannot learn"),
    ("SPN-4", "spawn needs a spawn template configured at the agent, which the suite cannot learn"),
    (
        "POL-1",
        "depends on the agent's configured allow list and visibility, which the suite cannot learn; provenance and hops are checked by a2a-server's tests",
    ),
    (
        "POL-2",
        "depends on the agent's configured allow list and visibility, which the suite cannot learn; provenance and hops are checked by a2a-server's tests",
    ),
    (
        "POL-6",
        "wait edges in a shared store are internal to the agents sharing it; the visible effect (409 wait_cycle) is POL-5",
    ),
    // Requirements on callers: the suite is a caller and follows them; they say nothing about the agent.
    ("TR-2", "a caller requirement (append /a2a to a URL); the suite does it for --target"),
    ("TR-9", "a caller requirement (ignore unknown response members); the suite reads responses leniently"),
    (
        "CAP-16",
        "a caller requirement (negotiate only advertised capabilities); the suite negotiates only those, and probe_missing_capability on purpose",
    ),
    ("DISC-4", "a caller requirement (cache DISCOVER 5 minutes)"),
    ("EXE-8", "a caller requirement (send Idempotency-Key on retries)"),
    ("FB-4", "a caller requirement (how to use fallback options)"),
    ("ERR-2", "a caller requirement (handle unknown codes by status)"),
    ("CLI-1", "a caller requirement (caching, pre-warming)"),
    ("CLI-2", "a caller requirement (long-poll or backoff); the suite polls that way"),
    ("CLI-3", "a caller requirement (retry only safe steps)"),
    ("CLI-4", "a caller requirement (timeouts and deadlines per step)"),
    ("CLI-5", "a caller requirement (refuse another version); the suite reports A2A-Version in discover/headers"),
    ("CLI-6", "a caller requirement (client caches)"),
    ("CLI-7", "a caller requirement (waiting for results)"),
    ("CLI-8", "a caller requirement (retries)"),
    ("CLI-9", "a caller requirement (using fallback options)"),
    ("CLI-10", "a caller requirement (verifying signed responses)"),
    ("JCS-20", "a sender recommendation (send the canonical form); the suite's own bodies"),
    ("JCS-24", "a recommendation to Python senders"),
    // Tooling: declaration loaders, converters, key tools. Not on the wire.
    ("CAP-21", "tooling (YAML authoring of declarations)"),
    ("CAP-22", "tooling (the YAML to JSON converter)"),
    ("SCH-19", "tooling (a client SDK or CLI offering the nullable conversion)"),
    ("SCH-20", "tooling (how the nullable conversion works)"),
    ("SCH-21", "tooling (the nullable conversion is idempotent)"),
    ("KEY-4", "key material at rest (private JWKs); never sent to the agent"),
    ("KEY-5", "key files (PEM forms); never sent to the agent"),
    ("KEY-6", "tooling (a key check command)"),
    ("KEY-7", "the JWK thumbprint; not on the wire"),
    // Composite capabilities (§19, the optional `composite` feature).
    (
        "CMP-1",
        "the optional composite feature (§19): needs a composite whose steps, inputs and failures the suite controls; a2a-agent/tests/e2e/composite.rs runs it against real agents",
    ),
    (
        "CMP-2",
        "the optional composite feature (§19): a declaration rule enforced when the agent is built (refuses to start); a2a-server/src/compose/plan.rs tests it",
    ),
    (
        "CMP-3",
        "the optional composite feature (§19): a declaration rule enforced when the agent is built (refuses to start); a2a-server/src/compose/plan.rs tests it",
    ),
    (
        "CMP-4",
        "the optional composite feature (§19): a declaration rule enforced when the agent is built (refuses to start); a2a-server/src/compose/plan.rs tests it",
    ),
    (
        "CMP-5",
        "the optional composite feature (§19): a declaration rule enforced when the agent is built (refuses to start); a2a-server/src/compose/plan.rs tests it",
    ),
    (
        "CMP-6",
        "the optional composite feature (§19): a declaration rule enforced when the agent is built (refuses to start); a2a-server/src/compose/plan.rs tests it",
    ),
    (
        "CMP-7",
        "the optional composite feature (§19): a declaration rule enforced when the agent is built (refuses to start); a2a-server/src/compose/plan.rs tests it",
    ),
    (
        "CMP-8",
        "the optional composite feature (§19): needs a composite whose steps, inputs and failures the suite controls; a2a-agent/tests/e2e/composite.rs runs it against real agents",
    ),
    (
        "CMP-9",
        "the optional composite feature (§19): needs a composite whose steps, inputs and failures the suite controls; a2a-agent/tests/e2e/composite.rs runs it against real agents",
    ),
    (
        "CMP-10",
        "the optional composite feature (§19): needs a composite whose steps, inputs and failures the suite controls; a2a-agent/tests/e2e/composite.rs runs it against real agents",
    ),
    (
        "CMP-11",
        "the optional composite feature (§19): needs a composite whose steps, inputs and failures the suite controls; a2a-agent/tests/e2e/composite.rs runs it against real agents",
    ),
    (
        "CMP-12",
        "the optional composite feature (§19): needs a composite whose steps, inputs and failures the suite controls; a2a-agent/tests/e2e/composite.rs runs it against real agents",
    ),
    (
        "CMP-13",
        "the optional composite feature (§19): needs a composite whose steps, inputs and failures the suite controls; a2a-agent/tests/e2e/composite.rs runs it against real agents",
    ),
    (
        "CMP-14",
        "the optional composite feature (§19): needs a composite whose steps, inputs and failures the suite controls; a2a-agent/tests/e2e/composite.rs runs it against real agents",
    ),
    (
        "CMP-15",
        "the optional composite feature (§19): needs a composite whose steps, inputs and failures the suite controls; a2a-agent/tests/e2e/composite.rs runs it against real agents",
    ),
    (
        "CMP-16",
        "the optional composite feature (§19): needs a composite whose steps, inputs and failures the suite controls; a2a-agent/tests/e2e/composite.rs runs it against real agents",
    ),
    ("CMP-17", "a gateway serving composites itself (§19, MAY); not served by a2a-gateway yet"),
    // Judgements of prose.
    ("CAP-4", "says what a description should say: a judgement of prose, for a reviewer"),
    ("CAP-6", "names should be verb phrases: a judgement of English, for a reviewer"),
    ("CAP-15", "whether a composite capability is offered whole is a fact about the agent's business, not its answers"),
    // Internals of the agent.
    ("NEG-14", "compiling the agreed schema once is an implementation choice invisible on the wire"),
    ("ST-5", "how often a handler runs is internal; what is visible (a second CONFIRM starts nothing) is CONF-2"),
    (
        "JCS-18",
        "idempotence of the agent's canonicalizer is internal; its output is checked in signature/canonical-json",
    ),
    (
        "EID-4",
        "strictly increasing timestamps hold within one process; the suite cannot tell which process of a deployment (or gateway) made an id",
    ),
    (
        "CONF-5",
        "the suite cannot know an unknown agent's concurrency limit or safely drive it there; any 503 seen is checked for Retry-After by responses/required-headers",
    ),
    ("AUTH-7", "depends on the agent's configured internal domains, which the suite cannot learn"),
    (
        "DID-23",
        "a kid naming another DID than the signer's is caught earlier, as sender_mismatch (INT-6 step 4, checked in signature/sender-mismatch)",
    ),
    ("FB-5", "how a deployment shares its capability registry"),
    ("DID-32", "the optional DNS TXT variant; interoperability uses the did:web document only"),
    ("GW-5", "version translation by a gateway needs agents behind it of another version, which the suite cannot see"),
    (
        "GW-1",
        "checked by running this whole suite against the gateway (its agent side); its caller side, towards its agents, is not visible from outside",
    ),
    // Observable with a set-up the suite does not make.
    (
        "DID-28",
        "a key rotation is seen only after 30 s of cache (the rate limit of DID-28); the suite keeps runs short and does not wait",
    ),
    ("DID-29", "needs a public DNS name that resolves to a private address, which an offline run cannot provide"),
    // Streaming results (§18, the optional `streaming` feature): the streaming/* checks cover what any capability shows
    // (ids, the final event, resumption); these need set-ups the suite does not make, and
    // a2a-agent/tests/e2e/streaming.rs covers them over real HTTP.
    ("STR-3", "a caller requirement (read Content-Type after sending A2A-Stream); the suite does"),
    (
        "STR-5",
        "storage internals (events kept in shared storage); observable only with several processes, covered by a2a-agent/tests/e2e/streaming.rs",
    ),
    (
        "STR-7",
        "needs the agent to sign its responses, which the suite cannot configure; covered by a2a-agent/tests/e2e/streaming.rs",
    ),
    ("STR-8", "needs a handler that emits more than the limits; covered by a2a-agent/tests/e2e/streaming.rs"),
    (
        "STR-9",
        "needs a quiet execution longer than the heartbeat interval (15 s by default); covered by a2a-agent/tests/e2e/streaming.rs",
    ),
    ("STR-10", "needs max_streams concurrent streams; covered by a2a-agent/tests/e2e/streaming.rs"),
    (
        "STR-13",
        "a caller requirement (resume with backoff, de-duplicate); a2a-client's EventStream does it, tested in a2a-client/tests",
    ),
    // The MCP front (§21, optional): the mcp/* checks cover the revisions, the tools, a call, a refusal and the
    // JSON-RPC errors; these need set-ups the suite does not make, and tests/gateway/mcp.rs (the official MCP Python
    // SDK through a gateway) and a2a-agent's e2e mcp.rs cover them.
    (
        "MCP-1",
        "which A2A endpoint a front calls, and that it never bypasses it, is not visible from outside; the gateway's and the agent's MCP tests drive /mcp in front of real agents",
    ),
    (
        "MCP-3",
        "Host validation needs a request with a Host the target does not answer, which depends on its configured allowed_hosts; rmcp enforces it, checked by the gateway's MCP tests' defaults (loopback)",
    ),
    (
        "MCP-4",
        "the front's body limit is configuration the suite cannot learn; tests/gateway/mcp.rs (malformed_calls_are_json_rpc_errors) sends a body over it",
    ),
    ("MCP-7", "needs more capabilities than mcp.max_tools, which a caller cannot add"),
    (
        "MCP-8",
        "a capabilities document that names a capability twice is itself invalid (CAP-7); versions are names, checked with the tools' names in mcp/tools-list",
    ),
    (
        "MCP-14",
        "needs a capability that emits progress events and a caller's progressToken over a stream; tests/gateway/mcp.rs checks it with the official MCP Python SDK",
    ),
    ("MCP-15", "needs a call longer than the front's configured call_timeout_ms, which the suite cannot learn"),
    (
        "MCP-16",
        "needs a slow capability and the agent's view of its execution after the MCP stream is closed; tests/gateway/mcp.rs cancels with the official MCP Python SDK and checks the agent saw CANCEL",
    ),
    (
        "MCP-17",
        "the keep-alive interval is configuration the suite cannot learn; tests/gateway/mcp.rs relies on it for cancellation",
    ),
    (
        "MCP-18",
        "the DID the front calls as is seen only by the agent behind it; tests/gateway/mcp.rs checks the handler's sender",
    ),
    (
        "MCP-19",
        "needs an oauth2 issuer or api key the agent trusts; tests/gateway/mcp.rs passes a bearer token and an A2A-Api-Key through",
    ),
    (
        "MCP-20",
        "needs a front configured with an identity the agent can resolve; tests/gateway/mcp.rs checks did_auth tools with a signing front",
    ),
    // MCP servers' tools as capabilities (§21.9): a caller sees ordinary capabilities, which the other checks cover;
    // what happens between the agent and its MCP server is internal to the agent. a2a-agent/tests/e2e/mcp_outbound.rs
    // runs an agent against a server written with the official MCP Python SDK, over Streamable HTTP and stdio.
    ("MCP-30", "an imported tool is an ordinary capability to the suite; the other checks cover it as any capability"),
    ("MCP-31", "which tools the agent imports is its configuration, which the suite does not know"),
    ("MCP-32", "the MCP tool names behind an agent's capabilities are internal to the agent"),
    (
        "MCP-33",
        "a tool that was not imported is reported to the operator (log, a2a-server check, console), not to callers",
    ),
    (
        "MCP-34",
        "the MCP server's inputSchema is visible only to the agent; the suite checks every declared schema anyway",
    ),
    ("MCP-35", "the tools/call result behind an execution's result is visible only to the agent"),
    ("MCP-36", "needs an MCP tool that reports isError behind the agent; covered by mcp_outbound.rs"),
    (
        "MCP-37",
        "notifications/cancelled reaches the MCP server, which the suite does not see; covered by mcp_outbound.rs",
    ),
    ("MCP-38", "start-up with an unreachable MCP server happens before the agent serves anything the suite can reach"),
    ("MCP-39", "needs the MCP server behind the agent to go away and come back, which the suite cannot arrange"),
    ("MCP-40", "a stdio MCP server's process and environment are internal to the agent (as HDL-5)"),
    ("MCP-41", "tools/list_changed is sent by the MCP server to the agent, which the suite does not see"),
];

/// The reason a requirement is not checked, if it is listed.
pub fn reason(id: &str) -> Option<&'static str> {
    NOT_CHECKED.iter().find(|(i, _)| *i == id).map(|(_, r)| *r)
}
