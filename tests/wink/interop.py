"""Run by interop.mjs inside Pyodide (CPython 3.12) with WINK 0.27 and the
specs' dataclasses on the path. Reads /io/request.json:
  {"mode": "restore"}  reads /io/export.json (written by agent-journal) with
      Snapshot.from_json, restores it into a new WINK session, reports what
      the session holds and the spec's pending tool calls, and writes the
      session's own snapshot to /io/rewritten.json;
  {"mode": "write"}    builds InnerMessage items as WINK code would, writes
      the session's snapshot to /io/wink_written.json and the items (as
      WINK's serde dumps them) to /io/wink_items.json.
Writes /io/report.json."""

import json
from datetime import UTC, datetime, timedelta
from uuid import UUID

from weakincentives.runtime.session import Session, SlicePolicy, Snapshot
from weakincentives.runtime.session.reducers import append_all
from weakincentives.serde import dump
from weakincentives.runtime.inner_messages import (
    InnerMessage,
    ToolCallRecord,
    get_pending_tool_calls,
    inner_message_append,
)
from weakincentives.runtime.conversation import ConversationState
from weakincentives.runtime.adapter_state import AdapterStateSnapshot, ClaudeAgentSDKState


def new_session():
    session = Session()
    session[InnerMessage].register(InnerMessage, append_all)
    session[ConversationState].register(ConversationState, append_all)
    session[AdapterStateSnapshot].register(
        AdapterStateSnapshot, append_all, policy=SlicePolicy.LOG
    )
    return session


def restore():
    text = open("/io/export.json").read()
    snapshot = Snapshot.from_json(text)
    session = new_session()
    session.restore(snapshot, preserve_logs=False)
    messages = session[InnerMessage].all()
    evaluations = sorted({m.evaluation_id for m in messages})
    pending = {e: [tc.call_id for tc in get_pending_tool_calls(session, e)] for e in evaluations}
    states = session[ConversationState].all()
    adapters = session[AdapterStateSnapshot].all()
    report = {
        "messages": len(messages),
        "roles": [m.role for m in messages],
        "statuses": [tc.status for m in messages for tc in m.tool_calls],
        "pending": pending,
        "conversation_states": [
            {
                "evaluation_id": s.evaluation_id,
                "system": s.system_message.content,
                "turns": [len(t.tool_messages) for t in s.turns],
                "payload_kinds": [type(t.provider_payload).__name__ for t in s.turns],
            }
            for s in states
        ],
        "adapter_states": [
            {"session_id": a.state.session_id, "resumable": a.state.resumable, "supersedes": a.supersedes}
            for a in adapters
        ],
        "tags": sorted(snapshot.tags),
    }
    with open("/io/rewritten.json", "w") as f:
        f.write(session.snapshot(include_all=True).to_json())
    return report


def write():
    t0 = datetime(2026, 11, 24, 9, 30, 0, 123456, tzinfo=UTC)
    at = lambda k: t0 + timedelta(seconds=k)
    ev = "eval-1"
    items = [
        InnerMessage(role="system", content="You are terse.", evaluation_id=ev, sequence=0,
                     prompt_ns="demo", prompt_key="wink", created_at=at(0),
                     message_id=UUID("00000000-0000-4000-8000-000000000001")),
        InnerMessage(role="user", content="Read a and b.", evaluation_id=ev, sequence=1,
                     prompt_ns="demo", prompt_key="wink", created_at=at(1),
                     message_id=UUID("00000000-0000-4000-8000-000000000002")),
        InnerMessage(role="assistant", content="", evaluation_id=ev, sequence=2, turn=1,
                     tool_calls=(
                         ToolCallRecord(call_id="call_a", name="read_file", arguments='{"path": "a"}', status="completed"),
                         ToolCallRecord(call_id="call_b", name="read_file", arguments='{"path": "b"}'),
                     ),
                     prompt_ns="demo", prompt_key="wink", created_at=at(2),
                     message_id=UUID("00000000-0000-4000-8000-000000000003")),
        InnerMessage(role="tool", content="contents of a", evaluation_id=ev, sequence=3, turn=1,
                     tool_call_id="call_a", tool_name="read_file",
                     prompt_ns="demo", prompt_key="wink", created_at=at(3),
                     message_id=UUID("00000000-0000-4000-8000-000000000004")),
    ]
    session = new_session()
    for m in items:
        session.dispatch(m)
    state = ClaudeAgentSDKState(session_id="sdk-123", created_at=at(0), last_activity_at=at(3),
                                workspace_path="/work", prompt_name="demo:wink", message_count=4)
    session.dispatch(AdapterStateSnapshot(state=state, captured_at=at(3), evaluation_id=ev))
    with open("/io/wink_written.json", "w") as f:
        f.write(session.snapshot(include_all=True).to_json())
    with open("/io/wink_items.json", "w") as f:
        json.dump([dump(m) for m in session[InnerMessage].all()], f)
    return {"messages": len(items), "pending": [tc.call_id for tc in get_pending_tool_calls(session, ev)]}


request = json.load(open("/io/request.json"))
report = restore() if request["mode"] == "restore" else write()
with open("/io/report.json", "w") as f:
    json.dump(report, f, sort_keys=True)
