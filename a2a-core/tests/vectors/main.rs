//! Loads every test-vector file in `spec/vectors/` and checks `a2a-core` against it.
//! One test binary (this file plus its modules) keeps link time down.

mod common;

mod canonical;
mod capability;
mod did;
mod execution_id;
mod negotiation;
mod schema_rules;
#[cfg(feature = "sessions")]
mod sessions;
mod signatures;
