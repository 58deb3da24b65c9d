//! Not implemented yet: this crate is reserved in the workspace layout and has no functionality.
//! See the project's open issues for the plan; nothing here pretends to work.
