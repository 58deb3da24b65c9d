//! The configuration reference cannot drift from the configuration types: `docs/config-agent.md`,
//! `docs/config-gateway.md` and their JSON Schemas in `docs/schema/` are regenerated from the types here and compared
//! with the checked-in copies. With `A2A_UPDATE_CONFIG_DOCS=1` the test writes them instead.
//! (The gateway's own checks of its reference and of `a2a-gateway check`: `a2a-gateway/tests/config_reference.rs`.)

use std::path::{Path, PathBuf};

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
