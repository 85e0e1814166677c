"""The adapter-state spec's dataclasses, placed at the module path the
crate writes (weakincentives.runtime.adapter_state) by the
interoperability test. Written from ../shared/seeds/adapter-state-spec.md;
the snapshot's `state` is the spec's ClaudeAgentSDKState (the spec types it
as the AdapterState protocol, which WINK's serde cannot construct)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime


@dataclass(slots=True, frozen=True)
class ClaudeAgentSDKState:
    session_id: str
    created_at: datetime
    last_activity_at: datetime
    workspace_path: str | None
    prompt_name: str
    message_count: int = 0
    is_complete: bool = False

    @property
    def adapter_type(self) -> str:
        return "claude_agent_sdk"

    @property
    def resumable(self) -> bool:
        return bool(self.session_id) and not self.is_complete


@dataclass(slots=True, frozen=True)
class AdapterStateSnapshot:
    state: ClaudeAgentSDKState
    captured_at: datetime
    evaluation_id: str
    supersedes: str | None = None
