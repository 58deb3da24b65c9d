//! The announce step and the agent's channel (§17.6): announce deliveries to the suite's inbox session, `announce`
//! and `run` events on `GET /a2a/events`, and resumption with `Last-Event-ID` (ANN-1..ANN-4, ANN-6).

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::{
    answer, end, fresh_key, inbox_step, random_text, read_run, register, run_id, send, session_req,
    session_req_as_second,
};
use crate::check::{OpenStream, Outcome, Stop, Trial};
use crate::checks::show;
use crate::http::Req;
use crate::sse::{Event, Item};

/// How long the suite waits for an event it expects on the channel.
const EVENT_WAIT: Duration = Duration::from_secs(10);

/// How long the suite waits for the kept events of a resumed stream (they are in the agent's buffer already).
const RESUME_WAIT: Duration = Duration::from_secs(5);

/// Opens an event channel that must be a stream.
async fn open_channel(t: &mut Trial<'_>, title: String, req: Req) -> Result<OpenStream, Stop> {
    let mut open = t.open_stream(title, req).await?;
    if !open.stream.is_event_stream() {
        let resp = open.stream.read_plain(Duration::from_secs(5)).await;
        t.close_stream(open);
        t.check(false, "200 text/event-stream", resp.summary());
        return Err(Stop::Failed);
    }
    Ok(open)
}

fn run_of(e: &Event) -> String {
    e.json().and_then(|d| d["run_id"].as_str().map(str::to_owned)).unwrap_or_default()
}

fn is_run_event(e: &Event, run: &str) -> bool {
    e.event == "run" && run_of(e) == run
}

/// Reads events until one satisfies `done` (it is the last one returned); `Err` with what was read when none came in
/// `timeout` or the stream failed.
async fn read_until(
    open: &mut OpenStream,
    timeout: Duration,
    done: impl Fn(&Event) -> bool,
) -> Result<Vec<Event>, (Vec<Event>, String)> {
    let deadline = Instant::now() + timeout;
    let mut out = Vec::new();
    loop {
        match open.stream.next_event(deadline.saturating_duration_since(Instant::now())).await {
            Ok(Some(e)) => {
                let stop = done(&e);
                out.push(e);
                if stop {
                    return Ok(out);
                }
                if out.len() > 10_000 {
                    return Err((out, "more than 10 000 events".into()));
                }
            }
            Ok(None) => return Err((out, "the agent ended the stream".into())),
            Err(e) => return Err((out, e)),
        }
    }
}

/// [`read_until`] as an expectation: a failure is recorded (and the events read so far returned).
async fn expect_until(
    t: &mut Trial<'_>,
    open: &mut OpenStream,
    what: &str,
    wait: Duration,
    done: impl Fn(&Event) -> bool,
) -> Vec<Event> {
    match read_until(open, wait, done).await {
        Ok(events) => events,
        Err((events, e)) => {
            t.check(
                false,
                what.to_owned(),
                format!("{e}, after {:?}", events.iter().map(Event::summary).collect::<Vec<_>>()),
            );
            events
        }
    }
}

fn ids_increase(events: &[Event]) -> bool {
    let ids: Vec<Option<u64>> = events.iter().map(Event::id_number).collect();
    ids.iter().all(Option::is_some) && ids.windows(2).all(|w| w[0] < w[1])
}

fn triples(events: &[Event]) -> Vec<(Option<String>, String, String)> {
    events.iter().map(|e| (e.id.clone(), e.event.clone(), e.data.clone())).collect()
}

fn summaries(events: &[Event]) -> String {
    format!("{:?}", events.iter().map(Event::summary).collect::<Vec<_>>())
}

/// Sends `text` to `key`, answers round one with `round_one` and, when `announce` is given, the announce step with it;
/// returns the run id.
async fn converse(
    t: &mut Trial<'_>,
    key: &str,
    text: &str,
    round_one: &str,
    announce: Option<&str>,
) -> Result<(String, Option<Value>), Stop> {
    let body = json!({"target": key, "text": text, "announce": announce.is_some(), "run_timeout_ms": 60000});
    let r = send(t, format!("send {text:?}"), body, Duration::ZERO).await?;
    let run = run_id(t, &r)?;
    inbox_step(t, key, &run, Some("message")).await?;
    let r = answer(t, &run, round_one).await?;
    t.require(r.status == 200, "200", r.summary())?;
    let Some(published) = announce else { return Ok((run, None)) };
    let step = inbox_step(t, key, &run, Some("announce")).await?;
    let r = answer(t, &run, published).await?;
    t.require(r.status == 200, "200", r.summary())?;
    Ok((run, Some(step)))
}

pub(super) async fn announce(t: &mut Trial<'_>) -> Outcome {
    let key = fresh_key("announce");
    register(t, &key).await?;
    let address = format!("{}#{key}", t.ctx.agent_did());
    let req = session_req(t, "GET", &format!("/events?session={key}"))?;
    let mut channel = open_channel(t, format!("GET /a2a/events?session={key}"), req).await?;
    // Wait until the stream is live (its first line) before anything is published.
    let first = channel.stream.next(Duration::from_secs(5)).await;
    let mut early = Vec::new();
    if let Ok(Some(Item::Event(e))) = first {
        early.push(e);
    }
    let text = format!("announce check {}", random_text(8));
    let published = format!("the conformance suite announces {}", random_text(8));
    let (run, step) = converse(t, &key, &text, "round one reply", Some(&published)).await?;
    let step = step.unwrap_or(Value::Null);
    t.step("the announce step delivered to the target session");
    t.check(step["step"] == "announce", "step announce", show(&step["step"]));
    t.check(
        step["original"] == text.as_str()
            && step["round_one"] == "round one reply"
            && step["last"] == "round one reply",
        format!("original {text:?}, round_one and last \"round one reply\""),
        format!("original {}, round_one {}, last {}", step["original"], step["round_one"], step["last"]),
    );
    t.check(
        step["instruction"].as_str().is_some_and(|i| i.contains("ANNOUNCE_SKIP")),
        "the instruction, naming ANNOUNCE_SKIP",
        show(&step["instruction"]),
    );
    let r = read_run(t, &run, "done").await?;
    let b = r.json().unwrap_or(Value::Null);
    let event_id = b["announce"]["event_id"].as_str().unwrap_or("").to_owned();
    t.check(
        b["announce"]["status"] == "published" && !event_id.is_empty() && b["announce"]["text"] == published.as_str(),
        "announce.status published with an event_id and the text",
        show(&b["announce"]),
    );
    let mut events = early;
    events.extend(
        expect_until(t, &mut channel, "the run event of the run on the channel", EVENT_WAIT, |e| is_run_event(e, &run))
            .await,
    );
    t.step(format!("the events on the channel of {key}"));
    let ann = events.iter().find(|e| e.event == "announce" && run_of(e) == run).cloned();
    match &ann {
        None => {
            t.check(false, "an announce event of the run", summaries(&events));
        }
        Some(a) => {
            let d = a.json().unwrap_or(Value::Null);
            t.check(
                a.id.as_deref() == Some(event_id.as_str()),
                format!("the id the run recorded ({event_id})"),
                a.summary(),
            );
            t.check(
                d["session"] == address.as_str()
                    && d["text"] == published.as_str()
                    && d["from"].is_string()
                    && d["provenance"]["kind"] == "inter_session"
                    && d["at"].as_str().and_then(a2a_core::wire::parse_timestamp).is_some(),
                format!("{{session {address}, run_id, text {published:?}, from, provenance, at}}"),
                show(&d),
            );
        }
    }
    let run_event = events.iter().find(|e| is_run_event(e, &run)).and_then(Event::json).unwrap_or(Value::Null);
    t.check(
        run_event["state"] == "done" && run_event["announce"]["status"] == "published",
        "a run event with the Run, done",
        show(&run_event),
    );
    t.check(ids_increase(&events), "decimal ids, increasing", summaries(&events));
    let (skipped, _) = converse(t, &key, "second message", "second reply", Some("ANNOUNCE_SKIP")).await?;
    let r = read_run(t, &skipped, "done").await?;
    let b = r.json().unwrap_or(Value::Null);
    t.check(
        b["announce"]["status"] == "skipped" && b["announce"]["event_id"].is_null(),
        "announce.status skipped with no event_id (ANNOUNCE_SKIP)",
        show(&b["announce"]),
    );
    let (silent, _) = converse(t, &key, "third message", "third reply", None).await?;
    let r = read_run(t, &silent, "done").await?;
    let b = r.json().unwrap_or(Value::Null);
    t.check(
        b["announce"]["status"] == "not_requested",
        "announce.status not_requested (announce: false)",
        show(&b["announce"]),
    );
    let req = session_req(t, "GET", &format!("/sessions/{key}/inbox?wait_ms=0"))?;
    let r = t.send("the inbox after the run without announce", req).await?;
    let asked = r.json().and_then(|b| b["deliveries"].as_array().cloned()).unwrap_or_default();
    t.check(
        r.status == 200 && !asked.iter().any(|d| d["run_id"] == silent.as_str()),
        "no announce step for the run with announce: false",
        r.summary(),
    );
    let later =
        expect_until(t, &mut channel, "the run event of the third run", EVENT_WAIT, |e| is_run_event(e, &silent)).await;
    t.close_stream(channel);
    t.step("the events of the second and third runs");
    t.check(
        !later.iter().any(|e| e.event == "announce" && (run_of(e) == skipped || run_of(e) == silent)),
        "no announce event for the skipped and the unrequested announce",
        summaries(&later),
    );
    t.check(later.iter().any(|e| is_run_event(e, &skipped)), "the run event of the second run", summaries(&later));
    end(t, &key).await;
    Ok(())
}

pub(super) async fn events_resume(t: &mut Trial<'_>) -> Outcome {
    let key = fresh_key("events");
    register(t, &key).await?;
    let address = format!("{}#{key}", t.ctx.agent_did());
    let path = format!("/events?session={key}");
    let mut fresh = open_channel(t, format!("GET /a2a/events?session={key}"), session_req(t, "GET", &path)?).await?;
    let first = fresh.stream.next(Duration::from_secs(10)).await;
    t.check(
        matches!(&first, Ok(Some(Item::Comment(c))) if c.trim() == "connected"),
        "a first line \": connected\"",
        format!("{first:?}"),
    );
    let published = format!("published for the resumption check {}", random_text(8));
    let (run, _) = converse(t, &key, "resumption check", "a reply", Some(&published)).await?;
    let seen = expect_until(t, &mut fresh, "the run event of the run", EVENT_WAIT, |e| is_run_event(e, &run)).await;
    t.close_stream(fresh);
    let ours: Vec<Event> = seen.into_iter().filter(|e| run_of(e) == run).collect();
    t.step("the announce and run events of the run");
    let shape = ours.iter().map(|e| e.event.as_str()).collect::<Vec<_>>();
    t.ensure(
        shape == ["announce", "run"] && ids_increase(&ours),
        "an announce event, then a run event",
        summaries(&ours),
    )?;
    let (a, r) = (ours[0].clone(), ours[1].clone());
    let a_id = a.id_number().unwrap_or(0);
    for (last, want) in
        [(0, vec![a.clone(), r.clone()]), (a_id.saturating_sub(1), vec![a.clone(), r.clone()]), (a_id, vec![r.clone()])]
    {
        let req = session_req(t, "GET", &path)?.header("Last-Event-ID", last.to_string());
        let mut open =
            open_channel(t, format!("GET /a2a/events?session={key} with Last-Event-ID: {last}"), req).await?;
        let got = expect_until(t, &mut open, "the run event of the run", RESUME_WAIT, |e| is_run_event(e, &run)).await;
        // Nothing more may follow: the session has no later event.
        let more = read_until(&mut open, Duration::from_millis(700), |_| true).await.unwrap_or_default();
        t.close_stream(open);
        let got: Vec<Event> = got.into_iter().chain(more).filter(|e| e.event != "gap").collect();
        t.check(
            triples(&got) == triples(&want),
            format!("exactly the events after {last}: {}", summaries(&want)),
            summaries(&got),
        );
    }
    match session_req_as_second(t, "GET", &format!("/sessions/{key}")) {
        Err(Stop::Skip(why)) => {
            t.step(format!("a sender that may not see the session: not checked ({why})"));
        }
        Err(e) => return Err(e),
        Ok(req) => {
            let r = t.send(format!("read {key} as a second sender"), req).await?;
            if r.status == 200 {
                t.step("the second sender may see the session (the agent's visibility): nothing to leave out");
            } else {
                t.expect_error(&r, 404, "unknown_session");
                let req = session_req_as_second(t, "GET", &path)?;
                let mut open =
                    t.open_stream(format!("GET /a2a/events?session={key} as the second sender"), req).await?;
                let resp = open.stream.read_plain(Duration::from_secs(5)).await;
                t.close_stream(open);
                t.expect_error(&resp, 404, "unknown_session");
                // A run the second sender sends itself: its run event is the one it may see (ANN-6).
                let body = json!({"target": key, "text": "from a second sender", "run_timeout_ms": 60000});
                let req = session_req_as_second(t, "POST", "/sessions/send")?.json(&body);
                let r = t.send(format!("send to {key} as the second sender"), req).await?;
                let theirs = if r.status == 202 {
                    let run = run_id(t, &r)?;
                    inbox_step(t, &key, &run, Some("message")).await?;
                    answer(t, &run, "a reply to the second sender").await?;
                    inbox_step(t, &key, &run, Some("announce")).await?;
                    answer(t, &run, "announced about the second sender's run").await?;
                    read_run(t, &run, "done").await?;
                    Some(run)
                } else {
                    // The allow list (POL-1) may refuse it; then only the leaving out is checked.
                    t.step(format!("the second sender may not send to {key} ({}): no run of its own", r.summary()));
                    None
                };
                let req = session_req_as_second(t, "GET", "/events")?.header("Last-Event-ID", "0");
                let mut open =
                    open_channel(t, "GET /a2a/events with Last-Event-ID: 0 as the second sender".into(), req).await?;
                let all = match &theirs {
                    Some(run) => {
                        let what = "the run event of its own run";
                        expect_until(t, &mut open, what, EVENT_WAIT, |e| is_run_event(e, run)).await
                    }
                    None => read_quietly(&mut open).await,
                };
                t.close_stream(open);
                let own = |e: &Event| theirs.as_deref().is_some_and(|run| is_run_event(e, run));
                let about: Vec<Event> = all
                    .iter()
                    .filter(|e| !own(e))
                    .filter(|e| {
                        e.json().is_some_and(|d| d["session"] == address.as_str() || d["target"] == address.as_str())
                    })
                    .cloned()
                    .collect();
                t.check(
                    about.is_empty(),
                    format!("no event about {address} but the run event of the second sender's own run"),
                    summaries(&about),
                );
                if theirs.is_some() {
                    t.check(all.iter().any(own), "the run event of the second sender's own run", summaries(&all));
                }
            }
        }
    }
    end(t, &key).await;
    Ok(())
}

/// Events until the stream is quiet for a second (at most 10 s and 5 000 events).
async fn read_quietly(open: &mut OpenStream) -> Vec<Event> {
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut out = Vec::new();
    while Instant::now() < deadline && out.len() < 5_000 {
        match open.stream.next_event(Duration::from_secs(1)).await {
            Ok(Some(e)) => out.push(e),
            _ => break,
        }
    }
    out
}
