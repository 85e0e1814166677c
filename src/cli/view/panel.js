"use strict";
// The panel of one provider call: the request it sent (the messages, and
// the parameters a conversation's call records) and the response (the
// messages recorded for it). Texts go in with textContent only.
const AJPanel = (function () {
  const text = (e) => (e.type === "message" ? e.content : e.text);
  // [request messages, response messages] of the provider call P among the events E.
  function exchange(E, p) {
    if (p.type === "conversation_provider_call") {
      // A conversation's call names what it sent; its answer is what its
      // turn recorded from its start to its end.
      const byId = new Map();
      for (const e of E) if (e.type === "conversation_message") byId.set(e.message_id, e);
      const sent = (p.sent_messages || []).map((id) => byId.get(id)).filter(Boolean);
      let start = p.seq;
      for (const e of E) if (e.type === "conversation_provider_call" && e.id === p.id) { start = e.seq; break; }
      const got = E.filter((e) => e.type === "conversation_message" && e.turn === p.turn && e.role === "assistant" && e.seq > start && e.seq <= p.seq + 1);
      return [sent, got];
    }
    // An inner-loop call of turn N answered with the assistant message of
    // turn N; it sent the evaluation's messages before that one.
    const mine = E.filter((e) => e.type === "message" && e.evaluation === p.evaluation);
    const got = mine.filter((e) => e.role === "assistant" && e.turn === p.turn);
    const end = got.length ? got[0].seq : p.seq;
    return [mine.filter((e) => e.seq < end), got];
  }
  function render(box, E, p, el) {
    const [sent, got] = exchange(E, p);
    const d = el("div", "panel");
    d.id = "provider-call";
    d.dataset.seq = String(p.seq);
    d.dataset.sent = String(sent.length);
    d.dataset.received = String(got.length);
    const ok = p.ok === null ? "running" : p.ok ? "ok" : "failed";
    d.append(el("h2", "", "Provider call " + p.provider + "/" + p.model + " · " + ok + (p.error ? ": " + p.error : "")));
    if (p.parameters && Object.keys(p.parameters).length) d.append(el("pre", "json", AJText.pretty(p.parameters)));
    const list = (title, msgs, cls) => {
      d.append(el("h3", "", title + " (" + msgs.length + " message" + (msgs.length === 1 ? "" : "s") + ")"));
      for (const m of msgs) {
        const b = el("div", "msg " + cls);
        b.dataset.role = m.role;
        const hd = el("div", "hd");
        hd.append(el("b", "", m.role), el("span", "", "seq " + m.seq));
        b.append(hd, el("div", "body", m.tool_call_id ? AJText.pretty(text(m)) : text(m)));
        for (const c of m.tool_calls || []) b.append(el("div", "tc", "→ " + c.name + "  [" + c.call_id + "]\n" + AJText.pretty(c.arguments)));
        d.append(b);
      }
    };
    list("Request", sent, "sent");
    list("Response", got, "received");
    box.append(d);
  }
  return { render, exchange };
})();
