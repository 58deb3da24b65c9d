//! Vectors: being written.
