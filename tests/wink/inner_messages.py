"""The inner-messages spec's dataclasses, placed at the spec's module path
(weakincentives.runtime.inner_messages) by the interoperability test.
Written from ../shared/seeds/inner-messages-spec.md."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Literal
from uuid import UUID, uuid4


@dataclass(slots=True, frozen=True)
class ToolCallRecord:
    call_id: str
    name: str
    arguments: str  # JSON-encoded arguments
    status: Literal["pending", "completed", "failed"] = "pending"


@dataclass(slots=True, frozen=True)
class InnerMessage:
    role: Literal["system", "assistant", "user", "tool"]
    content: str
    evaluation_id: str
    sequence: int
    tool_calls: tuple[ToolCallRecord, ...] = ()
    tool_call_id: str | None = None
    tool_name: str | None = None
    turn: int = 0
    prompt_ns: str = ""
    prompt_key: str = ""
    created_at: datetime = field(default_factory=lambda: datetime.now(UTC))
    message_id: UUID = field(default_factory=uuid4)


def inner_message_append(slice_values, event, *, context=None):
    """The spec's reducer (as WINK 0.27 calls reducers: the slice's values
    and the event)."""
    values = tuple(getattr(slice_values, "values", slice_values) or ())
    if event.message_id in {m.message_id for m in values}:
        return values
    result = list(values)
    insert_idx = len(result)
    for i, msg in enumerate(result):
        if msg.evaluation_id == event.evaluation_id:
            if msg.sequence > event.sequence:
                insert_idx = i
                break
        elif msg.evaluation_id > event.evaluation_id:
            insert_idx = i
            break
    result.insert(insert_idx, event)
    return tuple(result)


def get_inner_messages(session, evaluation_id=None):
    messages = session[InnerMessage].all()
    if evaluation_id is not None:
        messages = tuple(m for m in messages if m.evaluation_id == evaluation_id)
    return tuple(sorted(messages, key=lambda m: (m.evaluation_id, m.sequence)))


def get_pending_tool_calls(session, evaluation_id):
    """The spec's query: calls of assistant messages with no tool result."""
    messages = get_inner_messages(session, evaluation_id)
    completed_ids = {m.tool_call_id for m in messages if m.role == "tool" and m.tool_call_id}
    pending = []
    for msg in messages:
        if msg.role == "assistant":
            for tc in msg.tool_calls:
                if tc.call_id not in completed_ids:
                    pending.append(tc)
    return tuple(pending)
