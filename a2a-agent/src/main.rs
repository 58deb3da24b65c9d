//! `a2a-server`: serve an agent from a configuration file, or the demo agent.
//!
//! ```text
//! a2a-server --demo [--listen 127.0.0.1:8080] [--trusted-gateway DID]...
//! a2a-server --sessions-demo [--linger] [--listen 127.0.0.1:8080]
//! a2a-server --config agent.toml [--listen ADDR] [--trusted-gateway DID]...
//! a2a-server check --config agent.toml
//! ```
//!
//! `check` exits 0 when the configuration is valid, 1 when it is refused (the error names file:line:column), 2 when
//! it is valid but has warnings (settings under which something can never work, deprecated spellings).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;

/// The allocator of the `a2a-server` binary (see `a2a_runtime::ShippedAllocator`).
#[cfg(feature = "mimalloc")]
#[global_allocator]
static GLOBAL: a2a_runtime::ShippedAllocator = a2a_runtime::ShippedAllocator;

/// Serve an A2A 0.3 agent.
#[derive(Parser, Debug)]
#[command(name = "a2a-server", version, about, subcommand_negates_reqs = true)]
struct Cli {
    /// The agent's TOML configuration.
    #[arg(long, conflicts_with_all = ["demo", "sessions_demo"], required_unless_present_any = ["demo", "sessions_demo"])]
    config: Option<PathBuf>,
    /// Run the demo agent: fresh identity, sample capabilities, in-memory store.
    #[arg(long, conflicts_with = "sessions_demo")]
    demo: bool,
    /// Run the sessions demo: seed 001's story played by three agents on loopback, then exit.
    #[arg(long)]
    sessions_demo: bool,
    /// With --sessions-demo: keep the agents up after the story (until Ctrl-C) to explore them with curl.
    #[arg(long, requires = "sessions_demo")]
    linger: bool,
    /// Address to listen on (default: the configuration's, else 127.0.0.1:8080). With --sessions-demo: the main
    /// assistant's, the work and finance assistants on the next two ports (default: free ports).
    #[arg(long)]
    listen: Option<String>,
    /// Trust this gateway's DID (repeatable; with --demo or --config, added to `auth.trusted_gateways`): requests
    /// it re-signs name their caller (GW-9), and callers' signatures for it are accepted (GW-18).
    #[arg(long = "trusted-gateway", value_name = "DID", conflicts_with = "sessions_demo")]
    trusted_gateways: Vec<String>,
    /// Serve the operator console at `/console` where `/metrics` is served (`[admin] console = true` for every
    /// configuration; with --demo and --sessions-demo, on their loopback listeners).
    #[arg(long)]
    console: bool,
    /// Serve the Model Context Protocol at `/mcp` (spec §21), as `[mcp] enabled = true` does (with --config).
    #[arg(long, requires = "config")]
    mcp: bool,
    /// Log format.
    #[arg(long, value_enum, default_value = "text", env = "A2A_LOG_FORMAT")]
    log_format: a2a_agent::app::LogFormat,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(clap::Subcommand, Debug)]
enum Command {
    /// Validate a configuration without starting the agent: exit 0 valid, 1 refused (the error says where and
    /// why), 2 valid with warnings (something in it can never work, or a deprecated spelling).
    Check {
        /// The agent's TOML configuration.
        #[arg(long)]
        config: PathBuf,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let _telemetry = a2a_agent::app::init_tracing(cli.log_format, "a2a-server");
    let runtime = match a2a_server::allocator::runtime() {
        Ok(r) => r,
        Err(e) => {
            a2a_agent::app::fatal(cli.log_format, "a2a-server", &format!("cannot start the runtime: {e}"));
            return ExitCode::FAILURE;
        }
    };
    if cli.console {
        a2a_agent::console::enable_from_command_line();
    }
    if cli.mcp {
        a2a_agent::app::enable_mcp_from_command_line();
    }
    if let Some(Command::Check { config }) = cli.command {
        return match runtime.block_on(a2a_agent::app::check_config(&config)) {
            Ok(warnings) if warnings.is_empty() => {
                println!("{}: ok", config.display());
                ExitCode::SUCCESS
            }
            Ok(warnings) => {
                for w in &warnings {
                    eprintln!("warning: {w}");
                }
                println!("{}: valid, with {} warning(s)", config.display(), warnings.len());
                ExitCode::from(2)
            }
            Err(e) => {
                eprintln!("a2a-server: {e}");
                ExitCode::FAILURE
            }
        };
    }
    let format = cli.log_format;
    let result = runtime.block_on(async {
        match cli.config {
            Some(path) => a2a_agent::app::run_config(&path, cli.listen.as_deref(), &cli.trusted_gateways).await,
            None if cli.sessions_demo => a2a_agent::sessions_demo::run(cli.linger, cli.listen.as_deref()).await,
            None => a2a_agent::app::run_demo(cli.listen.as_deref(), &cli.trusted_gateways).await,
        }
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            a2a_agent::app::fatal(format, "a2a-server", &e);
            ExitCode::FAILURE
        }
    }
}
