//! Integration tests: one binary, a module per area.

mod common;

mod bad_input;
mod cli;
mod codec;
mod concurrency;
mod crash;
mod golden;
mod kill;
mod recovery;
mod resume;
mod sessions;
mod store;
mod transfer;
