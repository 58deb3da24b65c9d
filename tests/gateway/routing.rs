//! A gateway in front of several real agents: DISCOVER union and cache, routing by capability, balancing, ejection
//! of a killed agent, FALLBACK aggregation, re-signing with the original sender, audit, version translation.

use a2a_core::capability::AuthRequirement;
use serde_json::json;

use crate::common::*;

fn agents(world: &World) -> (TestAgent, TestAgent) {
    // submit_report is offered by both (overlap); each has one of its own.
    let mut brief = decl("generate_brief_summary", AuthRequirement::None);
    brief.fallback_for = vec!["generate_summary".into()];
    brief.estimated_cost = Some(0.02);
    let a = TestAgent::start("agent-a", vec![decl("submit_report", AuthRequirement::None), brief], world);
    let b = TestAgent::start(
        "agent-b",
        vec![
            decl("submit_report", AuthRequirement::None),
            decl("sign_contract", AuthRequirement::DidAuth),
            decl("query_inventory", AuthRequirement::ApiKey),
        ],
        world,
    );
    (a, b)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn discover_answers_the_union_under_the_gateways_did_and_is_cached() {
    let world = World::new();
    let (a, b) = agents(&world);
    let gw = TestGateway::start(&[&a, &b], &world, "").await;
    let c = Caller::new(&gw.base);
    let d = c.send("OPTIONS", "/a2a", &[], None, Sign::No).await;
    assert_eq!(d.status, 204);
    assert_eq!(d.header("a2a-sender-id"), Some(GATEWAY));
    assert_eq!(d.header("a2a-version"), Some("0.3"));
    let caps: Vec<String> = serde_json::from_str(d.header("a2a-capabilities").expect("caps")).expect("json");
    assert_eq!(caps, ["submit_report", "generate_brief_summary", "sign_contract", "query_inventory"]);
    let before = a.step_requests(&c.http, "discover").await + b.step_requests(&c.http, "discover").await;
    for _ in 0..10 {
        assert_eq!(c.send("OPTIONS", "/a2a", &[], None, Sign::No).await.status, 204);
    }
    let after = a.step_requests(&c.http, "discover").await + b.step_requests(&c.http, "discover").await;
    assert_eq!(before, after, "cached DISCOVER answers do not reach the agents");
    let hits = gw.metric("a2a_gateway_discover_cache_hits_total", &[]);
    let misses = gw.metric("a2a_gateway_discover_cache_misses_total", &[]);
    assert_eq!(misses, 2.0, "one fetch per agent");
    assert!(hits >= 20.0, "hits {hits}");
    assert!(gw.metric("a2a_gateway_discover_cache_hit_ratio", &[]) > 0.9);
    let doc = c.send("GET", "/a2a/capabilities", &[], None, Sign::No).await;
    assert_eq!(doc.body["agent"]["id"], GATEWAY);
    assert_eq!(doc.body["capabilities"].as_array().map(Vec::len), Some(4));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn handshake_follows_its_negotiation_and_execution_to_one_agent_balanced_across_both() {
    let world = World::new();
    let (a, b) = agents(&world);
    let gw = TestGateway::start(&[&a, &b], &world, "").await;
    let c = Caller::new(&gw.base);
    let mut served = std::collections::BTreeMap::new();
    for _ in 0..8 {
        let r = c.handshake("submit_report", Sign::No).await;
        assert_eq!(r.body["status"], "succeeded", "{}", r.body);
        // Executions are scoped to the original sender (EID-2), whichever agent ran them.
        assert!(r.body["execution_id"].as_str().expect("id").starts_with(CLIENT));
        *served.entry(r.body["result"]["agent"].as_str().expect("agent").to_owned()).or_insert(0) += 1;
    }
    assert_eq!(served.len(), 2, "both agents offering submit_report took negotiations: {served:?}");
    // generate_brief_summary lives on agent A only.
    let r = c.handshake("generate_brief_summary", Sign::No).await;
    assert_eq!(r.body["result"]["agent"], a.did);
    assert!(gw.metric("a2a_gateway_requests_total", &[("step", "confirm"), ("outcome", "ok")]) >= 9.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_agent_is_ejected_and_its_capability_still_served_by_the_other() {
    let world = World::new();
    let (mut a, b) = agents(&world);
    let gw =
        TestGateway::start(&[&a, &b], &world, "[balancing]\nconsecutive_failures = 1\nejection_ms = 60000\n").await;
    let c = Caller::new(&gw.base);
    // Warm up: both agents known and serving.
    for _ in 0..2 {
        c.handshake("submit_report", Sign::No).await;
    }
    // A negotiation held by agent A, then A dies mid-run.
    let mut on_a = None;
    for _ in 0..6 {
        let n = c
            .send(
                "POST",
                "/a2a/negotiate",
                &[],
                Some(&json!({"target_capability": "generate_brief_summary", "proposed_schema": {"type": "object"}})),
                Sign::No,
            )
            .await;
        assert_eq!(n.status, 200);
        on_a = n.body["negotiation_id"].as_str().map(str::to_owned);
    }
    a.kill();
    let e = c
        .send(
            "POST",
            "/a2a/execute",
            &[("a2a-negotiation-id", on_a.as_deref().expect("neg"))],
            Some(&json!({"title": "t"})),
            Sign::No,
        )
        .await;
    assert_eq!(e.status, 502, "{}", e.body);
    assert_eq!(e.code(), "agent_unavailable");
    // Every new submit_report handshake succeeds, on B.
    for _ in 0..6 {
        let r = c.handshake("submit_report", Sign::No).await;
        assert_eq!(r.body["result"]["agent"], b.did);
    }
    assert!(gw.metric("a2a_gateway_agent_ejections_total", &[]) >= 1.0);
    assert_eq!(gw.metric("a2a_gateway_agent_healthy", &[("agent", "agent0")]), 0.0);
    // A capability only A offered is now unavailable, with the reason, not a hang.
    let n = c
        .send(
            "POST",
            "/a2a/negotiate",
            &[],
            Some(&json!({"target_capability": "generate_brief_summary", "proposed_schema": {"type": "object"}})),
            Sign::No,
        )
        .await;
    assert!(matches!(n.code(), "agent_unavailable" | "no_matching_capability"), "{}", n.body);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fallback_aggregates_options_from_every_agent() {
    let world = World::new();
    let (a, b) = agents(&world);
    let gw = TestGateway::start(&[&a, &b], &world, "").await;
    let c = Caller::new(&gw.base);
    let f =
        c.send("POST", "/a2a/fallback", &[], Some(&json!({"target_capability": "generate_summary"})), Sign::No).await;
    assert_eq!(f.status, 200, "{}", f.body);
    let opts = f.body["fallback_options"].as_array().expect("options");
    assert_eq!(opts.len(), 1);
    assert_eq!(opts[0]["capability"], "generate_brief_summary");
    assert_eq!(opts[0]["relation"], "degraded");
    // No agent offers generate_summary: the gateway answers the mismatch itself, with the options, at the edge.
    let before = a.requests(&c.http).await + b.requests(&c.http).await;
    let n = c
        .send(
            "POST",
            "/a2a/negotiate",
            &[],
            Some(&json!({"target_capability": "generate_summary", "proposed_schema": {"type": "object"}})),
            Sign::No,
        )
        .await;
    assert_eq!(n.status, 404);
    assert_eq!(n.code(), "no_matching_capability");
    assert_eq!(n.body["fallback_options"][0]["capability"], "generate_brief_summary");
    assert_eq!(before, a.requests(&c.http).await + b.requests(&c.http).await);
    assert_eq!(gw.metric("a2a_gateway_fallback_answers_total", &[("reason", "no_matching_capability")]), 1.0);
    assert_eq!(gw.metric("a2a_gateway_negotiation_failures_total", &[("reason", "no_matching_capability")]), 1.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn signed_caller_is_verified_once_and_forwarded_resigned_as_itself() {
    let world = World::new();
    let (a, b) = agents(&world);
    let gw = TestGateway::start(&[&a, &b], &world, "").await;
    let c = Caller::new(&gw.base);
    let sign = Sign::With { key: &world.client_key, aud: GATEWAY, skew: 0, lifetime: 60 };
    // sign_contract is did_auth at agent B: the agent accepts the gateway's signature and the forwarded sender.
    let r = c.handshake("sign_contract", sign).await;
    assert_eq!(r.body["status"], "succeeded", "{}", r.body);
    assert!(r.body["execution_id"].as_str().expect("id").starts_with(CLIENT), "scoped to the original sender");
    // A caller cannot claim to be forwarded: agents refuse A2A-Forwarded-Sender from anyone but a trusted gateway.
    let direct = Caller::new(b.url.trim_end_matches("/a2a"));
    let n = direct
        .send(
            "POST",
            "/a2a/negotiate",
            &[("a2a-forwarded-sender", "did:web:victim.example.com"), ("a2a-forwarded-verified", "true")],
            Some(&json!({"target_capability": "submit_report", "proposed_schema": {"type": "object"}})),
            Sign::No,
        )
        .await;
    assert_eq!(n.status, 403, "{}", n.body);
    assert_eq!(n.code(), "forbidden");
    // The gateway strips such a header from unsigned callers: the agent sees the caller's own claim.
    let n = c
        .send(
            "POST",
            "/a2a/negotiate",
            &[("a2a-forwarded-sender", "did:web:victim.example.com")],
            Some(&json!({"target_capability": "submit_report", "proposed_schema": {"type": "object"}})),
            Sign::No,
        )
        .await;
    assert_eq!(n.status, 200, "{}", n.body);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn audit_log_has_one_record_per_request_queryable_by_sender_negotiation_and_execution() {
    let world = World::new();
    let (a, b) = agents(&world);
    let gw = TestGateway::start(
        &[&a, &b],
        &world,
        "[audit]\nfile = \"audit.jsonl\"\n[admin]\ntoken_file = \"admin.token\"\n",
    )
    .await;
    let c = Caller::new(&gw.base);
    let r = c.handshake("submit_report", Sign::No).await;
    let exe = r.body["execution_id"].as_str().expect("id").to_owned();
    // The writer is asynchronous: a query waits (up to 20 s: a loaded machine writes late) until at least `min`
    // records landed.
    let q = |s: String, min: usize| {
        let http = c.http.clone();
        let base = gw.base.clone();
        async move {
            for _ in 0..400 {
                let v: serde_json::Value = http
                    .get(format!("{base}/gateway/audit?{s}"))
                    .bearer_auth(ADMIN_TOKEN)
                    .send()
                    .await
                    .expect("audit")
                    .json()
                    .await
                    .expect("json");
                let n = v["records"].as_array().map_or(0, Vec::len);
                if n >= min {
                    return v;
                }
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            }
            panic!("fewer than {min} audit records for {s}");
        }
    };
    let enc = |s: &str| s.replace('%', "%25").replace(':', "%3A");
    let by_exe = q(format!("execution={}", enc(&exe)), 3).await;
    let steps: Vec<&str> =
        by_exe["records"].as_array().expect("records").iter().map(|r| r["step"].as_str().unwrap_or("")).collect();
    assert_eq!(steps, ["execute", "confirm", "result"]);
    // The RESULT's record carries the execution's status, as answered; the other steps' records have none.
    assert_eq!(by_exe["records"][2]["execution_status"], r.body["status"], "{by_exe}");
    assert!(r.body["status"].is_string(), "{}", r.body);
    assert!(by_exe["records"][0].get("execution_status").is_none(), "{by_exe}");
    let rec = &by_exe["records"][0];
    assert_eq!(rec["sender_id"], CLIENT);
    assert_eq!(rec["capability"], "submit_report");
    assert!(rec["agent"].as_str().is_some_and(|u| u == a.url || u == b.url));
    assert_eq!(rec["outcome"], "ok");
    assert!(rec["latency_us"].as_u64().is_some());
    let neg = rec["negotiation_id"].as_str().expect("negotiation").to_owned();
    let by_neg = q(format!("negotiation={neg}"), 1).await;
    assert_eq!(by_neg["records"][0]["step"], "negotiate");
    let by_sender = q(format!("sender={}", enc(CLIENT)), 4).await;
    assert_eq!(by_sender["records"].as_array().map(Vec::len), Some(4));
    let file = std::fs::read_to_string(gw.dir.0.join("audit.jsonl")).expect("audit file");
    assert_eq!(file.lines().count(), 4);
    // The query command reads the same log (`a2a-gateway audit`), oldest first, one JSON object a line.
    let out = std::process::Command::new(a2a_test_support::bin("a2a-gateway"))
        .arg("--config")
        .arg(gw.dir.0.join("gateway.toml"))
        .args(["audit", "--execution", &exe])
        .output()
        .expect("a2a-gateway audit");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let steps: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).expect("a JSON line")["step"].as_str().unwrap_or("").to_owned()
        })
        .collect();
    assert_eq!(steps, ["execute", "confirm", "result"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn translated_caller_version_is_served_and_versions_without_translation_are_refused() {
    let world = World::new();
    let (a, b) = agents(&world);
    let gw = TestGateway::start(
        &[&a, &b],
        &world,
        "[[translations]]\ncaller_version = \"0.9\"\nheaders = { \"a2a-sender\" = \"a2a-sender-id\", \"a2a-negotiation\" = \"a2a-negotiation-id\" }\nfields = { \"capability\" = \"target_capability\" }\n",
    )
    .await;
    let http = reqwest::Client::new();
    let send = |path: &str, version: &str, extra: Vec<(&'static str, String)>, body: serde_json::Value| {
        let mut rb = http
            .post(format!("{}{path}", gw.base))
            .header("a2a-version", version)
            .header("content-type", "application/json");
        for (k, v) in extra {
            rb = rb.header(k, v);
        }
        rb.body(body.to_string()).send()
    };
    let r = send(
        "/a2a/negotiate",
        "0.9",
        vec![("a2a-sender", CLIENT.into())],
        json!({"capability": "submit_report", "proposed_schema": {"type": "object"}}),
    )
    .await
    .expect("negotiate");
    assert_eq!(r.status(), 200);
    assert_eq!(r.headers().get("a2a-version").and_then(|v| v.to_str().ok()), Some("0.9"));
    let neg = r.headers().get("a2a-negotiation").and_then(|v| v.to_str().ok()).expect("renamed header").to_owned();
    let body: serde_json::Value = r.json().await.expect("json");
    assert_eq!(body["capability"], "submit_report", "{body}");
    assert!(body.get("target_capability").is_none());
    let r = send(
        "/a2a/execute",
        "0.9",
        vec![("a2a-sender", CLIENT.into()), ("a2a-negotiation", neg)],
        json!({"title": "t"}),
    )
    .await
    .expect("execute");
    assert_eq!(r.status(), 201);
    // A version the gateway has no table for.
    let r = send(
        "/a2a/negotiate",
        "0.4",
        vec![("a2a-sender-id", CLIENT.into())],
        json!({"target_capability": "submit_report", "proposed_schema": {}}),
    )
    .await
    .expect("negotiate");
    assert_eq!(r.status(), 400);
    let body: serde_json::Value = r.json().await.expect("json");
    assert_eq!(body["error"]["code"], "unsupported_version");
    assert_eq!(body["error"]["details"]["supported_versions"], json!(["0.3", "0.9"]));
}

/// The threads of this process whose name starts with `prefix`, once there are `n` of them or 5 s have passed.
#[cfg(target_os = "linux")]
async fn threads_named(prefix: &str, n: usize) -> usize {
    let count = || {
        std::fs::read_dir("/proc/self/task")
            .expect("tasks")
            .filter_map(Result::ok)
            .filter(|t| std::fs::read_to_string(t.path().join("comm")).is_ok_and(|c| c.starts_with(prefix)))
            .count()
    };
    let t = std::time::Instant::now();
    while count() != n && t.elapsed() < std::time::Duration::from_secs(5) {
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_worker_threads_every_connection_is_served_and_the_shutdown_joins_them() {
    let world = World::new();
    let (a, b) = agents(&world);
    let mut gw = TestGateway::start_workers(&[&a, &b], &world, "", 3).await;
    // The serving task starts them.
    #[cfg(target_os = "linux")]
    assert_eq!(threads_named("a2a-gw-", 3).await, 3, "one thread per worker");
    // Twelve callers with connections of their own, at once: whichever worker accepts a connection, the handshake
    // follows its negotiation and execution (the routes are the gateway's, not a worker's).
    let callers: Vec<_> = (0..12)
        .map(|_| {
            let c = Caller::new(&gw.base);
            tokio::spawn(async move {
                for _ in 0..3 {
                    let r = c.handshake("submit_report", Sign::No).await;
                    assert_eq!(r.body["status"], "succeeded", "{}", r.body);
                }
            })
        })
        .collect();
    for c in callers {
        c.await.expect("caller");
    }
    assert_eq!(gw.metric("a2a_gateway_requests_total", &[("step", "confirm"), ("outcome", "ok")]), 36.0);
    let base = gw.base.clone();
    gw.stopped(std::time::Duration::from_secs(10)).await.expect("a clean stop");
    // Each has sent its end; its thread then returns.
    #[cfg(target_os = "linux")]
    assert_eq!(threads_named("a2a-gw-", 0).await, 0, "the workers' threads ended");
    let after = reqwest::Client::new().get(format!("{base}/a2a/capabilities")).send().await;
    assert!(after.is_err(), "no new connection is served after the shutdown");
}

/// LIM-18, DISC-11: the gateway's `limits` are, member by member, the smallest of its agents' (a caller sizes its
/// parallelism to the share it meets at whichever agent serves it); the body limit is also the gateway's own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_gateway_announces_the_smallest_of_its_agents_limits_and_shares() {
    let world = World::new();
    let limits = |share: usize, queued: usize, wait_s: u64, received: usize| {
        move |b: a2a_server::AgentBuilder| {
            let mut l = a2a_server::Limits::default();
            l.max_in_progress_per_sender = share;
            l.max_queued_per_sender = queued;
            l.sender_queue_timeout_ms = wait_s * 1_000;
            l.max_received_per_sender = received;
            b.limits(l)
        }
    };
    let a = TestAgent::start_with(
        "agent-a",
        vec![decl("submit_report", AuthRequirement::None)],
        &world,
        limits(3, 8, 2, 50),
    );
    let b = TestAgent::start_with(
        "agent-b",
        vec![decl("query_inventory", AuthRequirement::None)],
        &world,
        limits(5, 4, 9, 40),
    );
    let gw = TestGateway::start(&[&a, &b], &world, "").await;
    let c = Caller::new(&gw.base);
    let doc = c.send("GET", "/a2a/capabilities", &[], None, Sign::No).await;
    let l = &doc.body["limits"];
    let member = |k: &str| l[k].as_u64();
    assert_eq!(
        (
            member("max_in_progress_per_sender"),
            member("max_queued_per_sender"),
            member("sender_queue_timeout_ms"),
            member("max_received_per_sender")
        ),
        (Some(3), Some(4), Some(2_000), Some(40)),
        "{l}"
    );
    assert!(member("max_body_bytes").is_some_and(|b| b > 0), "{l}");
}
