// sluice dashboard: polls /api/snapshot every second and draws the series
// as inline SVG. No external code.
'use strict';

const NS = 'http://www.w3.org/2000/svg';
const CLASS_COLORS = { high: '#2a9d8f', normal: '#1f6feb', low: '#e76f51' };
const PALETTE = ['#1f6feb', '#e76f51', '#2a9d8f', '#9b5de5', '#f4a261', '#577590', '#d62828', '#6a994e'];
const H = 190, L = 70, R = 12, T = 10, B = 22;

function fmtRate(v) {
  if (v == null) return '–';
  const u = ['B/s', 'kB/s', 'MB/s', 'GB/s'];
  let i = 0;
  while (Math.abs(v) >= 1000 && i < u.length - 1) { v /= 1000; i++; }
  return (v >= 100 || i === 0 ? v.toFixed(0) : v.toPrecision(3)) + ' ' + u[i];
}
function fmtBytes(v) { return fmtRate(v).replace('/s', ''); }
function fmtMs(v) {
  if (v == null) return '–';
  if (v === 0) return '0';
  if (v >= 1000) return (v / 1000).toPrecision(3) + ' s';
  if (v >= 1) return v.toPrecision(3) + ' ms';
  return (v * 1000).toPrecision(3) + ' µs';
}
function fmtSecs(v) { return v < 60 ? v.toFixed(1) + ' s' : Math.floor(v / 60) + ' min ' + Math.round(v % 60) + ' s'; }

// niceMax rounds a maximum up to 1, 2 or 5 times a power of ten.
function niceMax(v) {
  if (!(v > 0)) return 1;
  const p = Math.pow(10, Math.floor(Math.log10(v)));
  for (const m of [1, 2, 5, 10]) if (v <= m * p) return m * p;
  return 10 * p;
}

function el(tag, attrs, text) {
  const e = tag.includes(':') ? document.createElementNS(NS, tag.slice(4)) : document.createElement(tag);
  for (const k in attrs || {}) e.setAttribute(k, attrs[k]);
  if (text != null) e.textContent = text;
  return e;
}

// chart draws series [{name, values, color}] over times (Unix seconds)
// into svg, at most maxSpan seconds back from the last sample (at least
// one minute, so a young series starts at the left), values formatted by
// fmt.
function chart(svg, times, series, maxSpan, fmt) {
  svg.replaceChildren();
  // Draw in CSS pixels, so text keeps its size at any width.
  const W = Math.max(320, Math.round(svg.getBoundingClientRect().width) || 800);
  svg.setAttribute('viewBox', '0 0 ' + W + ' ' + H);
  const now = times.length ? times[times.length - 1] : Date.now() / 1000;
  const span = Math.min(maxSpan, Math.max(60, times.length ? now - times[0] : 0));
  let max = 0;
  for (const s of series) for (const v of s.values) if (v != null && v > max) max = v;
  max = niceMax(max * 1.05);
  const x = t => L + (W - L - R) * (1 - (now - t) / span);
  const y = v => T + (H - T - B) * (1 - v / max);
  for (const f of [0, 0.5, 1]) {
    const v = max * f;
    svg.append(el('svg:line', { class: 'grid', x1: L, x2: W - R, y1: y(v), y2: y(v) }));
    svg.append(el('svg:text', { class: 'axis', x: L - 6, y: y(v) + 4, 'text-anchor': 'end' }, fmt(v)));
  }
  const step = [10, 15, 30, 60, 120, 300].find(st => span / st <= 6) || 600;
  for (let k = 0; k * step <= span + 0.001; k++) {
    const ago = k * step;
    const label = k === 0 ? 'now' : '-' + (ago < 60 ? ago + ' s' : ago / 60 + ' min');
    const anchor = k === 0 ? 'end' : (ago + step > span ? 'start' : 'middle');
    svg.append(el('svg:text', { class: 'axis', x: x(now - ago), y: H - 6, 'text-anchor': anchor }, label));
  }
  if (!times.length) {
    svg.append(el('svg:text', { class: 'empty', x: (W + L) / 2, y: H / 2, 'text-anchor': 'middle' }, 'waiting for samples…'));
  }
  for (const s of series) {
    let d = '', pen = 'M';
    for (let i = 0; i < times.length; i++) {
      const v = s.values[i];
      if (v == null || now - times[i] > span) { pen = 'M'; continue; }
      d += pen + x(times[i]).toFixed(1) + ' ' + y(v).toFixed(1) + ' ';
      pen = 'L';
    }
    const p = el('svg:path', { class: 'series', d: d.trim() || 'M0 0', stroke: s.color, 'data-series': s.name });
    if (!d) p.setAttribute('visibility', 'hidden');
    svg.append(p);
  }
}

function legend(div, series, fmt) {
  div.replaceChildren();
  for (const s of series) {
    let last = null;
    for (let i = s.values.length - 1; i >= 0; i--) if (s.values[i] != null) { last = s.values[i]; break; }
    const item = el('span');
    const sw = el('span', { class: 'sw' });
    sw.style.background = s.color;
    item.append(sw, document.createTextNode(s.name), el('b', null, fmt(last)));
    div.append(item);
  }
}

function badge(cls, text) { return el('span', { class: 'badge ' + cls }, text); }

// rows fills table with a row per item. A column is the name of the
// item's field it shows, or { get, cls, title }.
function rows(table, items, cols, empty) {
  const body = table.tBodies[0];
  body.replaceChildren();
  if (!items.length) {
    const tr = el('tr', { class: 'none' });
    tr.append(el('td', { colspan: table.tHead.rows[0].cells.length }, empty));
    body.append(tr);
    return;
  }
  for (const it of items) {
    const tr = el('tr');
    for (const c of cols) {
      const td = el('td', c.cls ? { class: c.cls } : null);
      const v = typeof c === 'string' ? it[c] : c.get(it);
      if (v instanceof Node) td.append(v); else td.textContent = v == null ? '' : String(v);
      if (c.title) td.title = c.title(it);
      tr.append(td);
    }
    if (it.penalized) tr.dataset.penalized = 'true';
    tr.dataset.id = it.id != null ? it.id : '';
    body.append(tr);
  }
}

function classCell(s) {
  const f = document.createDocumentFragment();
  f.append(badge(s.class, s.class));
  if (s.penalized) f.append(badge('penalized', 'penalized'));
  return f;
}

function render(s) {
  const span = s.window_seconds;
  const t = s.series.times;
  const classes = ['high', 'normal', 'low'].map(c => ({ name: c, values: s.series.classes[c] || [], color: CLASS_COLORS[c] }));
  chart(document.getElementById('chart-classes'), t, classes, span, fmtRate);
  legend(document.getElementById('legend-classes'), classes, fmtRate);

  const pools = Object.keys(s.series.pools).sort().map((p, i) => ({ name: p || '(no pool)', values: s.series.pools[p], color: PALETTE[i % PALETTE.length] }));
  chart(document.getElementById('chart-pools'), t, pools, span, fmtRate);
  legend(document.getElementById('legend-pools'), pools, fmtRate);

  const delay = ['high', 'normal', 'low'].map(c => ({ name: c, values: s.series.delay_ms[c] || [], color: CLASS_COLORS[c] }));
  chart(document.getElementById('chart-delay'), t, delay, span, fmtMs);
  legend(document.getElementById('legend-delay'), delay, fmtMs);

  rows(document.getElementById('statements'), s.statements, [
    'id',
    'user',
    'pool',
    { get: classCell },
    'state',
    { cls: 'num', get: x => fmtRate(x.bytes_per_second) },
    { cls: 'num', get: x => fmtBytes(x.bytes) },
    { cls: 'num', get: x => fmtSecs(x.elapsed_seconds) },
    { cls: 'sql', get: x => x.sql, title: x => x.sql + (x.except_info && x.except_info.length ? '\n' + x.except_info.join('\n') : '') },
  ], 'no running statements');

  rows(document.getElementById('firings'), s.firings, [
    'time',
    'rule',
    'action',
    'statement_id',
    'usename',
    'resource_pool',
    { cls: 'num', get: x => x.bandwidth_mbps + ' MB/s' },
    { cls: 'num', get: x => fmtSecs(Number(x.elapsed_s)) },
    { cls: 'sql', get: x => x.query, title: x => x.query },
    { cls: 'info', get: x => x.except_info },
    'outcome',
  ], 'none yet');

  // Rules and links are the console's views, row by row, column by column.
  const unset = v => (v === undefined || v === '' || v === '-1') ? '–' : v;
  rows(document.getElementById('rules'), s.rules, [
    'name',
    'action',
    { cls: 'num', get: x => unset(x.bandwidth) },
    { cls: 'num', get: x => unset(x.elapsedtime) },
    { cls: 'num', get: x => unset(x.blocktime) },
    'pools',
    { cls: 'num', get: x => x.firings },
  ], 'no exception rules');

  const settings = Object.keys(s.settings).sort().map(k => ({ name: k, value: s.settings[k] }));
  rows(document.getElementById('settings'), settings, [
    'name',
    'value',
  ], 'none');

  rows(document.getElementById('links'), s.links, [
    'name',
    'capacity',
    'queue_size',
    { get: x => x.emulation || '–' },
    { cls: 'num', get: x => unset(x.max_active_statements) },
    { get: x => x.routes || '–' },
    { cls: 'num', get: x => fmtRate(x.bytes_per_second) },
  ], 'no links');

  rows(document.getElementById('network'), s.network, [
    'link',
    'direction',
    'side',
    'state',
    { cls: 'num', get: x => fmtRate(Number(x.bottleneck_bytes_per_second)) },
    { cls: 'num', get: x => x.base_rtt_ms + ' ms' },
    { cls: 'num', get: x => x.queue_delay_ms + ' ms' },
    { cls: 'num', get: x => x.low_rate_bytes_per_second === '0' ? '–' : fmtRate(Number(x.low_rate_bytes_per_second)) },
  ], 'no link with network control carries traffic');

  document.getElementById('meta').textContent =
    'version ' + s.version + ' · up ' + fmtSecs(s.uptime_seconds) + ' · ' + s.sessions + ' sessions · ' + s.running + ' running statements';
}

function status(text, ok) {
  const st = document.getElementById('status');
  st.textContent = text;
  st.className = 'status ' + (ok ? 'ok' : 'bad');
}

async function tick() {
  try {
    const r = await fetch('/api/snapshot', { cache: 'no-store', credentials: 'same-origin' });
    if (r.status === 401) {
      status('unauthorized: open this page as /?token=TOKEN', false);
    } else if (!r.ok) {
      status('error ' + r.status, false);
    } else {
      render(await r.json());
      status('live · ' + new Date().toLocaleTimeString(), true);
    }
  } catch (e) {
    status('disconnected', false);
  }
  setTimeout(tick, 1000);
}

// What-if panel: polls /api/whatif with the RTTs of its input and plots,
// per application, predicted latency and throughput against added RTT
// (today's figures at 0).

function fmtTPS(v) {
  if (v == null) return '–';
  if (v >= 100) return v.toFixed(0);
  return v.toPrecision(3);
}
function appKey(a) { return [a.protocol, a.user, a.database, a.application].join('/'); }
function appName(a) { return (a.application || '(no name)') + ' · ' + a.user + '@' + a.database; }

// xyChart draws series [{name, points: [[x, y]...], color}] into svg
// with linear axes from 0, x formatted by fmtX, y by fmtY; each series is
// a <path data-app="NAME"> with a dot per point.
function xyChart(svg, series, fmtX, fmtY, empty) {
  svg.replaceChildren();
  const W = Math.max(280, Math.round(svg.getBoundingClientRect().width) || 400);
  svg.setAttribute('viewBox', '0 0 ' + W + ' ' + H);
  let xmax = 0, ymax = 0;
  for (const s of series) for (const [px, py] of s.points) { xmax = Math.max(xmax, px); ymax = Math.max(ymax, py); }
  xmax = niceMax(xmax);
  ymax = niceMax(ymax * 1.05);
  const x = v => L + (W - L - R) * v / xmax;
  const y = v => T + (H - T - B) * (1 - v / ymax);
  for (const f of [0, 0.5, 1]) {
    svg.append(el('svg:line', { class: 'grid', x1: L, x2: W - R, y1: y(ymax * f), y2: y(ymax * f) }));
    svg.append(el('svg:text', { class: 'axis', x: L - 6, y: y(ymax * f) + 4, 'text-anchor': 'end' }, fmtY(ymax * f)));
  }
  for (const f of [0, 0.25, 0.5, 0.75, 1]) {
    const anchor = f === 0 ? 'start' : (f === 1 ? 'end' : 'middle');
    svg.append(el('svg:text', { class: 'axis', x: x(xmax * f), y: H - 6, 'text-anchor': anchor }, '+' + fmtX(xmax * f)));
  }
  if (!series.length) {
    svg.append(el('svg:text', { class: 'empty', x: (W + L) / 2, y: H / 2, 'text-anchor': 'middle' }, empty));
  }
  for (const s of series) {
    const d = s.points.map((p, i) => (i ? 'L' : 'M') + x(p[0]).toFixed(1) + ' ' + y(p[1]).toFixed(1)).join(' ');
    const g = el('svg:g', { 'data-app': s.name });
    g.append(el('svg:path', { class: 'series', d: d || 'M0 0', stroke: s.color, 'data-app': s.name }));
    for (const p of s.points) {
      const c = el('svg:circle', { class: 'dot', cx: x(p[0]).toFixed(1), cy: y(p[1]).toFixed(1), r: 2.5, fill: s.color });
      c.append(el('svg:title', null, s.name + ': +' + fmtX(p[0]) + ' → ' + fmtY(p[1])));
      g.append(c);
    }
    svg.append(g);
  }
}

function renderWhatIf(w) {
  const apps = w.applications || [];
  const colors = {};
  apps.forEach((a, i) => { colors[appKey(a)] = PALETTE[i % PALETTE.length]; });
  const lat = apps.map(a => ({ name: appKey(a), color: colors[appKey(a)],
    points: [[0, a.latency_ms]].concat((a.predictions || []).map(p => [p.rtt_ms, p.latency_ms])) }));
  const tps = apps.map(a => ({ name: appKey(a), color: colors[appKey(a)],
    points: [[0, a.tps]].concat((a.predictions || []).map(p => [p.rtt_ms, p.tps])) }));
  const empty = 'no application completed a transaction in the last ' + w.window_seconds + ' s';
  xyChart(document.getElementById('chart-whatif-latency'), lat, fmtMs, fmtMs, empty);
  xyChart(document.getElementById('chart-whatif-tps'), tps, fmtMs, v => fmtTPS(v) + ' TPS', empty);

  const lg = document.getElementById('legend-whatif');
  lg.replaceChildren();
  for (const a of apps) {
    const item = el('span', { 'data-app': appKey(a) });
    const sw = el('span', { class: 'sw' });
    sw.style.background = colors[appKey(a)];
    item.append(sw, document.createTextNode(appName(a)));
    lg.append(item);
  }

  const last = a => (a.predictions || [])[(a.predictions || []).length - 1];
  const table = document.getElementById('whatif');
  rows(table, apps.map(a => Object.assign({ key: appKey(a) }, a)), [
    { get: x => x.application || '(no name)' },
    'protocol',
    'user',
    'database',
    { cls: 'num', get: x => x.sessions },
    { cls: 'num', get: x => fmtTPS(x.tps) },
    { cls: 'num', get: x => fmtMs(x.latency_ms) },
    { cls: 'num', get: x => x.round_trips.toFixed(1) },
    { cls: 'num', get: x => (100 * x.network_share).toFixed(1) + '%' },
    { cls: 'num', get: x => { const p = last(x); return p ? '+' + fmtMs(p.rtt_ms) + ': ' + fmtMs(p.latency_ms) + ', ' + fmtTPS(p.tps) + ' TPS' : '–'; } },
  ], empty);
  for (const tr of table.tBodies[0].rows) {
    const i = tr.sectionRowIndex;
    if (apps[i]) tr.dataset.app = appKey(apps[i]);
  }
}

async function whatIfTick() {
  const note = document.getElementById('whatif-status');
  const rtt = document.getElementById('whatif-rtt').value.trim();
  try {
    const r = await fetch('/api/whatif' + (rtt ? '?rtt=' + encodeURIComponent(rtt) : ''), { cache: 'no-store', credentials: 'same-origin' });
    if (r.ok) {
      renderWhatIf(await r.json());
      note.textContent = '';
      note.className = 'note';
    } else {
      let msg = 'error ' + r.status;
      try { const e = await r.json(); if (e.error) msg = e.error; } catch (e) { /* not JSON */ }
      note.textContent = msg;
      note.className = 'note bad';
    }
  } catch (e) {
    note.textContent = 'disconnected';
    note.className = 'note bad';
  }
}

let whatIfTimer = null;
function whatIfLoop() {
  clearTimeout(whatIfTimer);
  whatIfTick().finally(() => { whatIfTimer = setTimeout(whatIfLoop, 2000); });
}

document.getElementById('whatif-form').addEventListener('submit', ev => {
  ev.preventDefault();
  whatIfLoop();
});

tick();
whatIfLoop();
