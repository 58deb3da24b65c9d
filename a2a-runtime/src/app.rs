//! What every binary of the workspace does the same way: its log format and subscriber, how it reports the error
//! that ends it, and how it serves a did:web DID document.

use a2a_core::did::Did;

/// Log output format.
#[derive(Debug, Clone, Copy)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line.
    Json,
}

/// Installs the tracing subscriber (`RUST_LOG` filters, default `info`) and, when the standard `OTEL_*` variables
/// ask for it, the OpenTelemetry exporter of `service`'s request spans (OPS-6). Keep the returned guard until the
/// process ends: dropping it sends the spans not yet sent.
pub fn init_tracing(format: LogFormat, service: &'static str) -> crate::telemetry::Telemetry {
    use tracing_subscriber::Layer as _;
    use tracing_subscriber::layer::SubscriberExt as _;
    use tracing_subscriber::util::SubscriberInitExt as _;
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    // Colours only on a terminal: logs piped to a file or a collector stay plain text.
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let fmt = tracing_subscriber::fmt::layer().with_writer(std::io::stderr).with_ansi(ansi);
    let fmt = match format {
        LogFormat::Text => fmt.boxed(),
        LogFormat::Json => fmt.json().boxed(),
    };
    let (otel, telemetry, problem) = crate::telemetry::Telemetry::install(service);
    // Only the request spans are exported (`a2a_request`, `a2a_gateway_request`), whatever `RUST_LOG` says.
    let requests_only = tracing_subscriber::filter::filter_fn(|m| {
        m.is_span() && matches!(m.name(), "a2a_request" | "a2a_gateway_request")
    });
    let _ = tracing_subscriber::registry()
        .with(fmt.with_filter(filter))
        .with(otel.map(|l| l.with_filter(requests_only)))
        .try_init();
    if let Some(problem) = problem {
        tracing::warn!("{problem}");
    } else if crate::telemetry::enabled() {
        tracing::info!(service, "OpenTelemetry: request spans are exported over OTLP/HTTP");
    }
    if matches!(format, LogFormat::Json) {
        // Every stderr line is JSON in this format, a panic's message too (it is logged, not printed).
        std::panic::set_hook(Box::new(|info| {
            let at = info.location().map(|l| format!("{}:{}", l.file(), l.line())).unwrap_or_default();
            let what = info
                .payload()
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| info.payload().downcast_ref::<String>().cloned())
                .unwrap_or_default();
            tracing::error!(panic = %what, at = %at, "panic");
        }));
    }
    telemetry
}

/// Reports the error that ends a binary (`a2a-server: <message>` on stderr): a plain line in the text format, a
/// JSON log record (level `ERROR`) in the JSON format, so that with `--log-format json` every stderr line is JSON.
pub fn fatal(format: LogFormat, program: &str, message: &str) {
    match format {
        LogFormat::Text => eprintln!("{program}: {message}"),
        LogFormat::Json => tracing::error!(program, "{message}"),
    }
}

/// The answer to a GET of a DID document (its JSON bytes): `application/did+json`, readable from a browser and
/// cacheable for 5 minutes (DID-16). Agents and gateways serve their documents with it.
pub fn did_document_response(body: bytes::Bytes) -> axum::response::Response {
    use axum::response::IntoResponse;
    (
        [
            (axum::http::header::CONTENT_TYPE, "application/did+json"),
            (axum::http::header::ACCESS_CONTROL_ALLOW_ORIGIN, "*"),
            (axum::http::header::CACHE_CONTROL, "max-age=300"),
        ],
        body,
    )
        .into_response()
}

/// The path at which a did:web DID's document is served (`/.well-known/did.json` or `/a/b/did.json`).
pub fn document_path(did: &Did) -> String {
    let segs = did.path_segments();
    if segs.is_empty() { "/.well-known/did.json".to_owned() } else { format!("/{}/did.json", segs.join("/")) }
}
