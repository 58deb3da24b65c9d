//! The `a2a` command-line client, for people and scripts (library side; `src/main.rs` only calls [`main`]).
//!
//! Network commands (`discover`, `capabilities`, `negotiate`, `call`, `result`, `cancel`, `fallback`, and the
//! `session` commands of §17: `register`, `list`, `show`, `end`, `send`, `ask`, `run`, `history`, `spawn`, `inbox`,
//! `reply`, `events`) run the
//! [`crate::Client`]; local tools (`keygen`, `key check`, `schema fix`, `capability lint|convert`) need no agent.
//! Results go to stdout (`--json` for machine output); errors go to stderr with a non-zero exit code:
//!
//! | code | meaning |
//! |---|---|
//! | 0 | success |
//! | 1 | the agent refused, the execution failed, or a checked file is invalid |
//! | 2 | wrong usage or invalid input |
//! | 3 | the agent could not be reached, or is not an A2A 0.3 agent |
//! | 4 | a timeout or the deadline passed |
//! | 141 | stdout or stderr is a pipe whose reader has gone (`a2a ... \| head`): the command stops quietly |

mod a2a1x;
mod net;
mod output;
mod session;
mod tools;

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::error::ClientError;

const AFTER_HELP: &str = "Exit codes: 0 success; 1 the agent refused, the execution failed, or a checked file is \
invalid; 2 wrong usage or invalid input; 3 the agent could not be reached or is not an A2A 0.3 agent; 4 a timeout or \
the deadline passed; 141 the reader of stdout went away (a2a ... | head).

Examples:
  a2a discover http://127.0.0.1:8080
  a2a call http://127.0.0.1:8080 submit_report --data '{\"title\":\"Lift 3\",\"timestamp\":\"2026-11-29T21:00:00Z\"}'
  a2a call https://agent.example.com summarize --data @doc.json --json --fallback accept-degraded
  a2a call http://127.0.0.1:8080 stream_summary --data '{\"text\":\"one two three\"}' --stream
  a2a result http://127.0.0.1:8080 EXECUTION_ID --wait
  a2a keygen --did did:web:caller.example.com --out keys/
  a2a schema fix openapi-schema.json -o schema.json
  a2a capability lint capabilities.yaml
  a2a a2a1x card http://127.0.0.1:9999
  a2a a2a1x call http://127.0.0.1:9999 echo --data '{\"text\":\"hi\"}' --stream
  a2a session list http://127.0.0.1:8080 --search bonus
  a2a session ask http://127.0.0.1:8080 bonus-desk -m 'What is the bonus this month?' --from main --wait 30s
  a2a session events http://127.0.0.1:8080 --session bonus-desk";

/// The A2A protocol 0.3 command-line client.
#[derive(Debug, Parser)]
#[command(name = "a2a", version, about, after_help = AFTER_HELP)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    #[command(flatten)]
    global: Global,
}

/// Options every command accepts.
#[derive(Debug, Args)]
struct Global {
    /// Machine output: one JSON document on stdout; errors as JSON on stderr.
    #[arg(long, global = true)]
    json: bool,
    /// No progress display and no notes on stderr.
    #[arg(long, short, global = true)]
    quiet: bool,
    /// The caller's did:web DID (A2A-Sender-ID).
    #[arg(long, global = true, env = "A2A_DID", value_name = "DID")]
    did: Option<String>,
    /// The caller's P-256 private key (PEM), to sign requests.
    #[arg(long, global = true, env = "A2A_KEY_FILE", value_name = "FILE")]
    key: Option<PathBuf>,
    /// The key's id in the caller's DID document.
    #[arg(long, global = true, env = "A2A_KEY_ID", default_value = "key-1", value_name = "ID")]
    key_id: String,
    /// The API key for the agent's api_key capabilities (sent only to the URL given).
    #[arg(long, global = true, env = "A2A_API_KEY", hide_env_values = true, value_name = "KEY")]
    api_key: Option<String>,
    /// The bearer token for the agent's oauth2 capabilities (sent only to the URL given).
    #[arg(long, global = true, env = "A2A_BEARER_TOKEN", hide_env_values = true, value_name = "TOKEN")]
    bearer: Option<String>,
    /// The caller's region, sent as A2A-Region.
    #[arg(long, global = true, env = "A2A_REGION", value_name = "REGION")]
    region: Option<String>,
    /// The timeout of each request (e.g. 500ms, 10s, 1m).
    #[arg(long, global = true, default_value = "10s", value_parser = parse_duration, value_name = "DURATION")]
    timeout: Duration,
    /// When to sign requests (needs --key).
    #[arg(long, global = true, value_enum, default_value = "auto")]
    sign: SignArg,
    /// What a signature of a request with a body covers.
    #[arg(long, global = true, value_enum, default_value = "payload-hash")]
    coverage: CoverageArg,
    /// What to do with signed responses.
    #[arg(long, global = true, value_enum, default_value = "if-signed")]
    verify: VerifyArg,
    /// Trust this CA certificate (PEM) for agents and DID documents; repeatable.
    #[arg(long, global = true, value_name = "FILE")]
    ca_cert: Vec<PathBuf>,
    /// Resolve did:web:localhost DIDs over plain HTTP (local development only).
    #[arg(long, global = true)]
    allow_http_loopback_dids: bool,
    /// Allow DID documents on private and loopback addresses (never in production).
    #[arg(long, global = true)]
    allow_private_dids: bool,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum SignArg {
    Never,
    Auto,
    Always,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum CoverageArg {
    HeaderOnly,
    PayloadHash,
    FullPayload,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum VerifyArg {
    Off,
    IfSigned,
    Required,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum FallbackArg {
    /// Call the same capability at another agent the registry names.
    TryOthers,
    /// Also accept a degraded capability (the output says so).
    AcceptDegraded,
    /// Try nothing else: report no_matching_capability with the options.
    Refuse,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// DISCOVER: who the agent is and which capabilities it offers.
    Discover {
        /// The agent's URL (`/a2a` is appended when missing).
        url: String,
    },
    /// The agent's full declarations, features and limits.
    Capabilities {
        /// The agent's URL.
        url: String,
    },
    /// NEGOTIATE a schema for a capability and print the agreed one.
    Negotiate {
        /// The agent's URL.
        url: String,
        /// The capability.
        capability: String,
        /// The proposed schema: JSON, @FILE or @- (default: the capability's input schema).
        #[arg(long, value_name = "JSON|@FILE")]
        schema: Option<String>,
        /// Accept the proposal unchanged or fail.
        #[arg(long)]
        strict: bool,
        /// The run time to ask for, in milliseconds.
        #[arg(long)]
        timeout_ms: Option<u64>,
    },
    /// The whole handshake: DISCOVER, NEGOTIATE, EXECUTE, CONFIRM, RESULT; prints the result.
    Call {
        /// The agent's URL.
        url: String,
        /// The capability.
        capability: String,
        /// The payload: JSON, @FILE or @- (stdin).
        #[arg(long, short, value_name = "JSON|@FILE")]
        data: String,
        /// The proposed schema (default: the capability's input schema).
        #[arg(long, value_name = "JSON|@FILE")]
        schema: Option<String>,
        /// What to do when the agent cannot serve the capability.
        #[arg(long, value_enum, default_value = "try-others")]
        fallback: FallbackArg,
        /// The overall deadline.
        #[arg(long, default_value = "60s", value_parser = parse_duration, value_name = "DURATION")]
        deadline: Duration,
        /// The run time to ask for, in milliseconds.
        #[arg(long)]
        timeout_ms: Option<u64>,
        /// The Idempotency-Key of EXECUTE (default: a random one).
        #[arg(long)]
        idempotency_key: Option<String>,
        /// Cancel the execution if the deadline passes.
        #[arg(long)]
        cancel_on_deadline: bool,
        /// Stream the result (spec §18): print the execution's events as they arrive (JSON lines with --json),
        /// resuming a dropped connection. Calls this agent only (no fallback to others).
        #[arg(long, conflicts_with = "cancel_on_deadline")]
        stream: bool,
    },
    /// RESULT of an execution; with --wait, until it is terminal.
    Result {
        /// The agent's URL.
        url: String,
        /// The execution id.
        execution_id: String,
        /// Wait until the execution is terminal (long-poll, or backoff).
        #[arg(long)]
        wait: bool,
        /// How long --wait waits.
        #[arg(long, default_value = "60s", value_parser = parse_duration, value_name = "DURATION")]
        deadline: Duration,
        /// Stream the execution's events as they arrive (spec §18), from the one after --last-event-id.
        #[arg(long, conflicts_with = "wait")]
        stream: bool,
        /// With --stream: resume after this event id.
        #[arg(long, default_value_t = 0, requires = "stream")]
        last_event_id: u64,
    },
    /// CANCEL an execution.
    Cancel {
        /// The agent's URL.
        url: String,
        /// The execution id.
        execution_id: String,
    },
    /// FALLBACK: what the agent suggests instead of a capability.
    Fallback {
        /// The agent's URL.
        url: String,
        /// The capability wanted.
        capability: String,
        /// Why (free text).
        #[arg(long)]
        reason: Option<String>,
    },
    /// Sessions and agent-to-agent conversations (§17): register, list, send, ask, history, spawn, events.
    #[command(subcommand)]
    Session(session::SessionCommand),
    /// Generate a P-256 key and the did:web DID document that publishes it.
    Keygen {
        /// Directory to write key.pem and did.json into.
        #[arg(long, default_value = ".")]
        out: PathBuf,
        /// Overwrite existing files.
        #[arg(long)]
        force: bool,
    },
    /// Key files.
    #[command(subcommand)]
    Key(KeyCommand),
    /// JSON Schemas.
    #[command(subcommand)]
    Schema(SchemaCommand),
    /// Capability declarations.
    #[command(subcommand)]
    Capability(CapabilityCommand),
    /// Agent2Agent (A2A) 1.x agents: read a card, call a skill (spec §20.8).
    #[command(subcommand, name = "a2a1x")]
    A2a1x(A2a1xCommand),
}

#[derive(Debug, Subcommand)]
enum A2a1xCommand {
    /// Fetch and verify an Agent Card; list its skills as capabilities.
    Card {
        /// The agent's URL (its origin's /.well-known/agent-card.json is read) or the card's URL.
        url: String,
        /// Refuse an unsigned card (a signed one is always verified).
        #[arg(long)]
        require_signature: bool,
    },
    /// Call a skill: SendMessage (or SendStreamingMessage with --stream), then GetTask until it ends.
    Call {
        /// The agent's URL.
        url: String,
        /// The skill.
        skill: String,
        /// The payload: JSON, @FILE or @- (stdin).
        #[arg(long, short, value_name = "JSON|@FILE")]
        data: String,
        /// Stream the task's events (printed on stderr).
        #[arg(long)]
        stream: bool,
        /// Refuse an unsigned card.
        #[arg(long)]
        require_signature: bool,
        /// The overall deadline.
        #[arg(long, default_value = "60s", value_parser = parse_duration, value_name = "DURATION")]
        deadline: Duration,
    },
}

#[derive(Debug, Subcommand)]
enum KeyCommand {
    /// Succeed only for an ECDSA P-256 key (private or public); refuse RSA and every other key (CI step).
    Check {
        /// The PEM file.
        file: PathBuf,
    },
}

#[derive(Debug, Subcommand)]
enum SchemaCommand {
    /// Convert OpenAPI `nullable: true` into `"type": ["T","null"]` (SCH-12).
    Fix {
        /// The schema file (JSON), or - for stdin.
        file: PathBuf,
        /// Write the fixed schema here instead of stdout.
        #[arg(long, short)]
        output: Option<PathBuf>,
        /// Rewrite FILE.
        #[arg(long, conflicts_with = "output")]
        in_place: bool,
        /// Write nothing; fail if the schema needs a change (CI step).
        #[arg(long, conflicts_with_all = ["output", "in_place"])]
        check: bool,
    },
}

#[derive(Debug, Subcommand)]
enum CapabilityCommand {
    /// Check declarations (YAML with comments, or JSON): every problem with its line.
    Lint {
        /// The declaration file.
        file: PathBuf,
    },
    /// Convert declarations (YAML) to the JSON declarations of the protocol, checking them.
    Convert {
        /// The declaration file.
        file: PathBuf,
        /// Write the JSON here instead of stdout.
        #[arg(long, short)]
        output: Option<PathBuf>,
    },
}

/// Parses `500ms`, `10s`, `2m` or a number of seconds.
fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let (num, unit) = match s.find(|c: char| !(c.is_ascii_digit() || c == '.')) {
        Some(i) => (&s[..i], &s[i..]),
        None => (s, "s"),
    };
    let n: f64 = num.parse().map_err(|_| format!("{s:?} is not a duration (e.g. 500ms, 10s, 2m)"))?;
    let secs = match unit {
        "ms" => n / 1000.0,
        "s" => n,
        "m" => n * 60.0,
        _ => return Err(format!("{s:?}: unknown unit {unit:?} (use ms, s or m)")),
    };
    if !(secs.is_finite() && secs > 0.0 && secs <= 86_400.0) {
        return Err(format!("{s:?} must be more than 0 and at most 24 h"));
    }
    Ok(Duration::from_secs_f64(secs))
}

/// The exit code for an error (see the module documentation).
pub(crate) fn exit_code(e: &ClientError) -> i32 {
    match e {
        ClientError::InvalidInput { .. } | ClientError::TooLarge { .. } => 2,
        ClientError::Unreachable { .. } | ClientError::Protocol { .. } | ClientError::UnsupportedVersion { .. } => 3,
        ClientError::Timeout { .. } | ClientError::DeadlineExceeded { .. } => 4,
        ClientError::NoMatchingCapability { cause, .. } if !cause.is_capability_mismatch() => exit_code(cause),
        _ => 1,
    }
}

/// Runs the command line with the process arguments and returns the exit code.
pub fn main() -> i32 {
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() { 2 } else { 0 };
        }
    };
    run(cli)
}

fn run(cli: Cli) -> i32 {
    let out = output::Output::new(cli.global.json, cli.global.quiet);
    match cli.command {
        Command::Keygen { out: dir, force } => {
            tools::keygen(&out, cli.global.did.as_deref(), &cli.global.key_id, &dir, force)
        }
        Command::Key(KeyCommand::Check { file }) => tools::key_check(&out, &file),
        Command::Schema(SchemaCommand::Fix { file, output, in_place, check }) => {
            tools::schema_fix(&out, &file, output.as_deref(), in_place, check)
        }
        Command::Capability(CapabilityCommand::Lint { file }) => tools::capability_lint(&out, &file),
        Command::Capability(CapabilityCommand::Convert { file, output }) => {
            tools::capability_convert(&out, &file, output.as_deref())
        }
        Command::A2a1x(cmd) => match tokio::runtime::Builder::new_current_thread().enable_all().build() {
            Ok(rt) => rt.block_on(a2a1x::run(&out, &cli.global, cmd)),
            Err(e) => {
                out.error(&ClientError::invalid(format!("cannot start the runtime: {e}")));
                2
            }
        },
        command => {
            let rt = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
                Ok(rt) => rt,
                Err(e) => {
                    out.error(&ClientError::invalid(format!("cannot start the runtime: {e}")));
                    return 2;
                }
            };
            rt.block_on(net::run(&out, &cli.global, command))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse_with_units() {
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("10s"), Ok(Duration::from_secs(10)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("3"), Ok(Duration::from_secs(3)));
        for bad in ["", "0s", "-1s", "1h", "abc", "1e9"] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_command_line_is_consistent() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
    }

    /// Every subcommand path, below `cmd`, as the words a user types.
    fn paths(cmd: &clap::Command, prefix: &[String], acc: &mut Vec<Vec<String>>) {
        for sc in cmd.get_subcommands() {
            let mut p = prefix.to_vec();
            p.push(sc.get_name().to_owned());
            acc.push(p.clone());
            paths(sc, &p, acc);
        }
    }

    /// clap accepts an argument of a subcommand whose id is that of a global option (`debug_assert` passes) and then
    /// panics on every run of that subcommand, when it reads the global back as the other type (`session show URL
    /// KEY` did, exit 101, with the global `--key FILE`). No argument of any subcommand may reuse a global's id.
    #[test]
    fn no_subcommand_argument_reuses_the_id_of_a_global_option() {
        use clap::CommandFactory;
        fn walk(cmd: &clap::Command, globals: &[String], path: &str, clashes: &mut Vec<String>) {
            let mut globals = globals.to_vec();
            for a in cmd.get_arguments() {
                let id = a.get_id().as_str().to_owned();
                if globals.contains(&id) {
                    clashes.push(format!("`{path}` defines `{id}`, the id of a global option"));
                }
                if a.is_global_set() {
                    globals.push(id);
                }
            }
            for sc in cmd.get_subcommands() {
                walk(sc, &globals, &format!("{path} {}", sc.get_name()), clashes);
            }
        }
        let mut clashes = Vec::new();
        walk(&Cli::command(), &[], "a2a", &mut clashes);
        assert!(clashes.is_empty(), "{clashes:#?}");
    }

    /// Every subcommand parses its `--help` (clap builds a subcommand only when it is used, so a definition error of
    /// one that no test parses would otherwise surface only to its first user).
    #[test]
    fn every_subcommand_has_help() {
        use clap::CommandFactory;
        let mut all = Vec::new();
        paths(&Cli::command(), &[], &mut all);
        assert!(all.len() > 20, "{all:?}");
        for p in all {
            let mut argv = vec!["a2a".to_owned()];
            argv.extend(p.iter().cloned());
            argv.push("--help".into());
            let e = Cli::try_parse_from(&argv).expect_err("--help ends the parse");
            assert_eq!(e.kind(), clap::error::ErrorKind::DisplayHelp, "{argv:?}: {e}");
        }
    }
}
