//! The `a2a` binary's commands that need no agent, run as a subprocess: keys, schemas, capability declarations,
//! usage errors and help (the commands that talk to agents are tested in `tests/client/cli.rs`, package a2a-tests).

use std::path::Path;

use a2a_test_support::TempDir;
use a2a_test_support::cli::Run;
use serde_json::{Value, json};

async fn a2a(args: &[&str]) -> Run {
    a2a_stdin(args, None).await
}

async fn a2a_stdin(args: &[&str], stdin: Option<&str>) -> Run {
    a2a_test_support::cli::run(Path::new(env!("CARGO_BIN_EXE_a2a")), args, stdin).await
}

fn vector_key(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../spec/vectors/keys").join(name).display().to_string()
}

#[tokio::test]
async fn keygen_writes_a_p256_key_and_its_did_document_and_never_overwrites() {
    let dir = TempDir::new("keygen");
    let out = dir.path("keys").display().to_string();
    let r = a2a(&["keygen", "--did", "did:web:caller.example.com", "--key-id", "key-2026", "--out", &out]).await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.contains("https://caller.example.com/.well-known/did.json"), "{}", r.stdout);
    let doc: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path("keys/did.json")).expect("did.json")).expect("JSON");
    assert_eq!(doc["verificationMethod"][0]["id"], "did:web:caller.example.com#key-2026");
    assert!(doc["verificationMethod"][0]["publicKeyJwk"].get("d").is_none());
    let check = a2a(&["key", "check", &dir.path("keys/key.pem").display().to_string()]).await;
    assert_eq!(check.code, 0, "{}", check.stderr);
    assert!(check.stdout.contains("ECDSA P-256 (secp256r1 / prime256v1) private key, PKCS#8"), "{}", check.stdout);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(dir.path("keys/key.pem")).expect("meta").permissions().mode();
        assert_eq!(mode & 0o077, 0, "the key is readable by others: {mode:o}");
    }
    let again = a2a(&["keygen", "--did", "did:web:caller.example.com", "--out", &out]).await;
    assert_eq!(again.code, 2);
    assert!(again.stderr.contains("--force"), "{}", again.stderr);
    let no_did = a2a(&["keygen", "--out", &out]).await;
    assert_eq!(no_did.code, 2);
}

#[tokio::test]
async fn key_check_accepts_only_p256_keys() {
    for ok in ["p256-pkcs8.pem", "p256-sec1.pem", "p256-spki.pem"] {
        let r = a2a(&["key", "check", &vector_key(ok)]).await;
        assert_eq!(r.code, 0, "{ok}: {}", r.stderr);
        assert!(r.stdout.contains("JWK thumbprint"), "{}", r.stdout);
    }
    for (bad, says) in [
        ("rsa2048-pkcs8.pem", "RSA"),
        ("p384-sec1.pem", "P-384"),
        ("ed25519-pkcs8.pem", "Ed25519"),
        ("p256-pkcs8-encrypted.pem", "encrypted"),
    ] {
        let r = a2a(&["key", "check", &vector_key(bad)]).await;
        assert_eq!(r.code, 1, "{bad} accepted");
        assert!(r.stderr.contains(says), "{bad}: {}", r.stderr);
    }
    let j = a2a(&["key", "check", &vector_key("p256-spki.pem"), "--json"]).await.json();
    assert_eq!((j["kind"].as_str(), j["format"].as_str()), (Some("public"), Some("SPKI")));
}

#[tokio::test]
async fn schema_fix_converts_nullable_and_check_fails_until_it_is_fixed() {
    let dir = TempDir::new("schema");
    let f = dir.write(
        "s.json",
        r#"{"type":"object","properties":{"status":{"type":"string","enum":["open","closed"],"nullable":true}}}"#,
    );
    let file = f.display().to_string();
    let r = a2a(&["schema", "fix", &file]).await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    let fixed: Value = serde_json::from_str(&r.stdout).expect("JSON");
    assert_eq!(
        fixed,
        json!({"type":"object","properties":{"status":{"type":["string","null"],"enum":["open","closed",null]}}})
    );
    assert!(r.stderr.contains("/properties/status/type"), "{}", r.stderr);
    assert_eq!(a2a(&["schema", "fix", &file, "--check"]).await.code, 1);
    assert_eq!(a2a(&["schema", "fix", &file, "--in-place"]).await.code, 0);
    assert_eq!(a2a(&["schema", "fix", &file, "--check"]).await.code, 0);
    let unconvertible = dir.write("u.json", r#"{"type":"object","properties":{"x":{"nullable":true}}}"#);
    let r = a2a(&["schema", "fix", &unconvertible.display().to_string()]).await;
    assert_eq!(r.code, 1);
    assert!(r.stderr.contains("no_type"), "{}", r.stderr);
}

#[tokio::test]
async fn capability_lint_and_convert_read_yaml_with_comments() {
    let dir = TempDir::new("caps");
    let good = dir.write(
        "caps.yaml",
        "# the seed's example\n- name: process_payment\n  description: \"Charge user's card on file; requires PCI-DSS compliant environment\"\n  auth_requirement: oauth2\n  # Note: This capability only available in EU region due to GDPR\n  region_restriction: eu-west-1\n",
    );
    let r = a2a(&["capability", "lint", &good.display().to_string()]).await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.contains("1 declaration(s), valid: process_payment"), "{}", r.stdout);
    let out = dir.path("caps.json");
    let r = a2a(&["capability", "convert", &good.display().to_string(), "-o", &out.display().to_string()]).await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    let converted: Value = serde_json::from_str(&std::fs::read_to_string(&out).expect("written")).expect("JSON");
    assert_eq!(converted[0]["region_restriction"], json!(["eu-west-1"]));
    assert_eq!(converted[0]["input_schema"], json!({"type": "object"}));
    let bad = dir.write("bad.yaml", "- name: query_status\n  description: Status of an order\n- name: Query-Thing\n  description: x\n  auth_requirement: none\n");
    let r = a2a(&["capability", "lint", &bad.display().to_string()]).await;
    assert_eq!(r.code, 1);
    assert!(
        r.stderr.contains("bad.yaml:1:3: capability \"query_status\": field `auth_requirement` is required"),
        "{}",
        r.stderr
    );
    assert!(r.stderr.contains("bad.yaml:3:3:"), "{}", r.stderr);
    let j = a2a(&["capability", "lint", &bad.display().to_string(), "--json"]).await.json();
    assert_eq!(j["diagnostics"].as_array().map(Vec::len), Some(2));
    assert_eq!(a2a(&["capability", "convert", &bad.display().to_string()]).await.code, 1);
}

#[tokio::test]
async fn usage_errors_exit_2_and_help_exits_0() {
    assert_eq!(a2a(&["call"]).await.code, 2);
    assert_eq!(a2a(&["frobnicate"]).await.code, 2);
    assert_eq!(a2a(&["discover", "ftp://x"]).await.code, 2);
    let h = a2a(&["--help"]).await;
    assert_eq!(h.code, 0);
    assert!(h.stdout.contains("Exit codes"), "{}", h.stdout);
}

/// The subcommands listed under "Commands:" in a help text (without `help`).
fn commands_in(help: &str) -> Vec<String> {
    help.lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next().map(str::to_owned))
        .filter(|c| c != "help")
        .collect()
}

/// Every command a user can find from `a2a --help` (walked down each level's "Commands:") answers `--help` with exit
/// 0 and its usage line, run as the binary is run.
#[tokio::test]
async fn every_subcommand_found_from_the_help_answers_its_help() {
    let mut todo: Vec<Vec<String>> = vec![Vec::new()];
    let mut seen = 0;
    while let Some(path) = todo.pop() {
        let mut args: Vec<&str> = path.iter().map(String::as_str).collect();
        args.push("--help");
        let r = a2a(&args).await;
        assert_eq!(r.code, 0, "a2a {args:?}: {}", r.stderr);
        let usage = format!("Usage: a2a {}", path.join(" "));
        assert!(r.stdout.contains(usage.trim_end()), "a2a {args:?}:\n{}", r.stdout);
        for c in commands_in(&r.stdout) {
            let mut p = path.clone();
            p.push(c);
            todo.push(p);
        }
        seen += 1;
    }
    assert!(seen > 25, "only {seen} commands found from the help");
}
