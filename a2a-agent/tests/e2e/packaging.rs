//! The deployment files of `deploy/` (Dockerfile, compose, Kubernetes, systemd, Prometheus rules) checked against the
//! binaries they run, since no container engine or cluster runs them here: every file parses, every flag they pass
//! is one the binary's `--help` lists, every configuration they mount is valid and mounted where the command line
//! reads it, every port they publish is the one the configuration listens on, every probe path answers 200 on a
//! running agent and gateway, and every metric the alert rules name is one the running binaries expose
//! (`docs/operations.md`).

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use yaml_rust2::{Yaml, YamlLoader};

use crate::common::free_port;
use crate::redis_support::RedisServer;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("workspace root").to_path_buf()
}

fn deploy(rel: &str) -> PathBuf {
    root().join("deploy").join(rel)
}

fn read(rel: &str) -> String {
    std::fs::read_to_string(deploy(rel)).unwrap_or_else(|e| panic!("deploy/{rel}: {e}"))
}

/// The binaries the deploy files may run, built beside this test's `a2a-server` by `cargo test --workspace`.
fn bin(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_BIN_EXE_a2a-server")).parent().expect("target dir").to_path_buf();
    let path = dir.join(name);
    assert!(path.exists(), "{} is missing: `cargo test --workspace` builds it", path.display());
    path
}

const BINARIES: &[&str] = &["a2a-server", "a2a-gateway", "a2a-supervise", "a2a"];

fn yaml_docs(rel: &str) -> Vec<Yaml> {
    YamlLoader::load_from_str(&read(rel)).unwrap_or_else(|e| panic!("deploy/{rel} is not YAML: {e}"))
}

fn yaml_files() -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![deploy("")];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).expect("read deploy/") {
            let p = entry.expect("entry").path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|e| e == "yaml" || e == "yml") {
                out.push(p.strip_prefix(deploy("")).expect("under deploy/").to_string_lossy().into_owned());
            }
        }
    }
    out.sort();
    out
}

fn k8s_docs() -> Vec<(String, Yaml)> {
    yaml_files()
        .into_iter()
        .filter(|f| f.starts_with("k8s/"))
        .flat_map(|f| yaml_docs(&f).into_iter().map(move |d| (f.clone(), d)))
        .collect()
}

fn strings(y: &Yaml) -> Vec<String> {
    y.as_vec().map(|v| v.iter().filter_map(|s| s.as_str().map(str::to_owned)).collect()).unwrap_or_default()
}

/// Every node of a YAML tree, depth first.
fn walk<'a>(y: &'a Yaml, out: &mut Vec<&'a Yaml>) {
    out.push(y);
    match y {
        Yaml::Array(v) => v.iter().for_each(|c| walk(c, out)),
        Yaml::Hash(h) => h.values().for_each(|c| walk(c, out)),
        _ => {}
    }
}

fn help(binary: &str) -> String {
    let out = Command::new(bin(binary)).arg("--help").output().expect("run --help");
    assert!(out.status.success(), "{binary} --help failed");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A command line the deploy files give a binary: its path, its arguments, and where it was found.
struct Invocation {
    at: String,
    program: String,
    args: Vec<String>,
}

fn invocations() -> Vec<Invocation> {
    let mut out = Vec::new();
    // Dockerfile: ENTRYPOINT + CMD.
    let docker = read("Dockerfile");
    let json_line = |key: &str| -> Vec<String> {
        let line = docker.lines().find(|l| l.starts_with(key)).unwrap_or_else(|| panic!("Dockerfile has no {key}"));
        serde_json::from_str(line[key.len()..].trim()).unwrap_or_else(|e| panic!("Dockerfile {key} (exec form): {e}"))
    };
    let entry = json_line("ENTRYPOINT");
    out.push(Invocation { at: "Dockerfile".into(), program: entry[0].clone(), args: json_line("CMD") });
    let image_entry = entry[0].clone();
    // Compose services running the image.
    let compose = &yaml_docs("compose.yaml")[0];
    for (name, svc) in compose["services"].as_hash().expect("services") {
        let svc_name = name.as_str().unwrap_or_default();
        // `x-agent` anchors are merged by compose (`<<`); yaml-rust2 keeps the merge key, so read through it.
        let field = |k: &str| {
            let direct = &svc[k];
            if direct.is_badvalue() { svc["<<"][k].clone() } else { direct.clone() }
        };
        let image = field("image");
        if image.as_str().is_none_or(|i| !i.starts_with("a2a:")) {
            continue;
        }
        let program = strings(&field("entrypoint")).first().cloned().unwrap_or_else(|| image_entry.clone());
        out.push(Invocation { at: format!("compose.yaml {svc_name}"), program, args: strings(&field("command")) });
    }
    // Kubernetes containers.
    for (file, doc) in k8s_docs() {
        let mut nodes = Vec::new();
        walk(&doc, &mut nodes);
        for n in nodes {
            if let Some(image) = n["image"].as_str().filter(|i| i.starts_with("a2a:")) {
                let program = strings(&n["command"]).first().cloned().unwrap_or_else(|| image_entry.clone());
                let _ = image;
                out.push(Invocation { at: file.clone(), program, args: strings(&n["args"]) });
            }
        }
    }
    // systemd units.
    for unit in ["systemd/a2a-server.service", "systemd/a2a-gateway.service"] {
        let text = read(unit);
        let exec = text.lines().find_map(|l| l.strip_prefix("ExecStart=")).expect("ExecStart");
        let mut words = exec.split_whitespace().map(str::to_owned);
        let program = words.next().expect("program");
        out.push(Invocation { at: unit.into(), program, args: words.collect() });
    }
    out
}

#[test]
fn every_yaml_file_of_deploy_parses_and_every_kubernetes_object_is_named() {
    let files = yaml_files();
    for want in ["compose.yaml", "k8s/agent.yaml", "k8s/gateway.yaml", "k8s/configmap.yaml", "prometheus/alerts.yaml"] {
        assert!(files.iter().any(|f| f == want), "deploy/{want} is missing: {files:?}");
    }
    for f in &files {
        assert!(!yaml_docs(f).is_empty(), "deploy/{f} is empty");
    }
    let mut kinds = BTreeSet::new();
    for (file, doc) in k8s_docs() {
        for key in ["apiVersion", "kind"] {
            assert!(doc[key].as_str().is_some(), "{file}: an object without {key}");
        }
        assert!(doc["metadata"]["name"].as_str().is_some(), "{file}: an object without metadata.name");
        kinds.insert(doc["kind"].as_str().expect("kind").to_owned());
    }
    for want in ["Deployment", "Service", "ConfigMap", "PodDisruptionBudget"] {
        assert!(kinds.contains(want), "deploy/k8s/ has no {want}: {kinds:?}");
    }
}

#[test]
fn every_command_line_of_deploy_runs_a_shipped_binary_with_flags_it_has() {
    // a2a-supervise is run by the agent, never by a deploy file: it must ship, and has no command line of its own.
    let _ = bin("a2a-supervise");
    let helps: BTreeMap<&str, String> =
        BINARIES.iter().filter(|b| **b != "a2a-supervise").map(|b| (*b, help(b))).collect();
    let all = invocations();
    assert!(all.len() >= 8, "too few command lines found in deploy/: {}", all.len());
    for inv in &all {
        assert!(
            inv.program.starts_with("/usr/local/bin/"),
            "{}: {} is not where the image installs",
            inv.at,
            inv.program
        );
        let name = inv.program.trim_start_matches("/usr/local/bin/");
        let help = helps.get(name).unwrap_or_else(|| panic!("{}: {name} is not a shipped binary", inv.at));
        for flag in inv.args.iter().filter(|a| a.starts_with("--")) {
            let flag = flag.split('=').next().unwrap_or(flag);
            assert!(help.contains(&format!("{flag} ")), "{}: {name} has no flag {flag}:\n{help}", inv.at);
        }
        if let Some(i) = inv.args.iter().position(|a| a == "--log-format") {
            assert!(
                ["json", "text"].contains(&inv.args[i + 1].as_str()),
                "{}: --log-format {}",
                inv.at,
                inv.args[i + 1]
            );
        }
    }
    // The Dockerfile builds and copies every shipped binary, and the runtime stage is not root.
    let docker = read("Dockerfile");
    for b in BINARIES {
        assert!(
            docker.contains(&format!("--bin {b} ")) || docker.contains(&format!("--bin {b}\n")),
            "Dockerfile does not build {b}"
        );
    }
    let runtime = docker.rsplit("\nFROM ").next().expect("a runtime stage");
    let user = runtime.lines().find_map(|l| l.strip_prefix("USER ")).expect("the runtime stage sets USER");
    assert!(!user.starts_with("0") && !user.starts_with("root"), "the image runs as root: USER {user}");
    // systemd: reload is SIGHUP (OPS-4).
    for unit in ["systemd/a2a-server.service", "systemd/a2a-gateway.service"] {
        let text = read(unit);
        assert!(text.contains("ExecReload=/bin/kill -HUP $MAINPID"), "{unit}: reload is not SIGHUP");
        for section in ["[Unit]", "[Service]", "[Install]"] {
            assert!(text.contains(section), "{unit}: no {section}");
        }
    }
}

/// The configuration a command line reads (`--config PATH`).
fn config_arg(inv: &Invocation) -> &str {
    let i = inv.args.iter().position(|a| a == "--config").unwrap_or_else(|| panic!("{}: no --config", inv.at));
    &inv.args[i + 1]
}

#[test]
fn the_configurations_of_deploy_are_valid_mounted_where_read_and_listen_on_the_published_ports() {
    // Valid: `check` exits 0 (no warning either).
    for (binary, file) in [("a2a-server", "config/agent.toml"), ("a2a-gateway", "config/gateway.toml")] {
        let out = Command::new(bin(binary))
            .args(["check", "--config"])
            .arg(deploy(file))
            .env("A2A_ADMIN_TOKEN", "test-token")
            .output()
            .expect("run check");
        assert_eq!(
            out.status.code(),
            Some(0),
            "{binary} check --config deploy/{file}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    // The ConfigMap holds the same configurations as deploy/config/ (compared as TOML values).
    let configmap = k8s_docs().into_iter().find(|(_, d)| d["kind"].as_str() == Some("ConfigMap")).expect("ConfigMap").1;
    let toml_of = |s: &str| -> toml::Value { toml::from_str(s).expect("TOML") };
    for (key, file) in [("agent.toml", "config/agent.toml"), ("gateway.toml", "config/gateway.toml")] {
        let held = configmap["data"][key].as_str().unwrap_or_else(|| panic!("ConfigMap has no {key}"));
        assert_eq!(toml_of(held), toml_of(&read(file)), "the ConfigMap's {key} differs from deploy/{file}");
    }
    // Every --config path is where compose or Kubernetes mounts a configuration of the right kind.
    let agent = toml_of(&read("config/agent.toml"));
    let gateway = toml_of(&read("config/gateway.toml"));
    let port = |v: &toml::Value, table: &str| -> u16 {
        let listen = v[table]["listen"].as_str().expect("listen");
        listen.rsplit(':').next().expect("port").parse().expect("a port number")
    };
    let agent_port = port(&agent, "agent");
    let metrics_port = port(&agent, "admin");
    let gateway_port = port(&gateway, "gateway");
    let compose = &yaml_docs("compose.yaml")[0];
    let mut compose_mounts = BTreeMap::new();
    for (_, svc) in compose["services"].as_hash().expect("services") {
        let vols = if svc["volumes"].is_badvalue() { &svc["<<"]["volumes"] } else { &svc["volumes"] };
        for v in strings(vols) {
            let parts: Vec<&str> = v.split(':').collect();
            if parts[0].starts_with("./") {
                compose_mounts.insert(parts[1].to_owned(), parts[0].trim_start_matches("./").to_owned());
                assert!(deploy(parts[0].trim_start_matches("./")).exists(), "compose mounts a missing {}", parts[0]);
            }
        }
    }
    let mut k8s_mounts = BTreeMap::new();
    for (_, doc) in k8s_docs() {
        let mut nodes = Vec::new();
        walk(&doc, &mut nodes);
        for n in nodes {
            if let (Some(mount), Some(_)) = (n["mountPath"].as_str(), n["name"].as_str()) {
                for item in nodes_items(&doc) {
                    k8s_mounts.insert(format!("{mount}/{}", item.1), item.0.clone());
                }
            }
        }
    }
    for inv in invocations().iter().filter(|i| !i.at.starts_with("systemd/")) {
        let path = config_arg(inv);
        let expected = if inv.program.ends_with("a2a-gateway") { "gateway.toml" } else { "agent.toml" };
        if inv.at.starts_with("compose.yaml") {
            assert_eq!(
                compose_mounts.get(path).map(String::as_str),
                Some(&*format!("config/{expected}")),
                "{}: {path}",
                inv.at
            );
        } else if inv.at.starts_with("k8s/") {
            assert_eq!(k8s_mounts.get(path).map(String::as_str), Some(expected), "{}: {path} is not mounted", inv.at);
        } else {
            assert!(path.ends_with(expected), "{}: {path}", inv.at);
        }
    }
    // Ports: the containers publish what the configurations listen on.
    let mut container_ports = BTreeSet::new();
    for (_, doc) in k8s_docs() {
        let mut nodes = Vec::new();
        walk(&doc, &mut nodes);
        container_ports.extend(nodes.iter().filter_map(|n| n["containerPort"].as_i64()));
    }
    for p in [agent_port, metrics_port, gateway_port] {
        assert!(container_ports.contains(&i64::from(p)), "no Kubernetes container publishes port {p}");
        assert!(read("Dockerfile").contains(&p.to_string()), "the Dockerfile does not EXPOSE {p}");
    }
    let published = strings(&compose["services"]["gateway"]["ports"]);
    assert!(published.iter().any(|p| p.ends_with(&format!(":{gateway_port}"))), "compose publishes {published:?}");
}

/// The `(key, path)` items of the ConfigMap volumes of a Kubernetes object.
fn nodes_items(doc: &Yaml) -> Vec<(String, String)> {
    let mut nodes = Vec::new();
    walk(doc, &mut nodes);
    nodes
        .into_iter()
        .filter(|n| !n["configMap"].is_badvalue())
        .flat_map(|n| n["configMap"]["items"].as_vec().cloned().unwrap_or_default())
        .filter_map(|i| Some((i["key"].as_str()?.to_owned(), i["path"].as_str()?.to_owned())))
        .collect()
}

/// A process of a shipped binary on a configuration of deploy/ rewritten for loopback; killed when dropped.
struct Running {
    child: Child,
    base: String,
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start(binary: &str, config: &Path) -> Running {
    let mut child = Command::new(bin(binary))
        .arg("--config")
        .arg(config)
        .env("A2A_ADMIN_TOKEN", "test-token")
        .env("RUST_LOG", "warn")
        .env_remove("REDIS_URL")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start");
    let stdout = child.stdout.take().expect("stdout");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if let Some(url) = line.split(" serving ").nth(1) {
                let url = url.split_whitespace().next().unwrap_or_default();
                let _ = tx.send(url.trim_end_matches("/a2a").to_owned());
            }
        }
    });
    let base = rx.recv_timeout(Duration::from_secs(60)).unwrap_or_else(|_| panic!("{binary} did not start"));
    Running { child, base }
}

/// Every metric name a PromQL expression selects.
fn selected_metrics(expr: &promql_parser::parser::Expr, out: &mut BTreeSet<String>) {
    use promql_parser::parser::Expr;
    match expr {
        Expr::VectorSelector(v) => out.extend(v.name.clone()),
        Expr::MatrixSelector(m) => out.extend(m.vs.name.clone()),
        Expr::Aggregate(a) => selected_metrics(&a.expr, out),
        Expr::Unary(u) => selected_metrics(&u.expr, out),
        Expr::Binary(b) => {
            selected_metrics(&b.lhs, out);
            selected_metrics(&b.rhs, out);
        }
        Expr::Paren(p) => selected_metrics(&p.expr, out),
        Expr::Subquery(s) => selected_metrics(&s.expr, out),
        Expr::Call(c) => c.args.args.iter().for_each(|a| selected_metrics(a, out)),
        Expr::Extension(_) | Expr::NumberLiteral(_) | Expr::StringLiteral(_) => {}
    }
}

/// The metric family names a Prometheus text exposition describes (`# TYPE name kind`), with the sample names each
/// gives (`_total` for counters; `_bucket`, `_sum`, `_count` for histograms).
fn exposed(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for line in text.lines() {
        let Some(rest) = line.strip_prefix("# TYPE ") else { continue };
        let mut words = rest.split_whitespace();
        let (Some(name), Some(kind)) = (words.next(), words.next()) else { continue };
        out.insert(name.to_owned());
        match kind {
            "counter" => {
                out.insert(format!("{name}_total"));
            }
            "histogram" => {
                for s in ["_bucket", "_sum", "_count"] {
                    out.insert(format!("{name}{s}"));
                }
            }
            _ => {}
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_probes_answer_on_running_processes_and_every_alert_names_a_metric_they_expose() {
    let redis = RedisServer::start();
    let dir = tempdir();
    // The deploy configurations, with loopback addresses instead of the cluster's names.
    let (agent_port, metrics_port, gateway_port) = (free_port(), free_port(), free_port());
    let agent_toml = read("config/agent.toml")
        .replace("0.0.0.0:8080", &format!("127.0.0.1:{agent_port}"))
        .replace("0.0.0.0:9090", &format!("127.0.0.1:{metrics_port}"))
        .replace("http://agent:8080/a2a", &format!("http://127.0.0.1:{agent_port}/a2a"))
        .replace("redis://redis:6379", &redis.url());
    let gateway_toml = read("config/gateway.toml")
        .replace("0.0.0.0:8443", &format!("127.0.0.1:{gateway_port}"))
        .replace("http://agent:8080/a2a", &format!("http://127.0.0.1:{agent_port}/a2a"))
        .replace("redis://redis:6379", &redis.url());
    std::fs::write(dir.join("agent.toml"), agent_toml).expect("write");
    std::fs::write(dir.join("gateway.toml"), gateway_toml).expect("write");
    let agent = start("a2a-server", &dir.join("agent.toml"));
    let gateway = start("a2a-gateway", &dir.join("gateway.toml"));
    let http = reqwest::Client::new();

    // Every HTTP probe of the manifests, on the process it probes (its port name or number).
    let mut probed = 0;
    for (file, doc) in k8s_docs() {
        let mut nodes = Vec::new();
        walk(&doc, &mut nodes);
        for n in nodes {
            let get = &n["httpGet"];
            let Some(path) = get["path"].as_str() else { continue };
            let base = if file.contains("gateway") { &gateway.base } else { &agent.base };
            // Readiness may take a moment (the gateway's first look at its agents): poll.
            let url = format!("{base}{path}");
            let deadline = std::time::Instant::now() + Duration::from_secs(30);
            loop {
                let status = http.get(&url).send().await.map(|r| r.status().as_u16()).unwrap_or(0);
                if status == 200 {
                    break;
                }
                assert!(std::time::Instant::now() < deadline, "{file}: GET {url} answers {status}, not 200");
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            probed += 1;
        }
    }
    assert!(probed >= 4, "the manifests probe too few paths: {probed}");

    // The metrics the alert rules select.
    let agent_metrics = http
        .get(format!("http://127.0.0.1:{metrics_port}/metrics"))
        .send()
        .await
        .expect("agent /metrics")
        .text()
        .await
        .expect("text");
    let gateway_metrics = http
        .get(format!("{}/metrics", gateway.base))
        .bearer_auth("test-token")
        .send()
        .await
        .expect("gateway /metrics")
        .text()
        .await
        .expect("text");
    let mut known = exposed(&agent_metrics);
    known.extend(exposed(&gateway_metrics));
    known.insert("up".into()); // Prometheus's own, per scrape target.
    let rules = &yaml_docs("prometheus/alerts.yaml")[0];
    let mut alerts = 0;
    for group in rules["groups"].as_vec().expect("groups") {
        for rule in group["rules"].as_vec().expect("rules") {
            let name = rule["alert"].as_str().expect("every rule is an alert");
            let expr = rule["expr"].as_str().expect("expr");
            let parsed = promql_parser::parser::parse(expr).unwrap_or_else(|e| panic!("{name}: {e}\n{expr}"));
            let mut metrics = BTreeSet::new();
            selected_metrics(&parsed, &mut metrics);
            assert!(!metrics.is_empty(), "{name} selects no metric");
            for m in metrics {
                assert!(known.contains(&m), "{name} names {m}, which neither binary exposes");
            }
            assert!(rule["annotations"]["summary"].as_str().is_some(), "{name} has no summary");
            assert!(docs_mention(name), "docs/operations.md does not say what to do about {name}");
            alerts += 1;
        }
    }
    assert!(alerts >= 8, "too few alert rules: {alerts}");
    drop(gateway);
    drop(agent);
    let _ = std::fs::remove_dir_all(&dir);
}

fn docs_mention(alert: &str) -> bool {
    std::fs::read_to_string(root().join("docs/operations.md")).expect("docs/operations.md").contains(alert)
}

fn tempdir() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("a2a-packaging-{}-{}", std::process::id(), free_port()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}
