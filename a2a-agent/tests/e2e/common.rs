//! Starting agents on loopback and talking to them: the workspace's test agent (`a2a_test_support::agent`), with the
//! agent end-to-end tests' own additions.

use std::sync::Arc;

use a2a_server::handler::ExecutionContext;
use a2a_server::{AgentBuilder, Limits};
use serde_json::{Value, json};

pub use a2a_test_support::agent::{Answer, SENDER, TestAgent, decl, report_schema};
pub use a2a_test_support::{TempDir, free_port};

/// A builder with the standard test capabilities (`a2a_test_support::agent::standard`: `submit_report`,
/// `run_slow_task`, `fail_on_purpose`) and `crash_on_purpose`, whose handler panics.
pub fn standard(runs: Arc<std::sync::atomic::AtomicUsize>) -> AgentBuilder {
    a2a_test_support::agent::standard("did:web:agent.example.com", runs).capability(
        decl("crash_on_purpose", json!({"type": "object"})),
        |_c: ExecutionContext, _p: Value| async move {
            if true {
                panic!("crash on purpose");
            }
            Ok(json!({}))
        },
    )
}

/// Fast limits for tests.
pub fn test_limits() -> Limits {
    let mut l = Limits::default();
    l.confirm_window_ms = 2_000;
    l
}

/// A test key of `spec/vectors/keys/`.
pub fn vector_key(name: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../spec/vectors/keys").join(name)
}
