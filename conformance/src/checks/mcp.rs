//! The optional Model Context Protocol front (§21), checked from outside when the target serves `/mcp` on the origin
//! of its endpoint: the revisions (MCP-2), the tools made of the capabilities (MCP-5, MCP-6), a call that runs the
//! handshake (MCP-10, MCP-12), a refusal as a tool error carrying the §12 body (MCP-11, MCP-13), and the JSON-RPC
//! errors of what cannot be carried out (MCP-9).
//!
//! Requests are sent at the current revision (`2026-07-28`: stateless, each request carries its protocol metadata in
//! `_meta` and `MCP-Protocol-Version`). A `404` for `/mcp` means "not served" and every check is skipped.

use a2a_core::capability::AuthRequirement;
use serde_json::{Value, json};

use super::show;
use crate::check;
use crate::check::{Check, Outcome, Stop, Trial};
use crate::http::{Req, Resp};

/// When the MCP checks apply.
const MCP: &str = "the target serves MCP at /mcp on the origin of its endpoint (a POST there is not 404)";

/// When the MCP checks that call a tool apply.
const MCP_CALL: &str = "the target serves MCP at /mcp and has a capability with auth_requirement none whose input schema the suite can fill";

/// The MCP revision the checks speak.
const REVISION: &str = "2026-07-28";

pub(super) fn checks() -> Vec<Check> {
    vec![
        check!(
            "mcp/revisions",
            ["MCP-2"],
            Must,
            MCP,
            "server/discover at 2026-07-28 answers a result whose supportedVersions lists 2026-07-28 and which names tools in its capabilities; initialize at 2025-11-25 answers protocolVersion 2025-11-25 without an Mcp-Session-Id",
            revisions
        ),
        check!(
            "mcp/tools-list",
            ["MCP-5", "MCP-6"],
            Must,
            MCP,
            "tools/list (without credentials) answers one tool per capability with auth_requirement none, in the capabilities document's order, named as the capability, with its description (and \"(usually about N ms)\" when it gives estimated_latency_ms), its input_schema as inputSchema, annotations readOnlyHint false and openWorldHint true, _meta a2a/auth_requirement, no outputSchema; no tool for an oauth2 or api_key capability",
            tools_list
        ),
        check!(
            "mcp/call",
            ["MCP-10", "MCP-12"],
            Must,
            MCP_CALL,
            "tools/call of a capability with arguments valid under its input schema answers isError false, structuredContent a JSON object (the result when it is an object, otherwise {\"result\": ...}) and a text content holding the same JSON",
            call
        ),
        check!(
            "mcp/refusal",
            ["MCP-11", "MCP-13"],
            Must,
            MCP_CALL,
            "tools/call with arguments that break the capability's input schema answers a tool error: isError true, structuredContent the error body {error: {code: payload_invalid, message, details.errors}}, details.errors ([{path, message}]) and details.agreed_schema, a text content that starts with \"payload_invalid: \"",
            refusal
        ),
        check!(
            "mcp/malformed",
            ["MCP-9"],
            Must,
            MCP,
            "a tools/call naming no tool is the JSON-RPC error -32602 (its message naming tools/list); a body that is not JSON is -32700 or an HTTP 4xx; an unknown method is -32601 (HTTP 404 allowed)",
            malformed
        ),
    ]
}

/// `http://host:port/mcp` of the endpoint's origin.
fn mcp_url(t: &Trial<'_>) -> String {
    let origin = url::Url::parse(&t.ctx.endpoint).map(|u| u.origin().ascii_serialization()).unwrap_or_default();
    format!("{origin}/mcp")
}

/// A JSON-RPC request of `method` at the current revision.
fn request(t: &Trial<'_>, method: &str, params: Value) -> Req {
    let mut params = params;
    if let Some(p) = params.as_object_mut() {
        p.insert(
            "_meta".into(),
            json!({"io.modelcontextprotocol/protocolVersion": REVISION,
                   "io.modelcontextprotocol/clientCapabilities": {},
                   "io.modelcontextprotocol/clientInfo": {"name": "a2a-conformance", "version": env!("CARGO_PKG_VERSION")}}),
        );
    }
    // At 2026-07-28 the method, and a tool call's name, are repeated in `Mcp-Method` and `Mcp-Name`.
    let name = params["name"].as_str().map(str::to_owned);
    let mut req = raw(t, &json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).to_string(), REVISION)
        .header("Mcp-Method", method);
    if let Some(n) = name {
        req = req.header("Mcp-Name", n);
    }
    req
}

/// A POST of `body` to `/mcp`.
fn raw(t: &Trial<'_>, body: &str, revision: &str) -> Req {
    Req::new("POST", mcp_url(t))
        .header("Content-Type", "application/json")
        .header("Accept", "application/json, text/event-stream")
        .header("MCP-Protocol-Version", revision)
        .body(body.as_bytes().to_vec())
}

/// The JSON-RPC answer of a response: the JSON body, or the last `data:` line of an SSE stream that holds one.
fn answer(r: &Resp) -> Value {
    if let Some(v) = r.json() {
        return v;
    }
    let text = String::from_utf8_lossy(&r.body);
    text.lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
        .rfind(|v| v.get("id").is_some())
        .unwrap_or(Value::Null)
}

/// Sends a JSON-RPC request; skips every check when `/mcp` is not served.
async fn rpc(t: &mut Trial<'_>, title: &str, req: Req) -> Result<(Resp, Value), Stop> {
    let resp = t.send(title.to_owned(), req).await?;
    if resp.status == 404 {
        return Err(Stop::Skip(format!("the target does not serve MCP ({} is 404)", mcp_url(t))));
    }
    let v = answer(&resp);
    Ok((resp, v))
}

/// The capability to call (auth none) and a valid payload, or skip.
fn call_target(t: &Trial<'_>) -> Result<(a2a_core::capability::CapabilityDeclaration, Value), Stop> {
    t.ctx
        .disc
        .decls
        .iter()
        .filter(|d| d.auth_requirement == AuthRequirement::None && d.region_restriction.is_empty())
        .find_map(|d| crate::payload::valid(&d.input_schema).map(|p| (d.clone(), p)))
        .ok_or_else(|| {
            Stop::Skip("no capability with auth_requirement none whose input schema the suite can fill".into())
        })
}

async fn revisions(t: &mut Trial<'_>) -> Outcome {
    let (_, v) = rpc(t, "server/discover at 2026-07-28", request(t, "server/discover", json!({}))).await?;
    let versions = v["result"]["supportedVersions"].as_array().cloned().unwrap_or_default();
    t.check(
        versions.iter().any(|x| x == REVISION) && v["result"]["capabilities"]["tools"].is_object(),
        "a result listing 2026-07-28 in supportedVersions, with capabilities.tools",
        show(&v),
    );
    let init = json!({"jsonrpc": "2.0", "id": 2, "method": "initialize", "params": {"protocolVersion": "2025-11-25",
        "capabilities": {}, "clientInfo": {"name": "a2a-conformance", "version": env!("CARGO_PKG_VERSION")}}});
    let (resp, v) = rpc(t, "initialize at 2025-11-25", raw(t, &init.to_string(), "2025-11-25")).await?;
    t.check(
        v["result"]["protocolVersion"] == "2025-11-25" && resp.header("mcp-session-id").is_none(),
        "protocolVersion 2025-11-25 and no Mcp-Session-Id (stateless)",
        format!("{} {}", resp.summary(), show(&v)),
    );
    Ok(())
}

async fn tools_list(t: &mut Trial<'_>) -> Outcome {
    let (_, v) = rpc(t, "tools/list", request(t, "tools/list", json!({}))).await?;
    let tools = v["result"]["tools"].as_array().cloned().unwrap_or_default();
    let expected: Vec<_> =
        t.ctx.disc.decls.iter().filter(|d| d.auth_requirement == AuthRequirement::None).cloned().collect();
    let names: Vec<&str> = tools.iter().filter_map(|x| x["name"].as_str()).collect();
    let want: Vec<&str> = expected.iter().map(|d| d.name.as_str()).collect();
    t.check(names == want, format!("the tools {want:?}"), format!("{names:?}"));
    for d in &expected {
        let Some(tool) = tools.iter().find(|x| x["name"] == d.name.as_str()) else { continue };
        let schema = if d.input_schema.is_object() { d.input_schema.clone() } else { json!({"type": "object"}) };
        // MCP-6: the description, `(usually about N ms)` added when the declaration gives a latency.
        let description = match d.estimated_latency_ms {
            Some(ms) => format!("{} (usually about {ms} ms)", d.description),
            None => d.description.clone(),
        };
        t.check(
            tool["inputSchema"] == schema && tool["description"] == description.as_str(),
            format!("tool {} with the description {description:?} and inputSchema {}", d.name, show(&schema)),
            show(tool),
        );
        // MCP-6: the annotations, the auth requirement in `_meta`, and no outputSchema.
        let auth = serde_json::to_value(d.auth_requirement).unwrap_or(Value::Null);
        t.check(
            tool["annotations"]["readOnlyHint"] == false
                && tool["annotations"]["openWorldHint"] == true
                && tool["_meta"]["a2a/auth_requirement"] == auth
                && tool.get("outputSchema").is_none(),
            format!(
                "tool {} with annotations readOnlyHint false and openWorldHint true, _meta {{\"a2a/auth_requirement\": {auth}}}, no outputSchema",
                d.name
            ),
            show(tool),
        );
    }
    Ok(())
}

async fn call(t: &mut Trial<'_>) -> Outcome {
    let (d, payload) = call_target(t)?;
    let params = json!({"name": d.name, "arguments": payload});
    let (_, v) = rpc(t, "tools/call with valid arguments", request(t, "tools/call", params)).await?;
    let r = &v["result"];
    t.check(
        r["isError"] == false && r["structuredContent"].is_object() && r["content"][0]["type"] == "text",
        "isError false, structuredContent an object, a text content",
        show(&v),
    );
    // MCP-10: structuredContent is the result itself when it is an object (`{"result": ...}` only otherwise), and the
    // text content holds the same JSON.
    let text: Option<Value> = r["content"][0]["text"].as_str().and_then(|s| serde_json::from_str(s).ok());
    let same = match &text {
        Some(x) if x.is_object() => r["structuredContent"] == *x,
        Some(x) => r["structuredContent"] == json!({ "result": x }),
        None => false,
    };
    t.ensure(
        same,
        "structuredContent the result (an object as it is, anything else as {\"result\": ...}), the text content the same JSON",
        show(&v),
    )
}

async fn refusal(t: &mut Trial<'_>) -> Outcome {
    let (d, _) = call_target(t)?;
    let Some(bad) = crate::payload::invalid(&d.input_schema).into_iter().next() else {
        return Err(Stop::Skip(format!("the input schema of {} accepts every object", d.name)));
    };
    let params = json!({"name": d.name, "arguments": bad.payload});
    let (_, v) = rpc(
        t,
        &format!("tools/call with arguments that break the schema ({})", bad.what),
        request(t, "tools/call", params),
    )
    .await?;
    let r = &v["result"];
    t.check(
        r["isError"] == true
            && r["structuredContent"]["error"]["code"] == "payload_invalid"
            && r["structuredContent"]["error"]["message"].is_string()
            && r["content"][0]["text"].as_str().is_some_and(|s| s.starts_with("payload_invalid: ")),
        "a tool error carrying {error: {code: payload_invalid, ...}}",
        show(&v),
    );
    // MCP-13: the front checked the arguments against the agreed schema: details lists the errors ({path, message},
    // as EXE-3 lists them) and the agreed schema.
    let details = &r["structuredContent"]["error"]["details"];
    let errors = details["errors"].as_array().cloned().unwrap_or_default();
    t.ensure(
        !errors.is_empty()
            && errors.iter().all(|e| e["path"].is_string() && e["message"].is_string())
            && details["agreed_schema"].is_object(),
        "details with errors [{path, message}, ...] and the agreed_schema",
        show(&v),
    )
}

async fn malformed(t: &mut Trial<'_>) -> Outcome {
    let params = json!({"name": super::MISSING_CAPABILITY, "arguments": {}});
    let (_, v) = rpc(t, "tools/call of a tool that does not exist", request(t, "tools/call", params)).await?;
    t.check(
        v["error"]["code"] == -32602 && v["error"]["message"].as_str().is_some_and(|m| m.contains("tools/list")),
        "the JSON-RPC error -32602 naming tools/list",
        show(&v),
    );
    // Once /mcp answered the first request, a 404 is an answer like any other (MCP-9), not "not served".
    let resp = t.send("a body that is not JSON".to_owned(), raw(t, "{not json", REVISION)).await?;
    let v = answer(&resp);
    t.check(
        v["error"]["code"] == -32700 || (400..500).contains(&resp.status),
        "the JSON-RPC error -32700, or an HTTP 4xx",
        format!("{} {}", resp.summary(), show(&v)),
    );
    // Sent without `rpc`: the transport may answer an unknown method with HTTP 404 (its body the JSON-RPC error).
    let resp = t.send("an unknown method", request(t, "probe/unknown", json!({}))).await?;
    let v = answer(&resp);
    t.ensure(
        v["error"]["code"] == -32601 || (resp.status == 404 && v.is_null()),
        "the JSON-RPC error -32601 (HTTP 404 allowed)",
        format!("{} {}", resp.summary(), show(&v)),
    )
}
