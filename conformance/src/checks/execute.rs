//! EXECUTE (§7), payload validation (§6.3.4) and execution ids (§8.5).

use std::time::Duration;

use a2a_core::execution_id::ExecutionId;
use serde_json::{Value, json};

use super::applies::{IDEMPOTENCY, MAIN};
use super::{execute_req, executed, main_plan, negotiate, result_path, result_req, show};
use crate::check;
use crate::check::{Check, Outcome, Stop, Trial};
use crate::ctx::{CallerAuth, CapPlan, SENDER_B};
use crate::payload;

pub(super) fn checks() -> Vec<Check> {
    vec![
        check!(
            "execute/happy-path",
            ["EXE-4", "EID-1", "EID-2", "EID-5", "EID-11"],
            Must,
            MAIN,
            "EXECUTE of a valid payload is answered 201 with an ExecuteResponse (status received), A2A-Execution-ID, A2A-Negotiation-ID and Location: /a2a/result/{id} (path-segment encoded); the id is sender_nanoseconds_suffix with the caller's DID and a 26-character base32 suffix",
            happy_path
        ),
        check!(
            "execute/no-negotiation",
            ["EXE-1"],
            Must,
            ALWAYS_TEXT,
            "EXECUTE without A2A-Negotiation-ID is 400 negotiation_required; with an unknown one, 404 unknown_negotiation",
            no_negotiation
        ),
        check!(
            "execute/payload-invalid",
            ["EXE-3", "NEG-42", "NEG-43"],
            Must,
            MAIN,
            "a payload that does not match the agreed schema is answered 422 payload_invalid with details.errors: at most 32 {path, message} at the paths the reference validator reports, sorted",
            payload_invalid
        ),
        check!(
            "execute/invalid-json",
            ["EXE-3", "TR-7"],
            Must,
            MAIN,
            "an EXECUTE body that is not JSON is answered 400 invalid_json",
            invalid_json
        ),
        check!(
            "execute/formats-asserted",
            ["NEG-40"],
            Must,
            MAIN,
            "format is asserted: an invalid date-time, email, uuid or ipv4 is refused with 422 payload_invalid at its path",
            formats_asserted
        ),
        check!(
            "execute/no-work-before-confirm",
            ["EXE-5", "RES-4"],
            Must,
            MAIN,
            "nothing runs before CONFIRM: RESULT shows received, still received later, and reading it changes nothing (the first CONFIRM is still 202)",
            no_work_before_confirm
        ),
        check!(
            "execute/confirm-window",
            ["EXE-6"],
            Must,
            MAIN,
            "confirm_by is created_at plus the negotiation's confirm_window_ms",
            confirm_window
        ),
        check!(
            "execute/confirm-window-elapses",
            ["EXE-6", "CONF-3"],
            Must,
            SHORT_WINDOW,
            "an execution not confirmed by confirm_by is canceled with confirm_window_elapsed, and a late CONFIRM is 409 invalid_state",
            confirm_window_elapses
        ),
        check!(
            "execute/idempotency",
            ["EXE-7"],
            Must,
            IDEMPOTENCY,
            "the same Idempotency-Key, negotiation and payload is answered 200 with the original execution, also with the payload written in another member order and spacing (equal canonical forms); the key with another payload or another negotiation is 409 idempotency_conflict; another sender's EXECUTE with the key is its own new execution (when the capability needs no credentials)",
            idempotency
        ),
        check!(
            "execute/idempotency-after-validation",
            ["EXE-9"],
            Must,
            IDEMPOTENCY,
            "an invalid payload sent with an Idempotency-Key already used is 422 payload_invalid (not 409, not the earlier execution), and afterwards the key still answers the original execution",
            idempotency_after_validation
        ),
        check!(
            "execute/ids-unique",
            ["EID-3", "EID-6", "EID-7"],
            Must,
            MAIN,
            "execution ids are distinct and carry the time of their creation in nanoseconds, written without leading zeros",
            ids_unique
        ),
        check!(
            "execute/sender-with-path-and-port",
            ["EID-2", "EID-8", "EID-11", "EID-12", "RES-5"],
            Must,
            MAIN,
            "a sender whose DID has a port and underscores in its path gets ids that parse from the right, readable with the encoded and with the raw path segment",
            sender_with_path_and_port
        ),
        check!(
            "result/malformed-ids",
            ["EID-9", "EID-12"],
            Must,
            ALWAYS_TEXT,
            "RESULT and CONFIRM of ids that do not parse, are double-encoded, are badly escaped or over 1 800 bytes are 404 unknown_execution (never 400 or 500)",
            malformed_ids
        ),
    ]
}

const ALWAYS_TEXT: &str = super::applies::ALWAYS;
const SHORT_WINDOW: &str = "the negotiation's confirm_window_ms is at most 5 s (waiting longer is left out)";

async fn happy_path(t: &mut Trial<'_>) -> Outcome {
    let plan = main_plan(t)?;
    let neg = negotiate(t, &plan, &plan.decl.input_schema).await?;
    let r = t.send("EXECUTE a valid payload", execute_req(t, &plan, &neg.id, &plan.payload)).await?;
    t.expect_status(&r, 201);
    let body = r.json().unwrap_or(Value::Null);
    let parsed: Result<a2a_core::wire::ExecuteResponse, _> = serde_json::from_value(body.clone());
    t.check(
        parsed.is_ok(),
        "an ExecuteResponse",
        match &parsed {
            Ok(_) => "an ExecuteResponse".into(),
            Err(e) => format!("{e}: {}", show(&body)),
        },
    );
    t.check(body["status"] == "received", "status \"received\"", format!("{}", body["status"]));
    t.check(
        body["negotiation_id"] == neg.id.as_str(),
        format!("negotiation_id {:?}", neg.id),
        format!("{}", body["negotiation_id"]),
    );
    let id = body["execution_id"].as_str().unwrap_or("").to_owned();
    t.check(
        r.header("a2a-execution-id") == Some(id.as_str()),
        format!("A2A-Execution-ID: {id}"),
        format!("{:?}", r.header("a2a-execution-id")),
    );
    t.check(
        r.header("a2a-negotiation-id") == Some(neg.id.as_str()),
        format!("A2A-Negotiation-ID: {}", neg.id),
        format!("{:?}", r.header("a2a-negotiation-id")),
    );
    let base_path = url::Url::parse(&t.ctx.endpoint).map(|u| u.path().to_owned()).unwrap_or_default();
    let want_location = format!("{base_path}{}", result_path(&id));
    let loc = r.header("location").unwrap_or("");
    let loc_path = url::Url::parse(loc).map(|u| u.path().to_owned()).unwrap_or_else(|_| loc.to_owned());
    t.check(loc_path == want_location, format!("Location: {want_location}"), format!("{loc:?}"));
    let parsed = ExecutionId::parse(&id);
    t.check(
        parsed.is_ok(),
        "an execution id sender_unix-time-ns_suffix (EID-1)",
        match &parsed {
            Ok(_) => id.clone(),
            Err(e) => format!("{id:?}: {e}"),
        },
    );
    if let Ok(e) = parsed {
        t.check(
            e.sender().as_str() == plan.sender(),
            format!("the caller's DID {} as sender part", plan.sender()),
            e.sender().to_string(),
        );
        let last = e.suffix().chars().last().unwrap_or(' ');
        t.check(
            "aeimquy4".contains(last),
            "a suffix whose last character carries 3 bits and 2 zero bits (a e i m q u y 4)",
            e.suffix().to_owned(),
        );
    }
    Ok(())
}

async fn no_negotiation(t: &mut Trial<'_>) -> Outcome {
    let r = t.send("EXECUTE without A2A-Negotiation-ID", t.ctx.request("POST", "/execute").json(&json!({}))).await?;
    t.expect_error(&r, 400, "negotiation_required");
    let req =
        t.ctx.request("POST", "/execute").header("A2A-Negotiation-ID", "n_unknownprobe00000000000000").json(&json!({}));
    let r = t.send("EXECUTE with an unknown A2A-Negotiation-ID", req).await?;
    t.expect_error(&r, 404, "unknown_negotiation");
    Ok(())
}

async fn payload_invalid(t: &mut Trial<'_>) -> Outcome {
    let plan = main_plan(t)?;
    let neg = negotiate(t, &plan, &plan.decl.input_schema).await?;
    let agreed = neg.agreed().clone();
    let mut cases = payload::invalid(&agreed);
    cases.insert(
        0,
        payload::Invalid {
            what: "a JSON array instead of an object".into(),
            payload: json!([1, 2]),
            paths: vec![String::new()],
        },
    );
    for case in cases {
        let r = t
            .send(format!("EXECUTE a payload with {}", case.what), execute_req(t, &plan, &neg.id, &case.payload))
            .await?;
        t.expect_error(&r, 422, "payload_invalid");
        let errors = r.error_details()["errors"].clone();
        let list = errors.as_array().cloned().unwrap_or_default();
        let shaped = !list.is_empty()
            && list.len() <= 32
            && list.iter().all(|e| e["path"].is_string() && e["message"].is_string());
        t.check(shaped, "details.errors: 1 to 32 {path, message}", show(&errors));
        let paths: Vec<String> = list.iter().filter_map(|e| e["path"].as_str().map(str::to_owned)).collect();
        // NEG-43: sorted by path (SCH-3), then by message; identical errors once.
        let pairs: Vec<(String, String)> = list
            .iter()
            .map(|e| (e["path"].as_str().unwrap_or("").to_owned(), e["message"].as_str().unwrap_or("").to_owned()))
            .collect();
        let mut sorted = pairs.clone();
        sorted.sort_by(|a, b| pointer_order(&a.0, &b.0).then_with(|| a.1.cmp(&b.1)));
        t.check(pairs == sorted, "errors sorted by path, then by message", format!("{pairs:?}"));
        let mut once = sorted.clone();
        once.dedup();
        t.check(once.len() == sorted.len(), "identical errors once", format!("{pairs:?}"));
        let mut distinct = paths.clone();
        distinct.dedup();
        if !case.paths.is_empty() && case.paths != [String::new()] {
            t.check(distinct == case.paths, format!("errors at {:?}", case.paths), format!("{distinct:?}"));
        }
    }
    Ok(())
}

/// The order of SCH-3: segment by segment, indices as numbers, a prefix first.
fn pointer_order(a: &str, b: &str) -> std::cmp::Ordering {
    let seg =
        |s: &str| -> Vec<String> { s.split('/').skip(1).map(|x| x.replace("~1", "/").replace("~0", "~")).collect() };
    let (sa, sb) = (seg(a), seg(b));
    for (x, y) in sa.iter().zip(sb.iter()) {
        let o = match (x.parse::<u64>(), y.parse::<u64>()) {
            (Ok(i), Ok(j)) => i.cmp(&j),
            _ => x.chars().cmp(y.chars()),
        };
        if o != std::cmp::Ordering::Equal {
            return o;
        }
    }
    sa.len().cmp(&sb.len())
}

async fn invalid_json(t: &mut Trial<'_>) -> Outcome {
    let plan = main_plan(t)?;
    let neg = negotiate(t, &plan, &plan.decl.input_schema).await?;
    let req = execute_req(t, &plan, &neg.id, &Value::Null).body(b"{\"title\": ".to_vec());
    let r = t.send("EXECUTE with a body that is not JSON", req).await?;
    t.expect_error(&r, 400, "invalid_json");
    Ok(())
}

/// The plan's schema with probe properties added (when the capability accepts extra members).
fn with_probes(plan: &CapPlan, probes: &[(&str, Value)]) -> Option<Value> {
    if plan.decl.input_schema["additionalProperties"] == false {
        return None;
    }
    let mut p = plan.decl.input_schema.clone();
    let props = p.as_object_mut()?.entry("properties").or_insert_with(|| json!({}));
    for (name, schema) in probes {
        props.as_object_mut()?.insert((*name).to_owned(), schema.clone());
    }
    Some(p)
}

async fn formats_asserted(t: &mut Trial<'_>) -> Outcome {
    let plan = main_plan(t)?;
    let probes = [
        ("probe_date_time", "date-time", "2026-01-01T00:00:00Z", "yesterday at noon"),
        ("probe_email", "email", "conformance@example.com", "not an email"),
        ("probe_uuid", "uuid", "00000000-0000-4000-8000-000000000000", "not-a-uuid"),
        ("probe_ipv4", "ipv4", "192.0.2.1", "300.1.2.3"),
    ];
    let schemas: Vec<(&str, Value)> =
        probes.iter().map(|(n, f, _, _)| (*n, json!({"type": "string", "format": f}))).collect();
    let Some(proposal) = with_probes(&plan, &schemas) else {
        return Err(Stop::Skip(format!(
            "{} is closed (additionalProperties: false): the suite cannot add a property with a format",
            plan.decl.name
        )));
    };
    let neg = negotiate(t, &plan, &proposal).await?;
    let mut good = plan.payload.clone();
    for (n, _, ok, _) in &probes {
        good[*n] = json!(ok);
    }
    let r = t
        .send("EXECUTE with valid date-time, email, uuid and ipv4 values", execute_req(t, &plan, &neg.id, &good))
        .await?;
    t.expect_status(&r, 201);
    for (n, f, _, bad) in &probes {
        let mut p = good.clone();
        p[*n] = json!(bad);
        let r = t.send(format!("EXECUTE with an invalid {f} ({bad:?})"), execute_req(t, &plan, &neg.id, &p)).await?;
        t.expect_error(&r, 422, "payload_invalid");
        let paths: Vec<String> = r.error_details()["errors"]
            .as_array()
            .map(|a| a.iter().filter_map(|e| e["path"].as_str().map(str::to_owned)).collect())
            .unwrap_or_default();
        t.check(paths == [format!("/{n}")], format!("one error at /{n}"), format!("{paths:?}"));
    }
    Ok(())
}

async fn no_work_before_confirm(t: &mut Trial<'_>) -> Outcome {
    let plan = main_plan(t)?;
    let (_, exe) = executed(t, &plan).await?;
    let r = t.send("RESULT right after EXECUTE", result_req(t, &plan, &exe.id, None)).await?;
    t.expect_status(&r, 200);
    let s = r.json().map(|b| b["status"].clone()).unwrap_or(Value::Null);
    t.check(s == "received", "status \"received\" (nothing runs before CONFIRM)", format!("{s}"));
    tokio::time::sleep(Duration::from_millis(600)).await;
    let r = t.send("RESULT 600 ms later", result_req(t, &plan, &exe.id, None)).await?;
    let s = r.json().map(|b| b["status"].clone()).unwrap_or(Value::Null);
    t.check(s == "received", "still \"received\"", format!("{s}"));
    let req = t.ctx.for_cap(&plan, "POST", "/confirm").json(&super::execution_ref(&exe.id));
    let r = t.send("the first CONFIRM after the reads", req).await?;
    t.check(r.status == 202, "202: reading RESULT confirmed nothing", r.summary());
    Ok(())
}

async fn confirm_window(t: &mut Trial<'_>) -> Outcome {
    let plan = main_plan(t)?;
    let (neg, exe) = executed(t, &plan).await?;
    t.step("compare created_at, confirm_by and confirm_window_ms");
    let window = neg.body["confirm_window_ms"].as_u64();
    let created = exe.body["created_at"].as_str().and_then(a2a_core::wire::parse_timestamp);
    let by = exe.body["confirm_by"].as_str().and_then(a2a_core::wire::parse_timestamp);
    let diff = created.zip(by).and_then(|(c, b)| b.duration_since(c).ok()).map(|d| d.as_millis() as i128);
    let ok = match (diff, window) {
        (Some(d), Some(w)) => (d - i128::from(w)).abs() <= 1,
        _ => false,
    };
    t.check(
        ok,
        format!("confirm_by - created_at = confirm_window_ms ({window:?})"),
        format!("{:?} ms ({} .. {})", diff, exe.body["created_at"], exe.body["confirm_by"]),
    );
    Ok(())
}

async fn confirm_window_elapses(t: &mut Trial<'_>) -> Outcome {
    let plan = main_plan(t)?;
    let neg = negotiate(t, &plan, &plan.decl.input_schema).await?;
    let window = neg.body["confirm_window_ms"].as_u64().unwrap_or(u64::MAX);
    if window > 5_000 {
        return Err(Stop::Skip(format!("confirm_window_ms is {window} ms; the suite waits at most 5 s")));
    }
    let exe = super::execute(t, &plan, &neg.id, &plan.payload).await?;
    tokio::time::sleep(Duration::from_millis(window + 500)).await;
    let r = t.send("RESULT after the confirm window", result_req(t, &plan, &exe.id, None)).await?;
    let b = r.json().unwrap_or(Value::Null);
    t.check(
        b["status"] == "canceled" && b["error"]["code"] == "confirm_window_elapsed",
        "status canceled, error.code confirm_window_elapsed",
        show(&b),
    );
    let r = t
        .send("CONFIRM after the window", t.ctx.for_cap(&plan, "POST", "/confirm").json(&super::execution_ref(&exe.id)))
        .await?;
    t.expect_error(&r, 409, "invalid_state");
    Ok(())
}

async fn idempotency(t: &mut Trial<'_>) -> Outcome {
    if !t.ctx.disc.has_feature("idempotency") {
        return Err(Stop::Skip("the agent does not list idempotency".into()));
    }
    let plan = main_plan(t)?;
    let neg = negotiate(t, &plan, &plan.decl.input_schema).await?;
    let key = format!("conformance-{}", crate::identity::unix_now());
    let r1 = t
        .send(
            "EXECUTE with an Idempotency-Key",
            execute_req(t, &plan, &neg.id, &plan.payload).header("Idempotency-Key", key.clone()),
        )
        .await?;
    t.expect_status(&r1, 201);
    let first = r1.json().map(|b| b["execution_id"].clone()).unwrap_or(Value::Null);
    let r2 = t
        .send(
            "the same EXECUTE again (a retry)",
            execute_req(t, &plan, &neg.id, &plan.payload).header("Idempotency-Key", key.clone()),
        )
        .await?;
    t.expect_status(&r2, 200);
    let second = r2.json().map(|b| b["execution_id"].clone()).unwrap_or(Value::Null);
    t.check(first == second && first.is_string(), format!("the original execution {first}"), format!("{second}"));
    // EXE-7: "an equal payload" is equal canonical forms (RFC 8785), not equal bytes: the members in another order
    // and with spaces are the same payload.
    let respaced = super::reversed_json(&plan.payload, true);
    let req = execute_req(t, &plan, &neg.id, &plan.payload)
        .body(respaced.clone().into_bytes())
        .header("Idempotency-Key", key.clone());
    let r = t.send(format!("the same EXECUTE again, its payload written {respaced}"), req).await?;
    t.expect_status(&r, 200);
    let again = r.json().map(|b| b["execution_id"].clone()).unwrap_or(Value::Null);
    t.check(first == again, format!("the original execution {first} (an equal payload)"), format!("{again}"));
    match another_payload(&neg.agreed().clone(), &plan.payload) {
        Some(different) => {
            let req = execute_req(t, &plan, &neg.id, &different).header("Idempotency-Key", key.clone());
            let r =
                t.send(format!("the key again with the same negotiation and another payload {different}"), req).await?;
            t.expect_error(&r, 409, "idempotency_conflict");
        }
        None => t.step("no second valid payload could be made: the key with another payload is not tried"),
    }
    let other = negotiate(t, &plan, &plan.decl.input_schema).await?;
    let r3 = t
        .send(
            "the key again with another negotiation",
            execute_req(t, &plan, &other.id, &plan.payload).header("Idempotency-Key", key.clone()),
        )
        .await?;
    t.expect_error(&r3, 409, "idempotency_conflict");
    // EXE-7: the key is the sender's: another sender's EXECUTE with the same key is its own. The suite can claim a
    // second sender only for a capability that needs no credentials.
    if matches!(plan.auth, CallerAuth::None) {
        let body = super::negotiate_body(&plan.decl.name, &plan.decl.input_schema);
        let req = t.ctx.for_cap(&plan, "POST", "/negotiate").set("A2A-Sender-ID", SENDER_B).json(&body);
        let r = t.send(format!("NEGOTIATE as {SENDER_B}"), req).await?;
        let theirs = r.json().and_then(|b| b["negotiation_id"].as_str().map(str::to_owned));
        t.require(theirs.is_some(), "a negotiation_id", r.summary())?;
        let req = execute_req(t, &plan, theirs.as_deref().unwrap_or(""), &plan.payload)
            .set("A2A-Sender-ID", SENDER_B)
            .header("Idempotency-Key", key);
        let r = t.send(format!("EXECUTE as {SENDER_B} with the same Idempotency-Key"), req).await?;
        let id = r.json().map(|b| b["execution_id"].clone()).unwrap_or(Value::Null);
        t.check(
            r.status == 201 && id.is_string() && id != first,
            format!("201 with a new execution of {SENDER_B} (the key is scoped to the sender)"),
            r.summary(),
        );
    }
    Ok(())
}

/// A valid payload under `schema` other than `payload`: one member changed (a string lengthened, a number moved by
/// one, a boolean flipped), or `None` when no such change is valid.
fn another_payload(schema: &Value, payload: &Value) -> Option<Value> {
    let compiled = a2a_core::negotiation::AgreedSchema::compile(schema).ok()?;
    let members = payload.as_object()?;
    for (name, v) in members {
        let candidates: Vec<Value> = match v {
            Value::String(s) => vec![json!(format!("{s}x")), json!("x"), json!(format!("{s}a"))],
            Value::Number(n) => match (n.as_i64(), n.as_f64()) {
                (Some(i), _) => vec![json!(i + 1), json!(i - 1)],
                (None, Some(f)) => vec![json!(f + 1.0), json!(f - 1.0)],
                _ => vec![],
            },
            Value::Bool(b) => vec![json!(!b)],
            _ => vec![],
        };
        for c in candidates {
            let mut p = payload.clone();
            p[name.as_str()] = c;
            if compiled.is_valid(&p) && &p != payload {
                return Some(p);
            }
        }
    }
    None
}

async fn idempotency_after_validation(t: &mut Trial<'_>) -> Outcome {
    if !t.ctx.disc.has_feature("idempotency") {
        return Err(Stop::Skip("the agent does not list idempotency".into()));
    }
    let plan = main_plan(t)?;
    let neg = negotiate(t, &plan, &plan.decl.input_schema).await?;
    let key = format!("conformance-exe9-{}", crate::identity::unix_now());
    let r1 = t
        .send(
            "EXECUTE with an Idempotency-Key",
            execute_req(t, &plan, &neg.id, &plan.payload).header("Idempotency-Key", key.clone()),
        )
        .await?;
    t.expect_status(&r1, 201);
    let first = r1.json().map(|b| b["execution_id"].clone()).unwrap_or(Value::Null);
    let r2 = t
        .send(
            "the key again with an invalid payload (a JSON array)",
            execute_req(t, &plan, &neg.id, &json!([1, 2])).header("Idempotency-Key", key.clone()),
        )
        .await?;
    t.expect_error(&r2, 422, "payload_invalid");
    let r3 = t
        .send(
            "the first EXECUTE again (a retry)",
            execute_req(t, &plan, &neg.id, &plan.payload).header("Idempotency-Key", key),
        )
        .await?;
    t.expect_status(&r3, 200);
    let again = r3.json().map(|b| b["execution_id"].clone()).unwrap_or(Value::Null);
    t.check(first == again && first.is_string(), format!("the original execution {first}"), format!("{again}"));
    Ok(())
}

async fn ids_unique(t: &mut Trial<'_>) -> Outcome {
    let plan = main_plan(t)?;
    let neg = negotiate(t, &plan, &plan.decl.input_schema).await?;
    let mut ids = Vec::new();
    for i in 1..=5 {
        let r = t.send(format!("EXECUTE #{i}"), execute_req(t, &plan, &neg.id, &plan.payload)).await?;
        t.expect_status(&r, 201);
        let b = r.json().unwrap_or(Value::Null);
        let id = b["execution_id"].as_str().unwrap_or("").to_owned();
        // The timestamp is read as EID-8 says (from the right) and on its own, so that the check holds whatever
        // else is wrong with the id (other checks judge the rest): decimal digits without leading zeros, in 64 bits.
        let ts = id.rsplit('_').nth(1).unwrap_or("");
        let canonical = !ts.is_empty()
            && ts.bytes().all(|c| c.is_ascii_digit())
            && (ts == "0" || !ts.starts_with('0'))
            && ts.parse::<u64>().is_ok();
        t.check(
            canonical,
            "a unix-time-ns of decimal digits without leading zeros that fits in 64 bits (EID-3)",
            format!("{ts:?} in {id:?}"),
        );
        if let (Ok(ns), Some(created)) =
            (ts.parse::<u64>(), b["created_at"].as_str().and_then(a2a_core::wire::parse_timestamp))
        {
            let created_ns = created.duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos()) as i128;
            let off = (i128::from(ns) - created_ns).abs();
            t.check(
                off < 5_000_000_000,
                "a timestamp in nanoseconds within 5 s of created_at (EID-3)",
                format!("{ns} ns vs created_at {}", b["created_at"]),
            );
        }
        ids.push(id);
    }
    t.step("compare the ids");
    let distinct: std::collections::HashSet<_> = ids.iter().collect();
    t.check(distinct.len() == ids.len(), "five distinct ids", format!("{ids:?}"));
    let suffixes: std::collections::HashSet<_> = ids.iter().map(|i| i.rsplit('_').next().unwrap_or("")).collect();
    t.check(suffixes.len() == ids.len(), "five distinct random suffixes", format!("{suffixes:?}"));
    Ok(())
}

async fn sender_with_path_and_port(t: &mut Trial<'_>) -> Outcome {
    let mut plan = main_plan(t)?;
    if !matches!(plan.auth, CallerAuth::None) {
        return Err(Stop::Skip("the only drivable capability needs credentials bound to one sender".into()));
    }
    let sender = "did:web:conformance.example%3A8443:team_a:bot_1";
    plan.auth = CallerAuth::None;
    let neg_req = t
        .ctx
        .for_cap(&plan, "POST", "/negotiate")
        .set("A2A-Sender-ID", sender)
        .json(&super::negotiate_body(&plan.decl.name, &plan.decl.input_schema));
    let r = t.setup(format!("NEGOTIATE as {sender}"), neg_req).await?;
    let neg_id = r.json().and_then(|b| b["negotiation_id"].as_str().map(str::to_owned));
    t.require(neg_id.is_some(), "200 with a negotiation_id", r.summary())?;
    let req = execute_req(t, &plan, &neg_id.unwrap_or_default(), &plan.payload).set("A2A-Sender-ID", sender);
    let r = t.send(format!("EXECUTE as {sender}"), req).await?;
    t.expect_status(&r, 201);
    let id = r.json().and_then(|b| b["execution_id"].as_str().map(str::to_owned)).unwrap_or_default();
    let parsed = ExecutionId::parse(&id);
    t.check(
        parsed.as_ref().is_ok_and(|e| e.sender().as_str() == sender),
        format!("an id whose sender part is {sender}"),
        id.clone(),
    );
    let encoded = result_path(&id);
    t.check(encoded.contains("%253A"), "the path segment encodes % as %25 (EID-11)", encoded.clone());
    let r = t
        .send("RESULT with the encoded segment", t.ctx.for_cap(&plan, "GET", &encoded).set("A2A-Sender-ID", sender))
        .await?;
    t.expect_status(&r, 200);
    let raw = format!("/result/{id}");
    let r = t
        .send("RESULT with the raw id as the segment", t.ctx.for_cap(&plan, "GET", &raw).set("A2A-Sender-ID", sender))
        .await?;
    t.expect_status(&r, 200);
    Ok(())
}

async fn malformed_ids(t: &mut Trial<'_>) -> Outcome {
    let good = "did:web:conformance.example_1719000000000000001_h6fgdqwzjyd3liod5hyci3mlc4";
    for (what, seg) in [
        ("an id that does not parse", "not-an-execution-id".to_owned()),
        ("an unknown well-formed id", good.to_owned()),
        ("a bad percent-escape", "did:web:conformance.example%zz_1_aaaaaaaaaaaaaaaaaaaaaaaaaa".to_owned()),
        ("invalid UTF-8 once decoded", "%ff%fe_1_aaaaaaaaaaaaaaaaaaaaaaaaaa".to_owned()),
        (
            "a segment over 1 800 bytes",
            format!("did:web:conformance.example:{}_1_aaaaaaaaaaaaaaaaaaaaaaaaaa", "a".repeat(1900)),
        ),
        ("a double-encoded id", "did%253Aweb%253Aconformance.example_1_aaaaaaaaaaaaaaaaaaaaaaaaaa".to_owned()),
    ] {
        let r = t.send(format!("RESULT of {what}"), t.ctx.request("GET", &format!("/result/{seg}"))).await?;
        t.expect_error(&r, 404, "unknown_execution");
    }
    for id in ["not-an-execution-id", good] {
        let r = t
            .send(format!("CONFIRM of {id:?}"), t.ctx.request("POST", "/confirm").json(&super::execution_ref(id)))
            .await?;
        t.expect_error(&r, 404, "unknown_execution");
    }
    Ok(())
}
