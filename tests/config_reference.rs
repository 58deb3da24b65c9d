//! The configuration reference cannot drift from the configuration types: `docs/config-agent.md`,
//! `docs/config-gateway.md` and their JSON Schemas in `docs/schema/` are regenerated from the types here and compared
//! with the checked-in copies. With `A2A_UPDATE_CONFIG_DOCS=1` the test writes them instead.
//!
//! Also: every example in `examples/` passes `a2a-gateway check` or `a2a-server check` (by its name), and the
//! gateway's `check` exit codes.

use std::path::{Path, PathBuf};
use std::process::Command;

use a2a_agent::config_reference::{AGENT_INTRO, GATEWAY_INTRO, REGENERATE, agent_schema, markdown};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("workspace").to_path_buf()
}

/// Compares (or, with `A2A_UPDATE_CONFIG_DOCS=1`, writes) one generated file; returns a complaint when it differs.
fn compare(rel: &str, generated: &str) -> Option<String> {
    let path = root().join(rel);
    if std::env::var_os("A2A_UPDATE_CONFIG_DOCS").is_some() {
        std::fs::write(&path, generated).expect("write the generated file");
        return None;
    }
    let on_disk = std::fs::read_to_string(&path).unwrap_or_default();
    if on_disk == generated {
        return None;
    }
    let line = on_disk
        .lines()
        .zip(generated.lines())
        .position(|(a, b)| a != b)
        .map_or_else(|| on_disk.lines().count().min(generated.lines().count()) + 1, |i| i + 1);
    Some(format!("{rel} differs from the configuration types from line {line} on"))
}

#[test]
fn the_configuration_reference_and_schemas_match_the_configuration_types() {
    let agent = agent_schema();
    let gateway = a2a_gateway::config::schema();
    let pretty = |v: &serde_json::Value| serde_json::to_string_pretty(v).expect("json") + "\n";
    let complaints: Vec<String> = [
        compare("docs/schema/agent.schema.json", &pretty(&agent)),
        compare("docs/schema/gateway.schema.json", &pretty(&gateway)),
        compare("docs/config-agent.md", &markdown("agent.toml reference", AGENT_INTRO, &agent)),
        compare("docs/config-gateway.md", &markdown("gateway.toml reference", GATEWAY_INTRO, &gateway)),
    ]
    .into_iter()
    .flatten()
    .collect();
    assert!(complaints.is_empty(), "{}; regenerate them with\n\n    {REGENERATE}\n", complaints.join("; "));
}

#[test]
fn every_key_of_the_gateway_configuration_is_in_its_reference() {
    // The generator itself is checked against the schema: every property of every section is a row of the page.
    let schema = a2a_gateway::config::schema();
    let page = markdown("gateway.toml reference", GATEWAY_INTRO, &schema);
    for (_, def) in schema["$defs"].as_object().expect("defs") {
        for key in def.get("properties").and_then(|p| p.as_object()).into_iter().flatten().map(|(k, _)| k) {
            assert!(
                page.contains(&format!("| `{key}` |")) || page.contains(&format!(".{key}]`")),
                "{key} is missing from the page"
            );
        }
    }
    for key in ["max_body_bytes", "verify_signatures", "ttl_ms", "token_env", "consecutive_failures"] {
        assert!(page.contains(&format!("| `{key}` |")), "{key}");
    }
}

fn gateway_check(config: &Path) -> (i32, String) {
    let out = Command::new(a2a_tests::bin("a2a-gateway"))
        .args(["check", "--config"])
        .arg(config)
        .env_remove("REDIS_URL")
        .output()
        .expect("run a2a-gateway check");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr),
    )
}

#[test]
fn every_gateway_example_passes_check() {
    let mut seen = 0;
    for entry in std::fs::read_dir(root().join("examples")).expect("examples/") {
        let path = entry.expect("entry").path();
        if path.extension().is_some_and(|e| e == "toml")
            && path.file_name().is_some_and(|n| n.to_string_lossy().starts_with("gateway"))
        {
            let (code, out) = gateway_check(&path);
            assert_eq!(code, 0, "{}: {out}", path.display());
            seen += 1;
        }
    }
    assert!(seen >= 1, "no gateway example in examples/");
}

#[test]
fn gateway_check_exit_codes_say_valid_refused_or_valid_with_warnings() {
    let dir = std::env::temp_dir().join(format!("a2a-gw-check-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let file = dir.join("gateway.toml");
    // Valid: an agent to route to, no key needed in transparent mode.
    std::fs::write(&file, "[gateway]\ndid = \"did:web:gw.example.com\"\n[edge]\nverify_signatures = false\n[[agents]]\nurl = \"http://127.0.0.1:9001/a2a\"\n").expect("write");
    assert_eq!(gateway_check(&file).0, 0);
    // Refused: an unknown key, named with its line.
    std::fs::write(&file, "[gateway]\ndid = \"did:web:gw.example.com\"\nlisten_on = \"x\"\n").expect("write");
    let (code, out) = gateway_check(&file);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("gateway.toml:3:") && out.contains("listen_on"), "{out}");
    // Refused: a key file that is not there, looked for next to the configuration (not in the current directory).
    std::fs::write(&file, "[gateway]\ndid = \"did:web:gw.example.com\"\nkey_file = \"gw.pem\"\n[[agents]]\nurl = \"http://127.0.0.1:9001/a2a\"\n").expect("write");
    let (code, out) = gateway_check(&file);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains(&dir.join("gw.pem").display().to_string()), "{out}");
    // Valid with a warning: nothing to route to.
    std::fs::write(&file, "[gateway]\ndid = \"did:web:gw.example.com\"\n[edge]\nverify_signatures = false\n")
        .expect("write");
    let (code, out) = gateway_check(&file);
    assert_eq!(code, 2, "{out}");
    assert!(out.contains("warning:") && out.contains("no [[agents]]"), "{out}");
    std::fs::remove_dir_all(&dir).ok();
}
