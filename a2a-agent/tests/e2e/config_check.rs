//! `a2a-server check --config F` (exit 0 valid, 1 refused, 2 valid with warnings), the examples in `examples/`, the
//! one handler syntax of capabilities and sessions (`type`/`argv`, the old `kind`/`program`/`args` read with a
//! deprecation warning), and relative paths resolved against the configuration file's folder.

use std::path::{Path, PathBuf};
use std::process::Command;

use reqwest::StatusCode;
use serde_json::json;

use crate::common::{TempDir, TestAgent};
use crate::config::{build, handshake};

fn examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples")
}

/// Runs `a2a-server check --config path` from `cwd`; its exit code and its stdout and stderr together.
fn check_in(path: &Path, cwd: &Path) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_a2a-server"))
        .args(["check", "--config"])
        .arg(path)
        .current_dir(cwd)
        .env("DESK_API_KEY", "example-key")
        .env_remove("REDIS_URL")
        .output()
        .expect("run a2a-server check");
    let text = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (out.status.code().unwrap_or(-1), text)
}

fn check(path: &Path) -> (i32, String) {
    check_in(path, Path::new("/"))
}

#[test]
fn every_agent_example_passes_check_from_any_directory() {
    let mut seen = 0;
    for entry in std::fs::read_dir(examples()).expect("examples/") {
        let path = entry.expect("entry").path();
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        if name.starts_with("agent") && name.ends_with(".toml") {
            // Started from `/`: the key files and programs are found next to the file, not in the current directory.
            let (code, out) = check(&path);
            assert_eq!(code, 0, "{name}: {out}");
            assert!(out.contains(": ok"), "{name}: {out}");
            seen += 1;
        }
    }
    assert!(seen >= 3, "agent examples in examples/: {seen}");
}

const AGENT: &str = "[agent]\ndid = \"did:web:desk.example.com\"\n\n";

#[test]
fn check_exits_1_with_the_line_for_a_refused_configuration() {
    let dir = TempDir::new("check-refused");
    let path = dir.write("agent.toml", &format!("{AGENT}[limits]\nmax_body_byte = 5\n"));
    let (code, out) = check(&path);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("agent.toml:5:") && out.contains("max_body_byte"), "{out}");
}

#[test]
fn check_warns_and_exits_2_for_capabilities_that_can_never_be_called() {
    let dir = TempDir::new("check-warn");
    let path = dir.write(
        "agent.toml",
        &format!(
            "{AGENT}[[capabilities]]\nname = \"submit_report\"\ndescription = \"File a report\"\n\
             auth_requirement = \"api_key\"\nhandler = {{ type = \"echo\" }}\n\n\
             [[capabilities]]\nname = \"place_order\"\ndescription = \"Order\"\nauth_requirement = \"none\"\n\
             handler = {{ type = \"command\", argv = [\"a2a-no-such-program-on-path\"] }}\n\n\
             [[capabilities]]\nname = \"run_local\"\ndescription = \"Run a local script\"\nauth_requirement = \"oauth2\"\n\
             handler = {{ type = \"command\", argv = [\"./missing.py\"] }}\n"
        ),
    );
    let (code, out) = check(&path);
    assert_eq!(code, 2, "{out}");
    // An api_key capability with no key configured, at its auth_requirement's line.
    assert!(out.contains("agent.toml:7:") && out.contains("[[auth.api_keys]] configures no key"), "{out}");
    assert!(out.contains("\"a2a-no-such-program-on-path\" is not found on PATH"), "{out}");
    assert!(out.contains("[auth.oauth2] is absent"), "{out}");
    // A program with a `/` is looked for next to the file.
    assert!(out.contains(&dir.0.join("./missing.py").display().to_string()), "{out}");
    assert!(out.contains("valid, with 4 warning(s)"), "{out}");
    // With the key configured and the programs present, the same capabilities pass.
    std::fs::write(dir.0.join("missing.py"), "#!/bin/sh\ncat\n").expect("write");
    make_executable(&dir.0.join("missing.py"));
    let fixed = std::fs::read_to_string(&path).expect("read").replace("a2a-no-such-program-on-path", "sh").replace(
        "[[capabilities]]\nname = \"submit_report\"",
        "[[auth.api_keys]]\nkey = \"k\"\n\n[auth.oauth2]\nissuer = \"https://issuer.example.com\"\nkeys = [{ kty = \"EC\", crv = \"P-256\", x = \"MKBCTNIcKUSDii11ySs3526iDZ8AiTo7Tu6KPAqv7D4\", y = \"4Etl6SRW2YiLUrN5vfvVHuhp7x8PxltmWWlbbM4IFyM\" }]\n\n[[capabilities]]\nname = \"submit_report\"",
    );
    std::fs::write(&path, fixed).expect("write");
    let (code, out) = check(&path);
    assert_eq!(code, 0, "{out}");
}

fn make_executable(path: &Path) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
}

#[test]
fn the_old_handler_spelling_is_read_with_a_deprecation_warning() {
    let dir = TempDir::new("check-legacy");
    let path = dir.write(
        "agent.toml",
        &format!(
            "{AGENT}[[capabilities]]\nname = \"echo_message\"\ndescription = \"Echo\"\nauth_requirement = \"none\"\n\
             handler = {{ kind = \"command\", program = \"sh\", args = [\"-c\", \"cat\"] }}\n"
        ),
    );
    let (code, out) = check(&path);
    assert_eq!(code, 2, "{out}");
    assert!(out.contains("agent.toml:8:") && out.contains("is deprecated") && out.contains("argv"), "{out}");
    // Mixing the spellings is refused, naming the key that does not belong.
    let mixed = dir.write(
        "mixed.toml",
        &format!(
            "{AGENT}[[capabilities]]\nname = \"echo_message\"\ndescription = \"Echo\"\nauth_requirement = \"none\"\n\
             handler = {{ type = \"command\", program = \"sh\" }}\n"
        ),
    );
    let (code, out) = check(&mixed);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("unknown field `program`") && out.contains("argv"), "{out}");
}

#[tokio::test]
async fn a_capability_program_written_with_a_slash_runs_from_the_configuration_files_folder() {
    // The test process's directory is the crate's; the program lives next to the configuration only.
    let dir = TempDir::new("relative-program");
    std::fs::create_dir_all(dir.0.join("bin")).expect("mkdir");
    let program = dir.write("bin/answer.sh", "#!/bin/sh\nprintf '{\"from\": \"bin/answer.sh\"}'\n");
    make_executable(&program);
    for argv in ["[\"./bin/answer.sh\"]", "[\"bin/answer.sh\"]"] {
        let path = dir.write(
            "agent.toml",
            &format!(
                "{AGENT}[[capabilities]]\nname = \"answer_question\"\ndescription = \"Answer\"\n\
                 auth_requirement = \"none\"\nhandler = {{ type = \"command\", argv = {argv} }}\n"
            ),
        );
        let (agent, _) = build(&path).unwrap_or_else(|e| panic!("{argv}: refused: {e}"));
        let t = TestAgent::start_built(agent).await;
        let r = handshake(&t, "answer_question", json!({"type": "object"}), json!({}), &[]).await;
        assert_eq!(r["status"], json!("succeeded"), "{argv}: {r}");
        assert_eq!(r["result"], json!({"from": "bin/answer.sh"}), "{argv}: {r}");
        let _ = StatusCode::OK;
    }
}
