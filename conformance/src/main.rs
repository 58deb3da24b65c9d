//! `a2a-conformance --target URL`: validates an A2A 0.3 agent or gateway (see `conformance/README.md`).

use clap::Parser;

fn main() -> std::process::ExitCode {
    a2a_conformance::cli::main(a2a_conformance::cli::Cli::parse())
}
