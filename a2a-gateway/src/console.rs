//! The operator console at `/console` (`docs/console.md`): a web page embedded in the binary (vanilla JavaScript, no
//! build step, nothing fetched from elsewhere) that shows the gateway's agents and their capabilities (the permission
//! matrix), its traffic as the audit trail records it (live, over Server-Sent Events), its golden metrics over the
//! last minutes, and runs a handshake through the gateway ("Try it").
//!
//! It is part of the operator surface (GW-22, §16): it exists only while `[admin] token_env` or `token_file` names a
//! token (and `admin.console` is not `false`), and every one of its requests — the page, its assets, its JSON and
//! event stream — needs that token: as `Authorization: Bearer <token>`, or as the login cookie a browser gets by
//! posting the token to `/console/login` (or by opening `/console?token=<token>` once, which sets the cookie and
//! redirects to drop the token from the address bar). The cookie is `HttpOnly`, `SameSite=Strict`, scoped to
//! `/console`, and carries no token: an expiry and an HMAC of it keyed by the token's digest, so that changing the
//! token (a reload, OPS-4) ends every login.
//!
//! The rest of the gateway uses only `serves`, `handle` and `tapping` (the request path) and [`Console`] (its state).

mod history;
mod sessions;
mod traffic;

use std::sync::Arc;
use std::time::Instant;

use a2a_core::error::{A2aError, ErrorCode};
use axum::body::Body;
use bytes::Bytes;
use http::{HeaderValue, Method, Response, StatusCode, header};
use serde_json::{Value, json};

use a2a_runtime::console_auth as auth;

use crate::Inner;
pub use history::MetricHistory;
pub use traffic::Traffic;

/// The page.
const INDEX_HTML: &str = include_str!("console/assets/index.html");
/// Its script.
const CONSOLE_JS: &str = include_str!("console/assets/console.js");
/// Its style sheet.
const CONSOLE_CSS: &str = a2a_runtime::console_auth::STYLE;

/// Every path the console answers (anything else below `/console` is `404`): what a test walks unauthenticated.
pub const ROUTES: &[(&str, &str)] = &[
    ("GET", "/console"),
    ("GET", "/console/"),
    ("POST", "/console/login"),
    ("POST", "/console/logout"),
    ("GET", "/console/assets/dom.js"),
    ("GET", "/console/assets/console.js"),
    ("GET", "/console/assets/console.css"),
    ("GET", "/console/assets/try.js"),
    ("GET", "/console/assets/sessions.js"),
    ("GET", "/console/api/agents"),
    ("GET", "/console/api/audit"),
    ("GET", "/console/api/execution/x_example"),
    ("GET", "/console/api/traffic"),
    ("GET", "/console/api/metrics"),
    ("GET", "/console/api/sessions"),
    ("GET", "/console/api/sessions/history"),
    ("GET", "/console/api/sessions/events"),
    ("GET", "/console/api/signer"),
    ("POST", "/console/api/signer"),
    ("DELETE", "/console/api/signer"),
    ("POST", "/console/api/sign"),
];

/// The largest login form accepted.
const MAX_FORM_BYTES: usize = 8 * 1024;

/// The console's state that outlives reloads: the metric samples, the traffic tap and the signing keys operators
/// uploaded for "Try it" (in memory only, one per login).
pub struct Console {
    /// The metric samples of the charts.
    pub history: Arc<MetricHistory>,
    /// The live audit records.
    pub traffic: Arc<Traffic>,
    /// The keys "Try it" signs with.
    pub signers: Arc<a2a_runtime::console_try::Signers>,
}

impl Console {
    /// The console's state: `samples` metric samples, `records` audit records kept when `keep_records` (no audit log
    /// is configured) and the bound of a live stream's lag.
    pub fn new(samples: usize, records: usize, keep_records: bool) -> Console {
        Console {
            history: Arc::new(MetricHistory::new(samples)),
            traffic: Arc::new(Traffic::new(records, keep_records)),
            signers: Arc::new(a2a_runtime::console_try::Signers::new()),
        }
    }
}

/// Whether `path` is the console's.
pub(crate) fn serves(path: &str) -> bool {
    path == "/console" || path.starts_with("/console/")
}

/// Whether the request path should build an audit record for the console: someone watches the traffic, or the
/// console keeps the records itself (no audit log) while it is served.
pub(crate) fn tapping(gw: &Inner) -> bool {
    gw.console_on() && gw.kept.console.traffic.wanted()
}

impl Inner {
    /// Whether the console is served: a token is configured and `admin.console` is on.
    fn console_on(&self) -> bool {
        self.admin_token.is_some() && self.console.enabled
    }
}

/// The console's settings of one configuration in force.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Settings {
    /// `admin.console`.
    pub(crate) enabled: bool,
    /// `admin.console_session_s`.
    pub(crate) session_s: u64,
}

fn headers(r: &mut Response<Body>, content_type: &'static str, csp: &'static str) {
    a2a_runtime::console_auth::secure_headers(r.headers_mut(), content_type, csp);
}

/// The policy of the console's own page: its script and style only, from itself.
const CSP: &str = a2a_runtime::console_auth::CSP;

fn respond(status: StatusCode, content_type: &'static str, body: impl Into<Body>) -> Response<Body> {
    let mut r = Response::new(body.into());
    *r.status_mut() = status;
    headers(&mut r, content_type, CSP);
    r
}

fn json_response(status: StatusCode, v: &Value) -> Response<Body> {
    respond(status, "application/json", serde_json::to_vec(v).unwrap_or_default())
}

fn error(e: A2aError) -> Response<Body> {
    let status = StatusCode::from_u16(e.http_status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    json_response(status, &serde_json::to_value(e.to_body()).unwrap_or_default())
}

const PRODUCT: &str = "a2a-gateway";

/// Answers a request below `/console` (GW-22: nothing without the admin token).
pub(crate) async fn handle(gw: Arc<Inner>, parts: http::request::Parts, body: Body) -> Response<Body> {
    let path = parts.uri.path().to_owned();
    let Some(key) = gw.admin_token.filter(|_| gw.console.enabled) else {
        return error(A2aError::with_message(
            ErrorCode::NOT_FOUND,
            "no endpoint at this path (the console is off: set [admin] token_env or token_file)",
        ));
    };
    let html = path == "/console" || path == "/console/";
    let secure = parts.headers.get("x-forwarded-proto").is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"https"));
    let session = gw.console.session_s;
    // The login: a form post, or the token in the query once (then dropped from the address by the redirect).
    if path == "/console/login" {
        if parts.method != Method::POST {
            return method_not_allowed("POST");
        }
        let form = match http_body_util::BodyExt::collect(http_body_util::Limited::new(body, MAX_FORM_BYTES)).await {
            Ok(b) => b.to_bytes(),
            Err(_) => return auth::login_page(StatusCode::PAYLOAD_TOO_LARGE, PRODUCT, Some("The form is too large.")),
        };
        return match auth::form_token(&form) {
            Some(t) if auth::token_matches(&key, &t) => {
                auth::redirect("/console", Some(auth::cookie(&key, session, secure)))
            }
            _ => auth::login_page(StatusCode::UNAUTHORIZED, PRODUCT, Some("That is not the admin token.")),
        };
    }
    if html && let Some(t) = auth::query_token(&parts.uri) {
        return if auth::token_matches(&key, &t) {
            auth::redirect("/console", Some(auth::cookie(&key, session, secure)))
        } else {
            auth::login_page(StatusCode::UNAUTHORIZED, PRODUCT, Some("That is not the admin token."))
        };
    }
    if let Some(refused) = auth::refuse(&key, &parts.headers, html, PRODUCT) {
        return refused;
    }
    let login = auth::login_of(&key, &parts.headers);
    if path == "/console/logout" {
        if parts.method != Method::POST {
            return method_not_allowed("POST");
        }
        // A key uploaded for "Try it" ends with the login.
        if let Some((id, _)) = &login {
            gw.kept.console.signers.forget(id);
        }
        return auth::redirect("/console", Some(auth::clear_cookie(secure)));
    }
    let signers = gw.kept.console.signers.clone();
    if let Some(r) = a2a_runtime::console_try::handle(&signers, login, &gw.did, &parts.method, &path, body).await {
        return r;
    }
    if parts.method != Method::GET && parts.method != Method::HEAD {
        return method_not_allowed("GET, HEAD");
    }
    if let Some(js) = a2a_runtime::console_try::shared_script(&path) {
        return respond(StatusCode::OK, "text/javascript; charset=utf-8", js);
    }
    match path.as_str() {
        "/console" | "/console/" => respond(StatusCode::OK, "text/html; charset=utf-8", INDEX_HTML),
        "/console/assets/console.js" => respond(StatusCode::OK, "text/javascript; charset=utf-8", CONSOLE_JS),
        "/console/assets/console.css" => respond(StatusCode::OK, "text/css; charset=utf-8", CONSOLE_CSS),
        "/console/api/sessions" => json_response(StatusCode::OK, &sessions::list(&gw).await),
        "/console/api/sessions/history" => sessions::history(&gw, &parts.uri).await,
        "/console/api/sessions/events" => sessions::events(&gw, &parts).await,
        "/console/api/agents" => json_response(StatusCode::OK, &agents(&gw).await),
        "/console/api/metrics" => {
            let labels = gw.agents.listed().iter().map(|a| (a.label.clone(), json!(a.endpoint.url))).collect();
            json_response(StatusCode::OK, &gw.kept.console.history.report(&gw.metrics.encode(), labels))
        }
        "/console/api/audit" => match traffic::Filter::from_uri(&parts.uri) {
            Ok(f) => match traffic::history(&gw, &f).await {
                Ok(records) => json_response(StatusCode::OK, &json!({"records": records})),
                Err(e) => error(A2aError::with_message(ErrorCode::STORE_UNAVAILABLE, e)),
            },
            Err(e) => error(A2aError::with_message(ErrorCode::INVALID_REQUEST, e)),
        },
        "/console/api/traffic" => match traffic::Filter::from_uri(&parts.uri) {
            Ok(f) => traffic::stream(&gw, f).await,
            Err(e) => error(A2aError::with_message(ErrorCode::INVALID_REQUEST, e)),
        },
        p if p.starts_with("/console/api/execution/") => {
            // The id as the page sent it, percent-encoded (ids hold the sender's DID: `:`).
            let raw = p["/console/api/execution/".len()..].replace('+', "%2B");
            let id = url::form_urlencoded::parse(format!("id={raw}").as_bytes())
                .next()
                .map(|(_, v)| v.into_owned())
                .unwrap_or_default();
            match traffic::timeline(&gw, &id).await {
                Ok(v) => json_response(StatusCode::OK, &v),
                Err(e) => error(A2aError::with_message(ErrorCode::STORE_UNAVAILABLE, e)),
            }
        }
        _ => error(A2aError::with_message(ErrorCode::NOT_FOUND, "no console page or API at this path")),
    }
}

fn method_not_allowed(allow: &'static str) -> Response<Body> {
    let mut r = error(A2aError::with_message(ErrorCode::METHOD_NOT_ALLOWED, format!("this path accepts {allow}")));
    r.headers_mut().insert(header::ALLOW, HeaderValue::from_static(allow));
    r
}

/// The permission matrix: every agent (configured or registered) with its health, load, version, features and the
/// declarations of its capabilities (name, `auth_requirement`, `region_restriction`, schemas, …).
async fn agents(gw: &Inner) -> Value {
    let now = Instant::now();
    let mut list = Vec::new();
    let mut names = std::collections::BTreeSet::new();
    for a in gw.agents.listed().iter() {
        let info = gw.agents.info(a).await;
        if let Ok(i) = &info {
            names.extend(i.doc.capabilities.iter().map(|c| c.name.clone()));
        }
        list.push(json!({
            "label": a.label,
            "endpoint": a.endpoint.url,
            "from_config": a.from_config(),
            "healthy": a.healthy(now),
            "in_flight": a.in_flight(),
            "did": info.as_ref().ok().map(|i| i.did.clone()),
            "name": info.as_ref().ok().and_then(|i| i.doc.agent.name.clone()),
            "version": info.as_ref().ok().map(|i| i.doc.a2a_version.clone()),
            "features": info.as_ref().map(|i| i.doc.features.clone()).unwrap_or_default(),
            "capabilities": info.as_ref().map(|i| i.doc.capabilities.clone()).unwrap_or_default(),
            "error": info.as_ref().err().map(|e| e.to_string()),
        }));
    }
    json!({"gateway": {"did": gw.did, "name": gw.name}, "agents": list, "capabilities": names})
}

/// Bytes of an SSE event written with the workspace's one codec.
fn sse_bytes(event: &str, id: Option<String>, data: String) -> Bytes {
    let e = a2a_core::sse::Event { id, event: Some(event.to_owned()), data, ..Default::default() };
    Bytes::from(a2a_core::sse::encode(&e))
}
