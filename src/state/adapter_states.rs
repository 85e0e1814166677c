//! The `AdapterStates` slice: captured adapter states, a LOG slice.

use serde::{Deserialize, Serialize};

use crate::event::AdapterStateSnapshot;

/// Every captured adapter state, in journal order (LOG slice: it survives
/// [`SessionState::restore`](crate::state::SessionState::restore), as the
/// adapter-state spec requires). O(1) per event.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct AdapterStates {
    states: Vec<AdapterStateSnapshot>,
}

impl AdapterStates {
    /// The most recent resumable capture of the given adapter type.
    pub fn find_resumable(&self, adapter_type: &str) -> Option<&AdapterStateSnapshot> {
        self.states
            .iter()
            .rev()
            .find(|s| s.resumable && s.adapter_type == adapter_type)
    }

    /// The latest capture of `adapter_type`, resumable or not.
    pub fn latest(&self, adapter_type: &str) -> Option<&AdapterStateSnapshot> {
        self.states
            .iter()
            .rev()
            .find(|s| s.adapter_type == adapter_type)
    }

    /// All captures, in journal order.
    pub fn iter(&self) -> impl Iterator<Item = &AdapterStateSnapshot> + '_ {
        self.states.iter()
    }

    /// Number of captures.
    pub fn len(&self) -> usize {
        self.states.len()
    }

    /// True when there is no capture.
    pub fn is_empty(&self) -> bool {
        self.states.is_empty()
    }

    pub(crate) fn push(&mut self, state: &AdapterStateSnapshot) {
        self.states.push(state.clone());
    }

    pub(crate) fn from_items(states: Vec<AdapterStateSnapshot>) -> Self {
        Self { states }
    }

    /// The captures from the `before`th on (a delta snapshot's).
    pub(crate) fn since(&self, before: usize) -> &[AdapterStateSnapshot] {
        self.states.get(before..).unwrap_or(&[])
    }

    /// Adds the captures a delta snapshot holds: made after the first
    /// `before`, which must be all this slice has.
    pub(crate) fn extend_after(
        &mut self,
        before: u64,
        added: Vec<AdapterStateSnapshot>,
    ) -> Result<(), String> {
        if before != self.states.len() as u64 {
            return Err(format!(
                "adapter states: the delta follows {before}, the state has {}",
                self.states.len()
            ));
        }
        self.states.extend(added);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::now;

    fn snap(kind: &str, resumable: bool) -> AdapterStateSnapshot {
        AdapterStateSnapshot {
            snapshot_id: uuid::Uuid::now_v7(),
            adapter_type: kind.into(),
            state: "{}".into(),
            resumable,
            captured_at: now(),
            evaluation_id: None,
            supersedes: None,
        }
    }

    #[test]
    fn finds_the_most_recent_resumable_of_its_type() {
        let mut s = AdapterStates::default();
        let (a, b, c) = (snap("x", true), snap("x", true), snap("y", true));
        s.push(&a);
        s.push(&b);
        s.push(&c);
        s.push(&snap("x", false));
        assert_eq!(s.find_resumable("x"), Some(&b));
        assert_eq!(s.find_resumable("z"), None);
        assert_eq!(s.len(), 4);
    }
}
