//! The TOML configuration (`a2a-server --config agent.toml`, `a2a_agent::config`): a full configuration loads,
//! builds and serves its capabilities; every kind of mistake is refused with the file, the line and the field; and
//! the real binary serves a configuration and refuses a broken one.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use a2a_agent::config::Config;
use a2a_core::keys::SigningKey;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::common::{Answer, SENDER, TempDir, TestAgent, free_port, vector_key};
use crate::handlers::Backend;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/config")
}

/// Loads and builds a configuration file as the binary does.
pub(crate) fn build(path: &Path) -> Result<(a2a_server::Agent, Option<(String, Value)>), String> {
    let (cfg, text) = Config::load(path).map_err(|e| e.to_string())?;
    a2a_agent::app::build_from_config(&cfg, &text, path)
}

/// An environment variable this process has, with a value usable as an API key: tests cannot set one (setting the
/// environment is `unsafe` and the crate forbids unsafe code), so the full configuration names one that exists.
fn variable_with_a_value() -> (String, String) {
    let usable = |(k, v): &(String, String)| {
        !v.is_empty()
            && v.len() <= 256
            && v.bytes().all(|b| b.is_ascii_graphic())
            && k.bytes().all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_')
    };
    let mut vars: Vec<(String, String)> = std::env::vars().filter(usable).collect();
    vars.sort();
    let preferred = vars.iter().position(|(k, _)| k == "HOME").unwrap_or(0);
    vars.into_iter().nth(preferred).expect("the environment has a variable with a plain value")
}

/// Copies the full configuration fixture into a fresh directory with its placeholders replaced.
fn full_config(backend: &str, key_env: &str) -> (TempDir, PathBuf) {
    let dir = TempDir::new("full-config");
    for sub in ["schemas", "programs"] {
        std::fs::create_dir_all(dir.path(sub)).expect("mkdir");
        for entry in std::fs::read_dir(fixtures().join(sub)).expect("fixture dir") {
            let entry = entry.expect("entry");
            std::fs::copy(entry.path(), dir.path(sub).join(entry.file_name())).expect("copy");
        }
    }
    let text = std::fs::read_to_string(fixtures().join("full-agent.toml"))
        .expect("fixture")
        .replace("@KEY_FILE@", &vector_key("p256-pkcs8.pem").display().to_string())
        .replace("@KEY_ENV@", key_env)
        .replace("@BACKEND@", backend);
    let path = dir.write("agent.toml", &text);
    (dir, path)
}

/// The whole handshake with extra headers on every request; returns the final RESULT body.
pub(crate) async fn handshake(
    t: &TestAgent,
    capability: &str,
    schema: Value,
    payload: Value,
    extra: &[(&str, &str)],
) -> Value {
    let with = |mut rb: reqwest::RequestBuilder| {
        for (k, v) in extra {
            rb = rb.header(*k, *v);
        }
        rb
    };
    let n = t
        .send(
            with(t.req(Method::POST, "/a2a/negotiate"))
                .json(&json!({"target_capability": capability, "proposed_schema": schema})),
        )
        .await;
    assert_eq!(n.status, StatusCode::OK, "{capability}: {}", n.body);
    let neg = n.body["negotiation_id"].as_str().expect("negotiation_id");
    let e = t.send(with(t.req(Method::POST, "/a2a/execute")).header("A2A-Negotiation-ID", neg).json(&payload)).await;
    assert_eq!(e.status, StatusCode::CREATED, "{capability}: {}", e.body);
    let exe = e.body["execution_id"].as_str().expect("execution_id").to_owned();
    let c = t.send(with(t.req(Method::POST, "/a2a/confirm")).json(&json!({"execution_id": exe}))).await;
    assert_eq!(c.status, StatusCode::ACCEPTED, "{capability}: {}", c.body);
    let seg = a2a_core::execution_id::ExecutionId::parse(&exe).expect("id").to_path_segment();
    let r = t.send(with(t.req(Method::GET, &format!("/a2a/result/{seg}?wait_ms=10000")))).await;
    assert_eq!(r.status, StatusCode::OK, "{capability}: {}", r.body);
    r.body
}

#[tokio::test]
async fn full_configuration_loads_builds_and_serves_every_capability_over_http() {
    let backend = Backend::start().await;
    let (key_env, key) = variable_with_a_value();
    let (_dir, path) = full_config(&backend.base, &key_env);
    let (agent, doc) = build(&path).unwrap_or_else(|e| panic!("the full configuration is refused: {e}"));

    // [agent] key_file: the DID document, at the path did:web maps to, with the configured key id and key.
    let (doc_path, doc) = doc.expect("a DID document, since key_file is set");
    assert_eq!(doc_path, "/.well-known/did.json");
    assert_eq!(doc["id"], json!("did:web:localhost%3A8080"));
    let pem = std::fs::read_to_string(vector_key("p256-pkcs8.pem")).expect("pem");
    let jwk = SigningKey::from_pem(&pem).expect("key").verifying_key().to_jwk();
    let method = &doc["verificationMethod"][0];
    assert_eq!(method["id"], json!("did:web:localhost%3A8080#key-1"));
    assert_eq!((&method["publicKeyJwk"]["x"], &method["publicKeyJwk"]["y"]), (&jwk["x"], &jwk["y"]));

    let t = TestAgent::start_built(agent).await;
    let d = t.send(t.http.request(Method::OPTIONS, t.url("/a2a"))).await;
    assert_eq!(d.status, StatusCode::NO_CONTENT);
    assert_eq!(d.header("a2a-capabilities"), Some(r#"["echo_message","submit_report","place_order"]"#));
    let caps = t.get("/a2a/capabilities").await;
    assert_eq!(caps.body["agent"], json!({"id": "did:web:localhost%3A8080", "name": "Report desk"}));
    assert_eq!(caps.body["limits"]["max_body_bytes"], json!(65536));
    assert_eq!(caps.body["limits"]["max_wait_ms"], json!(10000));
    assert_eq!(caps.body["limits"]["confirm_window_ms"], json!(5000));
    let report =
        caps.body["capabilities"].as_array().expect("capabilities").iter().find(|c| c["name"] == "submit_report");
    let report = report.expect("submit_report declared").clone();
    let file_schema: Value =
        serde_json::from_str(&std::fs::read_to_string(fixtures().join("schemas/report.json")).expect("schema"))
            .expect("json");
    assert_eq!(report["input_schema"], file_schema, "input_schema_file is the declared schema");
    assert_eq!((&report["auth_requirement"], &report["estimated_cost"]), (&json!("api_key"), &json!(0.01)));

    // echo.
    let r = handshake(&t, "echo_message", json!({"type": "object"}), json!({"message": "hi"}), &[]).await;
    assert_eq!(r["result"], json!({"echo": {"message": "hi"}}), "{r}");

    // command, behind the API key read from the environment; cwd and env as configured.
    let report_payload = json!({"title": "Broken pump", "timestamp": "2026-11-29T21:00:00Z"});
    let refused = t
        .send(
            t.req(Method::POST, "/a2a/negotiate")
                .json(&json!({"target_capability": "submit_report", "proposed_schema": file_schema})),
        )
        .await;
    assert_eq!((refused.status, refused.code()), (StatusCode::UNAUTHORIZED, "auth_required"));
    let r = handshake(&t, "submit_report", file_schema.clone(), report_payload, &[("A2A-Api-Key", &key)]).await;
    assert_eq!(r["status"], json!("succeeded"), "{r}");
    assert_eq!((&r["result"]["title"], &r["result"]["desk"]), (&json!("Broken pump"), &json!("north")), "{r}");

    // http, with the configured header.
    let r = handshake(&t, "place_order", json!({"type": "object"}), json!({"item": "valve", "quantity": 2}), &[]).await;
    assert_eq!(r["result"], json!({"order": {"item": "valve", "quantity": 2}}), "{r}");
    let seen = backend.seen();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].headers.get("x-backend-key").and_then(|v| v.to_str().ok()), Some("s3cret"));

    // [[registry]]: offered as a fallback for the capability it declares fallback_for.
    let f = t.post("/a2a/fallback", json!({"target_capability": "submit_report"})).await;
    assert_eq!(f.status, StatusCode::OK, "{}", f.body);
    let option = &f.body["fallback_options"][0];
    assert_eq!(
        (&option["capability"], &option["agent"], &option["relation"]),
        (&json!("summarize_report"), &json!("did:web:summaries.example.com"), &json!("degraded")),
        "{}",
        f.body
    );

    // [cors]: the listed origin is allowed, another is not.
    let preflight = |origin: &'static str| {
        t.send(
            t.http
                .request(Method::OPTIONS, t.url("/a2a/negotiate"))
                .header("Origin", origin)
                .header("Access-Control-Request-Method", "POST"),
        )
    };
    let allowed: Answer = preflight("https://app.example.com").await;
    assert_eq!(allowed.header("access-control-allow-origin"), Some("https://app.example.com"));
    let other = preflight("https://evil.example.com").await;
    assert_eq!(other.header("access-control-allow-origin"), None);
}

/// Writes `text` as `agent.toml` (with `schema.json`, a schema breaking the rules, next to it) and returns the error
/// loading and building it gives.
fn refusal(text: &str) -> (String, String) {
    let dir = TempDir::new("bad-config");
    dir.write("schema.json", r#"{"type": "object", "properties": {"a": {"type": "string"}}, "required": ["b"]}"#);
    let path = dir.write("agent.toml", text);
    match build(&path) {
        Ok(_) => panic!("this configuration was accepted:\n{text}"),
        Err(e) => (e, path.display().to_string()),
    }
}

/// Asserts that the configuration is refused with a message that starts with `file:line:` and mentions every one of
/// `needles`.
fn assert_refused_at(text: &str, line: usize, needles: &[&str]) {
    let (message, file) = refusal(text);
    let prefix = format!("{file}:{line}:");
    assert!(message.starts_with(&prefix), "expected the message to start with {prefix:?}:\n{message}");
    for needle in needles {
        assert!(message.contains(needle), "the message lacks {needle:?}:\n{message}");
    }
}

const AGENT: &str = "[agent]\ndid = \"did:web:agent.example.com\"\n";

/// A configuration with one capability whose lines 4.. are these (line 3 is `[[capabilities]]`).
fn one_capability(lines: &str) -> String {
    format!("{AGENT}[[capabilities]]\n{lines}")
}

#[test]
fn toml_syntax_error_names_the_file_line_and_column() {
    assert_refused_at(&format!("{AGENT}name = \"Report desk\n"), 3, &["agent.toml:3:", "invalid basic string"]);
}

#[test]
fn unknown_field_in_agent_is_refused_at_its_line_with_the_fields_there_are() {
    assert_refused_at(&format!("{AGENT}\nnmae = \"Report desk\"\n"), 4, &["unknown field `nmae`", "`name`"]);
}

#[test]
fn unknown_field_in_limits_is_refused_at_its_line() {
    let text = format!("{AGENT}\n[limits]\nmax_body_bytes = 4096\nmax_wait = 1000\n");
    assert_refused_at(&text, 6, &["unknown field `max_wait`", "`max_wait_ms`"]);
}

#[test]
fn unknown_field_in_a_capability_is_refused_at_its_line_with_a_suggestion() {
    let text = one_capability(
        "name = \"submit_report\"\ndescription = \"File a report\"\nauth_requirement = \"none\"\n\
         descripton = \"typo\"\nhandler = { kind = \"echo\" }\n",
    );
    assert_refused_at(&text, 7, &["capabilities[0]", "submit_report", "unknown field `descripton`", "`description`"]);
    // In the second capability, the line is still the field's.
    let text = format!(
        "{}\n[[capabilities]]\nname = \"place_order\"\ndescription = \"Order\"\nauth_requirement = \"none\"\n\
         cost = 3\nhandler = {{ kind = \"echo\" }}\n",
        one_capability(
            "name = \"submit_report\"\ndescription = \"File a report\"\nauth_requirement = \"none\"\n\
             handler = { kind = \"echo\" }\n"
        )
    );
    assert_refused_at(&text, 13, &["capabilities[1]", "place_order", "unknown field `cost`"]);
}

#[test]
fn capability_without_auth_requirement_is_refused_at_its_header() {
    let text =
        one_capability("name = \"submit_report\"\ndescription = \"File a report\"\nhandler = { kind = \"echo\" }\n");
    assert_refused_at(&text, 3, &["submit_report", "`auth_requirement` is required", "\"none\""]);
}

#[test]
fn invalid_capability_name_is_refused_at_the_name() {
    let text = one_capability(
        "description = \"File a report\"\nname = \"Submit-Report\"\nauth_requirement = \"none\"\n\
         handler = { kind = \"echo\" }\n",
    );
    assert_refused_at(&text, 5, &["\"Submit-Report\" is invalid", "upper-case"]);
}

#[test]
fn input_schema_breaking_the_schema_rules_is_refused_inline_and_from_a_file() {
    let inline = one_capability(
        "name = \"submit_report\"\ndescription = \"File a report\"\nauth_requirement = \"none\"\n\
         input_schema = { type = \"object\", properties = { a = { type = \"integer\" } } }\nhandler = { kind = \"echo\" }\n",
    );
    assert_refused_at(&inline, 7, &["`input_schema` breaks the schema rules", "/properties/a/type", "\"integer\""]);
    let file = one_capability(
        "name = \"submit_report\"\ndescription = \"File a report\"\nauth_requirement = \"none\"\n\
         input_schema_file = \"schema.json\"\nhandler = { kind = \"echo\" }\n",
    );
    assert_refused_at(
        &file,
        7,
        &["`input_schema` breaks the schema rules", "\"b\" is required but not defined", "schema.json"],
    );
}

#[test]
fn input_schema_given_both_inline_and_as_a_file_is_refused() {
    let text = one_capability(
        "name = \"submit_report\"\ndescription = \"File a report\"\nauth_requirement = \"none\"\n\
         input_schema = { type = \"object\" }\ninput_schema_file = \"schema.json\"\nhandler = { kind = \"echo\" }\n",
    );
    assert_refused_at(
        &text,
        8,
        &["input_schema_file", "inline (`input_schema`) or in a file (`input_schema_file`), not both"],
    );
}

#[test]
fn handler_kind_that_does_not_exist_is_refused_with_the_kinds_there_are() {
    let text = one_capability(
        "name = \"submit_report\"\ndescription = \"File a report\"\nauth_requirement = \"none\"\n\
         handler = { kind = \"grpc\", url = \"http://x\" }\n",
    );
    assert_refused_at(&text, 7, &["unknown variant `grpc`", "`echo`, `command`, `http`"]);
}

#[test]
fn unknown_field_of_a_handler_is_refused() {
    let text = one_capability(
        "name = \"submit_report\"\ndescription = \"File a report\"\nauth_requirement = \"none\"\n\
         [capabilities.handler]\nkind = \"command\"\nprogram = \"python3\"\ntimeout = 5\n",
    );
    assert_refused_at(&text, 7, &["unknown field `timeout`", "`timeout_ms`"]);
}

#[test]
fn http_handler_url_that_is_not_http_or_https_is_refused_at_the_url() {
    let text = one_capability(
        "name = \"place_order\"\ndescription = \"Order\"\nauth_requirement = \"none\"\n\
         [capabilities.handler]\nkind = \"http\"\nurl = \"ftp://warehouse.example.com/orders\"\n",
    );
    assert_refused_at(&text, 9, &["handler.url", "ftp://warehouse.example.com/orders", "must be http or https"]);
}

#[test]
fn api_key_with_both_key_and_key_env_is_refused() {
    let text = format!("{AGENT}\n[[auth.api_keys]]\nkey = \"k-1\"\nkey_env = \"HOME\"\n");
    assert_refused_at(&text, 4, &["auth.api_keys[0]", "exactly one of `key` and `key_env`"]);
}

#[test]
fn api_key_env_naming_an_unset_variable_is_refused_at_key_env() {
    let var = format!("A2A_TEST_UNSET_{}", std::process::id());
    assert!(std::env::var_os(&var).is_none());
    let text = format!("{AGENT}\n[[auth.api_keys]]\nkey = \"k-1\"\n\n[[auth.api_keys]]\nkey_env = \"{var}\"\n");
    assert_refused_at(&text, 8, &["auth.api_keys[1].key_env", &format!("{var} is not set")]);
}

#[test]
fn empty_api_key_is_refused() {
    assert_refused_at(&format!("{AGENT}\n[[auth.api_keys]]\nkey = \"\"\n"), 5, &["auth.api_keys[0].key", "empty"]);
}

#[test]
fn key_file_that_is_not_a_p256_key_is_refused_at_key_file() {
    for (file, kind) in [("rsa2048-pkcs8.pem", "RSA"), ("p384-pkcs8.pem", "P-384"), ("ed25519-pkcs8.pem", "Ed25519")] {
        let path = vector_key(file);
        let text = format!("{AGENT}name = \"Report desk\"\nkey_file = \"{}\"\n", path.display());
        assert_refused_at(&text, 4, &["agent.key_file", file, kind, "only ECDSA P-256"]);
    }
}

#[test]
fn key_id_that_is_not_a_did_fragment_is_refused() {
    let text = format!("{AGENT}key_file = \"{}\"\nkey_id = \"key 1\"\n", vector_key("p256-pkcs8.pem").display());
    assert_refused_at(&text, 4, &["agent.key_id", "\"key 1\""]);
}

#[test]
fn capability_declared_twice_is_refused_at_the_second() {
    let cap = "name = \"submit_report\"\ndescription = \"File a report\"\nauth_requirement = \"none\"\n\
               handler = { kind = \"echo\" }\n";
    let text = format!("{}\n[[capabilities]]\n{cap}", one_capability(cap));
    assert_refused_at(&text, 10, &["capabilities[1]", "\"submit_report\" is declared twice"]);
}

#[test]
fn agent_did_that_is_not_did_web_is_refused_at_the_did() {
    assert_refused_at(
        "[agent]\nname = \"x\"\ndid = \"did:key:z6Mk\"\n",
        3,
        &["agent.did", "method `key` is not supported"],
    );
}

#[test]
fn registry_entry_with_an_invalid_declaration_is_refused_at_the_entry() {
    let text = format!(
        "{AGENT}\n[[registry]]\nagent = \"did:web:summaries.example.com\"\n\n[registry.capability]\n\
         name = \"summarize\"\ndescription = \"Summarise\"\nauth_requirement = \"none\"\n"
    );
    assert_refused_at(&text, 8, &["registry[0].capability", "\"summarize\" is invalid", "single word"]);
}

/// Kills the child on drop.
struct Child(std::process::Child);

impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Waits up to 20 s for something to listen on `port`.
async fn wait_listening(port: u16, child: &mut Child) {
    let until = Instant::now() + Duration::from_secs(20);
    while tokio::net::TcpStream::connect(("127.0.0.1", port)).await.is_err() {
        if let Ok(Some(status)) = child.0.try_wait() {
            panic!("a2a-server exited with {status} before listening");
        }
        assert!(Instant::now() < until, "a2a-server did not listen on {port} within 20 s");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn binary_serves_a_configuration_discover_the_did_document_and_a_handshake() {
    let port = free_port();
    let did = format!("did:web:localhost%3A{port}:agents:desk");
    let dir = TempDir::new("bin-config");
    let path = dir.write(
        "agent.toml",
        &format!(
            "[agent]\ndid = \"{did}\"\nlisten = \"127.0.0.1:1\"\nkey_file = \"{}\"\nkey_id = \"desk-key\"\n\n\
             [[auth.api_keys]]\nkey_env = \"A2A_TEST_DESK_KEY\"\n\n\
             [[capabilities]]\nname = \"echo_message\"\ndescription = \"Echo\"\nauth_requirement = \"api_key\"\n\
             handler = {{ kind = \"echo\" }}\n\n[bridge]\nenabled = true\n",
            vector_key("p256-pkcs8.pem").display()
        ),
    );
    // --listen wins over the file's `listen`.
    let mut child = Child(
        Command::new(env!("CARGO_BIN_EXE_a2a-server"))
            .args(["--config", &path.display().to_string(), "--listen", &format!("127.0.0.1:{port}")])
            .env("A2A_TEST_DESK_KEY", "desk-secret")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("a2a-server starts"),
    );
    wait_listening(port, &mut child).await;
    let http = reqwest::Client::builder().timeout(Duration::from_secs(10)).build().expect("client");
    let base = format!("http://127.0.0.1:{port}");
    let d = http.request(Method::OPTIONS, format!("{base}/a2a")).send().await.expect("DISCOVER");
    assert_eq!(d.status(), StatusCode::NO_CONTENT);
    assert_eq!(d.headers().get("a2a-capabilities").and_then(|v| v.to_str().ok()), Some(r#"["echo_message"]"#));
    assert_eq!(d.headers().get("a2a-sender-id").and_then(|v| v.to_str().ok()), Some(did.as_str()));
    // A DID with a path is served at /<path>/did.json (did:web), not at /.well-known/did.json.
    let doc: Value =
        http.get(format!("{base}/agents/desk/did.json")).send().await.expect("doc").json().await.expect("json");
    assert_eq!(doc["id"], json!(did));
    assert_eq!(doc["verificationMethod"][0]["id"], json!(format!("{did}#desk-key")));
    let parsed = a2a_core::did::DidDocument::parse(
        &serde_json::to_vec(&doc).expect("json"),
        &a2a_core::did::Did::parse(&did).expect("did"),
    );
    assert!(parsed.is_ok(), "the served document does not parse as {did}'s: {parsed:?}");
    let wk = http.get(format!("{base}/.well-known/did.json")).send().await.expect("well-known");
    assert_eq!(wk.status(), StatusCode::NOT_FOUND);
    // The key from the environment of the process opens the api_key capability.
    let n = http
        .post(format!("{base}/a2a/negotiate"))
        .header("A2A-Version", "0.3")
        .header("A2A-Sender-ID", SENDER)
        .header("A2A-Api-Key", "desk-secret")
        .json(&json!({"target_capability": "echo_message", "proposed_schema": {"type": "object"}}))
        .send()
        .await
        .expect("negotiate");
    assert_eq!(n.status(), StatusCode::OK);
    // [bridge] enabled: the A2A 1.x Agent Card (BR-3), its skill the capability (BR-4), signed with the agent's key (BR-5).
    let card = http.get(format!("{base}/.well-known/agent-card.json")).send().await.expect("card");
    assert_eq!(card.status(), StatusCode::OK);
    let card: Value = card.json().await.expect("card json");
    assert_eq!(card["skills"][0]["id"], json!("echo_message"), "{card}");
    assert!(card["signatures"].as_array().is_some_and(|s| !s.is_empty()), "{card}");
}

#[tokio::test]
async fn binary_exits_non_zero_with_the_file_line_and_field_on_stderr_for_a_broken_config() {
    let dir = TempDir::new("bin-broken");
    let path = dir.write(
        "agent.toml",
        "[agent]\ndid = \"did:web:agent.example.com\"\n\n[[capabilities]]\nname = \"submit_report\"\n\
         description = \"File a report\"\nauth_requirment = \"none\"\nhandler = { kind = \"echo\" }\n",
    );
    let mut child = Child(
        Command::new(env!("CARGO_BIN_EXE_a2a-server"))
            .args(["--config", &path.display().to_string(), "--listen", "127.0.0.1:0"])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("a2a-server starts"),
    );
    let until = Instant::now() + Duration::from_secs(20);
    let status = loop {
        if let Some(status) = child.0.try_wait().expect("try_wait") {
            break status;
        }
        assert!(Instant::now() < until, "a2a-server did not exit on a broken configuration");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.0.stderr.take().expect("stderr"), &mut stderr).expect("read stderr");
    assert!(!status.success(), "exit status {status}");
    let expected = format!("{}:7:", path.display());
    assert!(stderr.contains(&expected), "stderr lacks {expected:?}:\n{stderr}");
    assert!(stderr.contains("unknown field `auth_requirment`") && stderr.contains("`auth_requirement`"), "{stderr}");
}

/// `[[agent.published_keys]]`: the DID document lists further keys beside the signing key (a rotation's next or
/// previous key; docs/operations.md), read from a private or a public PEM; a repeated key id and published keys
/// without `key_file` are refused.
#[tokio::test]
async fn published_keys_are_listed_in_the_did_document_beside_the_signing_key() {
    let dir = TempDir::new("published-keys");
    let next = SigningKey::generate().expect("key");
    let previous = SigningKey::generate().expect("key");
    dir.write("next.pem", &next.to_pkcs8_pem().expect("pem"));
    dir.write("previous.pub.pem", &previous.verifying_key().to_pem().expect("pem"));
    let agent = |extra: &str, key_file: bool| {
        let key = if key_file {
            format!("key_file = \"{}\"\n", vector_key("p256-pkcs8.pem").display())
        } else {
            String::new()
        };
        format!(
            "[agent]\ndid = \"did:web:desk.example.com\"\n{key}{extra}\n\n[[capabilities]]\nname = \"echo_message\"\n\
             description = \"Echo\"\nauth_requirement = \"none\"\nhandler = {{ type = \"echo\" }}\n"
        )
    };
    let path = dir.write(
        "agent.toml",
        &agent(
            "published_keys = [{ key_id = \"key-2\", key_file = \"next.pem\" }, \
             { key_id = \"key-0\", key_file = \"previous.pub.pem\" }]",
            true,
        ),
    );
    let (cfg, text) = Config::load(&path).expect("load");
    let (_, doc) = a2a_agent::app::build_from_config(&cfg, &text, &path).expect("build");
    let (_, doc) = doc.expect("a DID document");
    let methods = doc["verificationMethod"].as_array().expect("methods");
    let ids: Vec<&str> = methods.iter().filter_map(|m| m["id"].as_str()).collect();
    assert_eq!(
        ids,
        ["did:web:desk.example.com#key-1", "did:web:desk.example.com#key-2", "did:web:desk.example.com#key-0"]
    );
    assert_eq!(methods[1]["publicKeyJwk"], next.verifying_key().to_jwk());
    assert_eq!(methods[2]["publicKeyJwk"], previous.verifying_key().to_jwk());
    assert!(methods.iter().all(|m| m["publicKeyJwk"].get("d").is_none()), "a private part was published: {doc}");
    assert_eq!(doc["assertionMethod"].as_array().map(Vec::len), Some(3), "{doc}");
    // Refused: a key id used twice, and published keys with no document to publish them in.
    let twice =
        dir.write("twice.toml", &agent("published_keys = [{ key_id = \"key-1\", key_file = \"next.pem\" }]", true));
    let err = a2a_agent::app::check_config(&twice).await.expect_err("refused");
    assert!(err.contains("twice.toml:") && err.contains("published_keys[0].key_id"), "{err}");
    let without =
        dir.write("without.toml", &agent("published_keys = [{ key_id = \"key-2\", key_file = \"next.pem\" }]", false));
    let err = a2a_agent::app::check_config(&without).await.expect_err("refused");
    assert!(err.contains("agent.key_file"), "{err}");
}
