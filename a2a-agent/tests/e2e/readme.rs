//! Every command line of the user-facing documents runs as written (README.md and docs/*.md): each line of each
//! ```` ```sh ```` block is extracted from the text itself and run by bash against real processes (`a2a-server --demo`,
//! `a2a-server --sessions-demo --linger`, the `a2a` client), checking its exit code and, where the block shows its
//! output (`$ command` lines followed by output lines, `...` standing for anything), that output. A command added to
//! a document later is picked up by this test and fails it unless it runs.
//!
//! The only mechanism between the text and the run, each entry with its reason:
//! - [`ADDRESSES`]: the documents' fixed addresses are replaced by free ports of the processes this test starts;
//! - [`SERVICES`]: lines that start a long-running agent are started once in the background (and must print their
//!   banner) before every other block runs;
//! - [`FILES`]: files an example reads, written into the scratch directory the commands run in;
//! - [`CAPTURES`]: a placeholder an example names (`RUN_ID`) takes a value from an earlier command's output;
//! - [`EXPECT`]: lines whose documented exit code is not 0, or that follow a stream until stopped;
//! - [`NOT_RUN`] and [`NOT_RUN_DOCUMENTS`]: lines and documents that cannot run here, each with why.
//!
//! The binaries are those of this build (`cargo run [--release] -p CRATE --` is replaced by the binary, and the
//! target directory leads `PATH`), so `cargo test --workspace`, which builds every binary before it runs a test, is
//! what runs them; `cargo test -p a2a-agent --test e2e readme` needs `cargo build -p a2a-client --features cli --bin a2a` first.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The documents whose ```sh blocks are run (docs/*.md are added by [`documents`]).
const DOCUMENTS: &[&str] = &["README.md"];

/// The documents' addresses, each replaced by the port of the process the test starts for it (`--demo` on the first,
/// `--sessions-demo --listen 127.0.0.1:9100` on three consecutive free ports).
const ADDRESSES: &[(&str, &str)] =
    &[("8080", "demo"), ("9100", "sessions main"), ("9101", "sessions work"), ("9102", "sessions finance")];

/// Lines that start a long-running agent: run in the background before the other blocks, each must print the text
/// given (its banner) within a minute and keep running until the test ends.
const SERVICES: &[(&str, &str)] = &[
    ("cargo run --release -p a2a-agent -- --demo", "A2A demo agent"),
    ("cargo run -p a2a-agent -- --sessions-demo --linger --listen 127.0.0.1:9100", "The agents stay up"),
];

/// Files the examples read, written into the scratch directory the commands run in (name, content).
const FILES: &[(&str, &str)] = &[
    // `a2a schema fix openapi-schema.json`: an OpenAPI 3.0 schema with `nullable: true`.
    (
        "openapi-schema.json",
        r#"{"type":"object","properties":{"title":{"type":"string"},"note":{"type":"string","nullable":true}},"required":["title"]}"#,
    ),
    // `a2a capability lint capabilities.yaml`: a declaration in YAML, with comments.
    (
        "capabilities.yaml",
        "# the capabilities of a report desk\n- name: submit_report   # files a report\n  description: File a report\n  auth_requirement: none\n  input_schema:\n    type: object\n    properties:\n      title: {type: string}\n    required: [title]\n",
    ),
    // `a2a session send ... -m @task.txt --attach payslip.png`.
    ("task.txt", "Please file the payslip of this month."),
    ("payslip.png", "\u{89}PNG\r\n\u{1a}\n"),
];

/// Placeholders an example names, with the earlier lines (prefix) whose output gives their value: the first word of
/// the latest such output that starts with the given prefix.
const CAPTURES: &[(&str, &str, &str)] = &[
    // `a2a session send` prints the run id of the message it sent; `run` and `reply` after it read that run.
    ("RUN_ID", "a2a session send", "did:web:"),
];

/// Lines whose documented outcome is not exit code 0 at once: (line prefix, expected exit code, seconds after which
/// the line is stopped — a command that follows a stream until Ctrl-C — or 0).
const EXPECT: &[(&str, i32, u64)] = &[
    // `a2a session events` follows the event channel until stopped (it "resumes after a drop").
    ("a2a session events", 124, 3),
    // `--sessions-demo --linger` without --listen: plays its story on free ports and stays up until stopped.
    ("cargo run -p a2a-agent -- --sessions-demo --linger", 124, 20),
];

/// Documents under docs/ whose blocks are not run, each with why.
const NOT_RUN_DOCUMENTS: &[(&str, &str)] = &[(
    "BENCHMARKS.md",
    "a record of measurements: each block is the recipe of one past run (release-profile benchmark builds — a cold \
     one takes longer than CI's budget — run for minutes on a quiet machine, naming that run's commits, hashes and \
     directories); re-running them is measuring, not testing",
)];

/// Lines that are not run, each with why.
const NOT_RUN: &[(&str, &str)] = &[
    ("cargo test --workspace", "this test is part of that command: running it would recurse"),
    (
        "A2A_UPDATE_CONFIG_DOCS=1 cargo test",
        "regenerates the configuration reference from a checkout (the docs name it); the test that it runs, \
         a2a-gateway's config_reference, checks the same files on every run",
    ),
    (
        "REDIS_URL=redis://127.0.0.1:6379 a2a-server --config agent.toml",
        "needs a Redis on 6379 and the reader's agent.toml; several processes on one Redis are tested in \
         a2a-agent/tests/e2e/multiprocess.rs against a real redis-server",
    ),
];

/// One command line of a document: where it is, its text (continuations joined) and the output shown after it.
#[derive(Debug, Clone)]
struct Line {
    at: String,
    text: String,
    shown: Vec<String>,
}

/// The ```sh blocks of a document, each as its command lines.
fn blocks(path: &Path) -> Vec<Vec<Line>> {
    let doc = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let mut out = Vec::new();
    let mut block: Option<Vec<(usize, String)>> = None;
    for (i, l) in doc.lines().enumerate() {
        match &mut block {
            None if l.trim_start().starts_with("```sh") => block = Some(Vec::new()),
            None => {}
            Some(b) if l.trim_start().starts_with("```") => {
                out.push(lines_of(&name, b));
                block = None;
            }
            Some(b) => b.push((i + 1, l.to_owned())),
        }
    }
    assert!(block.is_none(), "{name}: a ```sh block is not closed");
    out
}

fn lines_of(doc: &str, raw: &[(usize, String)]) -> Vec<Line> {
    let transcript = raw.iter().any(|(_, l)| l.starts_with("$ "));
    let mut lines: Vec<Line> = Vec::new();
    let mut pending: Option<Line> = None;
    for (n, l) in raw {
        if let Some(p) = &mut pending {
            p.text.push('\n');
            p.text.push_str(l);
            if !l.trim_end().ends_with('\\') {
                lines.push(pending.take().expect("pending"));
            }
            continue;
        }
        let cmd = if transcript { l.strip_prefix("$ ") } else { Some(l.as_str()) };
        match cmd {
            Some(c) if c.trim().is_empty() || c.trim_start().starts_with('#') => {}
            Some(c) => {
                let line = Line { at: format!("{doc}:{n}"), text: c.to_owned(), shown: Vec::new() };
                if c.trim_end().ends_with('\\') {
                    pending = Some(line);
                } else {
                    lines.push(line);
                }
            }
            None => {
                if let Some(last) = lines.last_mut().filter(|_| l.trim() != "...") {
                    last.shown.push(l.to_owned());
                }
            }
        }
    }
    assert!(pending.is_none(), "{doc}: a command ends with a continuation \\");
    lines
}

/// `docs/*.md` after the fixed [`DOCUMENTS`].
fn documents(root: &Path) -> Vec<PathBuf> {
    let mut docs: Vec<PathBuf> = DOCUMENTS.iter().map(|d| root.join(d)).collect();
    let mut more: Vec<PathBuf> = std::fs::read_dir(root.join("docs"))
        .map(|rd| {
            rd.filter_map(|e| e.ok().map(|e| e.path())).filter(|p| p.extension().is_some_and(|x| x == "md")).collect()
        })
        .unwrap_or_default();
    more.sort();
    for (name, _why) in NOT_RUN_DOCUMENTS {
        assert!(more.iter().any(|p| p.ends_with(name)), "NOT_RUN_DOCUMENTS names docs/{name}, which is gone");
    }
    more.retain(|p| !NOT_RUN_DOCUMENTS.iter().any(|(name, _)| p.ends_with(name)));
    docs.extend(more);
    docs
}

/// `line` matches `pattern`, where `...` in the pattern stands for anything.
fn matches(pattern: &str, line: &str) -> bool {
    let parts: Vec<&str> = pattern.split("...").collect();
    let mut rest = line;
    for (i, p) in parts.iter().enumerate() {
        if i == 0 {
            match rest.strip_prefix(p) {
                Some(r) => rest = r,
                None => return false,
            }
        } else if i == parts.len() - 1 {
            return rest.ends_with(p);
        } else {
            match rest.find(p) {
                Some(at) => rest = &rest[at + p.len()..],
                None => return false,
            }
        }
    }
    rest.is_empty()
}

/// Kills the process group's leader on drop.
struct Service {
    child: std::process::Child,
    output: Arc<Mutex<String>>,
    line: String,
}

impl Drop for Service {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A bash that runs a block's lines one after the other, keeping its variables; each line's stdout, stderr and exit
/// code are told apart by a marker line.
struct Shell {
    child: std::process::Child,
    stdin: std::process::ChildStdin,
    lines: std::sync::mpsc::Receiver<String>,
    dir: PathBuf,
    n: usize,
}

impl Shell {
    fn start(dir: &Path, path: &str) -> Shell {
        let mut child = Command::new("bash")
            .args(["--noprofile", "--norc", "-o", "pipefail"])
            .current_dir(dir)
            .env("PATH", path)
            .env_remove("A2A_DID")
            .env_remove("A2A_KEY_FILE")
            .env_remove("A2A_API_KEY")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("bash starts");
        let stdin = child.stdin.take().expect("stdin");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for l in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(l).is_err() {
                    break;
                }
            }
        });
        Shell { child, stdin, lines, dir: dir.to_path_buf(), n: 0 }
    }

    /// Runs one command line: (exit code, stdout, stderr), or why it could not be read within `limit`.
    fn run(&mut self, cmd: &str, limit: Duration) -> Result<(i32, String, String), String> {
        use std::io::Write;
        self.n += 1;
        let err = self.dir.join(format!(".stderr-{}", self.n));
        let script = format!("{{\n{cmd}\n}} 2>'{}' </dev/null; printf '\\n@@rc %d\\n' $?\n", err.display());
        self.stdin.write_all(script.as_bytes()).and_then(|()| self.stdin.flush()).map_err(|e| format!("bash: {e}"))?;
        let deadline = Instant::now() + limit;
        let mut out: Vec<String> = Vec::new();
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(l) => match l.strip_prefix("@@rc ") {
                    Some(rc) => {
                        if out.last().is_some_and(String::is_empty) {
                            out.pop();
                        }
                        let stderr = std::fs::read_to_string(&err).unwrap_or_default();
                        let code = rc.trim().parse().unwrap_or(-1);
                        return Ok((code, out.join("\n").replace('\r', ""), stderr));
                    }
                    None => out.push(l),
                },
                Err(_) => return Err(format!("no end within {limit:?}; printed:\n{}", out.join("\n"))),
            }
        }
    }
}

impl Drop for Shell {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `n` consecutive free loopback ports (the sessions demo listens on three: its `--listen` port and the two after).
pub fn free_ports(n: u16) -> u16 {
    // n consecutive free ports: try bases until every one of them binds.
    for _ in 0..200 {
        let base = std::net::TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("addr").port();
        if base > 65_000 {
            continue;
        }
        let held: Vec<_> = (0..n).filter_map(|i| std::net::TcpListener::bind(("127.0.0.1", base + i)).ok()).collect();
        if held.len() == usize::from(n) {
            return base;
        }
    }
    panic!("no {n} consecutive free loopback ports");
}

/// The line as run here: addresses replaced, `cargo run -p CRATE --` replaced by the binary.
fn rewrite(text: &str, ports: &BTreeMap<&str, u16>, bin: &Path, captured: &BTreeMap<String, String>) -> String {
    let mut t = text.to_owned();
    for (doc_port, what) in ADDRESSES {
        let port = ports[what];
        for host in ["127.0.0.1:", "localhost:", "localhost%3A"] {
            t = t.replace(&format!("{host}{doc_port}"), &format!("{host}{port}"));
        }
    }
    for (krate, exe) in [("a2a-agent", "a2a-server"), ("a2a-client", "a2a"), ("a2a-gateway", "a2a-gateway")] {
        for release in ["cargo run --release -p", "cargo run -p"] {
            t = t.replace(&format!("{release} {krate} --features cli --"), &bin.join(exe).display().to_string());
            t = t.replace(&format!("{release} {krate} --"), &bin.join(exe).display().to_string());
        }
    }
    for (name, value) in captured {
        t = t.replace(name.as_str(), value);
    }
    t
}

fn expectation(text: &str) -> (i32, u64) {
    EXPECT.iter().find(|(p, ..)| text.starts_with(p)).map(|(_, c, s)| (*c, *s)).unwrap_or((0, 0))
}

#[test]
fn every_command_line_of_the_readme_and_docs_runs_as_written() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("workspace root").to_path_buf();
    let bin = Path::new(env!("CARGO_BIN_EXE_a2a-server")).parent().expect("target dir").to_path_buf();
    for exe in ["a2a", "a2a-server"] {
        assert!(
            bin.join(exe).exists(),
            "{} is missing: `cargo test --workspace` builds it (or `cargo build -p a2a-client --features cli --bin a2a`)",
            bin.join(exe).display()
        );
    }
    let scratch = std::env::temp_dir().join(format!("a2a-readme-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&scratch);
    std::fs::create_dir_all(&scratch).expect("scratch dir");
    for (name, content) in FILES {
        std::fs::write(scratch.join(name), content).expect("write a file an example reads");
    }
    let demo = free_ports(1);
    let sessions = free_ports(3);
    let ports: BTreeMap<&str, u16> = BTreeMap::from([
        ("demo", demo),
        ("sessions main", sessions),
        ("sessions work", sessions + 1),
        ("sessions finance", sessions + 2),
    ]);
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());

    let blocks_all: Vec<Vec<Line>> = documents(&root).iter().flat_map(|d| blocks(d)).collect();
    let all: Vec<Line> = blocks_all.iter().flatten().cloned().collect();
    assert!(all.len() > 20, "too few command lines found: {all:#?}");
    let mut failures = Vec::new();
    let mut seen_services = Vec::new();
    let mut seen_not_run = Vec::new();

    // The services first; the demo gets its port with --listen (the README says how to pick another port).
    let mut services = Vec::new();
    for l in all.iter().filter(|l| SERVICES.iter().any(|(s, _)| l.text.trim_start().starts_with(s))) {
        let (line, banner) = SERVICES.iter().find(|(s, _)| l.text.trim_start().starts_with(s)).expect("a service");
        seen_services.push(*line);
        let mut cmd = rewrite(&l.text, &ports, &bin, &BTreeMap::new());
        if !cmd.contains("--listen") {
            cmd.push_str(&format!(" --listen 127.0.0.1:{demo}"));
        }
        let cmd = cmd.split(" #").next().unwrap_or_default().to_owned();
        let mut child = Command::new("bash")
            .args(["-c", &format!("exec {cmd}")])
            .current_dir(&scratch)
            .env("PATH", &path)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .stdin(Stdio::null())
            .spawn()
            .expect("bash starts");
        let output = Arc::new(Mutex::new(String::new()));
        let sink = output.clone();
        let stdout = child.stdout.take().expect("stdout");
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if let Ok(mut o) = sink.lock() {
                    o.push_str(&line);
                    o.push('\n');
                }
            }
        });
        let s = Service { child, output, line: format!("{}: {}", l.at, l.text) };
        let started = Instant::now();
        while !s.output.lock().map(|o| o.contains(banner)).unwrap_or(false) {
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "{}: no {banner:?} within a minute:\n{}",
                s.line,
                s.output.lock().map(|o| o.clone()).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        services.push(s);
    }
    for (s, _) in SERVICES {
        assert!(seen_services.contains(s), "SERVICES names a line no document has any more: {s}");
    }

    let mut captured: BTreeMap<String, String> = BTreeMap::new();
    for block in &blocks_all {
        // One shell per block: a block's lines share its variables (`NEG=$(...)` then `$NEG`), as in a reader's shell.
        let mut shell = Shell::start(&scratch, &path);
        for l in block {
            let text = l.text.trim_start();
            if SERVICES.iter().any(|(s, _)| text.starts_with(s)) {
                continue;
            }
            if let Some((p, _why)) = NOT_RUN.iter().find(|(p, _)| text.starts_with(p)) {
                seen_not_run.push(*p);
                continue;
            }
            let (code, stop_after) = expectation(text);
            let mut cmd = rewrite(&l.text, &ports, &bin, &captured);
            if stop_after > 0 {
                cmd = format!("timeout {stop_after} {cmd}");
            }
            let (got, stdout, stderr) = match shell.run(&cmd, Duration::from_secs(120)) {
                Ok(r) => r,
                Err(e) => {
                    failures.push(format!("{}: {e}: {cmd}", l.at));
                    shell = Shell::start(&scratch, &path);
                    continue;
                }
            };
            if got != code {
                failures.push(format!("{}: exit {got} (want {code}): {cmd}\n{stdout}\n{stderr}", l.at));
                continue;
            }
            for shown in &l.shown {
                let shown = rewrite(shown, &ports, &bin, &captured);
                if !stdout.lines().any(|o| matches(&shown, o)) {
                    failures
                        .push(format!("{}: the output shown, {shown:?}, is not in what it printed:\n{stdout}", l.at));
                }
            }
            for (name, after, prefix) in CAPTURES {
                let value = stdout.split_whitespace().find(|w| w.starts_with(prefix));
                if let Some(v) = value.filter(|_| text.starts_with(after)) {
                    captured.insert((*name).to_owned(), v.to_owned());
                }
            }
        }
    }
    for (p, _) in NOT_RUN {
        assert!(seen_not_run.contains(p), "NOT_RUN names a line no document has any more: {p}");
    }
    for s in &mut services {
        if let Ok(Some(status)) = s.child.try_wait() {
            failures.push(format!("{}: the service ended ({status}) while the other lines ran", s.line));
        }
    }
    drop(services);
    let _ = std::fs::remove_dir_all(&scratch);
    assert!(
        failures.is_empty(),
        "{} of {} command lines failed:\n\n{}",
        failures.len(),
        all.len(),
        failures.join("\n\n")
    );
}

#[test]
fn the_extraction_reads_transcripts_continuations_and_wildcards() {
    let raw: Vec<(usize, String)> = [
        "$ curl -si http://127.0.0.1:8080/a2a",
        "HTTP/1.1 204 No Content",
        "...",
        "$ a2a session send URL key \\",
        "    --priority 7",
        "{\"id\":\"n_...\"}",
    ]
    .iter()
    .enumerate()
    .map(|(i, l)| (i + 1, (*l).to_owned()))
    .collect();
    let lines = lines_of("t.md", &raw);
    assert_eq!(lines.len(), 2, "{lines:#?}");
    assert_eq!(lines[0].shown, vec!["HTTP/1.1 204 No Content".to_owned()]);
    assert_eq!(lines[1].text, "a2a session send URL key \\\n    --priority 7");
    assert!(matches("{\"id\":\"n_...\"}", "{\"id\":\"n_42\"}"));
    assert!(matches("a...c...", "abxcdd"));
    assert!(!matches("HTTP/1.1 204", "HTTP/1.1 200 OK"));
    assert!(!matches("a...c", "abd"));
}
