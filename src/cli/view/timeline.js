"use strict";
// The timeline of one session: lanes drawn on a canvas, a virtualised event
// list, and the state folded up to the scrubbed event. Every text of the
// journal reaches the page through textContent, never as markup.
(function () {
  const D = JSON.parse(document.getElementById("journal-data").textContent);
  const E = D.events;
  const ROW = 20;
  const RANK = { pending: 0, started: 1, failed: 2, completed: 3 };
  const COLOUR = {
    completed: "#2e9e5b", succeeded: "#2e9e5b", ok: "#2e9e5b", failed: "#d64545",
    "in_doubt": "#e0a030", pending: "#9aa3b2", cancelled: "#777f8c", running: "#4a7bd0",
  };
  const $ = (id) => document.getElementById(id);
  const el = (tag, cls, text) => {
    const n = document.createElement(tag);
    if (cls) n.className = cls;
    if (text !== undefined && text !== null) n.textContent = String(text);
    return n;
  };
  const ms = (t) => (t ? Date.parse(t) : NaN);
  const clip = (s, n) => { s = String(s ?? "").replace(/\s+/g, " "); return s.length > n ? s.slice(0, n - 1) + "…" : s; };
  const today = new Date().toDateString();
  function when(t) {
    const d = new Date(t);
    const time = d.toLocaleTimeString(undefined, { hour12: false }) + "." + String(d.getMilliseconds()).padStart(3, "0");
    return d.toDateString() === today ? time : d.toLocaleDateString() + " " + time;
  }
  const zone = Intl.DateTimeFormat().resolvedOptions().timeZone || "local time";

  // ---- derived data over all events: call names, spans of the lanes ----
  let callName = new Map();
  let spans = [];
  let lanes = [];
  function derive() {
    callName = new Map();
    const open = new Map();
    spans = [];
    const laneSet = new Map();
    const lane = (name) => { if (!laneSet.has(name)) laneSet.set(name, laneSet.size); return name; };
    const groupLane = E.some((e) => e.type === "turn") ? "turns" : "evaluations";
    lane(groupLane);
    lane("provider calls");
    const byKey = new Map();
    const span = (key, s) => {
      const old = byKey.get(key);
      if (old) { Object.assign(old, s); return old; }
      byKey.set(key, s); spans.push(s); return s;
    };
    for (const e of E) {
      const t = ms(e.at);
      switch (e.type) {
        case "evaluation_started":
          span("e" + e.evaluation, { lane: groupLane, start: t, end: null, status: "running", label: "evaluation " + e.prompt_ns + "/" + e.prompt_key, seq: e.seq });
          break;
        case "evaluation_finished":
          span("e" + e.evaluation, { end: t, status: e.outcome, endSeq: e.seq });
          break;
        case "turn":
          span("t" + e.turn, { lane: groupLane, start: ms(e.started_at), end: ms(e.finished_at) || null, status: e.status === "completed" ? "succeeded" : e.status, label: "turn " + e.agent + " " + e.status, seq: byKey.has("t" + e.turn) ? byKey.get("t" + e.turn).seq : e.seq, endSeq: e.seq });
          break;
        case "provider_call":
          span("p" + e.seq, { lane: "provider calls", start: ms(e.started_at), end: ms(e.finished_at), status: e.ok ? "ok" : "failed", label: e.provider + "/" + e.model + " " + e.input_tokens + " in / " + e.output_tokens + " out", seq: e.seq });
          break;
        case "conversation_provider_call":
          span("c" + e.id, { lane: "provider calls", start: ms(e.started_at), end: ms(e.finished_at) || null, status: e.ok === null ? "running" : e.ok ? "ok" : "failed", label: e.provider + "/" + e.model + (e.input_tokens === null ? "" : " " + e.input_tokens + " in / " + e.output_tokens + " out"), seq: byKey.has("c" + e.id) ? byKey.get("c" + e.id).seq : e.seq, endSeq: e.seq });
          break;
        case "message":
        case "conversation_message":
          for (const c of e.tool_calls) {
            callName.set(c.call_id, c.name);
            // An inner-loop message's calls carry their status (the fold counts it); a conversation message's do not.
            span("k" + c.call_id, { lane: lane("tool: " + c.name), start: t, end: null, status: (e.type === "message" && c.status) || "pending", label: c.name + " " + c.call_id, seq: e.seq, call: c.call_id });
          }
          if (e.tool_call_id) {
            const s = byKey.get("k" + e.tool_call_id);
            // A result ends the bar; only the statuses the fold counts say how the call ended (a failed call has a result too).
            if (s && s.end === null) { s.end = t; s.endSeq = e.seq; }
          }
          break;
        case "tool_status": {
          const name = callName.get(e.call_id) || "?";
          const s = byKey.get("k" + e.call_id) || span("k" + e.call_id, { lane: lane("tool: " + name), start: t, end: null, status: "pending", label: name + " " + e.call_id, seq: e.seq, call: e.call_id });
          if (e.status === "started") { s.start = t; s.startSeq = e.seq; }
          if (RANK[e.status] >= RANK[s.status]) s.status = e.status;
          if (e.status === "completed" || e.status === "failed") { s.end = t; s.endSeq = e.seq; }
          if (e.error) s.label += ": " + e.error;
          break;
        }
      }
    }
    lanes = [...laneSet.keys()];
    for (const s of spans) {
      if (s.end === null || Number.isNaN(s.end)) {
        s.openEnd = true;
        if (s.status === "started") s.status = "in_doubt";
      }
    }
  }

  // ---- the fold: the state right after E[k] ----
  function fold(k) {
    const st = { groups: new Map(), msgs: [], calls: new Map(), tokens: { input: 0, output: 0, calls: 0 }, pcalls: new Map(), compactions: [] };
    const group = (id, g) => { if (!st.groups.has(id)) st.groups.set(id, g); return st.groups.get(id); };
    for (let i = 0; i <= k && i < E.length; i++) {
      const e = E[i];
      switch (e.type) {
        case "evaluation_started": group(e.evaluation, { kind: "evaluation", id: e.evaluation, what: e.prompt_ns + "/" + e.prompt_key + " via " + e.adapter, status: "running", error: null }); break;
        case "evaluation_finished": { const g = st.groups.get(e.evaluation); if (g) { g.status = e.outcome; g.error = e.error; } break; }
        case "turn": { const g = group(e.turn, { kind: "turn", id: e.turn, what: e.agent }); g.status = e.status; g.error = e.error; break; }
        case "message":
        case "conversation_message": {
          const text = e.type === "message" ? e.content : e.text;
          st.msgs.push({ seq: e.seq, role: e.role, text, calls: e.tool_calls, reply: e.tool_call_id, tool: e.tool_name || e.name });
          for (const c of e.tool_calls) st.calls.set(c.call_id, { id: c.call_id, name: c.name, args: c.arguments, status: (e.type === "message" && c.status) || "pending", error: null, seq: e.seq });
          break;
        }
        case "tool_status": {
          let c = st.calls.get(e.call_id);
          if (!c) { c = { id: e.call_id, name: callName.get(e.call_id) || "?", args: "", status: "pending", error: null, seq: e.seq }; st.calls.set(e.call_id, c); }
          if (RANK[e.status] >= RANK[c.status]) c.status = e.status;
          if (e.error) c.error = e.error;
          break;
        }
        case "provider_call": st.tokens.input += e.input_tokens; st.tokens.output += e.output_tokens; st.tokens.calls++; break;
        case "conversation_provider_call": st.pcalls.set(e.id, e); break;
        case "compacted": case "history_compacted": st.compactions.push(e); break;
      }
    }
    for (const p of st.pcalls.values()) {
      st.tokens.calls++;
      st.tokens.input += p.input_tokens || 0;
      st.tokens.output += p.output_tokens || 0;
    }
    return st;
  }

  // ---- one line per event ----
  function summary(e) {
    switch (e.type) {
      case "session_opened": return e.labels.map((l) => l[0] + "=" + l[1]).join(" ");
      case "evaluation_started": return e.prompt_ns + "/" + e.prompt_key + " via " + e.adapter;
      case "evaluation_finished": return e.outcome + (e.error ? ": " + e.error : "");
      case "message": case "conversation_message": {
        let s = e.role + " " + JSON.stringify(clip(e.type === "message" ? e.content : e.text, 160));
        for (const c of e.tool_calls) s += " → " + c.name + "(" + clip(c.arguments, 60) + ")";
        if (e.tool_call_id) s += " ← " + e.tool_call_id;
        return s;
      }
      case "tool_status": return (callName.get(e.call_id) || "") + " " + e.call_id + " " + e.status + (e.error ? ": " + e.error : "");
      case "provider_call": return e.provider + "/" + e.model + " " + e.input_tokens + " in / " + e.output_tokens + " out" + (e.ok ? "" : " failed: " + e.error);
      case "conversation_provider_call": return e.provider + "/" + e.model + " " + (e.ok === null ? "started" : e.ok ? "ok" : "failed: " + e.error);
      case "turn": return e.agent + " " + e.status + (e.error ? ": " + e.error : "");
      case "forked": return "from " + e.parent + " at seq " + e.parent_seq;
      case "compacted": return "through msg " + e.through_sequence;
      case "history_compacted": return e.strategy + ": " + e.messages_before + " → " + e.messages_after + " messages";
      case "custom": return e.kind + " (" + e.bytes + " bytes)";
      case "adapter_state": return e.adapter_type + " (resumable: " + e.resumable + ")";
      case "conversation_created": case "conversation_updated": return e.agent + " " + (e.title || "");
      default: return "";
    }
  }
  const toolOf = (e) => {
    const names = [];
    if (e.tool_calls) for (const c of e.tool_calls) names.push(c.name);
    if (e.tool_call_id) names.push(callName.get(e.tool_call_id));
    if (e.type === "tool_status") names.push(callName.get(e.call_id));
    return names;
  };

  // ---- header and controls ----
  const S = D.session;
  function header() {
    $("title").textContent = "session " + S.id;
    const meta = $("meta");
    meta.textContent = "";
    meta.append(el("span", "", E.length + " events"), " · ");
    const st = el("span", "status-" + S.status, S.status);
    meta.append(st);
    if (S.labels.length) meta.append(" · " + S.labels.map((l) => l[0] + "=" + l[1]).join(" "));
    const link = (id) => {
      if (D.link_base === null) return el("code", "", id);
      const a = el("a", "", id);
      a.href = D.link_base + id;
      return a;
    };
    if (S.parent) meta.append(" · forked from ", link(S.parent.id), " at seq " + S.parent.at);
    for (const f of S.forks) meta.append(" · fork ", link(f.id), " at seq " + f.at);
    meta.append(" · times in " + zone);
  }

  let cur = E.length - 1;
  let filtered = [];
  let hay = null;
  const scrub = $("scrub");
  const seqBox = $("seq");
  function setSeq(i, fromList) {
    if (E.length === 0) return;
    cur = Math.max(0, Math.min(E.length - 1, i));
    scrub.value = String(cur);
    seqBox.value = String(E[cur].seq);
    document.body.dataset.seq = String(E[cur].seq);
    try { history.replaceState(null, "", "#seq=" + E[cur].seq); } catch (_) { /* a sandboxed frame */ }
    drawLanes();
    renderState();
    if (!fromList) {
      const pos = lowerBound(filtered, cur);
      if (pos < filtered.length) {
        const list = $("list");
        const top = pos * ROW;
        if (top < list.scrollTop || top > list.scrollTop + list.clientHeight - ROW) list.scrollTop = Math.max(0, top - list.clientHeight / 2);
      }
    }
    renderRows();
  }
  const lowerBound = (arr, v) => { let lo = 0, hi = arr.length; while (lo < hi) { const m = (lo + hi) >> 1; if (arr[m] < v) lo = m + 1; else hi = m; } return lo; };
  const indexOfSeq = (seq) => { let lo = 0, hi = E.length; while (lo < hi) { const m = (lo + hi) >> 1; if (E[m].seq < seq) lo = m + 1; else hi = m; } return lo; };

  // ---- lanes ----
  const canvas = $("lanes");
  const LANE = 22, AXIS = 18, LABEL = 150;
  let t0 = 0, t1 = 1;
  function range() {
    t0 = Infinity; t1 = -Infinity;
    for (const e of E) { const t = ms(e.at); if (t < t0) t0 = t; if (t > t1) t1 = t; }
    if (!(t1 > t0)) { t0 = (t0 === Infinity ? 0 : t0) - 1; t1 = t0 + 2; }
  }
  // The x axis: wall-clock time, or event order (the default when the whole
  // run took under a second, where time would stack every bar on one pixel).
  let bySeq = false;
  const seq0 = () => (E.length ? E[0].seq : 0);
  const seqN = () => (E.length ? E[E.length - 1].seq + 1 : 1);
  const frac = (t, seq) => (bySeq ? (seq - seq0()) / Math.max(1, seqN() - seq0()) : (t - t0) / (t1 - t0));
  const xAt = (t, seq, w) => LABEL + frac(t, seq) * (w - LABEL - 8);
  const spanX = (s, w) => {
    const x0 = xAt(s.start, s.startSeq ?? s.seq, w);
    const x1 = s.openEnd ? xAt(t1, seqN(), w) : xAt(s.end, (s.endSeq ?? s.seq) + 1, w);
    return [x0, Math.max(x0 + 2, x1)];
  };
  function drawLanes() {
    const w = canvas.clientWidth || 800;
    const h = AXIS + lanes.length * LANE + 4;
    const dpr = window.devicePixelRatio || 1;
    canvas.style.height = h + "px";
    canvas.width = w * dpr; canvas.height = h * dpr;
    const g = canvas.getContext("2d");
    g.setTransform(dpr, 0, 0, dpr, 0, 0);
    g.clearRect(0, 0, w, h);
    g.font = "11px system-ui, sans-serif";
    g.fillStyle = "#687287";
    g.fillText(bySeq ? "by event" : "by time", 6, 12);
    for (let i = 0; i <= 4; i++) {
      const x = LABEL + ((w - LABEL - 8) * i) / 4;
      const label = bySeq
        ? "seq " + Math.round(seq0() + ((seqN() - seq0()) * i) / 4)
        : t1 - t0 < 60000 ? when(t0 + ((t1 - t0) * i) / 4) : new Date(t0 + ((t1 - t0) * i) / 4).toLocaleTimeString(undefined, { hour12: false });
      g.fillText(label, Math.min(x, w - 90), 12);
    }
    lanes.forEach((name, li) => {
      const y = AXIS + li * LANE;
      if (li % 2 === 0) { g.fillStyle = "#f7f8fa"; g.fillRect(0, y, w, LANE); }
      g.fillStyle = "#1d2330";
      g.fillText(clip(name, 24), 6, y + 15);
    });
    const laneIdx = new Map(lanes.map((n, i) => [n, i]));
    for (const s of spans) {
      const li = laneIdx.get(s.lane);
      if (li === undefined || Number.isNaN(s.start)) continue;
      const [x0, x1] = spanX(s, w);
      g.fillStyle = COLOUR[s.status] || "#4a7bd0";
      g.fillRect(x0, AXIS + li * LANE + 4, x1 - x0 - (bySeq ? 1 : 0), LANE - 8);
    }
    if (S.status === "unfinished" && E.length) {
      const last = E[E.length - 1];
      const x = bySeq ? xAt(0, last.seq + 1, w) : xAt(ms(last.at), 0, w);
      g.strokeStyle = "#d64545"; g.setLineDash([4, 3]); g.beginPath(); g.moveTo(x, AXIS); g.lineTo(x, h); g.stroke(); g.setLineDash([]);
      g.fillStyle = "#d64545"; g.fillText("crash point", Math.max(LABEL, x - 66), AXIS - 6 + lanes.length * LANE);
    }
    if (E.length) {
      const e = E[cur];
      const x = bySeq ? xAt(0, e.seq + 0.5, w) : xAt(ms(e.at), 0, w);
      g.strokeStyle = "#1d2330"; g.lineWidth = 1.5; g.beginPath(); g.moveTo(x, AXIS - 4); g.lineTo(x, h); g.stroke(); g.lineWidth = 1;
    }
  }
  function spanAt(ev) {
    const r = canvas.getBoundingClientRect();
    const x = ev.clientX - r.left, y = ev.clientY - r.top;
    const li = Math.floor((y - AXIS) / LANE);
    const w = canvas.clientWidth;
    const f = (x - LABEL) / (w - LABEL - 8);
    const t = t0 + f * (t1 - t0);
    const seq = seq0() + f * (seqN() - seq0());
    let best = null;
    for (const s of spans) {
      if (s.lane !== lanes[li]) continue;
      const [x0, x1] = spanX(s, w);
      if (x >= x0 - 1 && x <= x1 + 1) best = s;
    }
    return { t, seq, best, x, y };
  }
  canvas.addEventListener("click", (ev) => {
    const { t, seq, best } = spanAt(ev);
    if (best) { setSeq(indexOfSeq(best.seq)); return; }
    if (bySeq) { setSeq(indexOfSeq(Math.floor(seq))); return; }
    let lo = 0, hi = E.length - 1;
    while (lo < hi) { const m = (lo + hi) >> 1; if (ms(E[m].at) < t) lo = m + 1; else hi = m; }
    setSeq(lo);
  });
  canvas.addEventListener("mousemove", (ev) => {
    const { best, x, y } = spanAt(ev);
    const tip = $("tip");
    if (!best) { tip.style.display = "none"; return; }
    tip.textContent = best.label + "\n" + best.status + (best.openEnd ? " (no end recorded)" : " · " + Math.round(best.end - best.start) + " ms") + "\nseq " + best.seq + (best.endSeq !== undefined ? "–" + best.endSeq : "");
    tip.style.display = "block";
    tip.style.left = Math.min(x + 12, canvas.clientWidth - 260) + "px";
    tip.style.top = y + 12 + "px";
  });
  canvas.addEventListener("mouseleave", () => { $("tip").style.display = "none"; });

  // ---- the event list (only the visible rows are in the page) ----
  function applyFilter() {
    const q = $("search").value.trim().toLowerCase();
    const ty = $("type").value, tool = $("tool").value;
    if (q && !hay) hay = E.map((e) => JSON.stringify(e).toLowerCase());
    filtered = [];
    for (let i = 0; i < E.length; i++) {
      const e = E[i];
      if (ty && e.type !== ty) continue;
      if (tool && !toolOf(e).includes(tool)) continue;
      if (q && !hay[i].includes(q)) continue;
      filtered.push(i);
    }
    $("count").textContent = filtered.length + " of " + E.length;
    $("list-spacer").style.height = filtered.length * ROW + "px";
    renderRows();
  }
  function renderRows() {
    const list = $("list"), spacer = $("list-spacer");
    const first = Math.max(0, Math.floor(list.scrollTop / ROW) - 5);
    const last = Math.min(filtered.length, first + Math.ceil((list.clientHeight || 600) / ROW) + 10);
    spacer.textContent = "";
    for (let p = first; p < last; p++) {
      const i = filtered[p], e = E[i];
      const r = el("div", "row" + (i === cur ? " current" : i > cur ? " after" : ""));
      r.style.top = p * ROW + "px";
      r.dataset.index = String(i);
      r.append(el("span", "seq", e.seq), el("span", "", when(e.at) + "  "), el("span", "ty", e.type), el("span", "", summary(e)));
      r.title = summary(e);
      spacer.append(r);
    }
  }
  $("list").addEventListener("scroll", renderRows);
  $("list").addEventListener("click", (ev) => {
    const r = ev.target.closest(".row");
    if (r) setSeq(Number(r.dataset.index), true);
  });
  function fillSelects() {
    const types = [...new Set(E.map((e) => e.type))].sort();
    const tools = [...new Set([...callName.values()])].sort();
    for (const [id, values, all] of [["type", types, "all types"], ["tool", tools, "all tools"]]) {
      const s = $(id), keep = s.value;
      s.textContent = "";
      s.append(new Option(all, ""));
      for (const v of values) s.append(new Option(v, v));
      s.value = values.includes(keep) ? keep : "";
    }
  }

  // ---- the state at the scrubbed event ----
  let showAll = false;
  function renderState() {
    const box = $("state");
    box.textContent = "";
    if (!E.length) { box.append(el("p", "note", "This session has no events.")); return; }
    const st = fold(cur);
    const e = E[cur];
    const head = el("h2", "", "State after seq " + e.seq + " (" + e.type + ", " + when(e.at) + ")");
    head.id = "state-seq";
    head.dataset.seq = String(e.seq);
    box.append(head);
    const t = st.tokens;
    const tokens = el("p", "", t.calls + " provider calls · " + t.input + " input + " + t.output + " output tokens");
    tokens.id = "tokens";
    box.append(tokens);
    if (st.groups.size) {
      box.append(el("h2", "", [...st.groups.values()][0].kind === "turn" ? "Turns" : "Evaluations"));
      const tb = el("table");
      for (const g of st.groups.values()) {
        const tr = el("tr", "group");
        tr.append(el("td", "", g.id.slice(-8)), el("td", "", g.what), el("td", "st st-" + g.status, g.status), el("td", "", g.error || ""));
        tb.append(tr);
      }
      box.append(tb);
    }
    const calls = [...st.calls.values()];
    box.append(el("h2", "", "Tool calls (" + calls.length + ")"));
    if (calls.length) {
      const tb = el("table");
      tb.id = "calls";
      const last = cur === E.length - 1;
      for (const c of calls) {
        const status = last && c.status === "started" ? "in_doubt" : c.status;
        const tr = el("tr", "call");
        tr.dataset.call = c.id;
        tr.dataset.status = status;
        tr.append(el("td", "", c.id), el("td", "", c.name), el("td", "st st-" + status, status), el("td", "args", c.args), el("td", "", c.error || ""));
        tb.append(tr);
      }
      box.append(tb);
    }
    box.append(el("h2", "", "Messages (" + st.msgs.length + ")"));
    const MAX = 300;
    let msgs = st.msgs;
    if (!showAll && msgs.length > MAX) {
      const more = el("button", "", "show the " + (msgs.length - MAX) + " earlier messages");
      more.addEventListener("click", () => { showAll = true; renderState(); });
      box.append(more);
      msgs = msgs.slice(msgs.length - MAX);
    }
    const list = el("div");
    list.id = "messages";
    for (const m of msgs) {
      const d = el("div", "msg");
      d.dataset.role = m.role;
      d.dataset.seq = String(m.seq);
      const hd = el("div", "hd");
      hd.append(el("b", "", m.role), el("span", "", "seq " + m.seq));
      if (m.reply) hd.append(el("span", "", "result of " + m.reply + (m.tool ? " (" + m.tool + ")" : "")));
      d.append(hd, el("div", "body", m.text));
      for (const c of m.calls) d.append(el("div", "tc", "→ " + c.name + "(" + c.arguments + ")  [" + c.call_id + "]"));
      list.append(d);
    }
    box.append(list);
    if (st.compactions.length) box.append(el("p", "note", st.compactions.length + " compaction(s) recorded; every message is kept."));
  }

  // ---- wiring ----
  function refreshAll() {
    derive();
    range();
    if ($("axis").value === "auto") bySeq = t1 - t0 < 1000;
    fillSelects();
    scrub.max = String(Math.max(0, E.length - 1));
    header();
    applyFilter();
  }
  scrub.addEventListener("input", () => setSeq(Number(scrub.value)));
  seqBox.addEventListener("change", () => setSeq(indexOfSeq(Number(seqBox.value))));
  $("first").addEventListener("click", () => setSeq(0));
  $("prev").addEventListener("click", () => setSeq(cur - 1));
  $("next").addEventListener("click", () => setSeq(cur + 1));
  $("last").addEventListener("click", () => setSeq(E.length - 1));
  for (const id of ["search", "type", "tool"]) $(id).addEventListener("input", applyFilter);
  document.addEventListener("keydown", (ev) => {
    if (ev.target instanceof HTMLInputElement || ev.target instanceof HTMLSelectElement) return;
    if (ev.key === "ArrowLeft") setSeq(cur - 1);
    if (ev.key === "ArrowRight") setSeq(cur + 1);
  });
  window.addEventListener("resize", drawLanes);
  $("axis").addEventListener("input", () => {
    const v = $("axis").value;
    bySeq = v === "auto" ? t1 - t0 < 1000 : v === "seq";
    drawLanes();
  });

  refreshAll();
  const m = /seq=(\d+)/.exec(location.hash);
  setSeq(m ? indexOfSeq(Number(m[1])) : E.length - 1);
  document.documentElement.dataset.firstRenderMs = performance.now().toFixed(1);

  // ---- a live session (agent-journal serve): new events as they land ----
  if (D.live) {
    let busy = false;
    setInterval(async () => {
      if (busy) return;
      busy = true;
      try {
        const next = E.length ? E[E.length - 1].seq + 1 : 0;
        const r = await fetch(D.live + "?from=" + next, { cache: "no-store" });
        if (r.ok) {
          const body = await r.json();
          const follow = cur === E.length - 1;
          S.status = body.status;
          if (body.events.length) {
            for (const e of body.events) E.push(e);
            hay = null;
            refreshAll();
            setSeq(follow ? E.length - 1 : cur, true);
          } else header();
        }
      } finally { busy = false; }
    }, 1000);
  }
})();
