//! Streams (BR-15, BR-16): a task's states as Server-Sent Events. A stream is a view of RESULT: dropping it stops
//! nothing, and a caller that resubscribes sees the task as it is.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use a2a_core::a2a1x::{StreamResponse, Task, TaskArtifactUpdateEvent, TaskState, TaskStatusUpdateEvent};
use a2a_core::sse;
use axum::body::Body;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use serde_json::Value;
use tokio::sync::{OwnedSemaphorePermit, mpsc};

use super::Inner;
use super::error::{BridgeError, Kind};
use crate::engine::Caller;

/// A slot among `max_streams` (BR-16), or `-32603` when all are taken.
pub(crate) fn permit(inner: &Inner) -> Result<OwnedSemaphorePermit, BridgeError> {
    inner.streams.clone().try_acquire_owned().map_err(|_| {
        let mut e = BridgeError::new(
            Kind::Internal,
            format!(
                "this agent has {} streams open, its limit (max_streams); retry later or poll with GetTask",
                inner.opts.limits.max_streams
            ),
        );
        e.code = Some(a2a_core::error::ErrorCode::OVERLOADED);
        e.http_status = 503;
        e
    })
}

/// The events of task `first.id` from its state `first` on, until it is terminal or the receiver is dropped.
pub(crate) fn events(
    inner: Arc<Inner>,
    caller: Caller,
    first: Task,
    permit: OwnedSemaphorePermit,
) -> mpsc::Receiver<StreamResponse> {
    let (tx, rx) = mpsc::channel(8);
    tokio::spawn(async move {
        let _permit = permit;
        let poll = Duration::from_millis(inner.opts.limits.stream_poll_ms);
        let (id, context_id) = (first.id.clone(), first.context_id.clone());
        let mut last = first.status.state;
        if tx.send(StreamResponse::Task(first)).await.is_err() {
            return;
        }
        while !last.is_terminal() {
            let task = match inner.result(&caller, &id, poll).await {
                Ok(r) => inner.task_of(&r, Some(0)),
                Err(e) => {
                    tracing::debug!(task = %id, error = %e.message, "stream: the task cannot be read any more");
                    return;
                }
            };
            if task.status.state == last {
                if tx.is_closed() {
                    return;
                }
                continue;
            }
            last = task.status.state;
            if last == TaskState::Completed {
                for artifact in task.artifacts {
                    let ev = TaskArtifactUpdateEvent {
                        task_id: id.clone(),
                        context_id: context_id.clone(),
                        artifact,
                        append: false,
                        last_chunk: true,
                    };
                    if tx.send(StreamResponse::ArtifactUpdate(ev)).await.is_err() {
                        return;
                    }
                }
            }
            let ev = TaskStatusUpdateEvent { task_id: id.clone(), context_id: context_id.clone(), status: task.status };
            if tx.send(StreamResponse::StatusUpdate(ev)).await.is_err() {
                return;
            }
        }
    });
    rx
}

/// An SSE response whose events' `data` are `wrap(event)` (written with [`a2a_core::sse`]).
pub(crate) fn sse(
    mut rx: mpsc::Receiver<StreamResponse>,
    wrap: impl Fn(StreamResponse) -> Value + Send + 'static,
) -> Response {
    let stream = futures_util::stream::poll_fn(move |cx| {
        rx.poll_recv(cx).map(|ev| {
            ev.map(|ev| {
                let data = serde_json::to_string(&wrap(ev)).unwrap_or_default();
                Ok::<_, Infallible>(Bytes::from(sse::encode(&sse::Event::data(data))))
            })
        })
    });
    let mut resp = (StatusCode::OK, Body::from_stream(stream)).into_response();
    let h = resp.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert("a2a-version", HeaderValue::from_static(a2a_core::a2a1x::PROTOCOL_VERSION));
    resp
}
