//! Real agents (the workspace's test agent, `a2a_test_support::agent`) on loopback, and clients that talk to them.

use std::sync::Arc;
use std::sync::atomic::AtomicUsize;

use a2a_client::{Client, ClientConfig, Identity};

pub use a2a_test_support::TempDir;
pub use a2a_test_support::agent::{SENDER as CALLER, TestAgent, decl, report_schema, standard};

/// A client with the test caller's unsigned identity and generous timeouts.
pub fn client() -> Client {
    client_with(ClientConfig::default())
}

/// A client with the test caller's unsigned identity and `config`.
pub fn client_with(config: ClientConfig) -> Client {
    Client::builder(Identity::unsigned(CALLER).expect("did")).config(config).build().expect("client")
}

/// A URL where nothing listens (a port that was free a moment ago).
pub fn dead_url() -> String {
    format!("http://127.0.0.1:{}/a2a", a2a_test_support::free_port())
}

/// A fresh run counter for `standard`.
pub fn runs() -> Arc<AtomicUsize> {
    Arc::new(AtomicUsize::new(0))
}
