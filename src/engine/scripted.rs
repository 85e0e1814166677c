//! A deterministic, offline provider that follows a script.

use crate::engine::provider::{Provider, ProviderRequest, ProviderResponse};
use crate::event::TokenUsage;
use crate::model::{Role, ToolCallRecord};

/// One scripted assistant response.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScriptStep {
    /// The assistant's text. `{results}` is replaced by the contents of the
    /// tool results of the previous turn, joined with `"; "`.
    pub content: String,
    /// Tool calls: `(tool name, JSON arguments)`. Call ids are
    /// `call_<turn>_<k>`, so a replay of the script gives the same ids.
    pub calls: Vec<(String, String)>,
}

/// Answers turn `t` with step `t - 1` of its script; past the end, with a
/// final answer. Depends only on the request, so a resumed run continues
/// exactly as an uninterrupted one would.
#[derive(Clone, Debug)]
pub struct ScriptedProvider {
    steps: Vec<ScriptStep>,
    model: String,
}

impl ScriptedProvider {
    /// A provider following `steps`.
    pub fn new(steps: Vec<ScriptStep>) -> Self {
        Self {
            steps,
            model: "scripted-1".into(),
        }
    }
}

impl Provider for ScriptedProvider {
    fn name(&self) -> &str {
        "scripted"
    }

    fn complete(&self, request: &ProviderRequest<'_>) -> Result<ProviderResponse, String> {
        let index = request.turn.saturating_sub(1) as usize;
        let last_turn = request.turn.saturating_sub(1);
        let results: Vec<&str> = request
            .messages
            .iter()
            .filter(|m| m.role == Role::Tool && m.turn == last_turn)
            .map(|m| m.content.as_str())
            .collect();
        let input: u64 = request
            .messages
            .iter()
            .map(|m| m.content.len() as u64 / 4 + 4)
            .sum();
        let (content, calls) = match self.steps.get(index) {
            Some(step) => (
                step.content.replace("{results}", &results.join("; ")),
                step.calls.clone(),
            ),
            None => ("(end of script)".to_owned(), Vec::new()),
        };
        let tool_calls = calls
            .into_iter()
            .enumerate()
            .map(|(k, (name, args))| {
                ToolCallRecord::new(format!("call_{}_{}", request.turn, k + 1), name, args)
            })
            .collect();
        Ok(ProviderResponse {
            usage: TokenUsage {
                input_tokens: input,
                output_tokens: content.len() as u64 / 4 + 1,
                ..TokenUsage::default()
            },
            content,
            tool_calls,
            model: self.model.clone(),
            provider_payload: None,
        })
    }
}
