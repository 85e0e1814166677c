//! Integration tests: one binary, a module per area.

mod common;

mod golden;
mod recovery;
mod resume;
mod sessions;
mod store;
