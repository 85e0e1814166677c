//! The filters of `log` and `show`: `--type`, `--tool`, `--evaluation`,
//! `--grep`, and `--full`.

use std::collections::HashMap;

use agent_journal::conversation::ConversationEvent;
use agent_journal::{Envelope, Error, Event, Session};
use clap::Args;
use regex::Regex;

use crate::cli::{event_json, style};

/// The roles `show --type` takes.
const ROLES: &[&str] = &["system", "user", "assistant", "tool"];

/// The filter options shared by `log` and `show`.
#[derive(Args, Debug, Default)]
pub(crate) struct FilterArgs {
    /// Whole message contents and tool arguments (still one line an event
    /// in `log`; line breaks show as `\n`).
    #[arg(long)]
    pub(crate) full: bool,
    /// `log`: only events of these types (`message`, `tool_status`,
    /// `provider_call`, ...: the word `log` prints, the `type` of
    /// `log --json`; the older `ToolStatus` spelling is taken too); `show`: only
    /// messages of these roles (`user`, `assistant`, `tool`, `system`).
    /// Repeat it or separate with commas.
    #[arg(long = "type", value_name = "TYPE", value_delimiter = ',')]
    pub(crate) types: Vec<String>,
    /// Only what concerns the tool NAME: the calls to it, their status
    /// changes and their results.
    #[arg(long, value_name = "NAME")]
    pub(crate) tool: Option<String>,
    /// Only this evaluation (or conversation turn): its id, or a unique
    /// prefix or suffix of it (the 8 digits the text shows).
    #[arg(long, value_name = "ID")]
    pub(crate) evaluation: Option<String>,
    /// Only events (`show`: messages and tool calls) whose text matches
    /// this regular expression: contents, arguments, ids, errors. `(?i)`
    /// makes it ignore case.
    #[arg(long, value_name = "REGEX")]
    pub(crate) grep: Option<String>,
}

/// The filter, compiled.
pub(crate) struct Filter {
    types: Vec<String>,
    tool: Option<String>,
    evaluation: Option<String>,
    grep: Option<Regex>,
    /// Call ids to tool names, learnt from the events seen.
    calls: HashMap<String, String>,
}

/// True when `id` (a full id) is named by `text`: equal, a prefix or a suffix.
pub(crate) fn names(id: &str, text: &str) -> bool {
    let text = text.to_ascii_lowercase();
    id.starts_with(&text) || id.ends_with(&text)
}

impl Filter {
    /// Compiles `args` for `log` (types are event types) or `show` (roles).
    ///
    /// # Errors
    /// [`Error::InvalidInput`] for an unknown type or a bad regex.
    pub(crate) fn new(args: &FilterArgs, for_log: bool) -> Result<Filter, Error> {
        style::set_full(args.full);
        let mut types = Vec::new();
        for t in &args.types {
            let found = if for_log {
                // The type of `log --json`, or the spelling the text of
                // `log` showed before (`ToolStatus`), taken as its alias.
                event_json::KINDS
                    .iter()
                    .find(|(word, old)| t == word || t == old)
                    .map(|(word, _)| *word)
            } else {
                ROLES.iter().copied().find(|r| r == t)
            };
            match found {
                Some(word) => types.push(word.to_owned()),
                None => {
                    let mut known: Vec<&str> = if for_log {
                        event_json::KINDS.iter().map(|(w, _)| *w).collect()
                    } else {
                        ROLES.to_vec()
                    };
                    known.dedup();
                    return Err(Error::InvalidInput(format!(
                        "--type {t:?}: not one of {}",
                        known.join(", ")
                    )));
                }
            }
        }
        let grep = match &args.grep {
            Some(p) => {
                Some(Regex::new(p).map_err(|e| Error::InvalidInput(format!("--grep {p:?}: {e}")))?)
            }
            None => None,
        };
        Ok(Filter {
            types,
            tool: args.tool.clone(),
            evaluation: args.evaluation.clone(),
            grep,
            calls: HashMap::new(),
        })
    }

    /// True when it lets everything through.
    pub(crate) fn is_empty(&self) -> bool {
        self.types.is_empty()
            && self.tool.is_none()
            && self.evaluation.is_none()
            && self.grep.is_none()
    }

    /// Learns the tool calls of `s` before seq `from` (for `--tool` on a
    /// range that starts after them).
    pub(crate) fn learn_before(&mut self, s: &Session, from: u64) -> Result<(), Error> {
        if self.tool.is_some() && from > 0 {
            s.for_each_event(0..from, |e| {
                self.learn(&e.event);
                Ok(())
            })?;
        }
        Ok(())
    }

    fn learn(&mut self, event: &Event) {
        let calls = match event {
            Event::Message(m) => &m.tool_calls,
            Event::Conversation(c) => match &**c {
                ConversationEvent::Message(m) => &m.tool_calls,
                _ => return,
            },
            _ => return,
        };
        for c in calls {
            self.calls
                .insert(c.call_id.as_str().to_owned(), c.name.clone());
        }
    }

    /// The tool names an event concerns.
    fn tools_of<'a>(&'a self, event: &'a Event) -> Vec<&'a str> {
        let name = |id: &str| self.calls.get(id).map(String::as_str);
        match event {
            Event::Message(m) => m
                .tool_calls
                .iter()
                .map(|c| c.name.as_str())
                .chain(m.tool_name.as_deref())
                .chain(m.tool_call_id.as_ref().and_then(|c| name(c.as_str())))
                .collect(),
            Event::ToolStatus { call_id, .. } => name(call_id.as_str()).into_iter().collect(),
            Event::Conversation(c) => match &**c {
                ConversationEvent::Message(m) => m
                    .tool_calls
                    .iter()
                    .map(|c| c.name.as_str())
                    .chain(m.tool_call_id.as_ref().and_then(|c| name(c.as_str())))
                    .collect(),
                _ => Vec::new(),
            },
            _ => Vec::new(),
        }
    }

    /// The evaluation or turn ids an event belongs to.
    fn owners(event: &Event) -> Vec<String> {
        if let Some(e) = event.evaluation_id() {
            return vec![e.to_string()];
        }
        match event {
            Event::Conversation(c) => match &**c {
                ConversationEvent::Message(m) => m.turn_id.iter().map(|t| t.to_string()).collect(),
                ConversationEvent::Turn(t) => vec![t.id.to_string()],
                ConversationEvent::ProviderCall(p) => vec![p.turn_id.to_string()],
                ConversationEvent::Compacted(c) => {
                    c.turn_id.iter().map(|t| t.to_string()).collect()
                }
                _ => Vec::new(),
            },
            _ => Vec::new(),
        }
    }

    /// True when `log` shows event `e`.
    pub(crate) fn event(&mut self, e: &Envelope) -> bool {
        self.learn(&e.event);
        if self.is_empty() {
            return true;
        }
        if !self.types.is_empty() {
            let ty = event_json::kind(&e.event);
            if !self.types.iter().any(|t| t == ty) {
                return false;
            }
        }
        if let Some(tool) = &self.tool {
            if !self.tools_of(&e.event).contains(&tool.as_str()) {
                return false;
            }
        }
        if let Some(id) = &self.evaluation {
            if !Self::owners(&e.event).iter().any(|o| names(o, id)) {
                return false;
            }
        }
        match &self.grep {
            Some(re) => re.is_match(&event_json::event(e).to_string()),
            None => true,
        }
    }

    /// `show`: true when a message (role, text, tool names) passes.
    pub(crate) fn message(&self, role: &str, text: &str, tools: &[&str]) -> bool {
        (self.types.is_empty() || self.types.iter().any(|t| t == role))
            && self
                .tool
                .as_ref()
                .is_none_or(|t| tools.contains(&t.as_str()))
            && self.grep.as_ref().is_none_or(|re| re.is_match(text))
    }

    /// `show`: true when a tool call (name, arguments, id) passes.
    pub(crate) fn call(&self, name: &str, text: &str) -> bool {
        self.tool.as_ref().is_none_or(|t| t == name)
            && self.grep.as_ref().is_none_or(|re| re.is_match(text))
    }

    /// `show`: true when an evaluation passes `--evaluation`.
    pub(crate) fn evaluation(&self, id: &str) -> bool {
        self.evaluation.as_ref().is_none_or(|e| names(id, e))
    }
}
