//! Integration tests of the gateway (see the modules).
