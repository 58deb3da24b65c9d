//! Two gateways on one Redis behave as one: a negotiation made through one is executed, confirmed and read through
//! the other; replays are refused across them; the audit stream holds the records of both.

use a2a_core::capability::AuthRequirement;
use serde_json::json;

use crate::common::*;
use crate::redis_support::{shared_server, unique_prefix};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_gateways_on_one_redis_share_routes_replay_memory_and_the_audit_stream() {
    let redis = shared_server();
    let world = World::new();
    let a = TestAgent::start("agent-r1", vec![decl("submit_report", AuthRequirement::None)], &world);
    let b = TestAgent::start(
        "agent-r2",
        vec![decl("submit_report", AuthRequirement::None), decl("sign_contract", AuthRequirement::DidAuth)],
        &world,
    );
    let store = format!(
        "[store]\nredis_url = \"{}\"\nkey_prefix = \"{}\"\n[admin]\ntoken_file = \"admin.token\"\n",
        redis.url(),
        unique_prefix("gw")
    );
    let g1 = TestGateway::start(&[&a, &b], &world, &store).await;
    let g2 = TestGateway::start(&[&a, &b], &world, &store).await;
    let (c1, c2) = (Caller::new(&g1.base), Caller::new(&g2.base));
    for _ in 0..4 {
        let n = c1
            .send(
                "POST",
                "/a2a/negotiate",
                &[],
                Some(&json!({"target_capability": "submit_report", "proposed_schema": {"type": "object"}})),
                Sign::No,
            )
            .await;
        assert_eq!(n.status, 200, "{}", n.body);
        let neg = n.body["negotiation_id"].as_str().expect("neg").to_owned();
        let e = c2
            .send("POST", "/a2a/execute", &[("a2a-negotiation-id", &neg)], Some(&json!({"title": "t"})), Sign::No)
            .await;
        assert_eq!(e.status, 201, "execute through the other gateway: {}", e.body);
        let id = e.body["execution_id"].as_str().expect("id").to_owned();
        let c = c1.send("POST", "/a2a/confirm", &[], Some(&json!({"execution_id": id})), Sign::No).await;
        assert_eq!(c.status, 202, "{}", c.body);
        let seg = a2a_core::execution_id::ExecutionId::parse(&id).expect("id").to_path_segment();
        let r = c2.send("GET", &format!("/a2a/result/{seg}?wait_ms=20000"), &[], None, Sign::No).await;
        assert_eq!(r.body["status"], "succeeded", "{}", r.body);
    }
    // A signature accepted by one gateway is a replay at the other.
    let body =
        serde_json::to_vec(&json!({"target_capability": "sign_contract", "proposed_schema": {"type": "object"}}))
            .expect("json");
    let sign = Sign::With { key: &world.client_key, aud: GATEWAY, skew: 0, lifetime: 60 };
    let (first, token) = c1.send_raw("POST", "/a2a/negotiate", &[], Some(body.clone()), sign, None).await;
    assert_eq!(first.status, 200, "{}", first.body);
    let (again, _) = c2.send_raw("POST", "/a2a/negotiate", &[], Some(body), Sign::No, token).await;
    assert_eq!(again.code(), "replayed_request");
    // The audit stream has the records of both gateways, queryable from either.
    let mut gateways = std::collections::BTreeSet::new();
    // The writers are asynchronous: wait (up to 20 s: a loaded machine writes late) for the records.
    for _ in 0..400 {
        let v: serde_json::Value = c2
            .http
            .get(format!("{}/gateway/audit?sender={}&limit=1000", g2.base, CLIENT))
            .bearer_auth(ADMIN_TOKEN)
            .send()
            .await
            .expect("audit")
            .json()
            .await
            .expect("json");
        let records = v["records"].as_array().cloned().unwrap_or_default();
        gateways = records.iter().filter_map(|r| r["gateway"].as_str().map(str::to_owned)).collect();
        if records.len() >= 18 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert_eq!(gateways.len(), 2, "records of both gateways");
}

/// Seed §5.4, GW-1: an agent that registers itself in the shared registry (as `a2a-server` does with a Redis store)
/// is routed to by a gateway configured with no agents at all, from the moment the gateway is ready; when its
/// registration ends, the gateway stops routing to it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_that_registered_itself_is_routed_to_until_its_registration_ends() {
    use std::time::Duration;

    use a2a_server::registry::{RedisRegistry, Registry, RegistryEntry};
    use a2a_server::store::RedisStore;
    use a2a_server::store::redis::{AgentScope, RedisConfig};

    let redis = shared_server();
    let world = World::new();
    let prefix = unique_prefix("gw-registry");
    let agent = TestAgent::start("agent-reg", vec![decl("index_documents", AuthRequirement::None)], &world);
    // The agent's side: its registry entries, refreshed by a heartbeat, as `a2a-server --config` writes them.
    let scope = AgentScope { did: agent.did.clone(), retention: Duration::from_secs(60), max_received: 100 };
    let store = RedisStore::connect(RedisConfig::new(redis.url()).with_key_prefix(&prefix), scope).expect("connect");
    let registry: std::sync::Arc<dyn Registry> = std::sync::Arc::new(RedisRegistry::new(store, Vec::new()));
    let entry = RegistryEntry {
        agent: agent.did.clone(),
        endpoint: Some(agent.url.clone()),
        capability: decl("index_documents", AuthRequirement::None),
        updated_at_ms: 0,
        expires_at_ms: None,
    };
    let stop = tokio_util::sync::CancellationToken::new();
    let beat =
        a2a_server::registry::start_heartbeat(registry, vec![entry], Duration::from_secs(30), stop.clone()).await;

    // A gateway with no [[agents]]: what it routes to, it learned from the registry.
    let store_cfg =
        format!("[store]\nredis_url = \"{}\"\nkey_prefix = \"{prefix}\"\n[registry]\npoll_ms = 100\n", redis.url());
    let g = TestGateway::start(&[], &world, &store_cfg).await;
    tokio::time::timeout(Duration::from_secs(20), g.gateway.ready()).await.expect("the registry was read");
    let c = Caller::new(&g.base);
    let negotiate = json!({"target_capability": "index_documents", "proposed_schema": {"type": "object"}});
    let n = c.send("POST", "/a2a/negotiate", &[], Some(&negotiate), Sign::No).await;
    assert_eq!(n.status, 200, "routed to the registered agent at once: {}", n.body);
    let d = c.send("GET", "/a2a/capabilities", &[], None, Sign::No).await;
    assert!(d.body.to_string().contains("index_documents"), "DISCOVER lists it: {}", d.body);
    let before = agent.step_requests(&c.http, "negotiate").await;
    assert!(before >= 1.0, "the agent answered the NEGOTIATE: {before}");

    // The agent's process stops: its heartbeat deregisters it, and the gateway's next read takes it out.
    stop.cancel();
    beat.await.expect("the heartbeat ended");
    let until = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let n = c.send("POST", "/a2a/negotiate", &[], Some(&negotiate), Sign::No).await;
        if n.status != 200 {
            assert_eq!(n.code(), "no_matching_capability", "{}", n.body);
            break;
        }
        assert!(tokio::time::Instant::now() < until, "still routed to an agent that deregistered");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let after = agent.step_requests(&c.http, "negotiate").await;
    let n = c.send("POST", "/a2a/negotiate", &[], Some(&negotiate), Sign::No).await;
    assert_eq!(n.code(), "no_matching_capability", "{}", n.body);
    assert_eq!(agent.step_requests(&c.http, "negotiate").await, after, "nothing more reached the agent");
}
