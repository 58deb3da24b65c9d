//! `a2a-gateway`: the A2A gateway in front of many agents.
//!
//! ```text
//! a2a-gateway --config gateway.toml [--listen ADDR]
//! a2a-gateway check --config gateway.toml
//! a2a-gateway audit --config gateway.toml [--sender DID] [--negotiation ID] [--execution ID] [--limit N]
//! ```
//!
//! `check` exits 0 when the configuration is valid, 1 when it is refused, 2 when it is valid but has warnings
//! (settings under which the gateway can never route or log).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// The allocator of the `a2a-gateway` binary, the one `a2a-server` ships (feature `mimalloc`, on by default); the proxy
/// bench uses it too.
#[cfg(feature = "mimalloc")]
#[global_allocator]
static GLOBAL: a2a_runtime::ShippedAllocator = a2a_runtime::ShippedAllocator;

/// Serve an A2A 0.3 gateway.
#[derive(Parser, Debug)]
#[command(name = "a2a-gateway", version, about)]
struct Cli {
    /// The gateway's TOML configuration.
    #[arg(long, global = true)]
    config: Option<PathBuf>,
    /// Address to listen on (default: the configuration's, else 127.0.0.1:8443).
    #[arg(long)]
    listen: Option<String>,
    /// Log format.
    #[arg(long, value_enum, default_value = "text", env = "A2A_LOG_FORMAT")]
    log_format: a2a_runtime::app::LogFormat,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Validate the configuration without starting: exit 0 valid, 1 refused (the error says where and why), 2
    /// valid with warnings (something in it can never work).
    Check,
    /// Print audit records (JSON lines, oldest first) matching every filter given.
    Audit {
        /// Records of this sender DID.
        #[arg(long)]
        sender: Option<String>,
        /// Records of this negotiation id.
        #[arg(long)]
        negotiation: Option<String>,
        /// Records of this execution id.
        #[arg(long)]
        execution: Option<String>,
        /// Most records printed.
        #[arg(long, default_value_t = 100)]
        limit: usize,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let _telemetry = a2a_runtime::app::init_tracing(cli.log_format, "a2a-gateway");
    let Some(config) = cli.config else {
        a2a_runtime::app::fatal(cli.log_format, "a2a-gateway", "give the configuration with --config gateway.toml");
        return ExitCode::FAILURE;
    };
    let audit = match cli.command {
        None => None,
        Some(Command::Audit { sender, negotiation, execution, limit }) => {
            Some(a2a_gateway::audit::AuditParams { sender, negotiation, execution, limit: Some(limit) })
        }
        Some(Command::Check) => return check(&config),
    };
    let runtime = match a2a_runtime::allocator::runtime() {
        Ok(r) => r,
        Err(e) => {
            a2a_runtime::app::fatal(cli.log_format, "a2a-gateway", &format!("cannot start the runtime: {e}"));
            return ExitCode::FAILURE;
        }
    };
    let format = cli.log_format;
    let result = runtime.block_on(async {
        match audit {
            None => a2a_gateway::app::run(&config, cli.listen.as_deref()).await,
            Some(q) => a2a_gateway::app::audit(&config, q).await,
        }
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            a2a_runtime::app::fatal(format, "a2a-gateway", &e);
            ExitCode::FAILURE
        }
    }
}

/// `a2a-gateway check`: exit 0 valid, 1 refused, 2 valid with warnings.
fn check(config: &std::path::Path) -> ExitCode {
    match a2a_gateway::app::check(config) {
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
            eprintln!("a2a-gateway: {e}");
            ExitCode::FAILURE
        }
    }
}
