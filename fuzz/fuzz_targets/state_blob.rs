//! Arbitrary bytes as a conversation state blob (`conversation::state_blob`).
//!
//! Properties: decoding never panics, whatever the bytes: they either decode
//! or degrade (a `Degradation` with a reason). A decoded blob re-encodes to
//! bytes that decode equal, and encoding is a fixed point; the provider
//! check accepts the blob's own provider and refuses another.
//! `append_to_state` on the same bytes always gives a state that decodes,
//! ends with the appended message, keeps `processed_length`, and holds only
//! that message when the bytes degraded.
#![no_main]

use agent_journal::conversation::ConversationMessage;
use agent_journal::conversation::state_blob::{
    DEFAULT_MAX_STATE_BYTES, Degradation, StateBlob, append_to_state,
};
use libfuzzer_sys::fuzz_target;

/// The size limit the target decodes with.
const LIMIT: usize = 1 << 20;

fuzz_target!(|data: &[u8]| {
    let decoded = StateBlob::decode(data, None, LIMIT);
    match &decoded {
        Ok(blob) => {
            assert!(blob.processed_length <= blob.messages.len());
            let bytes = blob.encode();
            let again = StateBlob::decode(&bytes, Some(&blob.provider), usize::MAX)
                .unwrap_or_else(|d| panic!("an encoded blob does not decode: {d}"));
            assert_eq!(&again, blob, "decode(encode(b)) != b");
            assert_eq!(again.encode(), bytes, "encoding is not a fixed point");
            let other = format!("{}-other", blob.provider);
            assert!(matches!(
                StateBlob::decode(data, Some(&other), LIMIT),
                Err(Degradation::ProviderMismatch { .. })
            ));
        }
        Err(d) => assert!(!d.to_string().is_empty() && !d.kind().is_empty()),
    }

    let update = append_to_state(Some(data), "fuzz", &[ConversationMessage::user("appended")]);
    let after = StateBlob::decode(&update.state, Some("fuzz"), usize::MAX)
        .unwrap_or_else(|d| panic!("append_to_state wrote a state that does not decode: {d}"));
    assert_eq!(
        after.messages.last().map(|m| m.text()).as_deref(),
        Some("appended")
    );
    match (
        &update.degraded,
        StateBlob::decode(data, Some("fuzz"), DEFAULT_MAX_STATE_BYTES),
    ) {
        (Some(_), _) => {
            // Empty input is no state and never degraded.
            assert!(!data.is_empty());
            assert_eq!(after.messages.len(), 1);
            assert_eq!(after.processed_length, 0);
        }
        (None, Ok(before)) => {
            assert_eq!(after.messages.len(), before.messages.len() + 1);
            assert_eq!(after.processed_length, before.processed_length);
        }
        (None, Err(d)) => {
            assert!(data.is_empty(), "degraded ({d}) but not reported");
            assert_eq!(after.messages.len(), 1);
        }
    }
});
