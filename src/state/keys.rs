//! [`EvaluationId`] as an ordered map key, compared as one `u128`.
//!
//! The slices look evaluations up in `BTreeMap`s several times per event;
//! comparing ids as byte arrays calls `memcmp` at each step. A UUID's bytes
//! are big-endian, so the `u128` orders exactly as the id does. Serde and
//! `Debug` go through the id, so serialized forms are unchanged.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use uuid::Uuid;

use crate::model::EvaluationId;

#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct EvalKey(u128);

impl EvalKey {
    pub(crate) fn id(self) -> EvaluationId {
        EvaluationId(Uuid::from_u128(self.0))
    }
}

impl From<EvaluationId> for EvalKey {
    fn from(id: EvaluationId) -> Self {
        EvalKey(id.0.as_u128())
    }
}

impl fmt::Debug for EvalKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.id(), f)
    }
}

impl Serialize for EvalKey {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.id().serialize(s)
    }
}

impl<'de> Deserialize<'de> for EvalKey {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        EvaluationId::deserialize(d).map(EvalKey::from)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn orders_as_the_id_and_round_trips() {
        let ids: Vec<EvaluationId> = [0u128, 1, 255, 256, u128::MAX / 3, u128::MAX]
            .iter()
            .map(|n| EvaluationId(Uuid::from_u128(*n)))
            .chain((1..50u128).map(|i| {
                EvaluationId(Uuid::from_u128(
                    i.wrapping_mul(0x9e37_79b9_7f4a_7c15_f39c_c060_5ced_c835),
                ))
            }))
            .chain((0..5).map(|_| EvaluationId::new()))
            .collect();
        for a in &ids {
            assert_eq!(EvalKey::from(*a).id(), *a);
            for b in &ids {
                assert_eq!(EvalKey::from(*a).cmp(&EvalKey::from(*b)), a.cmp(b));
            }
        }
        let k = EvalKey::from(ids[3]);
        assert_eq!(format!("{k:?}"), format!("{:?}", ids[3]));
        let json = serde_json::to_string(&k).expect("json");
        assert_eq!(json, serde_json::to_string(&ids[3]).expect("json"));
    }
}
