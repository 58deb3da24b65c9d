//! The suite passes against `a2a-server --demo` (built in-process with `a2a_agent::app::demo_app`, the function
//! the binary serves), and each check that is skipped says why.

use a2a_conformance::report::{Compliance, Status};

use crate::common::{self, Running};

/// The real demo, as `a2a-server --demo` serves it.
async fn real_demo() -> Running {
    let (l, port) = common::listener().await;
    // `demo_app` serves `/mcp` beside `/a2a` (MCP-1), as `a2a-server --demo` does.
    let (agent, app) = a2a_agent::app::demo_app(port).expect("demo app");
    let store = std::sync::Arc::new(a2a_server::store::MemoryStore::new(Default::default()));
    common::serve(l, port, common::DemoParts { agent, app: app.clone(), store, key: None }, app)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn demo_agent_passes_every_check_that_applies_with_a_served_did() {
    let demo = real_demo().await;
    let report = common::run(common::options(&demo.base, None)).await;
    assert_eq!(common::failed(&report), Vec::<String>::new(), "{}", common::explain(&report));
    assert!(report.ids_with(Status::Blocked).is_empty(), "{}", common::explain(&report));
    let mut skipped: Vec<&str> = report.ids_with(Status::Skip);
    skipped.sort();
    // The demo has no oauth2 capability, a confirm window (60 s) longer than the suite waits, signs no responses,
    // and is not a gateway. It serves the A2A 1.x bridge (§20) and MCP (§21), so the bridge/* and mcp/* checks run and
    // pass.
    assert_eq!(
        skipped,
        [
            "auth/oauth2",
            "auth/oauth2-algorithms",
            "execute/confirm-window-elapses",
            "gateway/ambiguous-framing",
            "gateway/date-skew",
            "gateway/forwarded-sender-removed",
            "gateway/own-sender-id",
            "gateway/routes-follow",
            "gateway/unsupported-version",
            "responses/signatures",
            "responses/signatures-canonical"
        ]
    );
    assert_eq!(report.compliance, Compliance::Full);
    for c in report.checks.iter().filter(|c| c.id.starts_with("bridge/")) {
        assert_eq!(c.status, Status::Pass, "{}", c.id);
    }
    assert!(report.checks.len() > 140, "{} checks", report.checks.len());
    // The signed checks ran: the demo resolved the suite's DID document over loopback HTTP.
    for id in
        ["did-auth/handshake", "signature/replay", "signature/expired", "did-resolver/rsa-key", "did-resolver/redirect"]
    {
        let c = report.checks.iter().find(|c| c.id == id).expect("check present");
        assert_eq!(c.status, Status::Pass, "{id}");
    }
    assert!(report.run.caller_did.as_deref().is_some_and(|d| d.starts_with("did:web:localhost%3A")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_an_identity_the_signed_checks_are_skipped_with_the_reason() {
    let demo = real_demo().await;
    let mut opts = common::options(&demo.base, None);
    opts.serve_did = None;
    opts.only = Some("did-auth/*,signature/*,did-resolver/*".into());
    let report = common::run(opts).await;
    assert!(common::failed(&report).is_empty(), "{}", common::explain(&report));
    let unsigned = report.checks.iter().find(|c| c.id == "did-auth/unsigned-refused").expect("check");
    assert_eq!(unsigned.status, Status::Pass, "the unsigned check needs no identity");
    let handshake = report.checks.iter().find(|c| c.id == "did-auth/handshake").expect("check");
    assert_eq!(handshake.status, Status::Skip);
    assert!(handshake.message.as_deref().is_some_and(|m| m.contains("--serve-did")), "{:?}", handshake.message);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn level_must_runs_only_must_checks_and_only_filters_by_requirement() {
    let demo = real_demo().await;
    let mut opts = common::options(&demo.base, None);
    opts.level = a2a_conformance::Level::Must;
    opts.only = Some("DISC-*".into());
    let report = common::run(opts).await;
    assert!(!report.checks.is_empty());
    for c in &report.checks {
        assert_eq!(c.level, a2a_conformance::Level::Must, "{}", c.id);
        assert!(c.requirements.iter().any(|r| r.starts_with("DISC-")), "{} {:?}", c.id, c.requirements);
    }
    assert_eq!(report.compliance, Compliance::Must, "a MUST-only run cannot claim more");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn demo_agent_passes_every_session_check() {
    let demo = real_demo().await;
    let mut opts = common::options(&demo.base, None);
    opts.only = Some("sessions/*".into());
    let report = common::run(opts).await;
    assert!(report.checks.len() >= 8, "{} session checks", report.checks.len());
    for c in &report.checks {
        assert_eq!(c.status, Status::Pass, "{}: {}", c.id, common::explain(&report));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn demo_agent_passes_every_streaming_check() {
    let demo = real_demo().await;
    let mut opts = common::options(&demo.base, None);
    opts.only = Some("streaming/*,responses/json".into());
    let report = common::run(opts).await;
    assert!(report.checks.len() >= 5, "{} streaming checks", report.checks.len());
    for c in &report.checks {
        assert_eq!(c.status, Status::Pass, "{}: {}", c.id, common::explain(&report));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_demo_with_the_a2a1x_bridge_passes_every_bridge_check() {
    let demo = common::bridged_demo().await;
    let mut opts = common::options(&demo.base, None);
    opts.only = Some("bridge/*".into());
    let report = common::run(opts).await;
    assert_eq!(report.checks.len(), 6, "{:?}", report.checks.iter().map(|c| c.id.as_str()).collect::<Vec<_>>());
    for c in &report.checks {
        assert_eq!(c.status, Status::Pass, "{} {:?}\n{}", c.id, c.message, common::explain(&report));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_bridge_the_bridge_checks_are_skipped_with_the_reason() {
    let demo = common::demo().await;
    let mut opts = common::options(&demo.base, None);
    opts.only = Some("bridge/*".into());
    let report = common::run(opts).await;
    assert_eq!(report.checks.len(), 6);
    for c in &report.checks {
        assert_eq!(c.status, Status::Skip, "{}", c.id);
        assert!(c.message.as_deref().is_some_and(|m| m.contains("404")), "{} {:?}", c.id, c.message);
    }
}

/// A free loopback port (bound, then released) for a `--serve-did` address that stays the same between runs.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map(|a| a.port()).expect("free port")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_runs_with_the_same_served_did_address_both_reach_full_against_an_agent_that_caches_did_documents() {
    // The demo's resolver caches a caller's DID document for its max-age (DID-27, 300 s here). The suite publishes a
    // fresh DID (`...:run-<hex>`) and key id per run, so the second run, on the same --serve-did port and well within
    // the 300 s, is not answered from the document of the first run.
    let demo = real_demo().await;
    let addr = format!("127.0.0.1:{}", free_port());
    let started = std::time::Instant::now();
    let mut dids = Vec::new();
    for run in 1..=2 {
        let mut opts = common::options(&demo.base, None);
        opts.serve_did = Some(addr.clone());
        let report = common::run(opts).await;
        assert_eq!(common::failed(&report), Vec::<String>::new(), "run {run}:\n{}", common::explain(&report));
        assert_eq!(report.compliance, Compliance::Full, "run {run}");
        let handshake = report.checks.iter().find(|c| c.id == "did-auth/handshake").expect("check");
        assert_eq!(handshake.status, Status::Pass, "run {run}");
        dids.push(report.run.caller_did.clone().expect("a caller DID"));
    }
    assert!(started.elapsed() < std::time::Duration::from_secs(300), "both runs within the documents' max-age");
    assert_ne!(dids[0], dids[1], "a fresh DID per run");
    let port = addr.rsplit(':').next().expect("port");
    assert!(dids.iter().all(|d| d.starts_with(&format!("did:web:localhost%3A{port}:run-"))), "{dids:?}");
}
