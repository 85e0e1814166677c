//! Unit tests of the provider conversions, one module per area; the helpers
//! they share are in `helpers`.

mod anthropic;
mod helpers;
mod jsonl;
mod openai;
mod properties;
mod resume;
mod translate;
mod validate;
