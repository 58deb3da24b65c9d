//! What an operator runs the gateway with (OPS-2..OPS-5), on a real `a2a-gateway` process and real signals:
//! `/healthz` and `/readyz` following a real Redis killed and started again; `SIGHUP` reloading `gateway.toml` with
//! an execution in flight across it; an invalid file refused; the audit file reopened after rotation.

use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use a2a_core::capability::AuthRequirement;
use a2a_test_support::Process;
use serde_json::{Value, json};

use crate::common::*;
use crate::redis_support::{RedisServer, unique_prefix};

/// An `a2a-gateway` process whose stderr (its log, `RUST_LOG=info`) is kept to be searched, and its base URL.
struct GatewayProcess {
    process: Process,
    base: String,
}

impl GatewayProcess {
    /// `a2a-gateway --config <config> --listen 127.0.0.1:<free port>`, once it says it serves.
    fn start(config: &std::path::Path) -> GatewayProcess {
        let port = free_port();
        let mut command = Command::new(a2a_test_support::bin("a2a-gateway"));
        command
            .arg("--config")
            .arg(config)
            .args(["--listen", &format!("127.0.0.1:{port}")])
            .env("RUST_LOG", "info")
            .env_remove("REDIS_URL")
            .env_remove("A2A_LOG_FORMAT");
        let (process, _) = Process::start("a2a-gateway", command, " serving ");
        GatewayProcess { process, base: format!("http://127.0.0.1:{port}") }
    }
}

async fn probe(base: &str, path: &str) -> (u16, Value, Option<String>) {
    let r = reqwest::Client::new()
        .get(format!("{base}{path}"))
        .timeout(Duration::from_secs(30))
        .send()
        .await
        .expect("probe");
    let status = r.status().as_u16();
    let retry = r.headers().get("retry-after").and_then(|v| v.to_str().ok()).map(str::to_owned);
    (status, r.json().await.unwrap_or(Value::Null), retry)
}

async fn readyz_until(base: &str, want: u16) -> Value {
    let until = Instant::now() + Duration::from_secs(30);
    loop {
        let (s, body, _) = probe(base, "/readyz").await;
        if s == want {
            return body;
        }
        assert!(Instant::now() < until, "/readyz stayed {s} {body}, wanted {want}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn gateway_toml(agents: &[&TestAgent], extra: &str) -> String {
    let mut t = format!("[gateway]\ndid = \"{GATEWAY}\"\n[edge]\nverify_signatures = false\n");
    for a in agents {
        t.push_str(&format!("[[agents]]\nurl = \"{}\"\n", a.url));
    }
    t.push_str(extra);
    t
}

/// OPS-2: the gateway's `/readyz` answers 503 `store_unreachable` from the first probe after its Redis is killed and
/// 200 once Redis is back; `/healthz` answers 200 throughout; without any agent it is not ready (`no_agent`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gateway_readiness_follows_its_redis_and_its_agents() {
    let mut redis = RedisServer::start();
    let world = World::new();
    let a = TestAgent::start("agent-ready", vec![decl("submit_report", AuthRequirement::None)], &world);
    let dir = TempDir::new("ops-ready");
    let store = format!("[store]\nredis_url = \"{}\"\nkey_prefix = \"{}\"\n", redis.url(), unique_prefix("gwready"));
    let config = dir.0.join("gateway.toml");
    std::fs::write(&config, gateway_toml(&[&a], &store)).expect("write");
    let g = GatewayProcess::start(&config);
    assert_eq!(readyz_until(&g.base, 200).await, json!({"status": "ready"}));
    assert_eq!(probe(&g.base, "/healthz").await.1, json!({"status": "ok"}));
    let head = reqwest::Client::new().head(format!("{}/readyz", g.base)).send().await.expect("head");
    assert_eq!(head.status().as_u16(), 200);

    redis.stop();
    let asked = Instant::now();
    let (s, body, retry) = probe(&g.base, "/readyz").await;
    let took = asked.elapsed();
    assert_eq!(s, 503, "{body}");
    assert_eq!((body["status"].as_str(), body["reason"].as_str()), (Some("not_ready"), Some("store_unreachable")));
    assert_eq!(retry.as_deref(), Some("1"));
    assert!(took < Duration::from_secs(2), "the probe answered after {took:?}");
    eprintln!("gateway /readyz answered 503 {took:?} after it was asked, Redis down");
    assert_eq!(probe(&g.base, "/healthz").await.0, 200, "alive while Redis is down");
    redis.restart();
    readyz_until(&g.base, 200).await;
    assert_eq!(probe(&g.base, "/healthz").await.0, 200);
    drop(g);

    // No agent configured (and no registry): alive, not ready.
    std::fs::write(&config, gateway_toml(&[], "")).expect("write");
    let g = GatewayProcess::start(&config);
    assert_eq!(probe(&g.base, "/healthz").await.0, 200);
    let (s, body, _) = probe(&g.base, "/readyz").await;
    assert_eq!((s, body["reason"].as_str()), (503, Some("no_agent")), "{body}");
}

/// A capability whose handler waits until the test lets it finish; `started` is set when it runs.
fn gated_agent(world: &World, gate: Arc<tokio::sync::Semaphore>, started: Arc<AtomicBool>) -> TestAgent {
    TestAgent::start_with("agent-gated", vec![decl("submit_report", AuthRequirement::None)], world, move |b| {
        b.capability(
            decl("run_gated", AuthRequirement::None),
            move |_ctx: a2a_server::handler::ExecutionContext, payload: Value| {
                let (gate, started) = (gate.clone(), started.clone());
                async move {
                    started.store(true, Ordering::SeqCst);
                    let _ = gate.acquire().await;
                    Ok(json!({"gated": payload}))
                }
            },
        )
    })
}

/// OPS-4: `SIGHUP` reloads `gateway.toml`: the process lives, an agent added to the file is routed to, an execution
/// in flight across the reload finishes and its RESULT is served through the gateway, a restart-only setting that
/// changed is logged and ignored; an invalid file is refused and the running configuration keeps serving.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gateway_sighup_reloads_its_configuration_and_keeps_work_in_flight() {
    let world = World::new();
    let gate = Arc::new(tokio::sync::Semaphore::new(0));
    let started = Arc::new(AtomicBool::new(false));
    let a = gated_agent(&world, gate.clone(), started.clone());
    let b = TestAgent::start("agent-added", vec![decl("sign_contract", AuthRequirement::None)], &world);
    let dir = TempDir::new("ops-reload");
    let config = dir.0.join("gateway.toml");
    std::fs::write(&config, gateway_toml(&[&a], "")).expect("write");
    let mut g = GatewayProcess::start(&config);
    let c = Caller::new(&g.base);
    let schema = json!({"type": "object", "properties": {"title": {"type": "string"}}, "required": ["title"]});
    let n = c
        .send(
            "POST",
            "/a2a/negotiate",
            &[],
            Some(&json!({"target_capability": "sign_contract", "proposed_schema": schema})),
            Sign::No,
        )
        .await;
    assert_ne!(n.status, 200, "no configured agent offers sign_contract yet: {}", n.body);

    // An execution in flight at agent A.
    let n = c
        .send(
            "POST",
            "/a2a/negotiate",
            &[],
            Some(&json!({"target_capability": "run_gated", "proposed_schema": schema})),
            Sign::No,
        )
        .await;
    assert_eq!(n.status, 200, "{}", n.body);
    let neg = n.body["negotiation_id"].as_str().expect("neg").to_owned();
    let e =
        c.send("POST", "/a2a/execute", &[("a2a-negotiation-id", &neg)], Some(&json!({"title": "t"})), Sign::No).await;
    assert_eq!(e.status, 201, "{}", e.body);
    let id = e.body["execution_id"].as_str().expect("id").to_owned();
    let confirmed = c.send("POST", "/a2a/confirm", &[], Some(&json!({"execution_id": id})), Sign::No).await;
    assert_eq!(confirmed.status, 202, "{}", confirmed.body);
    let until = Instant::now() + Duration::from_secs(30);
    while !started.load(Ordering::SeqCst) {
        assert!(Instant::now() < until, "the gated handler did not start");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    // Agent B added; a restart-only setting changed.
    std::fs::write(&config, gateway_toml(&[&a, &b], "[limits]\nmax_agents = 7\n")).expect("write");
    g.process.signal("HUP");
    g.process.expect_log("configuration reloaded", 1);
    g.process.expect_log("limits.max_agents changed, which needs a restart", 1);
    assert!(g.process.alive(), "SIGHUP ended the gateway");
    let r = c.handshake("sign_contract", Sign::No).await;
    assert_eq!(r.body["status"], "succeeded", "{}", r.body);
    assert_eq!(r.body["result"]["agent"], b.did, "{}", r.body);
    // The execution that started before the reload finishes after it; its RESULT comes through the gateway.
    gate.add_permits(1);
    let seg = a2a_core::execution_id::ExecutionId::parse(&id).expect("id").to_path_segment();
    let r = c.send("GET", &format!("/a2a/result/{seg}?wait_ms=20000"), &[], None, Sign::No).await;
    assert_eq!(r.body["status"], "succeeded", "{}", r.body);
    assert_eq!(r.body["result"], json!({"gated": {"title": "t"}}), "{}", r.body);

    // An invalid file is refused; the running configuration keeps serving.
    std::fs::write(&config, gateway_toml(&[&a], "[[agents]]\nurl = \"ftp://nowhere\"\n")).expect("write");
    g.process.signal("HUP");
    g.process.expect_log("reload refused: ", 1);
    assert!(g.process.alive(), "an invalid file ended the gateway");
    let r = c.handshake("sign_contract", Sign::No).await;
    assert_eq!(r.body["status"], "succeeded", "the running configuration still routes to B: {}", r.body);
}

/// Lines of a file (none when it does not exist).
fn lines(path: &std::path::Path) -> usize {
    std::fs::read_to_string(path).map(|t| t.lines().count()).unwrap_or(0)
}

/// Sends requests until `path` has at least one line (at most 30 s): the audit writer is asynchronous.
async fn audited_into(c: &Caller, path: &std::path::Path) {
    let until = Instant::now() + Duration::from_secs(30);
    loop {
        let _ = c.send("GET", "/a2a/capabilities", &[], None, Sign::No).await;
        if lines(path) > 0 {
            return;
        }
        assert!(Instant::now() < until, "no audit record in {}", path.display());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// OPS-5: after `mv audit.jsonl audit.jsonl.1`, `SIGUSR1` (and `SIGHUP`) make the gateway write new records to a
/// fresh `audit.jsonl`; the moved file keeps the records written before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gateway_reopens_its_audit_file_after_rotation() {
    let world = World::new();
    let a = TestAgent::start("agent-audit", vec![decl("submit_report", AuthRequirement::None)], &world);
    let dir = TempDir::new("ops-audit");
    let config = dir.0.join("gateway.toml");
    std::fs::write(&config, gateway_toml(&[&a], "[audit]\nfile = \"audit.jsonl\"\n")).expect("write");
    let mut g = GatewayProcess::start(&config);
    let c = Caller::new(&g.base);
    let (audit, first, second) = (dir.0.join("audit.jsonl"), dir.0.join("audit.jsonl.1"), dir.0.join("audit.jsonl.2"));
    audited_into(&c, &audit).await;

    std::fs::rename(&audit, &first).expect("rotate");
    g.process.signal("USR1");
    g.process.expect_log("audit file reopened", 1);
    let before = lines(&first);
    audited_into(&c, &audit).await;
    assert_eq!(lines(&first), before, "records after the reopening go to the new file only");
    assert!(before > 0);

    std::fs::rename(&audit, &second).expect("rotate again");
    g.process.signal("HUP");
    g.process.expect_log("audit file reopened", 2);
    audited_into(&c, &audit).await;
    assert!(lines(&second) > 0);
    assert!(g.process.alive());
}
