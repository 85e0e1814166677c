//! Integration tests: one binary, a module per area.

mod common;

mod golden;
mod recovery;
mod sessions;
mod store;
