//! # a2a-core
//!
//! The protocol core of the A2A semantic-handshake protocol, version 0.3 (`spec/PROTOCOL.md`):
//!
//! - [`wire`]: every message of the protocol as serde types, and [`headers`]: the header names and their parsers;
//! - [`error`]: the one error table (stable code, HTTP status, message);
//! - [`canonical`]: RFC 8785 canonical JSON (JCS);
//! - [`keys`], [`jws`], [`integrity`]: ECDSA P-256 keys, ES256 compact JWS/JWT and the `message_integrity` coverage modes;
//! - [`did`]: did:web syntax, URL mapping and DID documents;
//! - [`capability`]: capability declarations and their naming rules;
//! - [`schema_rules`] and [`negotiation`]: the schema rules of NEGOTIATE, the `nullable` converter, and how an agent tightens
//!   a proposal;
//! - [`execution_id`]: generation and parsing of `execution_id`;
//! - [`request`]: reading a request's sender and JSON message, and [`step`]: the protocol steps as metrics and spans
//!   label them (the agent and the gateway share both);
//! - `sessions` (feature `sessions`, on by default): sessions and conversations (§17): wire types, skip tokens,
//!   addresses, globs, wait chains, redaction;
//! - [`sse`]: the one Server-Sent Events codec (a sans-I/O decoder and the writer) of every stream in the workspace;
//! - [`a2a1x`]: the Agent2Agent 1.0 messages, tasks and card signatures of the bridge (§20);
//! - [`remote`]: how an agent's composite steps reach other agents (a trait a client implements);
//! - [`resolver`]: resolving a sender's DID to its key (with the `http-resolver` feature, over HTTPS).
//!
//! ## Features
//!
//! - `sessions` (default): the `sessions` module of §17. Without it the crate has the handshake
//!   alone; the capabilities document still reads an agent's `sessions` member ([`wire::SessionsInfo`]) and the error
//!   table keeps its §17 codes, so a build without sessions talks to agents that serve them.
//! - `http-resolver`: [`resolver::HttpResolver`], resolving did:web over HTTPS (reqwest) with a cache.
//! - `yaml`: capability declarations written in YAML (`capability::yaml`).
//!
//! Nothing in this crate performs network I/O except the optional [`resolver::HttpResolver`], and nothing panics on
//! any input.

pub mod a2a1x;
pub mod canonical;
pub mod capability;
pub mod did;
pub mod error;
pub mod execution_id;
pub mod headers;
pub mod integrity;
pub mod jws;
pub mod keys;
pub mod negotiation;
pub mod remote;
pub mod request;
pub mod resolver;
pub mod schema_rules;
#[cfg(feature = "sessions")]
pub mod sessions;
pub mod sse;
pub mod step;
pub mod wire;

/// The protocol version this crate implements, as carried by the `A2A-Version` header.
pub const PROTOCOL_VERSION: &str = "0.3";
