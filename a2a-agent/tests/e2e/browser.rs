//! A browser-based agent on another origin can DISCOVER (read the A2A headers) and NEGOTIATE: real headless Chromium
//! (`/usr/bin/chromium`, or `$CHROMIUM`), real CORS.

use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::AtomicUsize;
use std::time::Duration;

use a2a_test_support::browser::{chromium, headless_args};
use axum::routing::{get, post};
use serde_json::{Value, json};
use tokio::net::TcpListener;

use crate::common::{TestAgent, standard};

const PAGE: &str = r#"<!doctype html><html><body><script>
(async () => {
  const agent = "AGENT";
  const out = {};
  try {
    const d = await fetch(agent + "/a2a", {method: "OPTIONS"});
    out.discover_status = d.status;
    out.version = d.headers.get("A2A-Version");
    out.sender = d.headers.get("A2A-Sender-ID");
    out.capabilities = JSON.parse(d.headers.get("A2A-Capabilities"));
    const n = await fetch(agent + "/a2a/negotiate", {
      method: "POST",
      headers: {"A2A-Version": "0.3", "A2A-Sender-ID": "did:web:browser.example.org", "Content-Type": "application/json"},
      body: JSON.stringify({target_capability: "submit_report",
        proposed_schema: {type: "object", properties: {title: {type: "string"}}, required: ["title"]}})
    });
    out.negotiate_status = n.status;
    out.negotiation_header = n.headers.get("A2A-Negotiation-ID");
    out.negotiation = await n.json();
    const bad = await fetch(agent + "/a2a/negotiate", {
      method: "POST",
      headers: {"A2A-Version": "0.3", "A2A-Sender-ID": "did:web:browser.example.org", "Content-Type": "application/json"},
      body: "{"
    });
    out.error_status = bad.status;
    out.error = await bad.json();
  } catch (e) {
    out.exception = String(e);
  }
  await fetch("/report", {method: "POST", body: JSON.stringify(out)});
})();
</script></body></html>"#;

#[tokio::test]
async fn a_page_on_another_origin_discovers_and_negotiates_in_headless_chromium() {
    let agent = TestAgent::start(standard(Arc::new(AtomicUsize::new(0)))).await;
    let (tx, mut rx) = tokio::sync::mpsc::channel::<Value>(1);
    let page = PAGE.replace("AGENT", &agent.base);
    let app = axum::Router::new()
        .route(
            "/",
            get(move || {
                let page = page.clone();
                async move { axum::response::Html(page) }
            }),
        )
        .route(
            "/report",
            post(move |body: String| {
                let tx = tx.clone();
                async move {
                    let _ = tx.send(serde_json::from_str(&body).unwrap_or(Value::Null)).await;
                    ""
                }
            }),
        );
    // "localhost" and "127.0.0.1" with another port: a different origin from the agent's.
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let page_url = format!("http://localhost:{}/", listener.local_addr().expect("addr").port());
    tokio::spawn(async move { axum::serve(listener, app).await });
    let profile = std::env::temp_dir().join(format!("a2a-chromium-{}", std::process::id()));
    let mut browser = Command::new(chromium())
        .args(headless_args(&profile))
        .arg(&page_url)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {} ({e}); install Chromium (see README, Set-up)", chromium()));
    let report = tokio::time::timeout(Duration::from_secs(60), rx.recv()).await;
    let _ = browser.kill();
    let _ = browser.wait();
    let _ = std::fs::remove_dir_all(&profile);
    let report = report.expect("the page reported within 60 s").expect("a report");
    assert!(report.get("exception").is_none(), "the page hit an exception (CORS?): {report}");
    assert_eq!(report["discover_status"], json!(204), "{report}");
    assert_eq!(report["version"], json!("0.3"));
    assert_eq!(report["sender"], json!("did:web:agent.example.com"));
    assert_eq!(report["capabilities"][0], json!("submit_report"));
    assert_eq!(report["negotiate_status"], json!(200), "{report}");
    assert_eq!(report["negotiation"]["agreed_schema"]["required"], json!(["title", "timestamp"]));
    assert_eq!(report["negotiation_header"], report["negotiation"]["negotiation_id"]);
    assert_eq!(report["error_status"], json!(400));
    assert_eq!(report["error"]["error"]["code"], json!("invalid_json"));
}
