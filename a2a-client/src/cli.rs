//! The `a2a` command-line client (library side; `src/main.rs` only calls [`main`]).

/// Runs the command line and returns the process exit code.
pub fn main() -> i32 {
    eprintln!("a2a: the command-line client is not in this build yet; use the a2a-client SDK");
    2
}
