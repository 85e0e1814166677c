//! The messages a converter has made and may still change, and the hand-off
//! of the ones it no longer can.
//!
//! A converter reads a provider's message list in order; a tool result
//! changes the status of the call an earlier message made. So a message
//! whose calls are all answered (or that makes none) is final, and so is
//! every message before it: [`Window::settle`] hands those on, in order, to
//! the sink, which writes them to the journal as they come (an import) or
//! collects them. What stays in memory is the run of messages from the
//! oldest one with an unanswered call: in a valid history, a turn.

use std::collections::VecDeque;

use crate::error::{Error, Result};
use crate::model::{InnerMessage, ToolStatus};

/// Where settled messages go.
pub(crate) type Sink<'a> = dyn FnMut(InnerMessage) -> Result<()> + 'a;

/// The messages of a conversion not yet handed on, indexed by their place
/// in the whole conversion.
pub(crate) struct Window<'a> {
    held: VecDeque<InnerMessage>,
    /// The place of `held[0]`: how many were handed on.
    start: usize,
    sink: &'a mut Sink<'a>,
}

impl<'a> Window<'a> {
    /// An empty window handing messages on to `sink`.
    pub(crate) fn new(sink: &'a mut Sink<'a>) -> Self {
        Window {
            held: VecDeque::new(),
            start: 0,
            sink,
        }
    }

    /// How many messages the conversion has made so far.
    pub(crate) fn len(&self) -> usize {
        self.start + self.held.len()
    }

    pub(crate) fn push(&mut self, m: InnerMessage) {
        self.held.push_back(m);
    }

    /// The message made at place `at`, while it is held.
    pub(crate) fn get(&self, at: usize) -> Option<&InnerMessage> {
        self.held.get(at.checked_sub(self.start)?)
    }

    /// The message made at place `at`, to change it.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] if it was handed on already (a converter only
    /// changes messages with an unanswered call, which are held).
    pub(crate) fn at_mut(&mut self, at: usize) -> Result<&mut InnerMessage> {
        let start = self.start;
        at.checked_sub(start)
            .and_then(|i| self.held.get_mut(i))
            .ok_or_else(|| {
                Error::InvalidInput(format!(
                    "message {at} is changed after it was written (the first {start} were)"
                ))
            })
    }

    /// The messages held from place `from` on.
    pub(crate) fn from(&self, from: usize) -> impl Iterator<Item = &InnerMessage> {
        self.held.iter().skip(from.saturating_sub(self.start))
    }

    /// Hands on the messages before the oldest one with an unanswered call.
    ///
    /// # Errors
    /// What the sink returns.
    pub(crate) fn settle(&mut self) -> Result<()> {
        while self
            .held
            .front()
            .is_some_and(|m| m.tool_calls.iter().all(|c| c.status != ToolStatus::Pending))
        {
            if let Some(m) = self.held.pop_front() {
                self.start += 1;
                (self.sink)(m)?;
            }
        }
        Ok(())
    }

    /// Hands on every message held.
    ///
    /// # Errors
    /// What the sink returns.
    pub(crate) fn finish(&mut self) -> Result<()> {
        while let Some(m) = self.held.pop_front() {
            self.start += 1;
            (self.sink)(m)?;
        }
        Ok(())
    }
}

/// Runs `convert` on a window whose sink collects the messages.
///
/// # Errors
/// What `convert` returns.
pub(crate) fn collect(
    convert: impl FnOnce(&mut Window<'_>) -> Result<()>,
) -> Result<Vec<InnerMessage>> {
    let mut out = Vec::new();
    {
        let mut push = |m| {
            out.push(m);
            Ok(())
        };
        let mut w = Window::new(&mut push);
        convert(&mut w)?;
        w.finish()?;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{EvaluationId, Role, ToolCallRecord};

    #[test]
    fn a_message_with_an_unanswered_call_holds_it_and_everything_after() {
        let eval = EvaluationId::new();
        let mut seen = Vec::new();
        let mut sink = |m: InnerMessage| {
            seen.push(m.sequence);
            Ok(())
        };
        let mut w = Window::new(&mut sink);
        w.push(InnerMessage::new(Role::User, "q", eval, 0));
        let mut a = InnerMessage::new(Role::Assistant, "", eval, 1);
        a.tool_calls.push(ToolCallRecord::new("c", "t", "{}"));
        w.push(a);
        w.push(InnerMessage::new(Role::User, "later", eval, 2));
        w.settle().expect("settle");
        assert_eq!(w.len(), 3);
        assert!(w.get(0).is_none() && w.get(1).is_some());
        assert_eq!(w.from(1).count(), 2);
        w.at_mut(1).expect("held").tool_calls[0].status = ToolStatus::Completed;
        w.settle().expect("settle");
        assert!(w.at_mut(1).is_err(), "written");
        w.finish().expect("finish");
        drop(w);
        assert_eq!(seen, [0, 1, 2]);
    }
}
