//! The binary: `--list`, the formats, `--out`, and the exit status (0, 1 when a MUST fails, 2 when it cannot run).

use std::process::Command;

use crate::broken;
use crate::common;

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_a2a-conformance"))
}

#[test]
fn list_prints_every_check_without_a_target() {
    let out = bin().args(["--list"]).output().expect("runs");
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("discover/status-204") && text.contains("DISC-1"), "{text}");
    assert!(text.contains(&format!("{} checks", a2a_conformance::checks::all().len())), "{text}");
    let out = bin().args(["--list", "--level", "must", "--only", "INT-*"]).output().expect("runs");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("signature/integrity") && !text.contains("SHOULD "), "{text}");
}

#[test]
fn only_selects_areas_requirements_and_globs_as_the_readme_documents() {
    let list = |only: &str| -> Vec<String> {
        let out = bin().args(["--list", "--only", only]).output().expect("runs");
        assert!(out.status.success(), "--only {only}: {}", String::from_utf8_lossy(&out.stderr));
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        // `LEVEL  id  requirements`, then indented lines about it.
        let ids: Vec<String> = text
            .lines()
            .filter(|l| l.starts_with(['M', 'S']))
            .filter_map(|l| l.split_whitespace().nth(1).map(str::to_owned))
            .collect();
        assert!(text.contains(&format!("{} checks", ids.len())), "--only {only}: {text}");
        ids
    };
    // An area ends with `/`: every check whose id starts with it, and no other.
    let areas = list("negotiate/,execute/");
    let all = a2a_conformance::checks::all();
    let want: Vec<String> = all
        .iter()
        .filter(|c| c.id.starts_with("negotiate/") || c.id.starts_with("execute/"))
        .map(|c| c.id.to_owned())
        .collect();
    assert_eq!(areas, want);
    // A requirement id: every check citing it.
    let want: Vec<String> = all.iter().filter(|c| c.requirements.contains(&"EXE-4")).map(|c| c.id.to_owned()).collect();
    assert!(want.len() >= 2, "{want:?}");
    assert_eq!(list("EXE-4"), want);
    // Globs, as before.
    assert!(list("INT-*,signature/replay").contains(&"signature/replay".to_owned()));
}

#[test]
fn an_unreachable_target_exits_2_with_advice() {
    let port = std::net::TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("addr").port();
    let out = bin().args(["--target", &format!("http://127.0.0.1:{port}")]).output().expect("runs");
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("did not answer DISCOVER") && err.contains("--target"), "{err}");
    let out = bin().args(["--target", "ftp://example.com"]).output().expect("runs");
    assert_eq!(out.status.code(), Some(2));
    let out = bin()
        .args(["--target", "http://127.0.0.1:1", "--identity", "/nonexistent.pem", "--did", "did:web:example.com"])
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("/nonexistent.pem"));
}

/// Runs the binary against an agent served by this test's runtime.
async fn run_bin(args: Vec<String>) -> std::process::Output {
    tokio::task::spawn_blocking(move || bin().args(args).output().expect("runs")).await.expect("joins")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_binary_passes_the_demo_with_exit_0_and_writes_json_and_junit() {
    let demo = common::demo().await;
    let dir = std::env::temp_dir().join(format!("a2a-conformance-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let json = dir.join("report.json");
    let args = |format: &str, out: &std::path::Path| {
        vec![
            "--target".into(),
            demo.base.clone(),
            "--serve-did".into(),
            "--api-key".into(),
            a2a_agent::demo::DEMO_API_KEY.into(),
            "--format".into(),
            format.into(),
            "--out".into(),
            out.display().to_string(),
        ]
    };
    let out = run_bin(args("json", &json)).await;
    let text = std::fs::read_to_string(&json).unwrap_or_default();
    let failures: Vec<String> = serde_json::from_str::<a2a_conformance::Report>(&text)
        .map(|r| {
            r.checks
                .iter()
                .filter(|c| c.status == a2a_conformance::Status::Fail)
                .map(|c| format!("{}: {:?}", c.id, c.message))
                .collect()
        })
        .unwrap_or_default();
    assert_eq!(out.status.code(), Some(0), "{}\n{failures:?}", String::from_utf8_lossy(&out.stderr));
    let report: a2a_conformance::Report =
        serde_json::from_slice(&std::fs::read(&json).expect("report")).expect("a report");
    assert!(!report.must_failed());
    let junit = dir.join("report.xml");
    let out = run_bin(args("junit", &junit)).await;
    assert_eq!(out.status.code(), Some(0));
    let xml = std::fs::read_to_string(&junit).expect("junit");
    assert!(
        xml.starts_with("<?xml") && xml.contains("<testsuite name=\"signature\"") && xml.contains("<skipped"),
        "{xml}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_must_exits_1_and_the_text_report_says_what_was_expected_and_observed() {
    let agent = broken::start(broken::Fault::NoExecutionHeader).await;
    let out =
        run_bin(vec!["--target".into(), agent.running.base.clone(), "--only".into(), "negotiate/,execute/".into()])
            .await;
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("only      negotiate/,execute/"), "the report names the selection: {text}");
    assert!(text.contains("FAIL  MUST   execute/happy-path"), "{text}");
    assert!(text.contains("expected A2A-Execution-ID") && text.contains("observed None"), "{text}");
    assert!(text.contains("compliance: none"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_report_names_the_capability_each_check_drove_and_why_in_every_format() {
    let demo = common::demo().await;
    let run = |format: &str, extra: &[&str]| {
        let mut v: Vec<String> = [
            "--target",
            &demo.base,
            "--only",
            "result/happy-path,result/deadline-enforced,discover/status-204",
            "--format",
            format,
        ]
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
        v.extend(extra.iter().map(|s| (*s).to_owned()));
        v
    };
    // By default: the first capability the suite can drive, and the slow one found by its duration member.
    let out = run_bin(run("json", &[])).await;
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    let used = |id: &str| -> Vec<(String, String)> {
        let c = report["checks"].as_array().expect("checks").iter().find(|c| c["id"] == id).expect("check").clone();
        c["capabilities"]
            .as_array()
            .map(|a| {
                a.iter()
                    .map(|u| (u["name"].as_str().unwrap_or("").to_owned(), u["why"].as_str().unwrap_or("").to_owned()))
                    .collect()
            })
            .unwrap_or_default()
    };
    let main = used("result/happy-path");
    assert_eq!(main.len(), 1, "{main:?}");
    assert_eq!(main[0].0, "echo_message");
    assert!(main[0].1.contains("first advertised capability"), "{main:?}");
    let slow = used("result/deadline-enforced");
    assert_eq!(slow[0].0, "run_slow_task", "{slow:?}");
    assert!(slow[0].1.contains("duration member"), "{slow:?}");
    assert!(used("discover/status-204").is_empty(), "a check that drives no capability names none");
    // --capability and --slow-capability choose them, and every format says so.
    let opts =
        ["--capability", "add_numbers", "--slow-capability", "run_slow_task", "--slow-payload", "{\"seconds\": 1.5}"];
    let out = run_bin(run("json", &opts)).await;
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    let check =
        |id: &str| report["checks"].as_array().expect("checks").iter().find(|c| c["id"] == id).expect("check").clone();
    assert_eq!(check("result/happy-path")["capabilities"][0]["name"], "add_numbers");
    assert_eq!(check("result/happy-path")["capabilities"][0]["why"], "named by --capability");
    assert_eq!(check("result/deadline-enforced")["status"], "pass");
    assert!(
        check("result/deadline-enforced")["capabilities"][0]["why"]
            .as_str()
            .is_some_and(|w| w.contains("--slow-payload"))
    );
    let text = String::from_utf8_lossy(&run_bin(run("text", &opts)).await.stdout).into_owned();
    assert!(text.contains("driven    add_numbers (named by --capability): 1 checks"), "{text}");
    let junit = String::from_utf8_lossy(&run_bin(run("junit", &opts)).await.stdout).into_owned();
    assert!(junit.contains("<property name=\"capability\" value=\"add_numbers: named by --capability\"/>"), "{junit}");
    // A capability the agent does not advertise: the checks that need it say why they are skipped.
    let out = run_bin(run("json", &["--capability", "no_such_capability"])).await;
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    let c = report["checks"]
        .as_array()
        .expect("checks")
        .iter()
        .find(|c| c["id"] == "result/happy-path")
        .expect("check")
        .clone();
    assert_eq!(c["status"], "skip");
    assert!(c["message"].as_str().is_some_and(|m| m.contains("--capability no_such_capability")), "{c}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_slow_capability_the_deadline_checks_say_why_they_cannot_run() {
    let demo = common::demo().await;
    // echo_message is instant: measured, it is too fast to outlast a deadline, and the report says so.
    let out = run_bin(
        [
            "--target",
            &demo.base,
            "--only",
            "result/deadline-enforced,cancel/late-result",
            "--slow-capability",
            "echo_message",
            "--format",
            "json",
        ]
        .iter()
        .map(|s| (*s).to_owned())
        .collect(),
    )
    .await;
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    for c in report["checks"].as_array().expect("checks") {
        assert_eq!(c["status"], "skip", "{c}");
        assert!(
            c["message"].as_str().is_some_and(|m| m.contains("too fast") && m.contains("--slow-capability")),
            "{c}"
        );
    }
}
