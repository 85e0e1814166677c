"use strict";
// The timeline of one session: lanes drawn on a canvas, a virtualised event
// list, and the state folded up to the scrubbed event. Every text of the
// journal reaches the page through textContent, never as markup.
(function () {
  const D = JSON.parse(document.getElementById("journal-data").textContent);
  const E = D.events;
  const ROW = 20;
  // The fold's statuses (view/fold.rs) and the costs from the price table (cli/price.rs).
  let F = AJFold.make(D.fold);
  let C = D.costs || { calls: {}, total: null, unpriced: [], prices_date: "" };
  const COLOUR = {
    completed: "#2e9e5b", succeeded: "#2e9e5b", ok: "#2e9e5b", failed: "#d64545",
    "in_doubt": "#e0a030", started: "#e0a030", pending: "#9aa3b2", cancelled: "#777f8c", running: "#4a7bd0",
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
  let tree = [];
  const callKey = (e, id) => (e.evaluation || e.turn) + "/" + id;
  function derive() {
    callName = new Map();
    for (const e of E) if (e.tool_calls) for (const c of e.tool_calls) callName.set(c.call_id, c.name);
    tree = AJTree.spans(E, F, C.calls);
    const laneSet = new Map();
    const lane = (name) => { if (!laneSet.has(name)) laneSet.set(name, laneSet.size); return name; };
    const groupLane = lane(E.some((e) => e.type === "turn") ? "turns" : "evaluations");
    lane("provider calls");
    spans = tree.map((s) => Object.assign({}, s, {
      lane: s.kind === "provider_call" ? "provider calls" : s.kind === "call" ? lane("tool: " + (callName.get(s.key.slice(s.key.indexOf("/") + 1)) || "?")) : groupLane,
      label: s.label + (s.tokens ? " " + s.tokens.input + " in / " + s.tokens.output + " out" : "") + (s.cost !== null ? " " + AJText.usd(s.cost) : "") + (s.error ? ": " + s.error : ""),
      openEnd: s.end === null || Number.isNaN(s.end),
    }));
    lanes = [...laneSet.keys()];
  }

  // ---- the state right after E[k]: messages and calls in order, statuses from the fold ----
  function fold(k) {
    const st = { groups: new Map(), msgs: [], calls: new Map(), tokens: { input: 0, output: 0, calls: 0, cost: 0, unpriced: 0 }, pcalls: new Map(), compactions: [] };
    const seq = k < E.length ? E[k].seq : -1;
    const group = (kind, id, what) => { if (!st.groups.has(id)) st.groups.set(id, { kind, id, what }); return st.groups.get(id); };
    const price = (key, n) => { const c = C.calls[key]; if (c === undefined || c === null) st.tokens.unpriced += n; else st.tokens.cost += c; };
    for (let i = 0; i <= k && i < E.length; i++) {
      const e = E[i];
      switch (e.type) {
        case "evaluation_started": group("evaluation", e.evaluation, e.prompt_ns + "/" + e.prompt_key + " via " + e.adapter); break;
        case "turn": group("turn", e.turn, e.agent); break;
        case "message":
        case "conversation_message": {
          if (e.type === "message") group("evaluation", e.evaluation, "");
          const text = e.type === "message" ? e.content : e.text;
          st.msgs.push({ seq: e.seq, role: e.role, text, calls: e.tool_calls, reply: e.tool_call_id, tool: e.tool_name || e.name });
          for (const c of e.tool_calls) {
            const key = callKey(e, c.call_id);
            if (!st.calls.has(key)) st.calls.set(key, { key, id: c.call_id, name: c.name, args: c.arguments, seq: e.seq });
          }
          break;
        }
        case "tool_status": {
          const key = callKey(e, e.call_id);
          if (!st.calls.has(key)) st.calls.set(key, { key, id: e.call_id, name: callName.get(e.call_id) || "?", args: "", seq: e.seq });
          break;
        }
        case "provider_call": st.tokens.input += e.input_tokens; st.tokens.output += e.output_tokens; st.tokens.calls++; price(String(e.seq), 1); break;
        case "conversation_provider_call": st.pcalls.set(e.id, e); break;
        case "compacted": case "history_compacted": st.compactions.push(e); break;
      }
    }
    for (const p of st.pcalls.values()) {
      st.tokens.calls++;
      st.tokens.input += p.input_tokens || 0;
      st.tokens.output += p.output_tokens || 0;
      price(p.id, 1);
    }
    for (const g of st.groups.values()) {
      const f = F.at(g.kind, g.id, seq);
      g.status = f ? f.status : "untracked"; g.error = f && f.error;
    }
    for (const c of st.calls.values()) { const f = F.call(c.key, seq); c.status = f.status; c.error = f.error; }
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
    // Served pages link to each other; a written page links to the file
    // `view ID` writes by default, next to it.
    const link = (id) => {
      const a = el("a", "", id);
      a.href = D.link_base === null ? id + ".html" : D.link_base + id;
      a.title = D.link_base === null ? "the page `agent-journal view " + id + "` writes" : "";
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
  let axis = AJAxis.make([]);
  function range() {
    const times = E.map((e) => ms(e.at));
    for (const s of spans) { times.push(s.start); if (!s.openEnd) times.push(s.end); }
    axis = AJAxis.make(times);
    t0 = axis.t0; t1 = axis.t1;
  }
  // The x axis: wall-clock time with idle gaps compressed, or event order
  // (the default when the whole run took under a second, where time would
  // stack every bar on one pixel).
  let bySeq = false;
  const seq0 = () => (E.length ? E[0].seq : 0);
  const seqN = () => (E.length ? E[E.length - 1].seq + 1 : 1);
  const frac = (t, seq) => (bySeq ? (seq - seq0()) / Math.max(1, seqN() - seq0()) : axis.frac(t));
  const xAt = (t, seq, w) => LABEL + frac(t, seq) * (w - LABEL - 8);
  const spanX = (s, w) => {
    const x0 = xAt(s.start, s.startSeq ?? s.seq, w);
    const x1 = s.openEnd ? xAt(t1, seqN(), w) : xAt(s.end, (s.endSeq ?? s.seq) + 1, w);
    return [x0, Math.max(x0 + 2, x1)];
  };
  const eventX = (e, w) => (bySeq ? xAt(0, e.seq + 0.5, w) : xAt(ms(e.at), 0, w));
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
    g.fillText(bySeq ? "by event" : axis.gaps.length ? "by time (idle gaps cut)" : "by time", 6, 12);
    const fmt = (t) => (t1 - t0 - axis.idle < 60000 ? when(t) : new Date(t).toLocaleTimeString(undefined, { hour12: false }));
    if (bySeq) {
      for (let i = 0; i <= 4; i++) g.fillText("seq " + Math.round(seq0() + ((seqN() - seq0()) * i) / 4), Math.min(LABEL + ((w - LABEL - 8) * i) / 4, w - 90), 12);
    } else {
      // A tick at the start and after each break, then between them where there is room.
      let lastX = -Infinity;
      for (const t of [t0, ...axis.gaps.map((x) => x.b)]) {
        const x = xAt(t, 0, w);
        if (x - lastX > 100) { g.fillText(fmt(t), Math.min(x, w - 90), 12); lastX = x; }
      }
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
    if (!bySeq) {
      // Each compressed idle gap: a zigzag break with its length.
      for (const x of axis.gaps) {
        const a = xAt(x.a, 0, w), b = xAt(x.b, 0, w);
        g.fillStyle = "rgba(246,247,249,0.92)"; g.fillRect(a + 1, AXIS, Math.max(2, b - a - 2), h - AXIS);
        g.strokeStyle = "#687287"; g.beginPath();
        for (const xx of [a + 2, b - 2]) { g.moveTo(xx, AXIS); for (let y = AXIS; y < h; y += 6) g.lineTo(xx + (((y - AXIS) / 6) % 2 ? -2 : 2), y + 6); }
        g.stroke();
        g.fillStyle = "#4a5468"; g.fillText("idle " + AJText.duration(x.b - x.a), Math.min(a + 4, w - 90), h - 4);
      }
    }
    for (const c of F.crashes) {
      const e = E[indexOfSeq(c.seq)];
      if (!e) continue;
      const x = eventX(e, w);
      g.strokeStyle = "#d64545"; g.setLineDash([4, 3]); g.beginPath(); g.moveTo(x, AXIS); g.lineTo(x, h); g.stroke(); g.setLineDash([]);
      g.fillStyle = "#d64545"; g.fillText("crash point", Math.max(LABEL, x - 66), AXIS - 6 + lanes.length * LANE);
    }
    if (E.length) {
      const x = eventX(E[cur], w);
      g.strokeStyle = "#1d2330"; g.lineWidth = 1.5; g.beginPath(); g.moveTo(x, AXIS - 4); g.lineTo(x, h); g.stroke(); g.lineWidth = 1;
    }
  }
  function spanAt(ev) {
    const r = canvas.getBoundingClientRect();
    const x = ev.clientX - r.left, y = ev.clientY - r.top;
    const li = Math.floor((y - AXIS) / LANE);
    const w = canvas.clientWidth;
    const f = (x - LABEL) / (w - LABEL - 8);
    const seq = seq0() + f * (seqN() - seq0());
    let best = null;
    for (const s of spans) {
      if (s.lane !== lanes[li]) continue;
      const [x0, x1] = spanX(s, w);
      if (x >= x0 - 1 && x <= x1 + 1) best = s;
    }
    return { seq, best, x, y };
  }
  canvas.addEventListener("click", (ev) => {
    const { seq, best, x } = spanAt(ev);
    if (best) { setSeq(indexOfSeq(best.seq)); return; }
    if (bySeq) { setSeq(indexOfSeq(Math.floor(seq))); return; }
    const w = canvas.clientWidth;
    let lo = 0, hi = E.length - 1;
    while (lo < hi) { const m = (lo + hi) >> 1; if (eventX(E[m], w) < x) lo = m + 1; else hi = m; }
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
  // An event that records a failure (its own fields say so; no status is re-derived).
  const failedEvent = (e) =>
    (e.type === "tool_status" && e.status === "failed") || (e.type === "evaluation_finished" && e.outcome === "failed") ||
    (e.type === "turn" && e.status === "failed") || (e.type === "provider_call" && !e.ok) || (e.type === "conversation_provider_call" && e.ok === false);
  function renderRows() {
    const list = $("list"), spacer = $("list-spacer");
    const first = Math.max(0, Math.floor(list.scrollTop / ROW) - 5);
    const last = Math.min(filtered.length, first + Math.ceil((list.clientHeight || 600) / ROW) + 10);
    spacer.textContent = "";
    for (let p = first; p < last; p++) {
      const i = filtered[p], e = E[i];
      const r = el("div", "row" + (i === cur ? " current" : i > cur ? " after" : "") + (failedEvent(e) ? " failed" : "") + (F.crashAt(e.seq) ? " crash" : ""));
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
    const crash = F.crashAt(e.seq);
    if (crash) box.append(crashBanner(crash));
    if (e.type === "provider_call" || e.type === "conversation_provider_call") AJPanel.render(box, E, e, el);
    const cost = t.calls === 0 ? "" : t.unpriced ? " · cost unknown (no price for " + C.unpriced.join(", ") + ")" : " · cost " + AJText.usd(t.cost) + " (prices of " + C.prices_date + ")";
    const tokens = el("p", "", t.calls + " provider calls · " + t.input + " input + " + t.output + " output tokens" + cost);
    tokens.id = "tokens";
    box.append(tokens);
    if (st.groups.size) {
      box.append(el("h2", "", [...st.groups.values()][0].kind === "turn" ? "Turns" : "Evaluations"));
      const tb = el("table");
      for (const g of st.groups.values()) {
        const tr = el("tr", "group");
        tr.dataset.kind = g.kind; tr.dataset.key = g.id; tr.dataset.status = g.status;
        tr.append(el("td", "", g.id.slice(-8)), el("td", "", g.what), el("td", "st st-" + g.status, g.status), el("td", "", g.error || ""));
        tb.append(tr);
      }
      box.append(tb);
    }
    let calls = [...st.calls.values()];
    box.append(el("h2", "", "Tool calls (" + calls.length + ")"));
    const MAX_CALLS = 300;
    if (!showAll && calls.length > MAX_CALLS) {
      const more = el("button", "", "show the " + (calls.length - MAX_CALLS) + " earlier tool calls");
      more.addEventListener("click", () => { showAll = true; renderState(); });
      box.append(more);
      calls = calls.slice(calls.length - MAX_CALLS);
    }
    if (calls.length) {
      const tb = el("table");
      tb.id = "calls";
      for (const c of calls) {
        const tr = el("tr", "call" + (c.status === "failed" ? " failed" : ""));
        tr.dataset.call = c.id;
        tr.dataset.key = c.key;
        tr.dataset.status = c.status;
        const args = el("td", "args");
        args.append(el("pre", "json", AJText.pretty(c.args)));
        tr.append(el("td", "", c.id), el("td", "", c.name), el("td", "st st-" + c.status, c.status), args, el("td", "", c.error || ""));
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
      d.append(hd, el("div", "body", m.reply ? AJText.pretty(m.text) : m.text));
      for (const c of m.calls) d.append(el("div", "tc", "→ " + c.name + "  [" + c.call_id + "]\n" + AJText.pretty(c.arguments)));
      list.append(d);
    }
    box.append(list);
    if (st.compactions.length) box.append(el("p", "note", st.compactions.length + " compaction(s) recorded; every message is kept."));
  }

  // ---- crash points: a banner each, at the top and in the state there ----
  function crashBanner(c) {
    // A served page of a run still going cannot tell a stop from a pause.
    const open = c.resumed_at === null && D.live;
    const parts = [open ? "no event after seq " + c.seq + " yet (if its process stopped, it stopped here)" : "process stopped here (seq " + c.seq + ")"];
    parts.push(c.in_doubt.length + " call" + (c.in_doubt.length === 1 ? "" : "s") + " in doubt");
    if (c.pending) parts.push(c.pending + " never started");
    if (c.running_turns) parts.push(c.running_turns + " turn" + (c.running_turns === 1 ? "" : "s") + " left running");
    parts.push(c.resumed_at === null ? "resume with: agent-journal resume " + S.id : "resumed at seq " + c.resumed_at);
    const b = el("div", "crash-banner", parts.join("; "));
    b.dataset.seq = String(c.seq);
    b.dataset.inDoubt = String(c.in_doubt.length);
    b.title = "go to seq " + c.seq;
    b.addEventListener("click", () => setSeq(indexOfSeq(c.seq)));
    return b;
  }
  function crashes() {
    const box = $("crashes");
    box.textContent = "";
    for (const c of F.crashes) box.append(crashBanner(c));
  }
  function drawTree() {
    const last = E.length ? E[E.length - 1] : null;
    let input = 0, output = 0;
    for (const s of tree) if (s.kind === "provider_call" && s.tokens) { input += s.tokens.input || 0; output += s.tokens.output || 0; }
    const total = { kind: "session", key: S.id, label: "session " + S.short, start: t0, end: last && S.status !== "unfinished" ? ms(last.at) : null,
      seq: E.length ? E[0].seq : undefined, status: S.status, tokens: { input, output }, cost: C.total };
    AJTree.render($("tree"), tree, axis, el, (seq) => setSeq(indexOfSeq(seq)), total);
  }

  // ---- wiring ----
  function refreshAll() {
    derive();
    range();
    if ($("axis").value === "auto") bySeq = t1 - t0 - axis.idle < 1000 && !axis.gaps.length;
    crashes();
    drawTree();
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
    bySeq = v === "auto" ? t1 - t0 - axis.idle < 1000 && !axis.gaps.length : v === "seq";
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
          if (body.fold) F = AJFold.make(body.fold);
          if (body.costs) C = body.costs;
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
