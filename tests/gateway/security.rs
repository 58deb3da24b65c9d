//! Edge security: every bad request is refused at the gateway with its code, counted, and never reaches an agent
//! (the agents' own request counters do not move).

use a2a_core::capability::AuthRequirement;
use serde_json::{Value, json};

use crate::common::*;

struct Setup {
    world: World,
    agent: TestAgent,
    gw: TestGateway,
    c: Caller,
}

async fn setup(extra: &str) -> Setup {
    let world = World::new();
    let agent = TestAgent::start(
        "agent-s",
        vec![
            decl("submit_report", AuthRequirement::None),
            decl("sign_contract", AuthRequirement::DidAuth),
            decl("query_inventory", AuthRequirement::ApiKey),
            decl("process_payment", AuthRequirement::Oauth2),
        ],
        &world,
    );
    let gw = TestGateway::start(&[&agent], &world, extra).await;
    let c = Caller::new(&gw.base);
    // Warm the DISCOVER cache so that the checks below need nothing from the agent.
    assert_eq!(c.send("OPTIONS", "/a2a", &[], None, Sign::No).await.status, 204);
    Setup { world, agent, gw, c }
}

fn negotiate(cap: &str) -> Value {
    json!({"target_capability": cap, "proposed_schema": {"type": "object"}})
}

impl Setup {
    /// Asserts the answer's status and code, that the gateway counted it, and that the agent saw nothing.
    async fn refused(&self, before: f64, a: &Answer, status: u16, code: &str) {
        assert_eq!((a.status, a.code()), (status, code), "{}", a.body);
        assert_eq!(a.header("a2a-sender-id"), Some(GATEWAY));
        assert!(self.gw.metric("a2a_gateway_edge_rejections_total", &[("reason", code)]) >= 1.0, "{code} not counted");
        assert_eq!(self.agent.requests(&self.c.http).await, before, "{code}: the request reached the agent");
    }

    fn signed(&self, skew: i64) -> Sign<'_> {
        Sign::With { key: &self.world.client_key, aud: GATEWAY, skew, lifetime: 60 }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forged_signature_wrong_did_expired_token_and_clock_skew_are_refused_at_the_edge() {
    let s = setup("").await;
    let before = s.agent.requests(&s.c.http).await;
    // Forged: signed with a key that is not in the client's DID document.
    let forged = Sign::With { key: &s.world.impostor_key, aud: GATEWAY, skew: 0, lifetime: 60 };
    let a = s.c.send("POST", "/a2a/negotiate", &[], Some(&negotiate("sign_contract")), forged).await;
    s.refused(before, &a, 401, "signature_invalid").await;
    // Wrong DID: the sender header names another DID than the signature's issuer.
    let (a, _) =
        s.c.send_raw(
            "POST",
            "/a2a/negotiate",
            &[],
            Some(serde_json::to_vec(&negotiate("sign_contract")).expect("json")),
            Sign::No,
            Some(sign_as_other(&s)),
        )
        .await;
    s.refused(before, &a, 401, "sender_mismatch").await;
    // An unknown DID: nobody can resolve it.
    let stranger = Caller { sender: "did:web:stranger.example.com".into(), ..Caller::new(&s.gw.base) };
    let a = stranger.send("POST", "/a2a/negotiate", &[], Some(&negotiate("sign_contract")), forged).await;
    s.refused(before, &a, 401, "did_resolution_failed").await;
    // Expired: issued 100 s ago for 60 s.
    let expired = Sign::With { key: &s.world.client_key, aud: GATEWAY, skew: -100, lifetime: 60 };
    let a = s.c.send("POST", "/a2a/negotiate", &[], Some(&negotiate("sign_contract")), expired).await;
    s.refused(before, &a, 401, "signature_expired").await;
    // Clock skew beyond 25 s either way (within the signature's own 30 s leeway, so only the gateway's bound). The
    // claims are whole seconds: 28 keeps the skew past the bound when the second turns between signing and checking.
    for skew in [28, -28] {
        let a = s.c.send("POST", "/a2a/negotiate", &[], Some(&negotiate("sign_contract")), s.signed(skew)).await;
        s.refused(before, &a, 401, "clock_skew").await;
    }
    assert_eq!(s.gw.metric("a2a_gateway_clock_skew_rejections_total", &[]), 2.0);
    assert!(s.gw.metric("a2a_gateway_signature_rejections_total", &[("reason", "signature_invalid")]) >= 1.0);
    // Unsigned requests are held to the bound through their Date header.
    let date = httpdate(now() + 28);
    let a = s.c.send("POST", "/a2a/negotiate", &[("date", &date)], Some(&negotiate("submit_report")), Sign::No).await;
    s.refused(before, &a, 401, "clock_skew").await;
    // Within the bound, signed requests pass and reach the agent.
    let a = s.c.send("POST", "/a2a/negotiate", &[], Some(&negotiate("sign_contract")), s.signed(20)).await;
    assert_eq!(a.status, 200, "{}", a.body);
}

fn httpdate(t: i64) -> String {
    let dt = time::OffsetDateTime::from_unix_timestamp(t).expect("time");
    let fmt = time::macros::format_description!(
        "[weekday repr:short], [day] [month repr:short] [year] [hour]:[minute]:[second] GMT"
    );
    dt.format(&fmt).expect("format")
}

/// A token signed by the client for a message whose A2A-Sender-ID is the client, sent with another sender.
fn sign_as_other(s: &Setup) -> String {
    let body = serde_json::to_vec(&negotiate("sign_contract")).expect("json");
    let headers = [("a2a-version", "0.3"), ("a2a-sender-id", "did:web:other.example.com")];
    let parts = a2a_core::integrity::MessageParts {
        method: "POST",
        target: "/a2a/negotiate",
        headers: &headers,
        body: &body,
        status: None,
    };
    let claims = a2a_core::integrity::build_claims(
        KEY_ID,
        "did:web:other.example.com",
        GATEWAY,
        a2a_core::integrity::Coverage::PayloadHash,
        &parts,
        now(),
        60,
    )
    .expect("claims");
    // Issued as other.example.com but the request says client.example.com.
    a2a_core::integrity::sign_claims(&s.world.client_key, &claims).expect("sign")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replayed_signature_is_refused_and_only_the_first_reaches_the_agent() {
    let s = setup("").await;
    let body = serde_json::to_vec(&negotiate("sign_contract")).expect("json");
    let before = s.agent.requests(&s.c.http).await;
    let (first, token) = s.c.send_raw("POST", "/a2a/negotiate", &[], Some(body.clone()), s.signed(0), None).await;
    assert_eq!(first.status, 200, "{}", first.body);
    let once = s.agent.requests(&s.c.http).await;
    assert_eq!(once, before + 1.0);
    let (again, _) = s.c.send_raw("POST", "/a2a/negotiate", &[], Some(body), Sign::No, token).await;
    s.refused(once, &again, 401, "replayed_request").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_auth_oversize_bodies_headers_and_path_scans_are_refused_without_reaching_an_agent() {
    let s = setup("[limits]\nmax_body_bytes = 4096\nmax_header_bytes = 4096\n").await;
    let before = s.agent.requests(&s.c.http).await;
    // did_auth capability, unsigned.
    let a = s.c.send("POST", "/a2a/negotiate", &[], Some(&negotiate("sign_contract")), Sign::No).await;
    s.refused(before, &a, 401, "signature_required").await;
    // api_key capability without the key; oauth2 without a bearer token (with its challenge).
    let a = s.c.send("POST", "/a2a/negotiate", &[], Some(&negotiate("query_inventory")), Sign::No).await;
    s.refused(before, &a, 401, "auth_required").await;
    let a = s.c.send("POST", "/a2a/negotiate", &[], Some(&negotiate("process_payment")), Sign::No).await;
    s.refused(before, &a, 401, "auth_required").await;
    assert!(a.header("www-authenticate").is_some());
    // With the key, the agent is reached (and checks the key itself).
    let a = s
        .c
        .send("POST", "/a2a/negotiate", &[("a2a-api-key", "secret-key")], Some(&negotiate("query_inventory")), Sign::No)
        .await;
    assert_eq!(a.status, 200, "{}", a.body);
    let before = s.agent.requests(&s.c.http).await;
    // Oversize body, announced and chunked.
    let big =
        json!({"target_capability": "submit_report", "proposed_schema": {"type": "object"}, "pad": "x".repeat(8000)});
    let a = s.c.send("POST", "/a2a/negotiate", &[], Some(&big), Sign::No).await;
    s.refused(before, &a, 413, "payload_too_large").await;
    let chunks: Vec<Result<Vec<u8>, std::io::Error>> = vec![Ok(vec![b' '; 3000]), Ok(vec![b' '; 3000])];
    let r =
        s.c.http
            .post(format!("{}/a2a/negotiate", s.gw.base))
            .header("a2a-version", "0.3")
            .header("a2a-sender-id", CLIENT)
            .header("content-type", "application/json")
            .body(reqwest::Body::wrap_stream(futures_util::stream::iter(chunks)))
            .send()
            .await
            .expect("chunked");
    assert_eq!(r.status(), 413);
    // Oversize headers.
    let fat = "v".repeat(5000);
    let a =
        s.c.send("POST", "/a2a/negotiate", &[("x-padding", &fat)], Some(&negotiate("submit_report")), Sign::No).await;
    s.refused(before, &a, 431, "headers_too_large").await;
    // A scan of A2A paths: answered cheaply, counted, none forwarded.
    for (m, p) in [
        ("GET", "/a2a/admin"),
        ("POST", "/a2a/internal/debug"),
        ("GET", "/a2a/.env"),
        ("GET", "/a2a-admin"),
        ("PUT", "/a2a/result/x/y"),
    ] {
        let a = s.c.send(m, p, &[], None, Sign::No).await;
        assert_eq!((a.status, a.code()), (404, "not_found"), "{m} {p}: {}", a.body);
    }
    assert_eq!(s.gw.metric("a2a_gateway_probes_total", &[]), 5.0);
    assert_eq!(s.agent.requests(&s.c.http).await, before, "the scan reached the agent");
    // Bad versions and senders never reach the agent either.
    let r =
        s.c.http
            .post(format!("{}/a2a/negotiate", s.gw.base))
            .header("a2a-version", "7.1")
            .header("a2a-sender-id", CLIENT)
            .header("content-type", "application/json")
            .body(negotiate("submit_report").to_string())
            .send()
            .await
            .expect("send");
    assert_eq!(r.status(), 400);
    let v: Value = r.json().await.expect("json");
    assert_eq!(v["error"]["code"], "unsupported_version");
    let x = Caller { sender: "not-a-did".into(), ..Caller::new(&s.gw.base) };
    let a = x.send("POST", "/a2a/negotiate", &[], Some(&negotiate("submit_report")), Sign::No).await;
    s.refused(before, &a, 400, "invalid_sender").await;
    // Routed steps with ids the gateway never issued.
    let a = s
        .c
        .send("POST", "/a2a/execute", &[("a2a-negotiation-id", "n_made_up")], Some(&json!({"title": "t"})), Sign::No)
        .await;
    s.refused(before, &a, 404, "unknown_negotiation").await;
    let a = s.c.send("POST", "/a2a/confirm", &[], Some(&json!({"execution_id": "nope"})), Sign::No).await;
    s.refused(before, &a, 404, "unknown_execution").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn senders_over_their_rate_are_refused_with_retry_after() {
    let s = setup("[edge]\nrate_limit_per_s = 1\nrate_limit_burst = 3\n").await;
    let mut codes = Vec::new();
    for _ in 0..6 {
        let a =
            s.c.send("POST", "/a2a/fallback", &[], Some(&json!({"target_capability": "submit_report"})), Sign::No)
                .await;
        codes.push(a.status);
        if a.status == 429 {
            assert_eq!(a.code(), "rate_limited");
            assert!(a.header("retry-after").is_some());
        }
    }
    assert_eq!(codes.iter().filter(|c| **c == 200).count(), 3, "{codes:?}");
    assert!(s.gw.metric("a2a_gateway_edge_rejections_total", &[("reason", "rate_limited")]) >= 3.0);
    // Another sender has its own budget.
    let other = Caller { sender: "did:web:other.example.com".into(), ..Caller::new(&s.gw.base) };
    let a =
        other.send("POST", "/a2a/fallback", &[], Some(&json!({"target_capability": "submit_report"})), Sign::No).await;
    assert_eq!(a.status, 200);
}

/// A step naming an id: method, path, extra headers, body, the real id and the made-up one.
type Probe = (&'static str, String, Vec<(&'static str, String)>, Option<Value>, String, String);

/// A made-up id of the same shape as `real`: its last character changed within the same alphabet.
fn made_up(real: &str) -> String {
    let mut s = real.to_owned();
    let last = s.pop().expect("not empty");
    s.push(if last == 'a' { 'q' } else { 'a' });
    s
}

/// What of an answer a caller can compare: status, body with `id` written as `as_id`, and the header names
/// (without those that differ from one answer to the next: `date`, `a2a-signature`).
fn seen(a: &Answer, id: &str, as_id: &str) -> (u16, String, Vec<String>) {
    let mut names: Vec<String> =
        a.headers.keys().map(|k| k.as_str().to_owned()).filter(|k| k != "date" && k != "a2a-signature").collect();
    names.sort();
    (a.status, a.body.to_string().replace(id, as_id), names)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_callers_real_ids_are_answered_exactly_as_made_up_ids() {
    let s = setup("").await;
    let signed = s.signed(0);
    // The victim (the client) opens a negotiation and an execution on a did_auth capability, and on one that needs
    // nothing.
    let mut ids = Vec::new();
    for (cap, sign) in [("sign_contract", signed), ("submit_report", Sign::No)] {
        let n = s.c.send("POST", "/a2a/negotiate", &[], Some(&negotiate(cap)), sign).await;
        assert_eq!(n.status, 200, "{}", n.body);
        let neg = n.body["negotiation_id"].as_str().expect("id").to_owned();
        let e =
            s.c.send("POST", "/a2a/execute", &[("a2a-negotiation-id", &neg)], Some(&json!({"title": "t"})), sign).await;
        assert_eq!(e.status, 201, "{}", e.body);
        let n2 = s.c.send("POST", "/a2a/negotiate", &[], Some(&negotiate(cap)), sign).await;
        let neg2 = n2.body["negotiation_id"].as_str().expect("id").to_owned();
        ids.push((cap, neg2, e.body["execution_id"].as_str().expect("id").to_owned()));
    }
    // Attackers: another DID, and one that claims the victim's DID without its key. Neither signs.
    let other = Caller { sender: "did:web:attacker.example".into(), ..Caller::new(&s.gw.base) };
    let claimant = Caller::new(&s.gw.base);
    for (cap, neg, exe) in &ids {
        for (who, c) in [("another sender", &other), ("a claim of the victim's DID", &claimant)] {
            if *cap == "submit_report" && who == "a claim of the victim's DID" {
                // auth_requirement none: an unsigned claim of a DID is that DID (HDR-8); nothing to hide.
                continue;
            }
            let (fake_neg, fake_exe) = (made_up(neg), made_up(exe));
            let seg = |id: &str| a2a_core::execution_id::ExecutionId::parse(id).expect("id").to_path_segment();
            let steps: [Probe; 4] = [
                (
                    "POST",
                    "/a2a/execute".into(),
                    vec![("a2a-negotiation-id", neg.clone())],
                    Some(json!({"title": "x"})),
                    neg.clone(),
                    fake_neg.clone(),
                ),
                ("GET", format!("/a2a/result/{}", seg(exe)), vec![], None, exe.clone(), fake_exe.clone()),
                (
                    "POST",
                    "/a2a/confirm".into(),
                    vec![],
                    Some(json!({"execution_id": exe})),
                    exe.clone(),
                    fake_exe.clone(),
                ),
                (
                    "POST",
                    "/a2a/cancel".into(),
                    vec![],
                    Some(json!({"execution_id": exe})),
                    exe.clone(),
                    fake_exe.clone(),
                ),
            ];
            for (method, path, extra, body, real, fake) in steps {
                let swap = |s: &str| match a2a_core::execution_id::ExecutionId::parse(&real) {
                    Ok(_) => s.replace(&seg(&real), &seg(&fake)).replace(&real, &fake),
                    Err(_) => s.replace(&real, &fake),
                };
                let extra_fake: Vec<(&str, String)> = extra.iter().map(|(k, v)| (*k, swap(v))).collect();
                let h1: Vec<(&str, &str)> = extra.iter().map(|(k, v)| (*k, v.as_str())).collect();
                let h2: Vec<(&str, &str)> = extra_fake.iter().map(|(k, v)| (*k, v.as_str())).collect();
                let body_fake =
                    body.as_ref().map(|b| serde_json::from_str::<Value>(&swap(&b.to_string())).expect("json"));
                let a = c.send(method, &path, &h1, body.as_ref(), Sign::No).await;
                let b = c.send(method, &swap(&path), &h2, body_fake.as_ref(), Sign::No).await;
                assert_eq!(b.status, 404, "{cap} {method} {path} by {who}, made up: {}", b.body);
                assert_eq!(
                    seen(&a, &real, &fake),
                    seen(&b, &fake, &fake),
                    "{cap} {method} {path} by {who}: the real id is told apart from a made-up one"
                );
            }
        }
    }
    // The victim's own execution is untouched (the attackers' CANCELs were refused) and still answers the victim.
    let (_, _, exe) = &ids[0];
    let seg = a2a_core::execution_id::ExecutionId::parse(exe).expect("id").to_path_segment();
    let r = s.c.send("GET", &format!("/a2a/result/{seg}"), &[], None, signed).await;
    assert_eq!((r.status, r.body["status"].as_str()), (200, Some("received")), "{}", r.body);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_admin_endpoints_are_closed_by_default_and_need_the_token_when_one_is_set() {
    let s = setup("[audit]\nfile = \"audit.jsonl\"\n").await;
    for path in ["/metrics", "/gateway/audit", "/gateway/agents"] {
        let r = s.c.http.get(format!("{}{path}", s.gw.base)).send().await.expect("get");
        assert_eq!(r.status(), 404, "{path}: GW-22, no token configured: the operator surface is not served");
        let v: Value = r.json().await.expect("a JSON error");
        assert_eq!(v["error"]["code"], "not_found");
    }
    let s = setup("[audit]\nfile = \"audit.jsonl\"\n[admin]\ntoken_file = \"admin.token\"\n").await;
    for path in ["/metrics", "/gateway/audit", "/gateway/agents"] {
        let url = format!("{}{path}", s.gw.base);
        let r = s.c.http.get(&url).send().await.expect("get");
        assert_eq!(r.status(), 401, "{path} without the token");
        let r = s.c.http.get(&url).bearer_auth("not-the-token").send().await.expect("get");
        assert_eq!(r.status(), 401, "{path} with another token");
        let r = s.c.http.get(&url).bearer_auth(ADMIN_TOKEN).send().await.expect("get");
        assert_eq!(r.status(), 200, "{path} with the token");
        let r = s.c.http.head(&url).bearer_auth(ADMIN_TOKEN).send().await.expect("head");
        assert_eq!(r.status(), 200, "{path}: HEAD as GET");
    }
}
