// SPDX-License-Identifier: MIT
// The live page of zcpipe (src/daemon/live.h): polls /stats, /api/latency and each
// stream's snapshot, and draws them: a snapshot's frame with its own moving cells (the
// JSON's mask of that frame) filled in and their box. Every value from zcpipe enters the
// page as text (textContent) or as an attribute value, never as markup.
"use strict";

const STATS_MS = 1000;
const LATENCY_MS = 2000;
const STAGES = ["convert", "infer", "publish"];
const QUANTILES = ["p50", "p90", "p99", "p99.9", "max"];
const COLOR = { p50: "#3ecf8e", p99: "#ff6b6b", convert: "#f5b942", infer: "#4cc2ff", publish: "#c792ea" };

const cards = new Map();   // stream name -> {name, el, snap}
let latency = null;        // the last /api/latency
let polls = 0;             // /stats answers rendered

const main = document.getElementById("streams");

function field(card, name) {
  return card.el.querySelector('[data-f="' + name + '"]');
}

function setText(el, value) {
  const s = String(value);
  if (el.textContent !== s) el.textContent = s;
}

function isNum(v) {
  return typeof v === "number" && Number.isFinite(v);
}

function fmtMs(v) {
  if (!isNum(v)) return "–";
  return v >= 100 ? v.toFixed(1) : v.toFixed(3);
}

// ---- one card per stream ----

function makeCard(name) {
  const el = document.getElementById("card").content.firstElementChild.cloneNode(true);
  const card = { name, el, snap: { seq: null, fps: 2, off: false, timer: 0 } };
  el.dataset.stream = name;
  setText(field(card, "name"), name);
  for (const c of el.querySelectorAll("canvas.chart")) c.dataset.points = "0";
  cards.set(name, card);
  card.snap.timer = setTimeout(() => pollSnapshot(card), 0);
  return card;
}

function dropCard(card) {
  clearTimeout(card.snap.timer);
  card.el.remove();
  cards.delete(card.name);
}

function firstDefined(...values) {
  for (const v of values) if (v !== undefined && v !== null) return v;
  return undefined;
}

// "stale 3, ring_full 1" of the non-zero counts of an object, or "none".
function nonzero(counts) {
  const list = Object.entries(counts || {}).filter(([, n]) => n > 0);
  return list.length ? list.map(([k, n]) => k + " " + n).join(", ") : "none";
}

function renderStream(card, s) {
  const fr = s.frames || {};
  const state = String(s.state || "unknown");
  const stateEl = field(card, "state");
  setText(stateEl, state);
  stateEl.dataset.state = state;
  setText(field(card, "fps"), isNum(s.fps) ? s.fps.toFixed(1) : "–");
  setText(field(card, "geometry"), s.width + "×" + s.height + " " + (s.format || ""));
  setText(field(card, "source"), s.source || "–");
  setText(field(card, "capture_path"), s.capture_path || "–");
  setText(field(card, "backend"), s.backend || "–");
  setText(field(card, "transfer"), s.transfer || "–");
  setText(field(card, "ring"), s.ring ? s.ring.in_flight + " of " + s.ring.slots + " slots in use" : "–");
  const restarts = firstDefined(s.restarts, fr.restarts);
  setText(field(card, "restarts"), restarts === undefined ? "–" : restarts);
  for (const k of ["captured", "published", "dropped", "decode_gaps", "copies", "reconnects"])
    setText(field(card, k), isNum(fr[k]) ? fr[k] : "–");
  setText(field(card, "drops"), nonzero(fr.dropped_by_reason));
  const sink = s.sink;
  setText(field(card, "output"), sink ? (sink.type || "?") + ": " + sink.written + " written, " + sink.queued +
          " queued, lost: " + nonzero(sink.lost) : "–");
  const err = firstDefined(s.last_error, s.error);
  const errEl = field(card, "last_error");
  errEl.hidden = !err;
  setText(errEl, err ? "last error: " + err : "");

  const rows = [];
  const lat = s.latency_ms || {};
  if (lat.e2e) rows.push(["end to end", lat.e2e]);
  for (const st of STAGES)
    for (const part of ["wait", "busy"])
      if (lat[st] && lat[st][part]) rows.push([st + " " + part, lat[st][part]]);
  const body = field(card, "latency");
  body.replaceChildren(...rows.map(([label, h]) => {
    const tr = document.createElement("tr");
    tr.dataset.row = label;
    const th = document.createElement("td");
    th.textContent = label;
    tr.append(th);
    for (const q of QUANTILES) {
      const td = document.createElement("td");
      td.dataset.q = q;
      td.textContent = fmtMs(h[q]);
      tr.append(td);
    }
    return tr;
  }));
  setText(field(card, "raw"), JSON.stringify(s, null, 2));
}

function renderStats(stats) {
  const seen = new Set();
  let prev = document.getElementById("empty");
  for (const s of stats.streams || []) {
    const name = String(s.name);
    seen.add(name);
    const card = cards.get(name) || makeCard(name);
    renderStream(card, s);
    if (prev.nextElementSibling !== card.el) prev.after(card.el);   // config order
    prev = card.el;
  }
  for (const card of [...cards.values()])
    if (!seen.has(card.name)) dropCard(card);
  document.getElementById("empty").hidden = cards.size > 0;
  setText(document.getElementById("version"), stats.version ? "version " + stats.version : "");
}

function setStatus(ok, text) {
  const el = document.getElementById("status");
  el.dataset.ok = ok ? "true" : "false";
  setText(el, text);
}

async function pollStats() {
  try {
    const r = await fetch("/stats", { cache: "no-store" });
    if (!r.ok) throw new Error("HTTP " + r.status);
    renderStats(await r.json());
    polls++;
    document.body.dataset.polls = String(polls);
    setStatus(true, "updated " + new Date().toLocaleTimeString());
  } catch (e) {
    setStatus(false, "zcpipe does not answer (" + e.message + "): retrying");
  }
  setTimeout(pollStats, STATS_MS);
}

// ---- snapshots: the frame, its moving cells and their box, the top classes ----

async function pollSnapshot(card) {
  const sn = card.snap;
  let delay = 1000 / sn.fps;
  if (!cards.has(card.name)) return;
  if (document.visibilityState !== "hidden") {
    try {
      const base = "/snapshot/" + encodeURIComponent(card.name);
      const r = await fetch(base + ".json", { cache: "no-store" });
      if (r.status === 404) {
        sn.off = true;
        setText(field(card, "snapshot"), (await r.text()).trim());
        return;
      }
      if (r.ok) {
        const info = await r.json();
        if (isNum(info.fps) && info.fps > 0) sn.fps = info.fps;
        delay = 1000 / sn.fps;
        if (info.seq !== null && info.seq !== sn.seq) {
          const ir = await fetch(base + ".jpg", { cache: "no-store" });
          // Draw a frame only with its own results: both answers must name the same frame.
          if (ir.ok && ir.headers.get("X-Zcp-Seq") === String(info.seq)) {
            const bitmap = await createImageBitmap(await ir.blob());
            drawFrame(card, bitmap, info);
            bitmap.close();
            sn.seq = info.seq;
          } else {
            delay = 100;
          }
        }
      }
    } catch (e) {
      delay = 2000;   // zcpipe restarting or gone: keep trying, slowly
    }
  }
  if (cards.has(card.name)) sn.timer = setTimeout(() => pollSnapshot(card), delay);
}

// The moving cells of a snapshot's mask (output/snapshot.h: cell i = gy * grid_w + gx is bit i % 8 of
// byte i / 8 of the hex), as cell indices; null when there is no mask or it is malformed.
function maskCells(mask) {
  if (!mask || !(mask.grid_w > 0) || !(mask.grid_h > 0) || typeof mask.hex !== "string") return null;
  const n = mask.grid_w * mask.grid_h;
  if (mask.hex.length !== 2 * Math.ceil(n / 8) || !/^[0-9a-f]*$/.test(mask.hex)) return null;
  const cells = [];
  for (let k = 0; 2 * k < mask.hex.length; k++) {
    const b = parseInt(mask.hex.substr(2 * k, 2), 16);
    for (let j = 0; b && j < 8; j++)
      if ((b >> j) & 1 && 8 * k + j < n) cells.push(8 * k + j);
  }
  return cells;
}

// A steady colour per class number (golden-angle hues).
function classColor(id) {
  return "hsl(" + Math.round((id * 137.508) % 360) + ", 90%, 55%)";
}

function drawFrame(card, bitmap, info) {
  const canvas = card.el.querySelector("canvas.frame");
  if (canvas.width !== bitmap.width || canvas.height !== bitmap.height) {
    canvas.width = bitmap.width;
    canvas.height = bitmap.height;
  }
  const g = canvas.getContext("2d");
  g.drawImage(bitmap, 0, 0);
  const res = info.result || {};
  const m = res.motion || null;
  const cell = info.cell;
  // The moving cells, each a translucent square (edge cells clipped to the frame).
  const cells = cell > 0 ? maskCells(info.mask) : null;
  if (cells) {
    const gw = info.mask.grid_w;
    g.fillStyle = "rgba(255, 214, 0, 0.35)";
    for (const i of cells) {
      const x = (i % gw) * cell, y = Math.floor(i / gw) * cell;
      g.fillRect(x, y, Math.min(cell, canvas.width - x), Math.min(cell, canvas.height - y));
    }
  }
  // What was drawn, for tests and curious users: cells drawn, and the count the mask itself declares.
  canvas.dataset.cells = cells ? String(cells.length) : "none";
  canvas.dataset.maskMoving = cells && isNum(info.mask.moving) ? String(info.mask.moving) : "none";
  if (m && Array.isArray(m.bbox)) {
    const [x0, y0, x1, y1] = m.bbox;
    // Then the box around them (the moving cells all lie inside it).
    // Line and label sized for the screen, whatever the frame's size: px is one CSS pixel in frame pixels.
    const px = canvas.width / (canvas.clientWidth || canvas.width);
    g.strokeStyle = "#ffd600";
    g.lineWidth = 2 * px;
    g.strokeRect(x0, y0, x1 - x0, y1 - y0);
    const label = "motion: " + m.moving_cells + " cells";
    g.font = Math.round(13 * px) + "px sans-serif";
    const tw = g.measureText(label).width + 8 * px, th = Math.round(18 * px);
    const ly = y0 >= th ? y0 - th : y1;
    g.fillStyle = "#ffd600";
    g.fillRect(x0, ly, tw, th);
    g.fillStyle = "#000";
    g.textBaseline = "middle";
    g.fillText(label, x0 + 4 * px, ly + th / 2);
  }
  // The detector's objects: a box per object with its class and score (frame pixels, as the result line).
  const dets = Array.isArray(res.detections) ? res.detections : null;
  let boxes = 0;
  if (dets) {
    const px = canvas.width / (canvas.clientWidth || canvas.width);
    g.font = Math.round(13 * px) + "px sans-serif";
    g.textBaseline = "middle";
    for (const d of dets) {
      if (!Array.isArray(d.box) || d.box.length !== 4 || !d.box.every(isNum)) continue;
      const [x0, y0, x1, y1] = d.box;
      const color = classColor(isNum(d.id) ? d.id : 0);
      g.strokeStyle = color;
      g.lineWidth = 2 * px;
      g.strokeRect(x0, y0, x1 - x0, y1 - y0);
      const text = String(d.class) + (isNum(d.score) ? " " + Math.round(d.score * 100) + "%" : "");
      const tw = g.measureText(text).width + 8 * px, th = Math.round(18 * px);
      const ly = y0 >= th ? y0 - th : y0;
      g.fillStyle = color;
      g.fillRect(x0, ly, tw, th);
      g.fillStyle = "#000";
      g.fillText(text, x0 + 4 * px, ly + th / 2);
      boxes++;
    }
  }
  canvas.dataset.boxes = dets ? String(boxes) : "none";
  canvas.dataset.seq = String(info.seq);
  card.el.dataset.snapSeq = String(info.seq);

  let caption = "frame " + info.seq;
  if (isNum(info.e2e_ms)) caption += " · end to end " + info.e2e_ms.toFixed(2) + " ms";
  if (isNum(res.pts_ns)) caption += " · at " + (res.pts_ns / 1e9).toFixed(1) + " s";
  setText(field(card, "snapshot"), caption);

  if (m) {
    const pct = isNum(m.fraction) ? " (" + (m.fraction * 100).toFixed(1) + " %)" : "";
    setText(field(card, "moving"), m.moving_cells + " of " + m.total_cells + pct);
    setText(field(card, "bbox"), Array.isArray(m.bbox) ? m.bbox.join(", ") : "none");
  } else {
    setText(field(card, "moving"), "–");
    setText(field(card, "bbox"), "–");
  }
  setText(field(card, "cell"), cell > 0 ? cell + " px, threshold " + info.threshold : "motion off");

  const list = field(card, "topk");
  setText(field(card, "results-title"), dets ? "Objects" : "Top classes");
  if (dets) {
    // One line per class: how many of it are in view, and the best score.
    const byClass = new Map();
    for (const d of dets) {
      const k = String(d.class);
      const e = byClass.get(k) || { n: 0, best: 0, id: d.id };
      e.n++;
      if (isNum(d.score) && d.score > e.best) e.best = d.score;
      byClass.set(k, e);
    }
    list.replaceChildren(...[...byClass.entries()].map(([k, e]) => {
      const li = document.createElement("li");
      const label = document.createElement("span");
      label.className = "label";
      label.textContent = e.n + " × " + k;
      label.style.borderLeft = "6px solid " + classColor(isNum(e.id) ? e.id : 0);
      const prob = document.createElement("span");
      prob.className = "prob";
      prob.textContent = "best " + Math.round(e.best * 100) + " %";
      li.append(label, prob);
      return li;
    }));
    if (!dets.length) {
      const li = document.createElement("li");
      li.textContent = "nothing detected";
      list.replaceChildren(li);
    }
    return;
  }
  list.replaceChildren(...(res.topk || []).map((t) => {
    const li = document.createElement("li");
    const label = document.createElement("span");
    label.className = "label";
    label.textContent = t.label !== undefined ? String(t.label) : "class " + t.class;
    const bar = document.createElement("progress");
    bar.max = 1;
    bar.value = isNum(t.prob) ? t.prob : 0;
    const prob = document.createElement("span");
    prob.className = "prob";
    prob.textContent = isNum(t.prob) ? (t.prob * 100).toFixed(2) + " %" : "";
    li.append(label, bar, prob);
    return li;
  }));
}

// ---- latency charts (plain canvas) ----

async function pollLatency() {
  try {
    const r = await fetch("/api/latency", { cache: "no-store" });
    if (r.ok) {
      latency = await r.json();
      drawCharts();
    }
  } catch (e) {
    // the status line already says when zcpipe does not answer
  }
  setTimeout(pollLatency, LATENCY_MS);
}

function drawCharts() {
  if (!latency) return;
  const byName = new Map((latency.streams || []).map((s) => [String(s.name), s]));
  for (const card of cards.values()) {
    const s = byName.get(card.name);
    if (!s) continue;
    const e2e = card.el.querySelector('canvas[data-chart="e2e"]');
    const stages = card.el.querySelector('canvas[data-chart="stages"]');
    drawChart(e2e, s.t, [
      { name: "p99", color: COLOR.p99, values: s.p99.e2e },
      { name: "p50", color: COLOR.p50, values: s.p50.e2e },
    ]);
    const lines = [];
    for (const st of STAGES) {
      lines.push({ name: st + " p99", color: COLOR[st], values: s.p99[st + "_busy"] });
      lines.push({ name: st + " p50", color: COLOR[st], dash: [4, 3], values: s.p50[st + "_busy"] });
    }
    drawChart(stages, s.t, lines);
  }
}

function drawChart(canvas, t, lines) {
  const dpr = window.devicePixelRatio || 1;
  const w = canvas.clientWidth, h = canvas.clientHeight;
  if (!w || !h || !t) return;
  canvas.width = Math.round(w * dpr);
  canvas.height = Math.round(h * dpr);
  const g = canvas.getContext("2d");
  g.setTransform(dpr, 0, 0, dpr, 0, 0);
  g.clearRect(0, 0, w, h);
  const L = 46, R = 10, T = 22, B = 20;

  let lo = Infinity, hi = -Infinity;
  for (const line of lines)
    for (const v of line.values || [])
      if (isNum(v) && v > 0) { lo = Math.min(lo, v); hi = Math.max(hi, v); }
  const span = t.length ? Math.max(60, Math.ceil(-t[0] / 60) * 60) : 60;
  const x = (sec) => L + (w - L - R) * (1 + sec / span);
  g.font = "11px sans-serif";
  g.textBaseline = "middle";

  // Axes: decades of milliseconds (log scale), a tick a minute.
  let d0 = -1, d1 = 1;
  if (lo <= hi) {
    d0 = Math.floor(Math.log10(lo));
    d1 = Math.max(d0 + 1, Math.ceil(Math.log10(hi)));
  }
  const y = (v) => T + (h - T - B) * (1 - (Math.log10(v) - d0) / (d1 - d0));
  g.strokeStyle = "#2c323c";
  g.fillStyle = "#8b94a3";
  g.lineWidth = 1;
  g.beginPath();
  for (let d = d0; d <= d1; d++) {
    const yy = Math.round(y(10 ** d)) + 0.5;
    g.moveTo(L, yy);
    g.lineTo(w - R, yy);
    g.textAlign = "right";
    g.fillText(d >= 0 ? String(10 ** d) : (10 ** d).toFixed(-d), L - 4, yy);
  }
  g.textAlign = "center";
  for (let s = 0; s <= span; s += 60) {
    const xx = Math.round(x(-s)) + 0.5;
    g.moveTo(xx, T);
    g.lineTo(xx, h - B);
    g.fillText(s === 0 ? "now" : "−" + s / 60 + " min", Math.min(Math.max(xx, L + 16), w - R - 14), h - B / 2);
  }
  g.stroke();

  let drawn = 0;
  let lx = L;
  for (const line of lines) {
    const values = line.values || [];
    g.strokeStyle = line.color;
    g.lineWidth = 1.6;
    g.setLineDash(line.dash || []);
    g.beginPath();
    let pen = false;
    for (let i = 0; i < t.length && i < values.length; i++) {
      const v = values[i];
      if (!isNum(v) || v <= 0) { pen = false; continue; }
      const px = x(t[i]), py = y(v);
      if (pen) g.lineTo(px, py); else g.moveTo(px, py);
      pen = true;
      drawn++;
    }
    g.stroke();
    // legend
    g.beginPath();
    g.moveTo(lx, T / 2);
    g.lineTo(lx + 16, T / 2);
    g.stroke();
    g.setLineDash([]);
    g.fillStyle = "#e6e9ee";
    g.textAlign = "left";
    g.fillText(line.name, lx + 20, T / 2);
    lx += 28 + g.measureText(line.name).width;
  }
  canvas.dataset.points = String(drawn);
}

window.addEventListener("resize", drawCharts);
document.addEventListener("visibilitychange", () => {
  if (document.visibilityState === "visible")
    for (const card of cards.values()) {
      clearTimeout(card.snap.timer);
      if (!card.snap.off) card.snap.timer = setTimeout(() => pollSnapshot(card), 0);
    }
});
pollStats();
pollLatency();
