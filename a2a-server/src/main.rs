//! `a2a-server`: serve an agent from a configuration file, or the demo agent.
//!
//! ```text
//! a2a-server --demo [--listen 127.0.0.1:8080]
//! a2a-server --sessions-demo [--linger] [--listen 127.0.0.1:8080]
//! a2a-server --config agent.toml [--listen ADDR]
//! ```

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;

/// The allocator of the `a2a-server` binary (see `a2a_server::ShippedAllocator`).
#[cfg(feature = "mimalloc")]
#[global_allocator]
static GLOBAL: a2a_server::ShippedAllocator = a2a_server::ShippedAllocator;

/// Serve an A2A 0.3 agent.
#[derive(Parser, Debug)]
#[command(name = "a2a-server", version, about)]
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
    /// Log format.
    #[arg(long, value_enum, default_value = "text", env = "A2A_LOG_FORMAT")]
    log_format: a2a_server::app::LogFormat,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    a2a_server::app::init_tracing(cli.log_format);
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("a2a-server: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(async {
        match cli.config {
            Some(path) => a2a_server::app::run_config(&path, cli.listen.as_deref()).await,
            None if cli.sessions_demo => a2a_server::sessions_demo::run(cli.linger, cli.listen.as_deref()).await,
            None => a2a_server::app::run_demo(cli.listen.as_deref()).await,
        }
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("a2a-server: {e}");
            ExitCode::FAILURE
        }
    }
}
