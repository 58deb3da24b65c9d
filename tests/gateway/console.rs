//! The operator console (`/console`, `docs/console.md`): nothing of it without the admin token (GW-22), and the
//! console itself in real headless Chromium (`/usr/bin/chromium`, or `$CHROMIUM`, started as the agent's browser test
//! starts it: a page that reports back) against a real gateway in front of two real agents: the permission matrix,
//! a handshake from "Try it" seen in the live traffic, the charts' numbers against `/metrics`, keyboard access and
//! contrast checked by axe-core (vendored under `tests/fixtures/axe-core` of this package, MPL-2.0, never shipped). Screenshots of
//! every view are saved in `<target dir>/console-screenshots/` (or `$A2A_CONSOLE_SCREENSHOTS`).

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use a2a_core::capability::AuthRequirement;
use axum::body::Body;
use serde_json::{Value, json};

use a2a_test_support::browser::{chromium, headless_args};

use crate::common::{ADMIN_TOKEN, TestAgent, TestGateway, World, decl};

const CONSOLE: &str = "[admin]\ntoken_file = \"admin.token\"\nconsole_sample_ms = 200\n";

fn screenshots() -> std::path::PathBuf {
    a2a_test_support::browser::screenshots(std::path::Path::new(env!("CARGO_TARGET_TMPDIR")))
}

fn no_redirects() -> reqwest::Client {
    reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().expect("client")
}

/// Two agents: alpha offers `submit_report` (none) and `notarize_message` (did_auth); beta offers `summarize_text` (none) and
/// `pay_invoice` (api_key, EU only).
fn agents(world: &World) -> (TestAgent, TestAgent) {
    let alpha = TestAgent::start(
        "alpha",
        vec![decl("submit_report", AuthRequirement::None), decl("notarize_message", AuthRequirement::DidAuth)],
        world,
    );
    let mut pay = decl("pay_invoice", AuthRequirement::ApiKey);
    pay.region_restriction = vec!["eu-west-1".into()];
    let beta = TestAgent::start("beta", vec![decl("summarize_text", AuthRequirement::None), pay], world);
    (alpha, beta)
}

fn cookie_of(r: &reqwest::Response) -> String {
    let set = r.headers().get("set-cookie").and_then(|v| v.to_str().ok()).expect("set-cookie").to_owned();
    assert!(set.contains("HttpOnly"), "{set}");
    assert!(set.contains("SameSite=Strict"), "{set}");
    assert!(set.contains("Path=/console"), "{set}");
    assert!(!set.contains(ADMIN_TOKEN), "the cookie never carries the token: {set}");
    set.split(';').next().expect("pair").to_owned()
}

async fn call(http: &reqwest::Client, method: &str, url: &str, auth: Option<(&str, &str)>) -> reqwest::Response {
    let mut r = http.request(method.parse().expect("method"), url);
    if let Some((name, value)) = auth {
        r = r.header(name, value);
    }
    if method == "POST" {
        r = r.header("content-type", "application/x-www-form-urlencoded").body("token=wrong");
    }
    r.send().await.expect("request")
}

#[tokio::test]
async fn no_console_route_is_served_without_the_admin_token() {
    let world = World::new();
    let (alpha, beta) = agents(&world);
    let gw = TestGateway::start(&[&alpha, &beta], &world, CONSOLE).await;
    let http = no_redirects();
    let forged = format!("a2a_console={}.{}", u64::MAX / 2, "0".repeat(64));
    for (method, path) in a2a_gateway::console::ROUTES {
        let url = format!("{}{path}", gw.base);
        for auth in [
            None,
            Some(("authorization", "Bearer not-the-token")),
            Some(("cookie", forged.as_str())),
            Some(("cookie", "a2a_console=garbage")),
        ] {
            let r = call(&http, method, &url, auth).await;
            assert_eq!(r.status(), 401, "{method} {path} with {auth:?}");
            assert!(r.headers().get("set-cookie").is_none(), "{method} {path} with {auth:?} logged in");
            let ct = r.headers().get("content-type").and_then(|v| v.to_str().ok()).unwrap_or("").to_owned();
            let body = r.text().await.expect("body");
            // Nothing of the gateway: no agent, no asset, no DID; the login form or a JSON error only.
            for secret in [alpha.url.as_str(), "console.js", "did:web:gateway", "submit_report"] {
                assert!(!body.contains(secret), "{method} {path} with {auth:?} shows {secret}: {body}");
            }
            assert!(ct.starts_with("text/html") || ct.starts_with("application/json"), "{method} {path}: {ct}");
        }
        // The token in the query only logs in at /console itself, never elsewhere.
        let r = call(&http, method, &format!("{url}?token={ADMIN_TOKEN}"), None).await;
        if *path == "/console" || *path == "/console/" {
            assert_eq!(r.status(), 303, "{path}?token=");
        } else {
            assert_eq!(r.status(), 401, "{method} {path}?token= is not a login");
        }
    }
    // Unknown console paths are refused the same way before anything else.
    let r = call(&http, "GET", &format!("{}/console/api/nothing", gw.base), None).await;
    assert_eq!(r.status(), 401);
}

/// The routes that, let in without their input (the walk sends a form, no query), answer `400`.
const NEED_INPUT: &[&str] = &["/console/api/sessions/history", "/console/api/sessions/events", "/console/api/sign"];

#[tokio::test]
async fn the_console_logs_in_by_form_or_query_and_the_cookie_opens_every_route() {
    let world = World::new();
    let (alpha, beta) = agents(&world);
    let gw = TestGateway::start(&[&alpha, &beta], &world, CONSOLE).await;
    let http = no_redirects();
    // A wrong token at the form: the form again, 401, no cookie.
    let r = http
        .post(format!("{}/console/login", gw.base))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(format!("token={}", "wrong"))
        .send()
        .await
        .expect("login");
    assert_eq!(r.status(), 401);
    assert!(r.headers().get("set-cookie").is_none());
    // The form: 303 to /console with the cookie.
    let r = http
        .post(format!("{}/console/login", gw.base))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(format!("token={}", ADMIN_TOKEN))
        .send()
        .await
        .expect("login");
    assert_eq!(r.status(), 303);
    assert_eq!(r.headers()["location"], "/console");
    let cookie = cookie_of(&r);
    // The query: the same, and the redirect drops the token from the address.
    let r = http.get(format!("{}/console?token={ADMIN_TOKEN}", gw.base)).send().await.expect("query login");
    assert_eq!(r.status(), 303);
    assert_eq!(r.headers()["location"], "/console");
    let query_cookie = cookie_of(&r);
    for c in [&cookie, &query_cookie] {
        let page = http.get(format!("{}/console", gw.base)).header("cookie", c).send().await.expect("page");
        assert_eq!(page.status(), 200);
        let csp = page.headers()["content-security-policy"].to_str().expect("csp").to_owned();
        assert!(csp.contains("script-src 'self'") && csp.contains("frame-ancestors 'none'"), "{csp}");
        assert!(page.text().await.expect("html").contains("/console/assets/console.js"));
    }
    // Every route answers with the cookie (and with the bearer token, as the admin endpoints do).
    for (method, path) in a2a_gateway::console::ROUTES {
        for auth in [("cookie", cookie.clone()), ("authorization", format!("Bearer {ADMIN_TOKEN}"))] {
            let mut req =
                http.request(method.parse().expect("method"), format!("{}{path}", gw.base)).header(auth.0, &auth.1);
            if *method == "POST" {
                req = req
                    .header("content-type", "application/x-www-form-urlencoded")
                    .body(format!("token={}", ADMIN_TOKEN));
            }
            let r = req.send().await.expect("request");
            let status = r.status().as_u16();
            let bearer = auth.0 == "authorization";
            let signer = *path == "/console/api/signer";
            if NEED_INPUT.contains(path) || (signer && *method == "POST") || (signer && *method == "DELETE" && bearer) {
                // Let in, then refused for what they lack (a JSON body, an agent and session, a browser login).
                assert_eq!(status, 400, "{method} {path} with {}", auth.0);
                continue;
            }
            assert!(matches!(status, 200 | 303), "{method} {path} with {}: {status}", auth.0);
            if *path == "/console/api/traffic" {
                assert_eq!(r.headers()["content-type"], "text/event-stream");
            }
        }
    }
    let agents: Value = http
        .get(format!("{}/console/api/agents", gw.base))
        .header("cookie", &cookie)
        .send()
        .await
        .expect("agents")
        .json()
        .await
        .expect("json");
    assert_eq!(agents["capabilities"], json!(["notarize_message", "pay_invoice", "submit_report", "summarize_text"]));
    assert_eq!(agents["agents"][1]["capabilities"][1]["region_restriction"], json!(["eu-west-1"]));
    // Logging out clears the cookie.
    let r = http.post(format!("{}/console/logout", gw.base)).header("cookie", &cookie).send().await.expect("logout");
    assert_eq!(r.status(), 303);
    assert!(r.headers()["set-cookie"].to_str().expect("cookie").contains("Max-Age=0"));
}

#[tokio::test]
async fn without_a_token_or_with_the_console_off_the_console_does_not_exist() {
    let world = World::new();
    let (alpha, beta) = agents(&world);
    for extra in ["", "[admin]\ntoken_file = \"admin.token\"\nconsole = false\n"] {
        let gw = TestGateway::start(&[&alpha, &beta], &world, extra).await;
        let http = no_redirects();
        let bearer = format!("Bearer {ADMIN_TOKEN}");
        for (method, path) in a2a_gateway::console::ROUTES {
            let r = call(
                &http,
                method,
                &format!("{}{path}?token={ADMIN_TOKEN}", gw.base),
                Some(("authorization", bearer.as_str())),
            )
            .await;
            assert_eq!(r.status(), 404, "{method} {path} with {extra:?}");
        }
    }
}

#[tokio::test]
async fn console_settings_past_their_bounds_are_refused() {
    for (extra, key) in [
        ("console_session_s = 59", "admin.console_session_s"),
        ("console_sample_ms = 99", "admin.console_sample_ms"),
        ("console_samples = 1", "admin.console_samples"),
        ("console_records = 0", "admin.console_records"),
        ("console_records = 100001", "admin.console_records"),
    ] {
        let text = format!(
            "[gateway]\ndid = \"did:web:gw.example.com\"\n[edge]\nverify_signatures = false\n[admin]\n{extra}\n"
        );
        let e = a2a_gateway::config::Config::parse(&text, std::path::Path::new("gateway.toml")).expect_err(extra).0;
        assert!(e.contains(key), "{extra}: {e}");
    }
}

/// What the harness adds to the console's page: the driver and axe-core, or (for screenshots) an image that holds the
/// page's `load` event — when Chromium takes the screenshot — for a while, so that the console has drawn its data.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Inject {
    Driver,
    Hold,
}

const DRIVER_TAGS: &str =
    "<script src=\"/__test/axe.min.js\"></script><script src=\"/__test/driver.js\" defer></script></head>";
const HOLD_TAG: &str = "<img src=\"/__test/hold\" alt=\"\" width=\"1\" height=\"1\"></body>";

/// The test's own origin in front of the gateway: it serves the driver and axe-core, takes the report, and passes
/// every other request to the gateway unchanged, except that the console's page gets what `inject` says (same
/// origin, so the console's own Content-Security-Policy lets the scripts run).
async fn harness(
    gateway: String,
    driver: String,
    report: tokio::sync::mpsc::Sender<Value>,
    inject: std::sync::Arc<std::sync::Mutex<Inject>>,
    extra: axum::Router,
) -> String {
    let axe = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/axe-core/axe.min.js"))
        .expect("axe-core fixture");
    let http = no_redirects();
    let start = format!(
        "<!doctype html><html lang=\"en\"><head><title>start</title></head><body>\
         <form method=\"post\" action=\"/console/login\"><input name=\"token\" value=\"{ADMIN_TOKEN}\"></form>\
         <script>document.forms[0].submit()</script></body></html>"
    );
    let app = axum::Router::new()
        .route(
            "/__test/start",
            axum::routing::get(move || {
                let s = start.clone();
                async move { axum::response::Html(s) }
            }),
        )
        .route(
            "/__test/driver.js",
            axum::routing::get(move || {
                let d = driver.clone();
                async move { ([("content-type", "text/javascript")], d) }
            }),
        )
        .route(
            "/__test/axe.min.js",
            axum::routing::get(move || {
                let a = axe.clone();
                async move { ([("content-type", "text/javascript")], a) }
            }),
        )
        .route(
            "/__test/report",
            axum::routing::post(move |body: String| {
                let tx = report.clone();
                async move {
                    let _ = tx.send(serde_json::from_str(&body).unwrap_or(Value::String(body))).await;
                    ""
                }
            }),
        )
        .merge(extra)
        .route("/favicon.ico", axum::routing::get(|| async { http::StatusCode::NOT_FOUND }))
        .route(
            "/__test/hold",
            axum::routing::get(|| async {
                tokio::time::sleep(Duration::from_millis(2500)).await;
                http::StatusCode::NOT_FOUND
            }),
        )
        .fallback(move |req: http::Request<Body>| {
            let (http, gateway) = (http.clone(), gateway.clone());
            let inject = *inject.lock().expect("inject");
            async move {
                let (parts, body) = req.into_parts();
                let body = axum::body::to_bytes(body, 1 << 20).await.unwrap_or_default();
                let path = parts.uri.path_and_query().map_or("/", |p| p.as_str()).to_owned();
                let mut out = http.request(parts.method.clone(), format!("{gateway}{path}")).body(body);
                for (k, v) in &parts.headers {
                    if k != "host" && k != "content-length" {
                        out = out.header(k, v);
                    }
                }
                let r = match out.send().await {
                    Ok(r) => r,
                    Err(e) => {
                        eprintln!("harness: {} {path}: {e}", parts.method);
                        return http::Response::builder().status(502).body(Body::empty()).expect("response");
                    }
                };
                let mut resp = http::Response::builder().status(r.status());
                for (k, v) in r.headers() {
                    if k != "content-length" && k != "transfer-encoding" {
                        resp = resp.header(k, v);
                    }
                }
                let html =
                    r.headers().get("content-type").is_some_and(|v| v.to_str().unwrap_or("").starts_with("text/html"));
                if html && r.status() == 200 && parts.uri.path().starts_with("/console") {
                    let page = r.text().await.expect("page");
                    let page = match inject {
                        Inject::Driver => page.replacen("</head>", DRIVER_TAGS, 1),
                        Inject::Hold => page.replacen("</body>", HOLD_TAG, 1),
                    };
                    resp.body(Body::from(page)).expect("response")
                } else {
                    resp.body(Body::from_stream(r.bytes_stream())).expect("response")
                }
            }
        });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let base = format!("http://127.0.0.1:{}", listener.local_addr().expect("addr").port());
    tokio::spawn(async move { axum::serve(listener, app).await });
    base
}

/// Runs Chromium on `url` until `until` completes (or 90 s), then ends it.
async fn browse<T>(url: &str, until: impl std::future::Future<Output = T>) -> Option<T> {
    let profile = std::env::temp_dir().join(format!(
        "a2a-console-chromium-{}-{}",
        std::process::id(),
        crate::common::free_port()
    ));
    let mut browser = Command::new(chromium())
        .args(headless_args(&profile))
        .arg(url)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {} ({e}); install Chromium (see README, Set-up)", chromium()));
    let out = tokio::time::timeout(Duration::from_secs(90), until).await.ok();
    let _ = browser.kill();
    let _ = browser.wait();
    let _ = std::fs::remove_dir_all(&profile);
    out
}

/// A screenshot of one view of the console through the harness (logged in by `?token=`, which redirects; the page's
/// `load`, when Chromium takes it, held until the console has drawn).
fn screenshot(base: &str, view: &str) -> std::path::PathBuf {
    let dir = screenshots();
    std::fs::create_dir_all(&dir).expect("screenshot dir");
    let file = dir.join(format!("{view}.png"));
    let _ = std::fs::remove_file(&file);
    let profile = std::env::temp_dir().join(format!("a2a-console-shot-{}-{view}", std::process::id()));
    let status = Command::new(chromium())
        .args(headless_args(&profile))
        .arg(format!("--screenshot={}", file.display()))
        .arg(format!("{base}/console?token={ADMIN_TOKEN}#{view}"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .unwrap_or_else(|e| panic!("cannot start {} ({e})", chromium()));
    let _ = std::fs::remove_dir_all(&profile);
    assert!(status.success(), "chromium --screenshot of {view}: {status}");
    file
}

/// The driver of the network, traffic, metrics and Try-it views, after the drivers' shared prelude.
const DRIVER: &str = concat!(include_str!("../fixtures/console_driver_prelude.js"), include_str!("console_driver.js"));

#[tokio::test]
async fn the_console_shows_the_network_runs_a_handshake_and_its_traffic_and_metrics_in_headless_chromium() {
    let world = World::new();
    let (alpha, beta) = agents(&world);
    let gw = TestGateway::start(&[&alpha, &beta], &world, CONSOLE).await;
    let (tx, mut rx) = tokio::sync::mpsc::channel::<Value>(1);
    let inject = std::sync::Arc::new(std::sync::Mutex::new(Inject::Driver));
    let base = harness(gw.base.clone(), DRIVER.to_owned(), tx, inject.clone(), axum::Router::new()).await;
    let report = browse(&format!("{base}/__test/start"), rx.recv()).await;
    let report = report.expect("the console reported within 90 s").expect("a report");
    let metrics = reqwest::Client::new()
        .get(format!("{}/metrics", gw.base))
        .bearer_auth(ADMIN_TOKEN)
        .send()
        .await
        .expect("metrics")
        .text()
        .await
        .expect("text");
    assert!(report.get("exception").is_none(), "the driver failed: {report:#}");
    // The matrix shows every capability of both agents, with its auth requirement and region.
    assert_eq!(
        report["matrix_capabilities"],
        json!(["notarize_message", "pay_invoice", "submit_report", "summarize_text"]),
        "{report:#}"
    );
    let rows = report["matrix_rows"].as_array().expect("rows");
    assert_eq!(rows.len(), 2, "{report:#}");
    assert_eq!(
        rows[0]["cells"],
        json!([["notarize_message", "did_auth", "any region"], ["submit_report", "none", "any region"]])
    );
    assert_eq!(
        rows[1]["cells"],
        json!([["pay_invoice", "api_key", "eu-west-1"], ["summarize_text", "none", "any region"]])
    );
    // The keyboard moves between the views.
    assert_eq!(report["keyboard"], json!(["tab-traffic", "tab-metrics", "tab-network"]), "{report:#}");
    // The handshake from Try it succeeded and its RESULT was in the live traffic within 1 s.
    assert_eq!(report["try_result"], json!("succeeded"), "{report:#}");
    assert_eq!(report["try_steps"], json!(["RESULT", "CONFIRM", "EXECUTE", "NEGOTIATE"]), "{report:#}");
    let seen_ms = report["traffic_ms"].as_f64().expect("traffic_ms");
    assert!(seen_ms <= 1000.0, "the RESULT reached the traffic view after {seen_ms} ms");
    assert_eq!(report["traffic_steps"], json!(["result", "confirm", "execute"]), "{report:#}");
    assert_eq!(report["timeline_steps"], json!(["negotiate", "execute", "confirm", "result"]), "{report:#}");
    // The charts' numbers are those of /metrics.
    let total = a2a_gateway::metrics::sample_sum(&metrics, "a2a_gateway_requests_total", &[]);
    assert!(total >= 4.0, "{metrics}");
    assert_eq!(report["metrics_requests"], json!(total.to_string()), "{report:#}");
    for (agent, shown) in report["metrics_by_agent"].as_object().expect("by agent") {
        let want = a2a_gateway::metrics::sample_sum(&metrics, "a2a_gateway_requests_total", &[("agent", agent)]);
        assert_eq!(shown, &json!(want.to_string()), "agent {agent}");
    }
    assert!(report["chart_paths"].as_u64().expect("paths") >= 1, "{report:#}");
    // axe-core: no WCAG 2 A/AA violation (contrast, names, keyboard access) in any view.
    assert_eq!(report["axe_views"], json!(4), "{report:#}");
    assert_eq!(report["axe_violations"], json!([]), "{report:#}");
    // Screenshots of every view, kept by CI.
    let started = Instant::now();
    *inject.lock().expect("inject") = Inject::Hold;
    for view in ["network", "traffic", "metrics", "try"] {
        let b = base.clone();
        let file = tokio::task::spawn_blocking(move || screenshot(&b, view)).await.expect("screenshot");
        let size = std::fs::metadata(&file).map(|m| m.len()).unwrap_or(0);
        assert!(size > 10_000, "{} is {size} bytes", file.display());
    }
    eprintln!("screenshots in {} ({:?})", screenshots().display(), started.elapsed());
}

/// The driver of the Sessions view and signed Try it, after the drivers' shared prelude.
const SESSIONS_DRIVER: &str =
    concat!(include_str!("../fixtures/console_driver_prelude.js"), include_str!("console_sessions_driver.js"));

/// An agent hosting the session `desk` (§17) under the default `did_auth`, whose policy lets every signed address see
/// and message it (POL-1: allow list `*`; POL-2: visibility `all`) — so the gateway's DID sees it too.
fn desk_agent(world: &World) -> TestAgent {
    TestAgent::start_with("desk", vec![decl("book_desk", AuthRequirement::None)], world, |b| {
        let mut settings = a2a_server::sessions::SessionSettings::default();
        settings.visibility = a2a_server::sessions::Visibility::All;
        settings.allow_list = a2a_core::sessions::AllowList(vec!["*".to_owned()]);
        let handler = |d: a2a_core::sessions::Delivery| async move {
            Ok(match d.step {
                a2a_core::sessions::Step::Announce => "Told the team: the desk is free.".to_owned(),
                _ => format!("Desk here. You asked: {}", d.text),
            })
        };
        b.sessions(
            a2a_server::sessions::SessionsBuilder::new().settings(settings).session(
                a2a_server::sessions::HostedSession::new("desk", "Answers whether the desk is free."),
                handler,
            ),
        )
    })
}

/// `POST /a2a/sessions/send` to the desk, signed as the test client (INT-1..INT-10, `payload_hash`).
async fn ask_the_desk(world: &World, desk_url: &str, desk_did: &str) -> Value {
    use a2a_core::integrity::{self, Coverage, MessageParts};
    let body =
        serde_json::to_vec(&json!({"target": "desk", "text": "Is the desk free?", "wait_ms": 5000, "max_turns": 0}))
            .expect("json");
    let headers = [("A2A-Version", "0.3"), ("A2A-Sender-ID", crate::common::CLIENT)];
    let parts =
        MessageParts { method: "POST", target: "/a2a/sessions/send", headers: &headers, body: &body, status: None };
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).expect("clock").as_secs() as i64;
    let sig = integrity::sign(
        &world.client_key,
        crate::common::KEY_ID,
        crate::common::CLIENT,
        desk_did,
        Coverage::PayloadHash,
        &parts,
        now,
        60,
    )
    .expect("sign");
    let r = reqwest::Client::new()
        .post(format!("{desk_url}/sessions/send"))
        .header("A2A-Version", "0.3")
        .header("A2A-Sender-ID", crate::common::CLIENT)
        .header("A2A-Signature", sig)
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .expect("send");
    r.json().await.expect("send answer")
}

#[tokio::test]
async fn the_console_shows_an_agents_sessions_live_and_signs_try_it_with_an_uploaded_key_in_headless_chromium() {
    let world = std::sync::Arc::new(World::new());
    let (alpha, _beta) = agents(&world);
    let desk = desk_agent(&world);
    let gw = TestGateway::start(&[&alpha, &desk], &world, CONSOLE).await;
    let (tx, mut rx) = tokio::sync::mpsc::channel::<Value>(1);
    let inject = std::sync::Arc::new(std::sync::Mutex::new(Inject::Driver));
    // The keys the operator uploads: the client's own (a JWK) and one that is not in its DID document (PEM).
    let keys = json!({
        "did": crate::common::CLIENT, "key_id": crate::common::KEY_ID,
        "good_jwk": world.client_key.to_jwk().to_string(),
        "wrong_pem": world.impostor_key.to_pkcs8_pem().expect("pem").to_string(),
    });
    let (w, desk_url, desk_did) = (world.clone(), desk.url.clone(), desk.did.clone());
    let extra = axum::Router::new()
        .route(
            "/__test/keys",
            axum::routing::get(move || {
                let k = keys.clone();
                async move { axum::Json(k) }
            }),
        )
        .route(
            "/__test/send",
            axum::routing::post(move || {
                let (w, u, d) = (w.clone(), desk_url.clone(), desk_did.clone());
                async move { axum::Json(ask_the_desk(&w, &u, &d).await) }
            }),
        );
    let base = harness(gw.base.clone(), SESSIONS_DRIVER.to_owned(), tx, inject.clone(), extra).await;
    let report = browse(&format!("{base}/__test/start"), rx.recv()).await;
    let report = report.expect("the console reported within 90 s").expect("a report");
    assert!(report.get("exception").is_none(), "the driver failed: {report:#}");
    // Sessions: the desk agent's session, read as the gateway (signed), and a run made while the page watched, live.
    assert_eq!(report["sessions"], json!([["agent1", "desk"]]), "{report:#}");
    assert!(report["sessions_as"].as_str().expect("as").contains("signed with its key"), "{report:#}");
    assert_eq!(report["send_status"], json!("ok"), "{report:#}");
    let events = report["events"].as_array().expect("events");
    assert!(events.contains(&json!("announce")) && events.contains(&json!("run")), "{report:#}");
    assert_eq!(report["run_row"], json!(["ok", "done"]), "{report:#}");
    let ms = report["events_ms"].as_f64().expect("events_ms");
    assert!(ms < 5000.0, "the run's events reached the page after {ms} ms");
    let roles = report["history_roles"].as_array().expect("roles");
    assert!(roles.contains(&json!("inter_session")) && roles.contains(&json!("assistant")), "{report:#}");
    // Try it on a did_auth capability: refused unsigned; with a key that is not the DID's, a clear signature error;
    // with the DID's own key (uploaded as a JWK), the whole handshake succeeds, each request carrying A2A-Signature.
    assert_eq!(report["unsigned"]["result"], json!("failed"), "{report:#}");
    assert!(report["unsigned"]["status"].as_str().expect("status").contains("NEGOTIATE answered 40"), "{report:#}");
    assert_eq!(report["wrong_key"]["result"], json!("failed"), "{report:#}");
    let wrong = report["wrong_key"]["status"].as_str().expect("status");
    assert!(wrong.contains("NEGOTIATE answered 401") && wrong.contains("signature"), "{report:#}");
    assert_eq!(report["key_cleared"], json!(true), "the key does not stay in the page: {report:#}");
    assert_eq!(report["signed"]["result"], json!("succeeded"), "{report:#}");
    assert_eq!(report["signed_requests"], json!(4), "{report:#}");
    eprintln!(
        "sessions view: from the send to its run event on the page {ms:.0} ms; a key that is not the DID's: {wrong:?}"
    );
    assert_eq!(report["axe_views"], json!(2), "{report:#}");
    assert_eq!(report["axe_violations"], json!([]), "{report:#}");
    // The verified handshake is in the audit trail as signed by the client.
    let audit: Value = reqwest::Client::new()
        .get(format!("{}/console/api/audit?capability=notarize_message&outcome=ok", gw.base))
        .bearer_auth(ADMIN_TOKEN)
        .send()
        .await
        .expect("audit")
        .json()
        .await
        .expect("json");
    let records = audit["records"].as_array().expect("records");
    assert!(
        records
            .iter()
            .any(|r| r["step"] == "result" && r["verified"] == true && r["sender_id"] == crate::common::CLIENT),
        "{audit:#}"
    );
    // A screenshot of the Sessions view, kept by CI.
    *inject.lock().expect("inject") = Inject::Hold;
    let b = base.clone();
    let file = tokio::task::spawn_blocking(move || screenshot(&b, "sessions")).await.expect("screenshot");
    let size = std::fs::metadata(&file).map(|m| m.len()).unwrap_or(0);
    assert!(size > 10_000, "{} is {size} bytes", file.display());
}

#[tokio::test]
async fn an_uploaded_key_belongs_to_its_login_is_never_shown_and_ends_at_logout() {
    let world = World::new();
    let (alpha, beta) = agents(&world);
    let gw = TestGateway::start(&[&alpha, &beta], &world, CONSOLE).await;
    let http = no_redirects();
    let login = http.get(format!("{}/console?token={ADMIN_TOKEN}", gw.base)).send().await.expect("login");
    let cookie = cookie_of(&login);
    let jwk = world.client_key.to_jwk();
    let d = jwk["d"].as_str().expect("d").to_owned();
    let upload =
        |body: Value| http.post(format!("{}/console/api/signer", gw.base)).header("cookie", &cookie).json(&body).send();
    let r = upload(json!({"did": crate::common::CLIENT, "key": jwk})).await.expect("upload");
    assert_eq!(r.status(), 200);
    let text = r.text().await.expect("text");
    assert!(text.contains("did:web:client.example.com#key-1") && !text.contains(&d), "{text}");
    // Not a key: a clear error naming the member.
    let r = upload(
        json!({"did": crate::common::CLIENT, "key": "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----"}),
    )
    .await
    .expect("upload");
    assert_eq!(r.status(), 400);
    let v: Value = r.json().await.expect("json");
    assert_eq!(v["error"]["details"]["member"], "key", "{v}");
    let sign = |cookie: Option<String>| {
        let mut r = http.post(format!("{}/console/api/sign", gw.base)).json(&json!({
            "method": "POST", "target": "/a2a/negotiate", "body": "{}",
            "headers": {"A2A-Version": "0.3", "A2A-Sender-ID": crate::common::CLIENT}}));
        r = match cookie {
            Some(c) => r.header("cookie", c),
            None => r.bearer_auth(ADMIN_TOKEN),
        };
        r.send()
    };
    let r = sign(Some(cookie.clone())).await.expect("sign");
    assert_eq!(r.status(), 200);
    let v: Value = r.json().await.expect("json");
    assert_eq!(v["aud"], crate::common::GATEWAY, "signatures are addressed to the gateway (GW-3): {v}");
    // Another login (or the bearer token, which is no login) has no key.
    let other = cookie_of(&http.get(format!("{}/console?token={ADMIN_TOKEN}", gw.base)).send().await.expect("login"));
    if other != cookie {
        assert_eq!(sign(Some(other)).await.expect("sign").status(), 400);
    }
    assert_eq!(sign(None).await.expect("sign").status(), 400);
    // Logging out drops the key: the same cookie, replayed, signs nothing any more.
    let r = http.post(format!("{}/console/logout", gw.base)).header("cookie", &cookie).send().await.expect("logout");
    assert_eq!(r.status(), 303);
    let r = sign(Some(cookie.clone())).await.expect("sign");
    assert_eq!(r.status(), 400);
    let v: Value = r.json().await.expect("json");
    assert!(v["error"]["message"].as_str().expect("message").contains("no signing key"), "{v}");
}
