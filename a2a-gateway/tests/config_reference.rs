//! The gateway's configuration reference names every key of its configuration, every example in `examples/` for
//! the gateway passes `a2a-gateway check`, and `check`'s exit codes. (That the reference pages cannot drift from the
//! types: `tests/config_reference.rs`, package a2a-tests.)

use std::path::{Path, PathBuf};
use std::process::Command;

use a2a_runtime::config_reference::{GATEWAY_INTRO, markdown};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("workspace").to_path_buf()
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
    let out = Command::new(env!("CARGO_BIN_EXE_a2a-gateway"))
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
