//! The command line of `a2a-conformance` (the binary only parses and calls [`main`]).

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::Parser;

use crate::identity::Identity;
use crate::render::{self, Format};
use crate::report::{Level, Status};
use crate::{Options, RunError};

/// Validates an A2A 0.3 agent (or gateway) by URL against spec/PROTOCOL.md.
///
/// Exit status: 0 when no MUST check failed, 1 when one did, 2 when the suite could not run (bad options, agent
/// unreachable).
#[derive(Parser, Debug)]
#[command(name = "a2a-conformance", version, about, long_about = None)]
pub struct Cli {
    /// The agent's URL: its A2A endpoint (`.../a2a`) or the URL below which it serves `/a2a`.
    #[arg(long, required_unless_present = "list")]
    pub target: Option<String>,
    /// PEM file of the caller's P-256 private key, to sign `did_auth` requests (with --did).
    #[arg(long, requires = "did", value_name = "KEYFILE")]
    pub identity: Option<PathBuf>,
    /// The caller's did:web DID (its document must list the --identity key, and the agent must resolve it).
    #[arg(long, requires = "identity", value_name = "DID")]
    pub did: Option<String>,
    /// The key id of --identity in the DID document (the `kid` fragment).
    #[arg(long, default_value = "key-1", value_name = "ID")]
    pub key_id: String,
    /// Publish the suite's own DID documents on this loopback address and sign as did:web:localhost%3A<port>
    /// (for agents that resolve localhost DIDs over plain HTTP; also enables the DID-resolver checks).
    #[arg(long, value_name = "ADDR", num_args = 0..=1, default_missing_value = "127.0.0.1:0", conflicts_with = "identity")]
    pub serve_did: Option<String>,
    /// The API key for `api_key` capabilities.
    #[arg(long, env = "A2A_CONFORMANCE_API_KEY", value_name = "KEY")]
    pub api_key: Option<String>,
    /// The highest level to check: must (MUST checks only), should (MUST and SHOULD) or may (every check).
    #[arg(long, value_enum, default_value = "may")]
    pub level: LevelArg,
    /// Only these checks, comma-separated: an area ending with `/` (`negotiate/,execute/`: every check of those
    /// areas), a requirement id (`EXE-4`: every check citing it) or a glob over check and requirement ids
    /// (`INT-*`, `signature/replay`).
    #[arg(long, value_name = "PATTERN")]
    pub only: Option<String>,
    /// List the checks (with --level and --only) instead of running them.
    #[arg(long)]
    pub list: bool,
    /// Output format.
    #[arg(long, value_enum, default_value = "text")]
    pub format: Format,
    /// Write the report to this file instead of standard output.
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// The browser origin of the CORS checks (name one the agent allows if it restricts origins).
    #[arg(long, default_value = crate::ctx::DEFAULT_ORIGIN, value_name = "ORIGIN")]
    pub origin: String,
    /// Time limit of one request, in seconds.
    #[arg(long, default_value_t = 30, value_name = "SECONDS")]
    pub timeout: u64,
    /// How long to wait for an execution to finish, in seconds.
    #[arg(long, default_value_t = 60, value_name = "SECONDS")]
    pub result_timeout: u64,
    /// The target is a gateway in front of agents (§15): run the gateway checks (routing, forwarding headers, edge
    /// policy, versions) instead of the agent-only ones.
    #[arg(long)]
    pub gateway: bool,
    /// The capability the generic checks drive (NEGOTIATE, EXECUTE, CONFIRM, RESULT, CANCEL); by default the first
    /// the suite can drive (auth none before api_key before did_auth). The report names it for each check.
    #[arg(long, value_name = "NAME")]
    pub capability: Option<String>,
    /// The capability the deadline and late-result checks drive (it must take about 2 s or more); by default the one
    /// with the largest declared estimated_latency_ms (2 000 ms or more), or one whose input has a duration member
    /// (`seconds`, `delay_ms`, ...), set to 2 s.
    #[arg(long, value_name = "NAME")]
    pub slow_capability: Option<String>,
    /// The JSON payload for --slow-capability (by default one made from its input_schema).
    #[arg(long, value_name = "JSON", requires = "slow_capability")]
    pub slow_payload: Option<String>,
    /// No progress display, even on a terminal.
    #[arg(long)]
    pub quiet: bool,
}

/// `--level`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LevelArg {
    /// MUST checks only.
    Must,
    /// MUST and SHOULD checks.
    Should,
    /// Every check.
    May,
}

impl From<LevelArg> for Level {
    fn from(l: LevelArg) -> Level {
        match l {
            LevelArg::Must => Level::Must,
            LevelArg::Should => Level::Should,
            LevelArg::May => Level::May,
        }
    }
}

fn options(cli: &Cli) -> Result<Options, String> {
    let mut o = Options::new(cli.target.clone().unwrap_or_default());
    o.level = cli.level.into();
    o.only = cli.only.clone();
    o.api_key = cli.api_key.clone();
    o.origin = cli.origin.clone();
    o.timeout = Duration::from_secs(cli.timeout.max(1));
    o.result_timeout = Duration::from_secs(cli.result_timeout.max(1));
    o.serve_did = cli.serve_did.clone();
    o.gateway = cli.gateway;
    o.capability = cli.capability.clone();
    o.slow_capability = cli.slow_capability.clone();
    if let Some(p) = &cli.slow_payload {
        let v: serde_json::Value = serde_json::from_str(p).map_err(|e| format!("--slow-payload is not JSON: {e}"))?;
        o.slow_payload = Some(v);
    }
    if let (Some(key), Some(did)) = (&cli.identity, &cli.did) {
        o.identity = Some(Identity::load(key, did, &cli.key_id)?);
    }
    Ok(o)
}

/// A one-line progress display on standard error.
fn progress_display() -> crate::Progress {
    Arc::new(|i, total, id, status| {
        let mut err = std::io::stderr().lock();
        match status {
            None => {
                let _ = write!(err, "\r\x1b[2K[{:>3}/{total}] {id}", i + 1);
            }
            Some(Status::Fail) => {
                let _ = writeln!(err, "\r\x1b[2K[{:>3}/{total}] {id}: FAIL", i + 1);
            }
            Some(_) if i + 1 == total => {
                let _ = write!(err, "\r\x1b[2K");
            }
            Some(_) => {}
        }
        let _ = err.flush();
    })
}

/// Runs the command line; returns the exit status.
pub fn main(cli: Cli) -> ExitCode {
    let level: Level = cli.level.into();
    if cli.list {
        let text = render::list(&crate::selected_checks(level, cli.only.as_deref()));
        return write_out(&cli, &text).err().unwrap_or(ExitCode::SUCCESS);
    }
    let opts = match options(&cli) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("a2a-conformance: {e}");
            return ExitCode::from(2);
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("a2a-conformance: cannot start the runtime: {e}");
            return ExitCode::from(2);
        }
    };
    let progress = (!cli.quiet && std::io::stderr().is_terminal()).then(progress_display);
    match runtime.block_on(crate::run(opts, progress)) {
        Ok(report) => {
            if let Err(code) = write_out(&cli, &render::render(&report, cli.format)) {
                return code;
            }
            if cli.out.is_some() || cli.format != Format::Text {
                eprintln!("a2a-conformance: {}", render::compliance_text(report.compliance));
            }
            if report.must_failed() { ExitCode::from(1) } else { ExitCode::SUCCESS }
        }
        Err(RunError::Usage(m)) => {
            eprintln!("a2a-conformance: {m}");
            ExitCode::from(2)
        }
        Err(RunError::Unreachable(m)) => {
            eprintln!("a2a-conformance: {m}; check --target (the agent's URL) and that the agent is running");
            ExitCode::from(2)
        }
    }
}

fn write_out(cli: &Cli, text: &str) -> Result<(), ExitCode> {
    match &cli.out {
        Some(path) => std::fs::write(path, text).map_err(|e| {
            eprintln!("a2a-conformance: cannot write {}: {e}", path.display());
            ExitCode::from(2)
        }),
        None => {
            let mut out = std::io::stdout().lock();
            let _ = out.write_all(text.as_bytes());
            let _ = out.flush();
            Ok(())
        }
    }
}
