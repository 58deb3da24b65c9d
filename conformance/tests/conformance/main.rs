//! Tests of the conformance suite, in one binary: the suite passes against the demo agent, catches each fault of the
//! deliberately broken agents with the expected checks and no other, covers every requirement of the specification,
//! and its report matches the committed JSON Schema.

#![allow(unreachable_pub)] // helpers are shared between the modules of this one binary

mod common;

mod broken;
mod cli;
mod coverage;
mod demo;
mod gateway;
mod mutation;
mod report_schema;
