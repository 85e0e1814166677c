"use strict";
// The span tree: the session, its evaluations or turns, and under each its
// provider calls and tool calls, one row each with a bar on the shared time
// axis (idle gaps compressed to a break), its duration, tokens and cost.
// Statuses are the fold's (AJFold); texts go in with textContent only.
const AJTree = (function () {
  const MAX_ROWS = 2000;
  const ms = (t) => (t ? Date.parse(t) : NaN);
  // The spans of the events E: {kind, key, parent, label, start, end, seq, status, tokens, cost}.
  function spans(E, F, costs) {
    const out = new Map();
    const at = (kind, key) => out.get(kind + " " + key);
    const put = (kind, key, s) => {
      const old = at(kind, key);
      // The first event names a span and places it; later ones end it or add to it.
      const first = ["seq", "parent", "label", "args"];
      if (old) { for (const [k, v] of Object.entries(s)) if (v !== undefined && v !== null && !(first.includes(k) && old[k] !== undefined && old[k] !== null)) old[k] = v; return old; }
      const n = Object.assign({ kind, key, tokens: null, cost: null, end: null }, s);
      out.set(kind + " " + key, n);
      return n;
    };
    const callKey = (e, id) => (e.evaluation || e.turn) + "/" + id;
    const owner = (e) => (e.evaluation ? ["evaluation", e.evaluation] : e.turn ? ["turn", e.turn] : null);
    for (const e of E) {
      const t = ms(e.at);
      switch (e.type) {
        case "evaluation_started":
          put("evaluation", e.evaluation, { label: "evaluation " + e.prompt_ns + "/" + e.prompt_key, start: t, seq: e.seq });
          break;
        case "evaluation_finished":
          put("evaluation", e.evaluation, { end: t, endSeq: e.seq });
          break;
        case "turn":
          put("turn", e.turn, { label: "turn " + e.agent, start: ms(e.started_at), end: ms(e.finished_at) || null, seq: e.seq, endSeq: e.seq });
          break;
        case "provider_call": {
          const s = put("provider_call", String(e.seq), { parent: ["evaluation", e.evaluation], label: e.provider + "/" + e.model, start: ms(e.started_at), end: ms(e.finished_at), seq: e.seq, status: e.ok ? "ok" : "failed", error: e.error });
          s.tokens = { input: e.input_tokens, output: e.output_tokens };
          s.cost = costs[String(e.seq)] ?? null;
          break;
        }
        case "conversation_provider_call": {
          const s = put("provider_call", e.id, { parent: ["turn", e.turn], label: e.provider + "/" + e.model, start: ms(e.started_at), end: ms(e.finished_at) || null, seq: e.seq, endSeq: e.seq });
          if (e.input_tokens !== null) s.tokens = { input: e.input_tokens, output: e.output_tokens };
          s.cost = costs[e.id] ?? null;
          break;
        }
        case "message":
        case "conversation_message": {
          const o = owner(e);
          if (o && e.type === "message" && !at(o[0], o[1])) put(o[0], o[1], { label: "evaluation " + o[1].slice(-8), start: t, seq: e.seq });
          for (const c of e.tool_calls) put("call", callKey(e, c.call_id), { parent: o, label: c.name + " " + c.call_id, start: t, seq: e.seq, args: c.arguments });
          if (e.tool_call_id) { const s = at("call", callKey(e, e.tool_call_id)); if (s && s.end === null) { s.end = t; s.endSeq = e.seq; } }
          break;
        }
        case "tool_status": {
          const s = put("call", callKey(e, e.call_id), { parent: ["evaluation", e.evaluation], label: e.call_id, start: t, seq: e.seq });
          if (e.status === "started") s.start = t;
          if (e.status === "completed" || e.status === "failed") { s.end = t; s.endSeq = e.seq; }
          break;
        }
      }
    }
    const last = E.length ? E[E.length - 1].seq : 0;
    for (const s of out.values()) {
      if (s.kind === "call") { const st = F.call(s.key, last); s.status = st.status; s.error = st.error; }
      else if (s.kind !== "provider_call" || s.status === undefined) { const st = F.final(s.kind, s.key); if (st) { s.status = st.status; s.error = st.error; } }
      if (!s.status) s.status = "untracked";
    }
    return [...out.values()];
  }

  // Renders the tree of SPANS into BOX on AXIS; PICK(seq) scrubs to an event.
  function render(box, all, axis, el, pick, total) {
    box.textContent = "";
    box.dataset.spanMs = String(Math.round(axis.t1 - axis.t0));
    const groups = all.filter((s) => s.kind === "evaluation" || s.kind === "turn").sort((a, b) => a.seq - b.seq);
    const children = new Map();
    const orphans = [];
    const groupKeys = new Set(groups.map((g) => g.kind + " " + g.key));
    for (const s of all) {
      if (s.kind === "evaluation" || s.kind === "turn") continue;
      // A tool status names an evaluation; a conversation turn's id stands for it.
      const known = (k) => groupKeys.has(k);
      let p = s.parent ? s.parent[0] + " " + s.parent[1] : null;
      if (p && !known(p) && s.parent[0] === "evaluation") p = "turn " + s.parent[1];
      if (p && known(p)) { if (!children.has(p)) children.set(p, []); children.get(p).push(s); } else orphans.push(s);
    }
    const rows = [[total, 0]];
    for (const g of groups) {
      rows.push([g, 1]);
      for (const c of (children.get(g.kind + " " + g.key) || []).sort((a, b) => a.seq - b.seq)) rows.push([c, 2]);
    }
    for (const o of orphans.sort((a, b) => a.seq - b.seq)) rows.push([o, 1]);
    const head = el("div", "tree-head");
    head.append(el("span", "", "span"), el("span", "axis", ""), el("span", "", "duration"), el("span", "", "tokens"), el("span", "", "cost"));
    box.append(head);
    const span = (s, depth) => {
      const r = el("div", "span st-row-" + s.status);
      r.dataset.kind = s.kind; r.dataset.key = s.key; r.dataset.status = s.status;
      const name = el("span", "name", s.label + (s.kind === "session" ? "" : " · " + s.status));
      name.style.paddingLeft = depth * 14 + "px";
      name.title = s.label + "\n" + s.status + (s.error ? ": " + s.error : "");
      const track = el("span", "track");
      const open = s.end === null || Number.isNaN(s.end);
      if (!Number.isNaN(s.start)) {
        const x0 = axis.frac(s.start), x1 = open ? 1 : axis.frac(s.end);
        const bar = el("i", "bar st-bar-" + s.status + (open ? " open" : ""));
        bar.style.left = (x0 * 100).toFixed(3) + "%";
        bar.style.width = Math.max(0.3, (x1 - x0) * 100).toFixed(3) + "%";
        track.append(bar);
      }
      const dur = open ? "no end" : AJText.duration(s.end - s.start);
      const tok = s.tokens ? s.tokens.input + " in / " + s.tokens.output + " out" : "";
      r.append(name, track, el("span", "dur", dur), el("span", "tok", tok), el("span", "cost", AJText.usd(s.cost)));
      if (s.seq !== undefined) r.addEventListener("click", () => pick(s.seq));
      return r;
    };
    let n = 0;
    for (const [s, depth] of rows) {
      if (n++ >= MAX_ROWS) { box.append(el("p", "note", (rows.length - MAX_ROWS) + " more spans not drawn; the event list has them all")); break; }
      box.append(span(s, depth));
    }
    // The breaks: one stripe over every track per compressed gap.
    for (const g of axis.gaps) {
      const x = (axis.frac(g.a) + axis.frac(g.b)) / 2;
      const b = el("div", "break", "idle " + AJText.duration(g.b - g.a));
      b.dataset.ms = String(Math.round(g.b - g.a));
      b.dataset.share = (axis.frac(g.b) - axis.frac(g.a)).toFixed(4);
      b.style.left = "calc(var(--name) + (100% - var(--name) - var(--cols)) * " + x.toFixed(4) + ")";
      box.append(b);
    }
  }
  return { spans, render };
})();
