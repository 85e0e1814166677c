//! Type erasure for application slices and the registry of their factories.

use std::any::Any;
use std::fmt;

use bincode::Options;

use crate::error::{Error, Result};
use crate::event::Envelope;
use crate::format::codec;
use crate::state::{Slice, SlicePolicy};

/// An application slice behind a trait object.
pub(crate) trait DynSlice: Send + Sync {
    /// [`Slice::NAME`].
    fn name(&self) -> &'static str;
    /// [`Slice::POLICY`].
    fn policy(&self) -> SlicePolicy;
    /// [`Slice::apply`].
    fn apply(&mut self, envelope: &Envelope);
    /// The concrete slice, for downcasting.
    fn as_any(&self) -> &dyn Any;
    /// A boxed copy.
    fn clone_box(&self) -> Box<dyn DynSlice>;
    /// A boxed slice of the same type at its default value.
    fn fresh(&self) -> Box<dyn DynSlice>;
    /// The slice's bincode bytes (the crate's codec, with `limit`).
    fn encode(&self, limit: u64) -> Result<Vec<u8>>;
    /// The slice as a JSON value.
    fn to_json(&self) -> std::result::Result<serde_json::Value, String>;
}

struct SliceBox<S>(S);

impl<S: Slice> DynSlice for SliceBox<S> {
    fn name(&self) -> &'static str {
        S::NAME
    }
    fn policy(&self) -> SlicePolicy {
        S::POLICY
    }
    fn apply(&mut self, envelope: &Envelope) {
        self.0.apply(envelope);
    }
    fn as_any(&self) -> &dyn Any {
        &self.0
    }
    fn clone_box(&self) -> Box<dyn DynSlice> {
        Box::new(SliceBox(self.0.clone()))
    }
    fn fresh(&self) -> Box<dyn DynSlice> {
        make::<S>()
    }
    fn encode(&self, limit: u64) -> Result<Vec<u8>> {
        codec(limit).serialize(&self.0).map_err(|e| match *e {
            bincode::ErrorKind::SizeLimit => Error::TooLarge {
                size: bincode::DefaultOptions::new()
                    .serialized_size(&self.0)
                    .unwrap_or(u64::MAX),
                limit,
            },
            other => Error::InvalidInput(format!("cannot encode slice {}: {other}", S::NAME)),
        })
    }
    fn to_json(&self) -> std::result::Result<serde_json::Value, String> {
        serde_json::to_value(&self.0).map_err(|e| e.to_string())
    }
}

fn make<S: Slice>() -> Box<dyn DynSlice> {
    Box::new(SliceBox(S::default()))
}

fn decode<S: Slice>(bytes: &[u8], limit: u64) -> Made {
    let s: S = codec(limit).deserialize(bytes).map_err(|e| e.to_string())?;
    Ok(Box::new(SliceBox(s)))
}

fn from_json<S: Slice>(value: &serde_json::Value) -> Made {
    let s = S::deserialize(value).map_err(|e| e.to_string())?;
    Ok(Box::new(SliceBox(s)))
}

/// A boxed slice, or why it could not be made.
type Made = std::result::Result<Box<dyn DynSlice>, String>;

/// How to make, decode and parse one application slice type.
#[derive(Clone, Copy)]
pub(crate) struct SliceFactory {
    /// [`Slice::NAME`].
    pub(crate) name: &'static str,
    /// [`Slice::POLICY`].
    pub(crate) policy: SlicePolicy,
    /// The slice at its default value.
    pub(crate) make: fn() -> Box<dyn DynSlice>,
    /// The slice from its bincode bytes.
    pub(crate) decode: fn(&[u8], u64) -> Made,
    /// The slice from its JSON value.
    pub(crate) from_json: fn(&serde_json::Value) -> Made,
}

/// The application slices a [`SessionState`](crate::state::SessionState) carries,
/// in registration order.
///
/// ```
/// # use agent_journal::Envelope;
/// # use agent_journal::state::{SessionState, Slice, SliceRegistry};
/// # #[derive(Clone, Default, serde::Serialize, serde::Deserialize)]
/// # struct Counter(u64);
/// # impl Slice for Counter {
/// #     const NAME: &'static str = "myapp:Counter";
/// #     fn apply(&mut self, _: &Envelope) { self.0 += 1 }
/// # }
/// let mut registry = SliceRegistry::default();
/// registry.register::<Counter>();
/// let state = SessionState::with_slices(&registry);
/// assert_eq!(state.slice::<Counter>().map(|c| c.0), Some(0));
/// ```
#[derive(Clone, Default)]
pub struct SliceRegistry {
    factories: Vec<SliceFactory>,
}

impl SliceRegistry {
    /// An empty registry (built-in slices only).
    pub fn new() -> Self {
        Self::default()
    }

    /// Registers the slice type `S`. Registering a second type under the same
    /// [`Slice::NAME`] replaces the first one, keeping its position.
    pub fn register<S: Slice>(&mut self) -> &mut Self {
        let factory = SliceFactory {
            name: S::NAME,
            policy: S::POLICY,
            make: make::<S>,
            decode: decode::<S>,
            from_json: from_json::<S>,
        };
        match self.factories.iter_mut().find(|f| f.name == S::NAME) {
            Some(existing) => *existing = factory,
            None => self.factories.push(factory),
        }
        self
    }

    /// The registered slice names, in registration order.
    pub fn names(&self) -> impl Iterator<Item = &'static str> + '_ {
        self.factories.iter().map(|f| f.name)
    }

    /// Number of registered slices.
    pub fn len(&self) -> usize {
        self.factories.len()
    }

    /// True when no application slice is registered.
    pub fn is_empty(&self) -> bool {
        self.factories.is_empty()
    }

    pub(crate) fn factories(&self) -> &[SliceFactory] {
        &self.factories
    }

    pub(crate) fn find(&self, name: &str) -> Option<&SliceFactory> {
        self.factories.iter().find(|f| f.name == name)
    }
}

impl fmt::Debug for SliceRegistry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SliceRegistry")
            .field(
                "slices",
                &self.factories.iter().map(|f| f.name).collect::<Vec<_>>(),
            )
            .finish()
    }
}
