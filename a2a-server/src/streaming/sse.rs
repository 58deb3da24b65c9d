//! The streaming RESULT response (`spec/PROTOCOL.md` §18): Server-Sent Events read from the event log, from the
//! event after `Last-Event-ID` to the final `result` event, with heartbeats.

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use a2a_core::error::{A2aError, ErrorCode};
use a2a_core::headers as h;
use a2a_core::integrity::{self, Coverage, MessageParts};
use a2a_core::sse;
use axum::body::Body;
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use serde_json::json;
use tokio::sync::OwnedSemaphorePermit;

use super::{EventKind, StreamEvent, Streaming};
use crate::engine::Engine;
use crate::router::AppState;
use crate::store::ExecutionRecord;

/// How often a quiet stream reads the execution's record (it may have become terminal in a process that could not
/// record the final event, or its confirm window or deadline may have passed).
const RECORD_CHECK: Duration = Duration::from_secs(1);

/// Events sent per read at most.
const BATCH: usize = 64;

/// STR-11: `Last-Event-ID`, a decimal integer (0 when absent).
fn last_event_id(headers: &HeaderMap) -> Result<u64, A2aError> {
    let Some(v) = headers.get("last-event-id") else { return Ok(0) };
    let s = v.to_str().unwrap_or("").trim();
    if !s.is_empty()
        && s.len() <= 20
        && s.bytes().all(|b| b.is_ascii_digit())
        && let Ok(n) = s.parse::<u64>()
    {
        return Ok(n);
    }
    Err(A2aError::with_message(
        ErrorCode::INVALID_HEADER,
        format!("Last-Event-ID must be the decimal id of an event of this stream (got {s:?})"),
    )
    .details(json!({"header": "Last-Event-ID"})))
}

/// Answers a RESULT request that asked for a stream (STR-1), after the router's checks.
pub(crate) async fn respond(
    state: &Arc<AppState>,
    streaming: &Arc<Streaming>,
    rec: ExecutionRecord,
    headers: &HeaderMap,
    target: String,
    requester: String,
) -> Result<Response, A2aError> {
    let after = last_event_id(headers)?;
    // STR-10: a bounded number of streams at once.
    let Ok(permit) = streaming.streams.clone().try_acquire_owned() else {
        return Err(A2aError::with_message(
            ErrorCode::OVERLOADED,
            format!(
                "this agent serves {} streams at once, its limit; retry after Retry-After, or read RESULT without A2A-Stream",
                streaming.config.max_streams
            ),
        )
        .details(json!({"retry_after_s": 1})));
    };
    let store_err =
        |e: crate::store::StoreError| A2aError::with_message(ErrorCode::STORE_UNAVAILABLE, format!("{e}; retry later"));
    let final_id =
        if rec.status.is_terminal() { Some(streaming.ensure_final(&rec).await.map_err(store_err)?) } else { None };
    let last = streaming.log.last_id(&rec.id).await.map_err(store_err)?;
    if after > last {
        return Err(A2aError::with_message(
            ErrorCode::INVALID_HEADER,
            format!(
                "Last-Event-ID {after} is beyond the last event of this execution ({last}); resume from an id it sent"
            ),
        )
        .details(json!({"header": "Last-Event-ID", "last_event_id": last})));
    }
    let cursor = Cursor {
        state: state.clone(),
        engine: state.engine.clone(),
        streaming: streaming.clone(),
        id: rec.id.clone(),
        after,
        // STR-11: resumed after the result event: nothing more to send.
        done: final_id.is_some_and(|f| after >= f),
        last_write: Instant::now(),
        last_check: Instant::now(),
        target,
        requester,
        _permit: permit,
    };
    let body = futures_util::stream::unfold(cursor, |mut c| async move {
        c.next_chunk().await.map(|chunk| (Ok::<Bytes, std::convert::Infallible>(chunk), c))
    });
    let mut resp = (StatusCode::OK, Body::from_stream(body)).into_response();
    let hs = resp.headers_mut();
    hs.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
    hs.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    hs.insert(HeaderName::from_static("x-accel-buffering"), HeaderValue::from_static("no"));
    hs.insert(HeaderName::from_static(super::A2A_STREAM), HeaderValue::from_static("true"));
    if let Ok(v) = HeaderValue::from_str(&rec.id) {
        hs.insert(HeaderName::from_static(h::A2A_EXECUTION_ID), v);
    }
    Ok(resp)
}

/// Where one stream is.
struct Cursor {
    state: Arc<AppState>,
    engine: Arc<Engine>,
    streaming: Arc<Streaming>,
    id: String,
    after: u64,
    done: bool,
    last_write: Instant,
    last_check: Instant,
    target: String,
    requester: String,
    _permit: OwnedSemaphorePermit,
}

impl Cursor {
    /// The next bytes to send: events, or a heartbeat; `None` ends the stream (after the final event, or when the
    /// execution or the store is gone: the caller resumes).
    async fn next_chunk(&mut self) -> Option<Bytes> {
        let heartbeat = Duration::from_millis(self.streaming.config.heartbeat_ms.max(1));
        loop {
            if self.done || self.engine.shutdown.is_cancelled() {
                return None;
            }
            let events = match self.streaming.log.read(&self.id, self.after, BATCH).await {
                Ok(e) => e,
                Err(e) => {
                    tracing::warn!(error = %e, "could not read stream events; ending the stream (the caller resumes)");
                    return None;
                }
            };
            if !events.is_empty() {
                let mut out = String::new();
                for e in &events {
                    self.after = e.id;
                    self.write_event(&mut out, e);
                    if e.kind == EventKind::Result {
                        self.done = true;
                        break;
                    }
                }
                self.last_write = Instant::now();
                return Some(Bytes::from(out));
            }
            if self.last_check.elapsed() >= RECORD_CHECK {
                self.last_check = Instant::now();
                match self.check_record().await {
                    Ok(Some(final_id)) if final_id <= self.after => return None,
                    Ok(Some(_)) => continue,
                    Ok(None) => {}
                    Err(()) => return None,
                }
            }
            let since = self.last_write.elapsed();
            if since >= heartbeat {
                self.last_write = Instant::now();
                let mut out = String::new();
                sse::write_comment(&mut out, "keep-alive");
                return Some(Bytes::from(out));
            }
            let slice = (heartbeat - since)
                .min(RECORD_CHECK.saturating_sub(self.last_check.elapsed()).max(Duration::from_millis(1)));
            tokio::select! {
                () = self.streaming.log.wait(&self.id, self.after, slice) => {}
                () = self.engine.shutdown.cancelled() => return None,
            }
        }
    }

    /// Reads the record; a terminal one gets its final event (STR-6), whose id is returned.
    async fn check_record(&self) -> Result<Option<u64>, ()> {
        let rec = match self.engine.store.get_execution(&self.id).await {
            Ok(Some(r)) => r,
            Ok(None) => return Err(()),
            Err(e) => {
                tracing::warn!(error = %e, "could not read the streamed execution");
                return Ok(None);
            }
        };
        let rec = self.engine.expire_if_due(rec).await.map_err(|_| ())?;
        if !rec.status.is_terminal() {
            return Ok(None);
        }
        match self.streaming.ensure_final(&rec).await {
            Ok(id) => Ok(Some(id)),
            Err(e) => {
                tracing::warn!(error = %e, "could not record the final stream event");
                Ok(None)
            }
        }
    }

    /// One event, written with the workspace's Server-Sent Events writer: `id`, `event`, STR-7's `signature` on the
    /// `result` event, and the data (compact JSON: one line, a JSON string escapes its line breaks).
    fn write_event(&self, out: &mut String, e: &StreamEvent) {
        let signature = (e.kind == EventKind::Result).then(|| self.sign_final(&e.data)).flatten();
        let event = sse::Event {
            id: Some(e.id.to_string()),
            event: Some(e.kind.as_str().to_owned()),
            data: e.data.clone(),
            retry: None,
            other: signature.map(|s| ("signature".to_owned(), s)).into_iter().collect(),
        };
        sse::write_event(out, &event);
    }

    /// STR-7: the INT-10 signature of the plain RESULT response this final event stands for.
    fn sign_final(&self, data: &str) -> Option<String> {
        let signer = self.state.response_signer.as_ref()?;
        a2a_core::did::Did::parse(&self.requester).ok()?;
        let did = self.engine.did.as_str();
        let headers = [
            (h::A2A_VERSION, a2a_core::PROTOCOL_VERSION),
            (h::A2A_SENDER_ID, did),
            (h::A2A_EXECUTION_ID, self.id.as_str()),
        ];
        let parts = MessageParts {
            method: "GET",
            target: &self.target,
            headers: &headers,
            body: data.as_bytes(),
            status: Some(200),
        };
        let now = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64);
        match integrity::sign(&signer.key, &signer.key_id, did, &self.requester, Coverage::FullPayload, &parts, now, 60)
        {
            Ok(s) => Some(s),
            Err(e) => {
                tracing::warn!(error = %e, "cannot sign the final stream event");
                None
            }
        }
    }
}
