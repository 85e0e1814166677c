//! The engine built on the journal: the inner loop of the inner-messages
//! spec (provider round trips, tool execution, per-message recording) and
//! its resume, adapter states, and a scripted provider.

pub(crate) mod adapter;
pub mod conversation;
pub(crate) mod inner_loop;
pub(crate) mod provider;
pub(crate) mod scripted;
pub(crate) mod stateful;
pub(crate) mod tool;
