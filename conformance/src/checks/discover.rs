//! DISCOVER (`OPTIONS /a2a`, §5.1) and the capabilities document (`GET /a2a/capabilities`, §5.3).

use a2a_core::capability;
use a2a_core::did::Did;
use a2a_core::headers as h;
use serde_json::{Value, json};

use super::applies::ALWAYS;
use crate::check;
use crate::check::{Check, Outcome, Trial};

pub(super) fn checks() -> Vec<Check> {
    vec![
        check!(
            "discover/status-204",
            ["DISC-1", "TR-3"],
            Must,
            ALWAYS,
            "OPTIONS /a2a is answered 204 with no body over HTTP/1.1, without authentication",
            status_204
        ),
        check!(
            "discover/any-version",
            ["HDR-3", "DISC-1"],
            Must,
            ALWAYS,
            "DISCOVER is answered whatever its A2A-Version and A2A-Sender-ID (none, or a version the agent does not speak)",
            any_version
        ),
        check!(
            "discover/headers",
            ["DISC-2", "HDR-7"],
            Must,
            ALWAYS,
            "DISCOVER carries A2A-Version: 0.3, the agent's did:web DID in A2A-Sender-ID and A2A-Capabilities",
            headers
        ),
        check!(
            "discover/capability-names",
            ["DISC-3", "CAP-5", "CAP-7"],
            Must,
            ALWAYS,
            "A2A-Capabilities is a compact JSON array of valid, distinct names, in the order of the capabilities document",
            capability_names
        ),
        check!(
            "discover/region-header",
            ["CAP-11", "DISC-2"],
            Must,
            ALWAYS,
            "A2A-Region maps every region-restricted capability to its regions (absent when none is restricted)",
            region_header
        ),
        check!(
            "capabilities/document",
            ["DISC-8"],
            Must,
            ALWAYS,
            "GET /a2a/capabilities is answered 200 with a CapabilitiesDocument for protocol 0.3 naming the agent's DID",
            document
        ),
        check!(
            "capabilities/order",
            ["DISC-9"],
            Must,
            ALWAYS,
            "the document holds the declaration of every advertised capability, in the order of A2A-Capabilities",
            order
        ),
        check!(
            "capabilities/declarations-valid",
            [
                "CAP-1", "CAP-2", "CAP-3", "CAP-8", "CAP-9", "CAP-10", "CAP-14", "CAP-17", "CAP-18", "CAP-19",
                "CAP-20", "SCH-18"
            ],
            Must,
            ALWAYS,
            "every published declaration is valid: only the members of §4.1 with their types, auth_requirement explicit, a non-blank description, valid sub-capabilities, regions and estimates, an input_schema that follows the schema rules",
            declarations_valid
        ),
        check!(
            "capabilities/features",
            ["DISC-10"],
            Must,
            ALWAYS,
            "features is an array of distinct feature names; CANCEL is served exactly when cancel is listed; every other feature listed is exercised by the checks gated on it",
            features
        ),
        check!(
            "capabilities/limits",
            ["DISC-11"],
            Should,
            ALWAYS,
            "the document announces limits (max_body_bytes, max_wait_ms, max_timeout_ms, confirm_window_ms)",
            limits
        ),
        check!(
            "transport/https",
            ["TR-4"],
            Should,
            ALWAYS,
            "the agent is served over HTTPS (plain HTTP only on loopback)",
            https
        ),
    ]
}

async fn status_204(t: &mut Trial<'_>) -> Outcome {
    let r = t.send("DISCOVER with A2A-Version and A2A-Sender-ID", t.ctx.request("OPTIONS", "")).await?;
    t.expect_status(&r, 204);
    t.check(r.body.is_empty(), "no body", format!("{} bytes", r.body.len()));
    t.check(r.version == "HTTP/1.1", "HTTP/1.1", r.version.clone());
    let r = t.send("DISCOVER with no header at all", t.ctx.bare("OPTIONS", "")).await?;
    t.expect_status(&r, 204);
    t.check(r.body.is_empty(), "no body", format!("{} bytes", r.body.len()));
    Ok(())
}

async fn any_version(t: &mut Trial<'_>) -> Outcome {
    for v in ["9.9", "0.2", "nonsense"] {
        let req = t.ctx.bare("OPTIONS", "").header("A2A-Version", v);
        let r = t.send(format!("DISCOVER with A2A-Version: {v}"), req).await?;
        t.check(r.status == 204, "204 (DISCOVER is how a caller learns the version)", r.summary());
    }
    let r = t.send("DISCOVER without A2A-Sender-ID", t.ctx.bare("OPTIONS", "").header("A2A-Version", "0.3")).await?;
    t.expect_status(&r, 204);
    Ok(())
}

async fn headers(t: &mut Trial<'_>) -> Outcome {
    let r = t.send("DISCOVER", t.ctx.request("OPTIONS", "")).await?;
    t.check(r.header(h::A2A_VERSION) == Some("0.3"), "A2A-Version: 0.3", format!("{:?}", r.header(h::A2A_VERSION)));
    let sender = r.header(h::A2A_SENDER_ID).unwrap_or("");
    let valid = Did::parse(sender);
    t.check(
        valid.is_ok(),
        "A2A-Sender-ID: a valid did:web DID",
        match &valid {
            Ok(_) => sender.to_owned(),
            Err(e) => format!("{sender:?}: {e}"),
        },
    );
    let caps = r.header(h::A2A_CAPABILITIES);
    t.check(caps.is_some(), "an A2A-Capabilities header", format!("{caps:?}"));
    Ok(())
}

async fn capability_names(t: &mut Trial<'_>) -> Outcome {
    let r = t.send("DISCOVER", t.ctx.request("OPTIONS", "")).await?;
    let raw = r.header(h::A2A_CAPABILITIES).unwrap_or("");
    let parsed = h::parse_capabilities(raw);
    t.check(
        parsed.is_ok(),
        "a JSON array of valid, distinct capability names",
        match &parsed {
            Ok(n) => format!("{n:?}"),
            Err(e) => format!("{raw:?}: {e}"),
        },
    );
    let names = parsed.unwrap_or_default();
    t.check(
        !raw.contains([' ', '\t', '\n']),
        "compact JSON (no blanks), e.g. [\"query_status\",\"submit_report\"]",
        raw.to_owned(),
    );
    let doc_names: Vec<String> = t
        .ctx
        .disc
        .doc
        .as_ref()
        .and_then(|d| d["capabilities"].as_array())
        .map(|a| a.iter().filter_map(|c| c["name"].as_str().map(str::to_owned)).collect())
        .unwrap_or_default();
    t.check(
        names == doc_names,
        "the names of the capabilities document, in its order",
        format!("header {names:?}, document {doc_names:?}"),
    );
    Ok(())
}

async fn region_header(t: &mut Trial<'_>) -> Outcome {
    let r = t.send("DISCOVER", t.ctx.request("OPTIONS", "")).await?;
    let expected: std::collections::BTreeMap<String, Vec<String>> = t
        .ctx
        .disc
        .decls
        .iter()
        .filter(|d| !d.region_restriction.is_empty())
        .map(|d| (d.name.clone(), d.region_restriction.clone()))
        .collect();
    match r.header(h::A2A_REGION) {
        None => t.check(
            expected.is_empty(),
            format!("A2A-Region: {}", h::format_region_map(&expected)),
            "no A2A-Region header",
        ),
        Some(v) => {
            let parsed = h::parse_region_map(v);
            t.check(
                parsed.as_ref().is_ok_and(|m| *m == expected) && !v.contains(' '),
                format!("compact A2A-Region {}", h::format_region_map(&expected)),
                match parsed {
                    Ok(_) => v.to_owned(),
                    Err(e) => format!("{v:?}: {e}"),
                },
            )
        }
    };
    Ok(())
}

async fn document(t: &mut Trial<'_>) -> Outcome {
    let r = t.send("GET /a2a/capabilities", t.ctx.request("GET", "/capabilities")).await?;
    t.expect_status(&r, 200);
    let body = r.json().unwrap_or(Value::Null);
    let parsed: Result<a2a_core::wire::CapabilitiesDocument, _> = serde_json::from_value(body.clone());
    t.check(
        parsed.is_ok(),
        "a CapabilitiesDocument (a2a_version, agent, capabilities, features, limits)",
        match &parsed {
            Ok(_) => "a CapabilitiesDocument".to_owned(),
            Err(e) => format!("{e}: {}", super::show(&body)),
        },
    );
    t.check(body["a2a_version"] == "0.3", "a2a_version \"0.3\"", format!("{}", body["a2a_version"]));
    if let Some(did) = &t.ctx.disc.agent_did {
        t.check(
            body["agent"]["id"] == did.as_str(),
            format!("agent.id {did:?} (DISCOVER's A2A-Sender-ID)"),
            format!("{}", body["agent"]["id"]),
        );
    }
    Ok(())
}

async fn order(t: &mut Trial<'_>) -> Outcome {
    t.step("compare A2A-Capabilities with the document");
    let names = t
        .ctx
        .disc
        .discover
        .as_ref()
        .and_then(|r| r.header(h::A2A_CAPABILITIES))
        .and_then(|v| h::parse_capabilities(v).ok());
    let Some(names) = names else {
        return Err(crate::check::Stop::Blocked(
            "DISCOVER gave no parsable A2A-Capabilities (discover/capability-names)".into(),
        ));
    };
    let doc: Vec<String> = t.ctx.disc.decls.iter().map(|d| d.name.clone()).collect();
    t.check(names == doc, format!("declarations for {names:?}, in that order"), format!("{doc:?}"));
    Ok(())
}

async fn declarations_valid(t: &mut Trial<'_>) -> Outcome {
    let r = t.send("GET /a2a/capabilities", t.ctx.request("GET", "/capabilities")).await?;
    let body = r.json().unwrap_or(Value::Null);
    let Some(list) = body["capabilities"].as_array() else {
        t.check(false, "a `capabilities` array", super::show(&body));
        return Ok(());
    };
    // A composite (§19, CMP-1) carries one member beyond §4.1, `composite`, at agents that list the feature.
    let composites = t
        .ctx
        .disc
        .doc
        .as_ref()
        .and_then(|d| d["features"].as_array())
        .is_some_and(|f| f.iter().any(|x| x == "composite"));
    let list: Vec<Value> = list
        .iter()
        .map(|d| {
            let mut d = d.clone();
            if composites
                && let Some(o) = d.as_object_mut()
                && o.get("composite").is_some_and(Value::is_object)
            {
                o.remove("composite");
            }
            d
        })
        .collect();
    for decl in &list {
        let name = decl["name"].as_str().unwrap_or("?");
        let res = capability::parse_declaration(decl);
        t.check(
            res.is_ok(),
            format!("a valid declaration of {name:?}"),
            match res {
                Ok(_) => "valid".to_owned(),
                Err(e) => format!("{} ({})", e, e.reason()),
            },
        );
    }
    let parsed: Vec<_> = list.iter().filter_map(|d| capability::parse_declaration(d).ok()).collect();
    if parsed.len() == list.len() {
        let all = capability::validate_all(&parsed);
        t.check(all.is_ok(), "distinct names", all.err().map_or("distinct".to_owned(), |e| e.to_string()));
    }
    Ok(())
}

async fn features(t: &mut Trial<'_>) -> Outcome {
    t.step("read features");
    let doc = t.ctx.disc.doc.clone().unwrap_or(Value::Null);
    let f = &doc["features"];
    let ok = f.is_null() || f.as_array().is_some_and(|a| a.iter().all(Value::is_string));
    t.check(ok, "an array of feature names (long_poll, cancel, idempotency)", super::show(f));
    let names: Vec<&str> = f.as_array().map(|a| a.iter().filter_map(Value::as_str).collect()).unwrap_or_default();
    let mut distinct = names.clone();
    distinct.sort_unstable();
    distinct.dedup();
    t.check(distinct.len() == names.len(), "each feature listed once", super::show(f));
    // DISC-10 both ways for the one optional endpoint: CANCEL is served exactly when `cancel` is listed. The
    // execution is unknown, so the request changes nothing; an agent that serves CANCEL answers 404
    // unknown_execution, one that does not answers its unknown path (404 not_found) or 405.
    let listed = t.ctx.disc.has_feature("cancel");
    let body = json!({"execution_id": "did:web:conformance.example_1_aaaaaaaaaaaaaaaaaaaaaaaaaa"});
    let r = t.send("POST /a2a/cancel of an unknown execution", t.ctx.request("POST", "/cancel").json(&body)).await?;
    let code = r.error_code();
    let served = r.status != 405 && !matches!(code.as_deref(), Some("not_found" | "method_not_allowed"));
    t.check(
        served == listed,
        if listed {
            "features lists cancel: POST /a2a/cancel is served (404 unknown_execution here)"
        } else {
            "features does not list cancel: POST /a2a/cancel is not served (404 not_found or 405)"
        },
        r.summary(),
    );
    Ok(())
}

async fn limits(t: &mut Trial<'_>) -> Outcome {
    t.step("read limits");
    let doc = t.ctx.disc.doc.clone().unwrap_or(Value::Null);
    let l = &doc["limits"];
    let ok = ["max_body_bytes", "max_wait_ms", "max_timeout_ms", "confirm_window_ms"].iter().all(|k| l[*k].is_u64());
    t.check(ok, "limits with max_body_bytes, max_wait_ms, max_timeout_ms, confirm_window_ms", super::show(l));
    Ok(())
}

async fn https(t: &mut Trial<'_>) -> Outcome {
    t.step("the endpoint's scheme");
    let scheme = url::Url::parse(&t.ctx.endpoint).map(|u| u.scheme().to_owned()).unwrap_or_default();
    let loopback = t.ctx.target_is_loopback();
    t.check(scheme == "https" || loopback, "https (or plain http on loopback)", t.ctx.endpoint.clone());
    Ok(())
}
