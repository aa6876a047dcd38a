// SPDX-License-Identifier: MIT
// The live page of zcpipe (src/daemon/live.h). Two views of the same streams:
//   the grid (no hash): a tile per stream, sized so that all of them fit one screen (scrolling
//     only where tiles would get too small), each with its latest frame, its objects, name,
//     state, fps, and why it is not up when it is not;
//   one stream in full (#<stream>, so a link opens it): frame, objects, motion, facts, charts.
// It polls /stats, /api/latency and the snapshots of the streams in view (a tile on screen or
// the stream shown in full), and draws a snapshot's frame with its own moving cells (the JSON's
// mask of that frame), their box, and the detector's boxes with class and score. Every value
// from zcpipe enters the page as text (textContent) or as an attribute value, never as markup.
"use strict";

const STATS_MS = 1000;
const LATENCY_MS = 2000;
const STAGES = ["convert", "infer", "publish"];
const QUANTILES = ["p50", "p90", "p99", "p99.9", "max"];
const COLOR = { p50: "#3ecf8e", p99: "#ff6b6b", convert: "#f5b942", infer: "#4cc2ff", publish: "#c792ea" };
const TILE_ASPECT = 16 / 9;   // a tile's box; frames of another shape are letterboxed in it
const TILE_MIN_W = 180;       // CSS px: narrower tiles would say nothing, the grid scrolls instead
const TILE_MIN_H = 100;
const NOUN = { v4l2: "the camera", network: "the network source", file: "the file", synthetic: "the synthetic source" };

const cams = new Map();   // stream name -> {name, tile, card, stats, inView, last, snap}
let latency = null;       // the last /api/latency
let polls = 0;            // /stats answers rendered
let selected = null;      // the stream shown in full (the hash), null for the grid
let cameFromGrid = false; // the detail view was opened from the grid: "back" is history.back()
let gridScroll = 0;

const grid = document.getElementById("grid");
const detail = document.getElementById("detail");

function field(el, name) {
  return el.querySelector('[data-f="' + name + '"]');
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

function firstDefined(...values) {
  for (const v of values) if (v !== undefined && v !== null) return v;
  return undefined;
}

// "stale 3, ring_full 1" of the non-zero counts of an object, or "none".
function nonzero(counts) {
  const list = Object.entries(counts || {}).filter(([, n]) => n > 0);
  return list.length ? list.map(([k, n]) => k + " " + n).join(", ") : "none";
}

// ---- a stream: its tile in the grid and its card (the full view) ----

const observer = new IntersectionObserver((entries) => {
  for (const e of entries) {
    const cam = cams.get(e.target.dataset.stream);
    if (!cam || cam.tile !== e.target) continue;
    cam.inView = e.isIntersecting;
    if (cam.inView) {
      paintTile(cam);
      kick(cam);
    }
  }
});

function makeCam(name) {
  const tile = document.getElementById("tile").content.firstElementChild.cloneNode(true);
  const card = document.getElementById("card").content.firstElementChild.cloneNode(true);
  const cam = { name, tile, card, stats: null, inView: false, last: null,
                snap: { seq: null, fps: 2, off: false, offText: "", timer: 0, busy: false } };
  tile.dataset.stream = name;
  card.dataset.stream = name;
  tile.href = "#" + encodeURIComponent(name);   // names are [A-Za-z0-9_.-] (config.c): the hash is the name
  setText(field(tile, "name"), name);
  setText(field(card, "name"), name);
  field(card, "video").href = "/stream/" + encodeURIComponent(name) + ".mjpg";
  for (const c of card.querySelectorAll("canvas.chart")) c.dataset.points = "0";
  card.hidden = selected !== name;
  detail.append(card);
  cams.set(name, cam);
  observer.observe(tile);
  return cam;
}

function dropCam(cam) {
  clearTimeout(cam.snap.timer);
  observer.unobserve(cam.tile);
  cam.tile.remove();
  cam.card.remove();
  if (cam.last) cam.last.bitmap.close();
  cams.delete(cam.name);
}

// Why a stream is not up, for a user (null when it is): the state to show, a title and a detail.
// stream_state is the supervisor's (a stream that failed and is re-opened, or gave up, or ended);
// state is the source's own (a camera that is not there yet: the stream runs, its source waits).
function trouble(s) {
  const sup = String(s.stream_state || "up"), src = String(s.state || "unknown");
  const what = NOUN[s.source] || "the source";
  const srcErr = s.source_error ? String(s.source_error) : "";
  const lastErr = s.last_error ? String(s.last_error) : "";
  if (sup === "failed")
    return { state: "failed", title: "stopped: it failed and is not retried", detail: lastErr || "see zcpipe's log" };
  if (sup === "backoff") {
    const n = isNum(s.restarts) && s.restarts > 0 ? " (restart " + s.restarts + ")" : "";
    return { state: "backoff", title: "restarting after a failure" + n, detail: lastErr || "see zcpipe's log" };
  }
  if (sup === "ended" || src === "ended")
    return { state: "ended", title: "ended", detail: what + " has no more frames" };
  if (src === "backoff")
    return { state: "backoff", title: "waiting for " + what,
             detail: srcErr || "it cannot be opened yet; zcpipe keeps trying (the reason is in its log)" };
  if (src === "opening") return { state: "opening", title: "opening " + what, detail: srcErr };
  if (src === "down") return { state: "down", title: what + " is down", detail: srcErr };
  if (src !== "up") return { state: src, title: "state " + src, detail: srcErr };
  return null;
}

function setWhy(el, why, kind, sep) {
  const box = field(el, "why");
  box.hidden = !why;
  if (!why) return;
  box.dataset.kind = kind;
  box.dataset.state = why.state || "";
  setText(field(el, "why-title"), why.title + (sep && why.detail ? sep : ""));
  setText(field(el, "why-detail"), why.detail || "");
}

function setState(el, state) {
  const pill = field(el, "state");
  setText(pill, state);
  pill.dataset.state = state;
}

function renderTile(cam, s) {
  const t = trouble(s);
  const tile = cam.tile;
  tile.dataset.state = t ? t.state : "up";
  tile.dataset.up = t ? "false" : "true";
  setState(tile, t ? t.state : "up");
  setText(field(tile, "fps"), isNum(s.fps) ? s.fps.toFixed(1) : "–");
  let why = t, kind = "trouble";
  if (!why && cam.snap.off) [why, kind] = [{ title: "no frames here", detail: cam.snap.offText }, "info"];
  else if (!why && !cam.last) [why, kind] = [{ title: "waiting for a frame…", detail: "" }, "info"];
  setWhy(tile, why, kind);
  tile.title = cam.name + (t ? ": " + t.title + (t.detail ? ": " + t.detail : "") : "");
}

function renderCard(cam, s) {
  const card = cam.card;
  const fr = s.frames || {};
  const t = trouble(s);
  setState(card, t ? t.state : "up");
  setWhy(card, t, "trouble", ":");
  setText(field(card, "fps"), isNum(s.fps) ? s.fps.toFixed(1) : "–");
  setText(field(card, "geometry"), s.width + "×" + s.height + " " + (s.format || ""));
  setText(field(card, "source"), s.source || "–");
  setText(field(card, "capture_path"), s.capture_path || "–");
  setText(field(card, "backend"), s.backend || "–");
  setText(field(card, "gpu"), Number.isInteger(s.gpu_device) ? String(s.gpu_device) : "–");
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
  // The last error stays after the stream came back: said once, quietly, unless the line above says it.
  const err = firstDefined(s.last_error, s.error);
  const errEl = field(card, "last_error");
  errEl.hidden = !err || (t !== null && t.detail === err);
  setText(errEl, err ? "last error: " + err : "");
  field(card, "video").hidden = cam.snap.off;

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

function renderSummary() {
  const counts = new Map();
  for (const cam of cams.values()) {
    if (!cam.stats) continue;
    const t = trouble(cam.stats);
    const k = !t ? "up" : t.state === "ended" ? "ended" : t.state === "failed" ? "failed" : "waiting";
    counts.set(k, (counts.get(k) || 0) + 1);
  }
  const el = document.getElementById("summary");
  const parts = [cams.size + (cams.size === 1 ? " stream" : " streams")];
  const cls = { up: "", waiting: "warn", failed: "bad", ended: "dim" };
  for (const k of ["up", "waiting", "failed", "ended"])
    if (counts.get(k)) parts.push([counts.get(k) + " " + k, cls[k]]);
  const text = parts.map((p) => (Array.isArray(p) ? p[0] : p)).join(" · ");
  if (el.dataset.text === text) return;
  el.dataset.text = text;
  el.replaceChildren(...parts.flatMap((p, i) => {
    const span = document.createElement("span");
    if (Array.isArray(p)) {
      span.textContent = p[0];
      if (p[1]) span.className = p[1];
    } else {
      span.textContent = p;
    }
    return i ? [" · ", span] : [span];
  }));
}

function renderStats(stats) {
  const seen = new Set();
  let prev = null;
  for (const s of stats.streams || []) {
    const name = String(s.name);
    seen.add(name);
    const cam = cams.get(name) || makeCam(name);
    cam.stats = s;
    renderTile(cam, s);
    renderCard(cam, s);
    kick(cam);
    const here = prev ? prev.nextElementSibling : grid.firstElementChild;   // config order
    if (here !== cam.tile) {
      if (prev) prev.after(cam.tile);
      else grid.prepend(cam.tile);
    }
    prev = cam.tile;
  }
  for (const cam of [...cams.values()])
    if (!seen.has(cam.name)) dropCam(cam);
  document.getElementById("empty").hidden = cams.size > 0;
  setText(document.getElementById("version"), stats.version ? "version " + stats.version : "");
  renderSummary();
  layoutGrid();   // the header may have grown a line, streams come and go
  showMissing();
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

// ---- the two views ----

// Columns and tile height so that every tile fits the window below the header, as large as
// possible; where they cannot fit without getting smaller than TILE_MIN_W x TILE_MIN_H, as many
// columns as fit at TILE_MIN_W and the page scrolls down (never sideways).
function layoutGrid() {
  const n = grid.children.length;
  if (!n || selected !== null) return;
  const cs = getComputedStyle(grid);
  const gap = parseFloat(cs.columnGap) || 0;
  const W = grid.clientWidth - parseFloat(cs.paddingLeft) - parseFloat(cs.paddingRight);
  const top = grid.getBoundingClientRect().top + window.scrollY + parseFloat(cs.paddingTop);
  const H = window.innerHeight - top - gap;
  let best = null;
  for (let c = 1; c <= n; c++) {
    const w = (W - (c - 1) * gap) / c;
    if (w < TILE_MIN_W && c > 1) break;
    const rows = Math.ceil(n / c);
    const h = Math.min(w / TILE_ASPECT, (H - (rows - 1) * gap) / rows);
    if (h < TILE_MIN_H) continue;
    const shown = Math.min(w, h * TILE_ASPECT) * Math.min(h, w / TILE_ASPECT);   // a 16:9 frame's area
    if (!best || shown > best.shown) best = { c, h, shown };
  }
  if (!best) {
    const c = Math.max(1, Math.min(n, Math.floor((W + gap) / (TILE_MIN_W + gap))));
    best = { c, h: (W - (c - 1) * gap) / c / TILE_ASPECT };
  }
  const cols = String(best.c), tileH = Math.floor(best.h) + "px";
  if (grid.dataset.cols === cols && grid.style.getPropertyValue("--tile-h") === tileH) return;
  grid.style.setProperty("--cols", cols);
  grid.style.setProperty("--tile-h", tileH);
  grid.dataset.cols = cols;
  for (const cam of cams.values()) paintTile(cam);   // line widths follow the tile's size
}

function hashName() {
  const h = location.hash.slice(1);
  if (!h) return null;
  try {
    return decodeURIComponent(h);
  } catch (e) {
    return h;
  }
}

function showMissing() {
  const el = document.getElementById("missing");
  const gone = selected !== null && polls > 0 && !cams.has(selected);
  el.hidden = !gone;
  setText(el, gone ? "no stream is called “" + selected + "” (any more)" : "");
}

function route() {
  const name = hashName();
  const was = selected;
  if (name === was && document.body.dataset.view) {
    showMissing();
    return;
  }
  if (was === null && name !== null) {
    gridScroll = window.scrollY;
    cameFromGrid = polls > 0;
  } else if (name !== null) {
    cameFromGrid = false;   // one stream to another (a typed hash): the entry before is not the grid
  }
  selected = name;
  document.body.dataset.view = name === null ? "grid" : "detail";
  detail.hidden = name === null;
  for (const cam of cams.values()) cam.card.hidden = cam.name !== name;
  document.title = name === null ? "zcpipe live" : name + " · zcpipe live";
  showMissing();
  if (name === null) {
    layoutGrid();
    window.scrollTo(0, gridScroll);
    cameFromGrid = false;
  } else {
    window.scrollTo(0, 0);
    const cam = cams.get(name);
    if (cam) {
      paintCard(cam);
      drawCharts();
      kick(cam);
    }
  }
}

function toGrid() {
  if (cameFromGrid) {
    history.back();
  } else {
    history.pushState(null, "", location.pathname + location.search);
    route();
  }
}

// ---- snapshots: polled while their stream is in view ----

function wanted(cam) {
  return selected === null ? cam.inView : selected === cam.name;
}

function kick(cam) {
  const sn = cam.snap;
  if (sn.busy || sn.timer || !cams.has(cam.name) || !wanted(cam)) return;
  sn.timer = setTimeout(() => pollSnapshot(cam), 0);
}

async function pollSnapshot(cam) {
  const sn = cam.snap;
  sn.timer = 0;
  // Out of view (or the tab hidden): no more requests, so zcpipe stops taking its frames; kick() resumes.
  if (!cams.has(cam.name) || !wanted(cam) || document.visibilityState === "hidden") return;
  let delay = 1000 / sn.fps;
  sn.busy = true;
  try {
    const base = "/snapshot/" + encodeURIComponent(cam.name);
    const r = await fetch(base + ".json", { cache: "no-store" });
    if (r.status === 404) {
      // Off (snapshot_fps: 0, not built) or a stream that is down and has none now: ask again, seldom.
      sn.off = true;
      sn.offText = (await r.text()).trim();
      delay = 5000;
      setText(field(cam.card, "snapshot"), sn.offText);
      if (cam.stats) renderTile(cam, cam.stats);
    } else if (r.ok) {
      if (sn.off) {
        sn.off = false;
        setText(field(cam.card, "snapshot"), "waiting for a frame…");
        paintCard(cam);
        if (cam.stats) renderTile(cam, cam.stats);
      }
      const info = await r.json();
      if (isNum(info.fps) && info.fps > 0) sn.fps = info.fps;
      delay = 1000 / sn.fps;
      if (info.seq !== null && info.seq !== sn.seq) {
        const ir = await fetch(base + ".jpg", { cache: "no-store" });
        // Draw a frame only with its own results: both answers must name the same frame.
        if (ir.ok && ir.headers.get("X-Zcp-Seq") === String(info.seq)) {
          const bitmap = await createImageBitmap(await ir.blob());
          if (cam.last) cam.last.bitmap.close();
          cam.last = { bitmap, info };
          sn.seq = info.seq;
          paintTile(cam);
          paintCard(cam);
          if (cam.stats) renderTile(cam, cam.stats);
        } else {
          delay = 100;
        }
      }
    }
  } catch (e) {
    delay = 2000;   // zcpipe restarting or gone: keep trying, slowly
  } finally {
    sn.busy = false;
  }
  if (cams.has(cam.name)) sn.timer = setTimeout(() => pollSnapshot(cam), delay);
}

// ---- drawing a frame ----

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

function detections(info) {
  const res = info.result || {};
  return Array.isArray(res.detections) ? res.detections : null;
}

// Frame pixels per CSS pixel of the frame as shown (the canvas letterboxes it: object-fit: contain),
// so that lines and labels are the same size on the screen whatever the frame's size.
function framePx(canvas) {
  const w = canvas.clientWidth, h = canvas.clientHeight;
  return w && h ? Math.max(canvas.width / w, canvas.height / h) : 1;
}

// The frame, its moving cells and their box, the detector's boxes with class and score (a tile's
// motion box goes without its label: the objects are what a small picture is for). The canvas says
// what it drew: data-cells (squares), data-mask-moving (the mask's own count), data-boxes, data-seq.
function drawFrame(canvas, bitmap, info, tile) {
  if (canvas.width !== bitmap.width || canvas.height !== bitmap.height) {
    canvas.width = bitmap.width;
    canvas.height = bitmap.height;
  }
  const g = canvas.getContext("2d");
  const px = framePx(canvas);
  const fontPx = tile && canvas.clientWidth < 300 ? 10 : 13;   // a phone's tiles: smaller labels
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
  canvas.dataset.cells = cells ? String(cells.length) : "none";
  canvas.dataset.maskMoving = cells && isNum(info.mask.moving) ? String(info.mask.moving) : "none";
  g.font = Math.round(fontPx * px) + "px sans-serif";
  g.textBaseline = "middle";
  g.lineWidth = (tile ? 1.5 : 2) * px;
  if (m && Array.isArray(m.bbox)) {
    // Then the box around them (the moving cells all lie inside it).
    const [x0, y0, x1, y1] = m.bbox;
    g.strokeStyle = "#ffd600";
    g.strokeRect(x0, y0, x1 - x0, y1 - y0);
  }
  if (m && Array.isArray(m.bbox) && !tile) {
    const [x0, y0, , y1] = m.bbox;
    const label = "motion: " + m.moving_cells + " cells";
    const tw = g.measureText(label).width + 8 * px, th = Math.round(18 * px);
    const ly = y0 >= th ? y0 - th : y1 + th <= canvas.height ? y1 : y0;   // above, else below, else inside
    g.fillStyle = "#ffd600";
    g.fillRect(x0, ly, tw, th);
    g.fillStyle = "#000";
    g.fillText(label, x0 + 4 * px, ly + th / 2);
  }
  // The detector's objects: a box per object with its class and score (frame pixels, as the result line).
  const dets = detections(info);
  let boxes = 0;
  for (const d of dets || []) {
    if (!Array.isArray(d.box) || d.box.length !== 4 || !d.box.every(isNum)) continue;
    const [x0, y0, x1, y1] = d.box;
    const color = classColor(isNum(d.id) ? d.id : 0);
    g.strokeStyle = color;
    g.strokeRect(x0, y0, x1 - x0, y1 - y0);
    const text = String(d.class) + (isNum(d.score) ? " " + Math.round(d.score * 100) + "%" : "");
    const tw = g.measureText(text).width + (fontPx / 2 + 2) * px, th = Math.round((fontPx + 5) * px);
    const ly = y0 >= th ? y0 - th : y0;
    g.fillStyle = color;
    g.fillRect(x0, ly, tw, th);
    g.fillStyle = "#000";
    g.fillText(text, x0 + (fontPx / 4 + 1) * px, ly + th / 2);
    boxes++;
  }
  canvas.dataset.boxes = dets ? String(boxes) : "none";
  canvas.dataset.seq = String(info.seq);
}

// "3 person · 1 car" of a detector's frame, the top class of a classifier's.
function objectsLine(info) {
  const dets = detections(info);
  if (dets) {
    const byClass = new Map();
    for (const d of dets) byClass.set(String(d.class), (byClass.get(String(d.class)) || 0) + 1);
    if (!byClass.size) return "nothing detected";
    return [...byClass.entries()].sort((a, b) => b[1] - a[1]).map(([k, n]) => n + " " + k).join(" · ");
  }
  const top = ((info.result || {}).topk || [])[0];
  if (!top) return "";
  return (top.label !== undefined ? String(top.label) : "class " + top.class) +
         (isNum(top.prob) ? " " + (top.prob * 100).toFixed(1) + " %" : "");
}

function paintTile(cam) {
  if (!cam.last || selected !== null) return;
  drawFrame(cam.tile.querySelector("canvas.frame"), cam.last.bitmap, cam.last.info, true);
  cam.tile.dataset.snapSeq = String(cam.last.info.seq);
  setText(field(cam.tile, "objects"), objectsLine(cam.last.info));
}

function paintCard(cam) {
  if (!cam.last || selected !== cam.name) return;
  const { bitmap, info } = cam.last;
  const card = cam.card;
  const canvas = card.querySelector("canvas.frame");
  // As wide as the column, as high as most of the window: no wider than that height allows.
  const maxWidth = "calc(75vh * " + (bitmap.width / bitmap.height).toFixed(4) + ")";
  if (canvas.style.maxWidth !== maxWidth) canvas.style.maxWidth = maxWidth;
  drawFrame(canvas, bitmap, info, false);
  card.dataset.snapSeq = String(info.seq);
  const res = info.result || {};
  const m = res.motion || null;
  const cell = info.cell;

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
  const dets = detections(info);
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

// ---- latency charts (plain canvas), of the stream shown in full ----

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
  const cam = selected !== null ? cams.get(selected) : null;
  if (!latency || !cam) return;
  const s = (latency.streams || []).find((x) => String(x.name) === cam.name);
  if (!s) return;
  const e2e = cam.card.querySelector('canvas[data-chart="e2e"]');
  const stages = cam.card.querySelector('canvas[data-chart="stages"]');
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

  // Legend entries wrap onto the plot's top rather than run off a narrow canvas.
  let drawn = 0;
  let lx = L, ly = T / 2;
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
    const lw = 28 + g.measureText(line.name).width;
    if (lx > L && lx + lw > w - R) {
      lx = L;
      ly += 14;
    }
    g.beginPath();
    g.moveTo(lx, ly);
    g.lineTo(lx + 16, ly);
    g.stroke();
    g.setLineDash([]);
    g.fillStyle = "#e6e9ee";
    g.textAlign = "left";
    g.fillText(line.name, lx + 20, ly);
    lx += lw;
  }
  canvas.dataset.points = String(drawn);
}

// ---- events ----

window.addEventListener("resize", () => {
  layoutGrid();
  drawCharts();
  if (selected !== null && cams.has(selected)) paintCard(cams.get(selected));
});
window.addEventListener("hashchange", route);
document.getElementById("back").addEventListener("click", (e) => {
  e.preventDefault();
  toGrid();
});
document.getElementById("home").addEventListener("click", (e) => {
  e.preventDefault();
  if (selected !== null) toGrid();
});
document.addEventListener("keydown", (e) => {
  if (e.key === "Escape" && selected !== null) toGrid();
});
document.addEventListener("visibilitychange", () => {
  if (document.visibilityState === "visible")
    for (const cam of cams.values()) kick(cam);
});
route();
pollStats();
pollLatency();
