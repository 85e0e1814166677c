"use strict";
// The statuses of tool calls, evaluations, turns and a conversation's
// provider calls, as the library's fold has them after each seq (computed
// by view/fold.rs with the library's reducer). The page looks them up; it
// never ranks or merges statuses itself.
const AJFold = (function () {
  function make(fold) {
    const byKey = new Map();
    for (const [seq, kind, key, status, error, result] of (fold && fold.changes) || []) {
      const k = kind + " " + key;
      if (!byKey.has(k)) byKey.set(k, []);
      byKey.get(k).push({ seq, status, error, result });
    }
    // The status of KIND KEY after the event SEQ, or null before the fold knows it.
    function at(kind, key, seq) {
      const list = byKey.get(kind + " " + key);
      if (!list) return null;
      let lo = 0, hi = list.length;
      while (lo < hi) { const m = (lo + hi) >> 1; if (list[m].seq <= seq) lo = m + 1; else hi = m; }
      return lo ? list[lo - 1] : null;
    }
    const crashes = (fold && fold.crashes) || [];
    // The crash point at SEQ (the end of an unfinished run, or where a resume resumed from).
    const crashAt = (seq) => crashes.find((c) => c.seq === seq) || null;
    // The status shown for a tool call after SEQ: "in_doubt" at a crash point
    // for the calls the fold has started with no result there.
    function call(key, seq) {
      const s = at("call", key, seq);
      const c = crashAt(seq);
      if (c && c.in_doubt.includes(key)) return { status: "in_doubt", error: s && s.error, result: false };
      return s || { status: "untracked", error: null, result: false };
    }
    return { at, call, crashAt, crashes, final: (kind, key) => at(kind, key, Infinity) };
  }
  return { make };
})();

// Text helpers shared by the page's files.
const AJText = (function () {
  // JSON text pretty-printed (two spaces), or the text as it is when it is not JSON.
  function pretty(text) {
    if (typeof text !== "string") return JSON.stringify(text, null, 2);
    const t = text.trim();
    if (!(t.startsWith("{") || t.startsWith("["))) return text;
    try { return JSON.stringify(JSON.parse(t), null, 2); } catch (_) { return text; }
  }
  // A duration for people: 12 ms, 3.4 s, 5 min 3 s, 1 h 2 min.
  function duration(ms) {
    if (!(ms >= 0)) return "";
    if (ms < 1000) return Math.round(ms) + " ms";
    if (ms < 60000) return (ms / 1000).toFixed(1) + " s";
    if (ms < 3600000) return Math.floor(ms / 60000) + " min " + Math.round((ms % 60000) / 1000) + " s";
    return Math.floor(ms / 3600000) + " h " + Math.round((ms % 3600000) / 60000) + " min";
  }
  // A cost in US dollars, or "" when it is unknown (a model with no price).
  function usd(x) {
    if (x === null || x === undefined) return "";
    return "$" + (x < 0.01 ? x.toFixed(5) : x < 1 ? x.toFixed(4) : x.toFixed(2));
  }
  return { pretty, duration, usd };
})();
