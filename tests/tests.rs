//! Integration tests: one binary, a module per area.

mod common;

mod bad_input;
mod cli;
mod codec;
mod golden;
mod recovery;
mod sessions;
mod store;
