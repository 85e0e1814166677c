//! Arbitrary bytes (lossy UTF-8) as a WINK JSON snapshot.
//!
//! Properties: `from_json` never panics; a state it accepts is written back
//! by `to_json` (with logs) to a document that reads back equal, and writing
//! that one again gives the same text; the same holds for the document
//! under WINK's names (`SliceNames::Wink`), which reads back to the same
//! state.
#![no_main]

use agent_journal::state::{JsonOptions, SessionState, SliceNames, SliceRegistry};
use fuzz_common::ts;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let registry = SliceRegistry::default();
    let Ok(state) = SessionState::from_json(&text, &registry) else {
        return;
    };
    let opts = JsonOptions {
        include_logs: true,
        created_at: Some(ts(0)),
        ..JsonOptions::default()
    };
    let json = state.to_json(&opts);
    let back = SessionState::from_json(&json, &registry)
        .unwrap_or_else(|e| panic!("to_json wrote a document from_json refuses: {e}\n{json}"));
    assert_eq!(back, state, "from_json(to_json(s)) != s\n{json}");
    assert_eq!(back.to_json(&opts), json, "to_json is not stable");
    let wink = JsonOptions {
        names: SliceNames::Wink { module: None },
        ..opts.clone()
    };
    let text = state.to_json(&wink);
    let back = SessionState::from_json(&text, &registry)
        .unwrap_or_else(|e| panic!("a WINK-named document from_json refuses: {e}\n{text}"));
    assert_eq!(back, state, "from_json(to_json(s, wink)) != s\n{text}");
});
