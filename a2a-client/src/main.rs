//! `a2a`: the A2A command-line client. Everything is in [`a2a_client::cli`].

fn main() {
    std::process::exit(a2a_client::cli::main());
}
