//! `a2a-gateway`: the A2A gateway in front of many agents.
//!
//! ```text
//! a2a-gateway --config gateway.toml [--listen ADDR]
//! a2a-gateway audit --config gateway.toml [--sender DID] [--negotiation ID] [--execution ID] [--limit N]
//! ```

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// The allocator of the `a2a-gateway` binary, the one `a2a-server` ships (feature `mimalloc`, on by default); the proxy
/// bench uses it too.
#[cfg(feature = "mimalloc")]
#[global_allocator]
static GLOBAL: a2a_server::ShippedAllocator = a2a_server::ShippedAllocator;

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
    log_format: a2a_server::app::LogFormat,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand, Debug)]
enum Command {
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
    a2a_server::app::init_tracing(cli.log_format);
    let Some(config) = cli.config else {
        a2a_server::app::fatal(cli.log_format, "a2a-gateway", "give the configuration with --config gateway.toml");
        return ExitCode::FAILURE;
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(r) => r,
        Err(e) => {
            a2a_server::app::fatal(cli.log_format, "a2a-gateway", &format!("cannot start the runtime: {e}"));
            return ExitCode::FAILURE;
        }
    };
    let format = cli.log_format;
    let result = runtime.block_on(async {
        match cli.command {
            None => a2a_gateway::app::run(&config, cli.listen.as_deref()).await,
            Some(Command::Audit { sender, negotiation, execution, limit }) => {
                let q = a2a_gateway::audit::AuditParams { sender, negotiation, execution, limit: Some(limit) };
                a2a_gateway::app::audit(&config, q).await
            }
        }
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            a2a_server::app::fatal(format, "a2a-gateway", &e);
            ExitCode::FAILURE
        }
    }
}
