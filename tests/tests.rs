//! Integration tests: one binary, a module per area.

mod common;

mod atomic;
mod bad_input;
mod blocks;
mod claude_code;
mod cli;
mod cli_json;
mod codec;
mod concurrency;
mod conversation;
mod conversation_fold;
mod corruption;
mod crash;
mod deltas;
mod examples;
mod failures;
mod footguns;
mod forks;
mod formats;
mod golden;
#[cfg(feature = "http")]
mod http_adapters;
#[cfg(unix)]
mod import_memory;
mod imports;
mod kill;
mod large_frames;
mod layers;
#[cfg(unix)]
mod live;
mod losses;
mod one_model;
#[cfg(unix)]
mod other_users;
#[cfg(feature = "postgres")]
mod pg_server;
#[cfg(feature = "postgres")]
mod postgres;
mod powerloss;
mod progress;
#[cfg(unix)]
mod readers_bounds;
mod records;
mod recovery;
mod redaction;
mod resume;
mod sandbox;
mod sessions;
mod sharing;
mod space;
mod spec_rows;
mod state_blob;
mod stateful;
mod store;
mod streamed_import;
mod transfer;
mod view;
mod wink;
