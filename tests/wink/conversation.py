"""The conversation-state spec's dataclasses, placed at the spec's module
path (weakincentives.runtime.conversation) by the interoperability test.
Written from ../shared/seeds/conversation-state-spec.md."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal
from uuid import UUID, uuid4


@dataclass(slots=True, frozen=True)
class ToolCallRecord:
    call_id: str
    name: str
    arguments: str


@dataclass(slots=True, frozen=True)
class ConversationMessage:
    role: Literal["system", "assistant", "user", "tool"]
    content: str
    tool_calls: tuple[ToolCallRecord, ...] = ()
    tool_call_id: str | None = None
    name: str | None = None
    created_at: datetime = field(default_factory=lambda: datetime.now(UTC))
    message_id: UUID = field(default_factory=uuid4)


@dataclass(slots=True, frozen=True)
class ConversationTurn:
    turn_number: int
    assistant_message: ConversationMessage
    tool_messages: tuple[ConversationMessage, ...] = ()
    provider_payload: Mapping[str, Any] | None = None
    evaluation_id: str = field(default_factory=lambda: str(uuid4()))
    created_at: datetime = field(default_factory=lambda: datetime.now(UTC))


@dataclass(slots=True, frozen=True)
class ConversationState:
    evaluation_id: str
    prompt_ns: str
    prompt_key: str
    system_message: ConversationMessage
    turns: tuple[ConversationTurn, ...] = ()
    created_at: datetime = field(default_factory=lambda: datetime.now(UTC))
    state_id: UUID = field(default_factory=uuid4)
