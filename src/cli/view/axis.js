"use strict";
// The time axis of the lanes and the span tree: wall-clock time with the
// idle gaps (a crash before its resume, a pause) compressed to a narrow
// break, so that a run with an hour of silence in it stays readable.
const AJAxis = (function () {
  // A gap is compressed when nothing happens for longer than this and for
  // more than a fifth of the whole run.
  const GAP_MIN_MS = 1000;
  const GAP_SHARE = 0.2;
  // Each break takes this share of the width (all of them at most 30%).
  const BREAK = 0.05;
  function make(times) {
    const ts = times.filter((t) => !Number.isNaN(t) && t !== null).sort((a, b) => a - b);
    let t0 = ts.length ? ts[0] : 0, t1 = ts.length ? ts[ts.length - 1] : 1;
    if (!(t1 > t0)) { t0 -= 1; t1 = t0 + 2; }
    const gaps = [];
    const min = Math.max(GAP_MIN_MS, (t1 - t0) * GAP_SHARE);
    for (let i = 0; i + 1 < ts.length; i++) if (ts[i + 1] - ts[i] > min) gaps.push({ a: ts[i], b: ts[i + 1] });
    const g = gaps.length ? Math.min(BREAK, 0.3 / gaps.length) : 0;
    const idle = gaps.reduce((s, x) => s + x.b - x.a, 0);
    const scale = (1 - g * gaps.length) / Math.max(1, t1 - t0 - idle);
    // The place of time T on the axis, from 0 to 1.
    function frac(t) {
      let u = 0, prev = t0;
      for (const x of gaps) {
        if (t <= x.a) break;
        u += (x.a - prev) * scale;
        if (t < x.b) return u + (g * (t - x.a)) / (x.b - x.a);
        u += g; prev = x.b;
      }
      return Math.max(0, Math.min(1, u + (t - prev) * scale));
    }
    return { t0, t1, gaps, frac, idle };
  }
  return { make };
})();
