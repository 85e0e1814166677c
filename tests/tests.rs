//! Integration tests: one binary, a module per area.

mod common;

mod bad_input;
mod cli;
mod codec;
mod corruption;
mod failures;
mod golden;
mod recovery;
mod resume;
mod sessions;
mod space;
mod store;
