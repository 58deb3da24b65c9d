//! OpenTelemetry traces (OPS-6): one span per protocol step (`a2a.<step>` at an agent, `a2a.gateway.<step>` at a
//! gateway), a child of the caller's `traceparent`, exported over OTLP/HTTP (protobuf) when the standard variables
//! ask for it (`OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` or `OTEL_EXPORTER_OTLP_ENDPOINT`; off by default, and off with
//! `OTEL_SDK_DISABLED=true`). The batch processor, its delays and the exporter's headers and timeout read the other
//! standard variables (`OTEL_BSP_*`, `OTEL_EXPORTER_OTLP_*`); `OTEL_SERVICE_NAME` names the service (default: the
//! binary's name).
//!
//! The trace this process passes on (to an agent behind a gateway, to a handler) is the span's own context, so the
//! spans of one handshake form one trace through the gateway and the agent; without export it is still continued
//! (`crate::trace_context`), so that audit records and log lines carry the caller's trace id either way.

use std::sync::OnceLock;

use opentelemetry::trace::{SpanContext, TraceContextExt, TraceFlags, TraceId, TraceState, TracerProvider as _};
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing_opentelemetry::OpenTelemetrySpanExt;

use crate::trace_context::TraceParent;

static ENABLED: OnceLock<bool> = OnceLock::new();

/// Whether spans are exported (set once, by [`Telemetry::install`]).
pub fn enabled() -> bool {
    ENABLED.get().copied().unwrap_or(false)
}

/// Whether the environment asks for OTLP trace export.
fn wanted() -> bool {
    let set = |v: &str| std::env::var(v).is_ok_and(|s| !s.trim().is_empty());
    let disabled = std::env::var("OTEL_SDK_DISABLED").is_ok_and(|v| v.trim().eq_ignore_ascii_case("true"));
    !disabled && (set("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") || set("OTEL_EXPORTER_OTLP_ENDPOINT"))
}

/// The exporter of a running process: dropping it flushes the spans not yet sent and stops the exporter.
#[derive(Debug, Default)]
pub struct Telemetry {
    provider: Option<SdkTracerProvider>,
}

impl Drop for Telemetry {
    fn drop(&mut self) {
        if let Some(p) = self.provider.take()
            && let Err(e) = p.shutdown()
        {
            tracing::warn!("OpenTelemetry: the last spans could not be sent: {e}");
        }
    }
}

/// The `tracing` layer that turns spans into OpenTelemetry spans, for a subscriber built on a registry.
pub type Layer<S> = tracing_opentelemetry::OpenTelemetryLayer<S, opentelemetry_sdk::trace::Tracer>;

impl Telemetry {
    /// The layer and the guard when the environment asks for export (`None` and an empty guard otherwise, or when
    /// the exporter cannot be built: that is logged once the subscriber is up, by [`Telemetry::report`]).
    pub fn install<S>(service: &'static str) -> (Option<Layer<S>>, Telemetry, Option<String>)
    where
        S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
    {
        if !wanted() {
            let _ = ENABLED.set(false);
            return (None, Telemetry::default(), None);
        }
        use opentelemetry_otlp::{WithExportConfig as _, WithHttpConfig as _};
        let exporter = match opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_protocol(opentelemetry_otlp::Protocol::HttpBinary)
            .with_http_client(ExportClient::new())
            .build()
        {
            Ok(e) => e,
            Err(e) => {
                let _ = ENABLED.set(false);
                return (None, Telemetry::default(), Some(format!("OpenTelemetry export is off: {e}")));
            }
        };
        let mut resource = opentelemetry_sdk::Resource::builder();
        if std::env::var("OTEL_SERVICE_NAME").is_err() {
            resource = resource.with_service_name(service);
        }
        let provider =
            SdkTracerProvider::builder().with_batch_exporter(exporter).with_resource(resource.build()).build();
        let tracer = provider.tracer(service);
        let _ = ENABLED.set(true);
        (Some(tracing_opentelemetry::layer().with_tracer(tracer)), Telemetry { provider: Some(provider) }, None)
    }
}

/// Makes `span` (a request's) a child of the caller's `traceparent` when spans are exported, and returns the trace
/// context this process passes on for the request: the span's own when exported, else `incoming` continued with a
/// new span id (or a new trace).
pub fn join(span: &tracing::Span, incoming: Option<&str>) -> TraceParent {
    let caller = incoming.and_then(TraceParent::parse);
    if enabled() && !span.is_disabled() {
        if let Some(parent) = caller.as_ref().and_then(remote_context) {
            let _ = span.set_parent(opentelemetry::Context::new().with_remote_span_context(parent));
        }
        let cx = span.context();
        let own = cx.span().span_context().clone();
        if own.is_valid() {
            return TraceParent {
                trace_id: own.trace_id().to_string(),
                parent_id: own.span_id().to_string(),
                flags: own.trace_flags().to_u8(),
            };
        }
    }
    caller.map_or_else(TraceParent::root, |p| p.child())
}

fn remote_context(p: &TraceParent) -> Option<SpanContext> {
    let trace_id = TraceId::from_hex(&p.trace_id).ok()?;
    let span_id = opentelemetry::trace::SpanId::from_hex(&p.parent_id).ok()?;
    Some(SpanContext::new(trace_id, span_id, TraceFlags::new(p.flags), true, TraceState::default()))
}

/// The exporter's HTTP client: the workspace's `reqwest`, on a runtime of its own (the batch processor exports from
/// its own thread, outside the process's runtime), with the exporter's timeout.
#[derive(Debug)]
struct ExportClient {
    http: reqwest::Client,
    runtime: tokio::runtime::Handle,
}

impl ExportClient {
    fn new() -> ExportClient {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::Builder::new()
            .name("otlp-export".into())
            .spawn(move || {
                let rt = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
                    Ok(rt) => rt,
                    Err(_) => return,
                };
                let _ = tx.send(rt.handle().clone());
                rt.block_on(std::future::pending::<()>());
            })
            .expect("start the OTLP export thread");
        let runtime = rx.recv().expect("the OTLP export runtime");
        ExportClient { http: reqwest::Client::new(), runtime }
    }
}

#[async_trait::async_trait]
impl opentelemetry_http::HttpClient for ExportClient {
    async fn send_bytes(
        &self,
        request: http::Request<bytes::Bytes>,
    ) -> Result<http::Response<bytes::Bytes>, opentelemetry_http::HttpError> {
        let http = self.http.clone();
        let (parts, body) = request.into_parts();
        let send = async move {
            let mut rb = http.request(parts.method, parts.uri.to_string()).body(body);
            for (name, value) in &parts.headers {
                rb = rb.header(name, value);
            }
            let resp = rb.send().await?;
            let status = resp.status();
            let headers = resp.headers().clone();
            let bytes = resp.bytes().await?;
            let mut out = http::Response::new(bytes);
            *out.status_mut() = status;
            *out.headers_mut() = headers;
            Ok::<_, reqwest::Error>(out)
        };
        Ok(self.runtime.spawn(send).await??)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_export_the_callers_trace_is_continued_with_a_new_span_id() {
        let span = tracing::Span::none();
        let incoming = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        let ours = join(&span, Some(incoming));
        assert_eq!(ours.trace_id, "4bf92f3577b34da6a3ce929d0e0e4736");
        assert_ne!(ours.parent_id, "00f067aa0ba902b7");
        let fresh = join(&span, Some("garbage"));
        assert_eq!(fresh.trace_id.len(), 32);
    }
}
