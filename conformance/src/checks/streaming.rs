//! Streaming results (§18, the optional `streaming` feature): RESULT with `A2A-Stream: true` answered as Server-Sent
//! Events with ids 1, 2, 3, ..., a final `result` event equal to the plain RESULT, and resumption with
//! `Last-Event-ID` after a dropped connection.
//!
//! The checks drive the plan's main capability, whatever it emits: every stream has at least the `status` event of the
//! handler's start and the `result` event, which is enough to see the ids, the final event and a resumption.

use std::time::Duration;

use serde_json::Value;

use super::{confirm, executed, main_plan, result_req, same_json, show, wait_terminal};
use crate::check;
use crate::check::{Check, OpenStream, Outcome, Stop, Trial};
use crate::ctx::CapPlan;
use crate::http::Req;
use crate::sse::{self, Event};

/// When the streaming checks apply.
const STREAMING: &str = "the agent lists \"streaming\" in features and advertises a capability the suite can drive";

/// The event types of §18.2.
const TYPES: [&str; 4] = ["status", "progress", "truncated", "result"];

/// Events read from one stream at most.
const MAX_EVENTS: usize = 5_000;

pub(super) fn checks() -> Vec<Check> {
    vec![
        check!(
            "streaming/events",
            ["STR-1", "STR-4", "STR-6"],
            Must,
            STREAMING,
            "RESULT with A2A-Stream: true is 200 text/event-stream (Cache-Control: no-store, A2A-Stream, A2A-Execution-ID) whose events have ids 1, 2, 3, ..., known types and one-line JSON data, end with exactly one result event equal to the plain RESULT, after which the agent ends the response; a second stream carries the same events",
            events
        ),
        check!(
            "streaming/resume-after-drop",
            ["STR-11", "STR-6"],
            Must,
            STREAMING,
            "a stream opened before CONFIRM and dropped after its first event, resumed with Last-Event-ID, carries exactly the events after that id: together nothing lost, nothing twice, the result last",
            resume_after_drop
        ),
        check!(
            "streaming/last-event-id",
            ["STR-11"],
            Must,
            STREAMING,
            "Last-Event-ID n answers exactly the events after n (0: all of them; the id of the result event: an empty stream that ends at once); an id beyond the last event, or not a decimal integer, is 400 invalid_header naming Last-Event-ID",
            last_event_id
        ),
        check!(
            "streaming/header-values",
            ["STR-2", "STR-1"],
            Must,
            STREAMING,
            "A2A-Stream is compared case-insensitively with blanks ignored (\" TRUE \" streams), false asks for the plain JSON RESULT, any other value is 400 invalid_header naming A2A-Stream; RESULT's own checks come first (an unknown execution is a JSON 404 unknown_execution)",
            header_values
        ),
        check!(
            "streaming/drop-keeps-running",
            ["STR-12"],
            Must,
            STREAMING_SLOW,
            "a stream of a slow execution, dropped after its first event while the handler runs, changes nothing: the execution runs on to its end (not canceled)",
            drop_keeps_running
        ),
    ]
}

/// When the checks that drop a stream of a running execution apply.
const STREAMING_SLOW: &str = "the agent lists \"streaming\" in features and advertises a capability the suite can drive that runs for a second or more";

async fn drop_keeps_running(t: &mut Trial<'_>) -> Outcome {
    if !t.ctx.disc.has_feature("streaming") {
        return Err(Stop::Skip("the agent does not list streaming".into()));
    }
    let plan = super::slow_plan(t)?;
    let neg = super::negotiate(t, &plan, &plan.decl.input_schema).await?;
    let exe = super::execute(t, &plan, &neg.id, &plan.payload).await?;
    confirm(t, &plan, &exe.id).await?;
    let req = stream_req(t, &plan, &exe.id, None);
    let mut open = open_ok(t, "RESULT with A2A-Stream: true of the running execution", req).await?;
    let first = open.stream.next_event(read_timeout(t)).await;
    t.close_stream(open);
    t.step("the first event, then the suite drops the connection while the handler runs");
    let seen = match &first {
        Ok(Some(e)) => e.summary(),
        Ok(None) => "the stream ended without an event".to_owned(),
        Err(e) => e.clone(),
    };
    t.require(matches!(first, Ok(Some(_))), "a first event", seen)?;
    let (_, last) = wait_terminal(t, &plan, &exe.id).await?;
    t.check(
        last["status"] != "canceled",
        "the execution ran on to its end: not canceled by the dropped stream (STR-12)",
        show(&last),
    );
    Ok(())
}

/// The plan to stream with, or skip.
fn streaming_plan(t: &Trial<'_>) -> Result<CapPlan, Stop> {
    if !t.ctx.disc.has_feature("streaming") {
        return Err(Stop::Skip("the agent does not list streaming".into()));
    }
    main_plan(t)
}

/// A streaming RESULT request, with `Last-Event-ID` when given.
fn stream_req(t: &Trial<'_>, plan: &CapPlan, id: &str, last: Option<&str>) -> Req {
    let req = result_req(t, plan, id, None).header("A2A-Stream", "true");
    match last {
        Some(l) => req.header("Last-Event-ID", l),
        None => req,
    }
}

/// An execution run to its terminal state, as preparatory steps: its id and the plain RESULT body.
async fn terminal(t: &mut Trial<'_>, plan: &CapPlan) -> Result<(String, Value), Stop> {
    let (_, exe) = executed(t, plan).await?;
    confirm(t, plan, &exe.id).await?;
    let (_, body) = wait_terminal(t, plan, &exe.id).await?;
    Ok((exe.id, body))
}

/// How long the suite waits for the next event of a stream.
fn read_timeout(t: &Trial<'_>) -> Duration {
    t.ctx.opts.result_timeout.min(Duration::from_secs(30))
}

/// Reads a stream to its end; an error (no end in time, a transport error) is recorded as a failed expectation.
async fn read_to_end(t: &mut Trial<'_>, mut open: OpenStream, what: &str) -> Vec<Event> {
    let limit = t.ctx.opts.result_timeout;
    let res = open.stream.events_to_end(MAX_EVENTS, limit).await;
    t.close_stream(open);
    match res {
        Ok(events) => {
            t.check(
                true,
                format!("{what}: the agent ends the response"),
                format!("{} events, then the end", events.len()),
            );
            events
        }
        Err((events, e)) => {
            t.check(
                false,
                format!("{what}: the agent ends the response after the result event"),
                format!("after {} events: {e}", events.len()),
            );
            events
        }
    }
}

/// Opens a stream whose answer must be a stream (preparation for comparisons): `200 text/event-stream`, or block.
async fn open_ok(t: &mut Trial<'_>, title: &str, req: Req) -> Result<OpenStream, Stop> {
    let mut open = t.open_stream(title, req).await?;
    if !open.stream.is_event_stream() {
        let resp = open.stream.read_plain(Duration::from_secs(5)).await;
        t.close_stream(open);
        t.check(false, "200 with Content-Type: text/event-stream", resp.summary());
        return Err(Stop::Failed);
    }
    Ok(open)
}

/// `id type data` of each event, for comparisons.
fn triples(events: &[Event]) -> Vec<(Option<String>, String, String)> {
    events.iter().map(|e| (e.id.clone(), e.event.clone(), e.data.clone())).collect()
}

fn ids(events: &[Event]) -> Vec<String> {
    events.iter().map(|e| e.id.clone().unwrap_or_else(|| "(none)".into())).collect()
}

/// STR-4, STR-6 on a whole stream: ids 1..n, known types, one-line JSON data, one result event, last, equal to `plain`.
fn judge_complete(t: &mut Trial<'_>, events: &[Event], plain: &Value) {
    let expected: Vec<String> = (1..=events.len()).map(|i| i.to_string()).collect();
    t.check(
        !events.is_empty() && ids(events) == expected,
        "event ids 1, 2, 3, ... (decimal, each one more than the last)",
        format!("{:?}", ids(events)),
    );
    let odd: Vec<String> = events
        .iter()
        .filter(|e| !TYPES.contains(&e.event.as_str()) || e.data_lines != 1 || e.json().is_none())
        .map(Event::summary)
        .collect();
    t.check(
        odd.is_empty(),
        "each event a status, progress, truncated or result event with one data line of JSON",
        format!("{odd:?}"),
    );
    let results = events.iter().filter(|e| e.event == "result").count();
    t.check(
        results == 1 && events.last().is_some_and(|e| e.event == "result"),
        "exactly one result event, the last",
        format!("{results} result events; the last event: {}", events.last().map_or("none".into(), Event::summary)),
    );
    if let Some(last) = events.last().filter(|e| e.event == "result") {
        let data = last.json().unwrap_or(Value::Null);
        t.check(
            same_json(&data, plain),
            format!("the result event's data equal (RFC 8785) to the plain RESULT {}", show(plain)),
            show(&data),
        );
    }
}

async fn events(t: &mut Trial<'_>) -> Outcome {
    let plan = streaming_plan(t)?;
    let (id, plain) = terminal(t, &plan).await?;
    let open = open_ok(t, "RESULT with A2A-Stream: true", stream_req(t, &plan, &id, None)).await?;
    let head = open.stream.head().clone();
    t.check(
        head.header("cache-control").is_some_and(|v| v.to_ascii_lowercase().split(',').any(|d| d.trim() == "no-store")),
        "Cache-Control: no-store",
        format!("{:?}", head.header("cache-control")),
    );
    t.check(
        head.header("a2a-stream").is_some_and(|v| v.trim().eq_ignore_ascii_case("true")),
        "A2A-Stream: true",
        format!("{:?}", head.header("a2a-stream")),
    );
    t.check(
        head.header("a2a-execution-id") == Some(id.as_str()),
        format!("A2A-Execution-ID: {id}"),
        format!("{:?}", head.header("a2a-execution-id")),
    );
    let first = read_to_end(t, open, "the stream").await;
    judge_complete(t, &first, &plain);
    let r = t.send("plain RESULT after the stream", result_req(t, &plan, &id, None)).await?;
    let after = r.json().unwrap_or(Value::Null);
    t.check(
        r.status == 200 && same_json(&after, &plain),
        "the same plain RESULT as before the stream (a stream changes nothing)",
        show(&after),
    );
    let open = open_ok(t, "RESULT with A2A-Stream: true, a second time", stream_req(t, &plan, &id, None)).await?;
    let second = read_to_end(t, open, "the second stream").await;
    t.check(
        triples(&second) == triples(&first),
        "the same events (id, type, data) as the first stream",
        format!("{:?}", second.iter().map(Event::summary).collect::<Vec<_>>()),
    );
    Ok(())
}

async fn resume_after_drop(t: &mut Trial<'_>) -> Outcome {
    let plan = streaming_plan(t)?;
    let (_, exe) = executed(t, &plan).await?;
    let mut open =
        open_ok(t, "RESULT with A2A-Stream: true before CONFIRM", stream_req(t, &plan, &exe.id, None)).await?;
    confirm(t, &plan, &exe.id).await?;
    let first = open.stream.next_event(read_timeout(t)).await;
    t.close_stream(open);
    t.step("the first event, then the suite drops the connection");
    let first = match first {
        Ok(Some(e)) => e,
        Ok(None) => {
            t.check(false, "a first event", "the agent ended the stream without one");
            return Err(Stop::Failed);
        }
        Err(e) => {
            t.check(false, "a first event", e);
            return Err(Stop::Failed);
        }
    };
    t.check(first.id.as_deref() == Some("1"), "the first event has id 1", first.summary());
    let last = first.id.clone().unwrap_or_default();
    let open = open_ok(
        t,
        format!("RESULT with A2A-Stream: true and Last-Event-ID: {last}").as_str(),
        stream_req(t, &plan, &exe.id, Some(&last)),
    )
    .await?;
    let rest = read_to_end(t, open, "the resumed stream").await;
    t.step("the events of both connections");
    let mut all = vec![first];
    all.extend(rest.iter().cloned());
    let expected: Vec<String> = (1..=all.len()).map(|i| i.to_string()).collect();
    t.check(
        ids(&all) == expected,
        "ids 1, 2, 3, ... across the drop: nothing lost, nothing twice",
        format!("{:?}", ids(&all)),
    );
    let (_, plain) = wait_terminal(t, &plan, &exe.id).await?;
    judge_complete(t, &all, &plain);
    let open = open_ok(t, "the whole stream again (no Last-Event-ID)", stream_req(t, &plan, &exe.id, None)).await?;
    let whole = read_to_end(t, open, "the whole stream").await;
    t.check(
        triples(&whole) == triples(&all),
        "the same events as the dropped and the resumed stream together",
        format!("{:?}", whole.iter().map(Event::summary).collect::<Vec<_>>()),
    );
    Ok(())
}

async fn last_event_id(t: &mut Trial<'_>) -> Outcome {
    let plan = streaming_plan(t)?;
    let (id, _) = terminal(t, &plan).await?;
    let open = open_ok(t, "the whole stream (preparation)", stream_req(t, &plan, &id, None)).await?;
    let whole = read_to_end(t, open, "the whole stream").await;
    let n = whole.len();
    if n == 0 || whole.iter().any(|e| e.id_number().is_none()) {
        return Err(Stop::Blocked("the stream has no events with decimal ids (streaming/events reports it)".into()));
    }
    let mut points = vec![0, 1, n.saturating_sub(1), n];
    points.dedup();
    for k in points {
        let open = open_ok(t, &format!("Last-Event-ID: {k}"), stream_req(t, &plan, &id, Some(&k.to_string()))).await?;
        let got = read_to_end(t, open, &format!("the stream after {k}")).await;
        let want = &whole[k.min(n)..];
        t.check(
            triples(&got) == triples(want),
            format!("exactly the events after {k} ({:?})", ids(want)),
            format!("{:?}", got.iter().map(Event::summary).collect::<Vec<_>>()),
        );
    }
    let beyond = (n + 1).to_string();
    for (value, why) in
        [(beyond.as_str(), "beyond the last event"), ("abc", "not a decimal integer"), ("-1", "not a decimal integer")]
    {
        let mut open =
            t.open_stream(format!("Last-Event-ID: {value} ({why})"), stream_req(t, &plan, &id, Some(value))).await?;
        let resp = open.stream.read_plain(Duration::from_secs(5)).await;
        t.close_stream(open);
        let ok = resp.status == 400
            && resp.error_code().as_deref() == Some("invalid_header")
            && resp.error_details()["header"].as_str().is_some_and(|h| h.eq_ignore_ascii_case("last-event-id"));
        t.check(
            ok,
            "400 invalid_header with details.header \"Last-Event-ID\"",
            format!("{} {}", resp.summary(), show(&resp.error_details())),
        );
        t.check(
            sse::mime(&resp) == "application/json",
            "a JSON error body",
            format!("{:?}", resp.header("content-type")),
        );
    }
    Ok(())
}

async fn header_values(t: &mut Trial<'_>) -> Outcome {
    let plan = streaming_plan(t)?;
    let (id, plain) = terminal(t, &plan).await?;
    let req = result_req(t, &plan, &id, None).header("A2A-Stream", " TRUE ");
    let mut open = t.open_stream("RESULT with A2A-Stream: \" TRUE \"", req).await?;
    let streamed = open.stream.is_event_stream();
    let resp = if streamed { open.stream.resp() } else { open.stream.read_plain(Duration::from_secs(5)).await };
    t.close_stream(open);
    t.check(streamed, "200 text/event-stream (the value is true)", resp.summary());
    let req = result_req(t, &plan, &id, None).header("A2A-Stream", "false");
    let r = t.send("RESULT with A2A-Stream: false", req).await?;
    let body = r.json().unwrap_or(Value::Null);
    t.check(
        r.status == 200 && sse::mime(&r) == "application/json" && same_json(&body, &plain),
        "200 application/json with the plain RESULT",
        format!("{} {:?}", r.summary(), r.header("content-type")),
    );
    for value in ["yes", "1"] {
        let req = result_req(t, &plan, &id, None).header("A2A-Stream", value);
        let r = t.send(format!("RESULT with A2A-Stream: {value}"), req).await?;
        let ok = r.error_code().as_deref() == Some("invalid_header")
            && r.status == 400
            && r.error_details()["header"].as_str().is_some_and(|h| h.eq_ignore_ascii_case("a2a-stream"));
        t.check(
            ok,
            "400 invalid_header with details.header \"A2A-Stream\"",
            format!("{} {}", r.summary(), show(&r.error_details())),
        );
    }
    let unknown = format!("{}_1719000000000000001_h6fgdqwzjyd3liod5hyci3mlc4", plan.sender());
    let mut open = t
        .open_stream("RESULT of an unknown execution with A2A-Stream: true", stream_req(t, &plan, &unknown, None))
        .await?;
    let resp = open.stream.read_plain(Duration::from_secs(5)).await;
    t.close_stream(open);
    t.check(
        resp.status == 404
            && resp.error_code().as_deref() == Some("unknown_execution")
            && sse::mime(&resp) == "application/json",
        "a JSON 404 unknown_execution (RESULT's checks first)",
        format!("{} {:?}", resp.summary(), resp.header("content-type")),
    );
    Ok(())
}
