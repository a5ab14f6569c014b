"""The console page: one HTML document with inline CSS and vanilla JS (no CDN, no network).

The script reads the JSON API with the staff key from localStorage (set by the key prompt) in
the ``X-Staff-Key`` header, re-renders every few seconds, and draws charts as inline SVG.
"""

from __future__ import annotations

__all__ = ["LOGIN_HTML", "PAGE_HTML"]

_STYLE = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:0;background:#f4f5f7;color:#1d2330}
header{background:#1d2330;color:#fff;padding:10px 24px;display:flex;justify-content:space-between;align-items:center}
header h1{font-size:17px;margin:0;font-weight:600} header span{opacity:.8}
main{padding:16px 24px;max-width:1280px;margin:auto}
section{background:#fff;border:1px solid #dde1e7;border-radius:6px;padding:14px 18px;margin-bottom:16px}
h2{font-size:15px;margin:0 0 10px}
table{border-collapse:collapse;width:100%} th,td{text-align:left;padding:5px 8px;border-bottom:1px solid #eceef2;vertical-align:top}
th{font-weight:600;color:#555;font-size:12px;text-transform:uppercase;letter-spacing:.03em}
.alert{border:1px solid #dde1e7;border-left:5px solid #999;border-radius:5px;padding:10px 14px;margin-bottom:10px}
.alert.critical{border-left-color:#c62828}.alert.warning{border-left-color:#ef8f00}.alert.resolved{opacity:.6}
.alert h3{margin:0 0 4px;font-size:15px}
.badge{display:inline-block;padding:1px 7px;border-radius:9px;font-size:12px;font-weight:600;margin-right:4px;background:#e8eaef}
.badge.critical{background:#fde0e0;color:#9b1c1c}.badge.warning{background:#fff0d6;color:#8a5200}
.badge.firing{background:#c62828;color:#fff}.badge.acknowledged{background:#1565c0;color:#fff}
.badge.resolved{background:#2e7d32;color:#fff}.badge.silenced{background:#6a1b9a;color:#fff}
.labels code{background:#f0f1f4;padding:1px 5px;border-radius:3px;margin-right:4px;font-size:12px}
.summary{font-family:ui-monospace,Menlo,monospace;font-size:12.5px;margin:6px 0}
details{margin:6px 0} summary{cursor:pointer;color:#1565c0}
.evidence td{font-family:ui-monospace,Menlo,monospace;font-size:12px}
.runbook{background:#f7f8fa;padding:8px 10px;border-radius:4px;margin:6px 0}
.actions{display:flex;gap:6px;flex-wrap:wrap;align-items:center;margin-top:6px}
button{font:inherit;padding:4px 11px;border:1px solid #b9c0cc;border-radius:4px;background:#fff;cursor:pointer}
button:hover{background:#eef1f6} button.danger{border-color:#c62828;color:#c62828}
select,input{font:inherit;padding:3px 6px;border:1px solid #b9c0cc;border-radius:4px}
.muted{color:#777} .chart-controls{display:flex;gap:10px;align-items:center;margin-bottom:6px}
.legend span{display:inline-block;margin-right:14px;font-size:12px}
.legend i{display:inline-block;width:12px;height:3px;margin-right:5px;vertical-align:middle}
#toast{position:fixed;right:20px;bottom:20px;background:#1d2330;color:#fff;padding:8px 14px;border-radius:5px;display:none}
"""

LOGIN_HTML = f"""<!doctype html><html lang="en"><head><meta charset="utf-8">
<title>rewardstream console: sign in</title><style>{_STYLE}</style></head><body>
<header><h1>rewardstream · monitoring console</h1></header>
<main><section style="max-width:420px;margin:60px auto">
<h2>Staff key required</h2>
<p class="muted">Enter your staff key (from REWARDSTREAM_STAFF_KEYS) to open the console.</p>
<form id="login"><input id="staff-key" type="password" autocomplete="off" size="32"
 placeholder="staff key" autofocus> <button id="sign-in" type="submit">Sign in</button></form>
</section></main>
<script>
document.getElementById('login').addEventListener('submit', e => {{
  e.preventDefault();
  const key = document.getElementById('staff-key').value.trim();
  localStorage.setItem('staffKey', key);
  document.cookie = 'rewardstream_staff_key=' + encodeURIComponent(key) + '; path=/; SameSite=Strict';
  location.reload();
}});
</script></body></html>"""

_SCRIPT = r"""
const KEY = localStorage.getItem('staffKey') ||
  decodeURIComponent((document.cookie.match(/rewardstream_staff_key=([^;]*)/) || [,''])[1]);
const COLORS = ['#1565c0','#c62828','#2e7d32','#ef8f00','#6a1b9a','#00838f','#5d4037','#ad1457'];
const $ = s => document.querySelector(s);
const esc = s => String(s ?? '').replace(/[&<>"']/g, c => ({'&':'&amp;','<':'&lt;','>':'&gt;','"':'&quot;',"'":'&#39;'}[c]));
async function api(path, body) {
  const opts = {headers: {'X-Staff-Key': KEY, 'Content-Type': 'application/json'}};
  if (body !== undefined) { opts.method = 'POST'; opts.body = JSON.stringify(body); }
  const r = await fetch(path, opts);
  if (r.status === 401 || r.status === 403) { location.reload(); throw new Error('signed out'); }
  const data = await r.json();
  if (!r.ok) throw new Error(data.detail || r.status);
  return data;
}
function toast(text) { const t = $('#toast'); t.textContent = text; t.style.display = 'block';
  setTimeout(() => t.style.display = 'none', 3000); }
const fmt = v => v === null || v === undefined ? '–' : (Math.abs(v) >= 100 ? v.toFixed(0) : (+v).toPrecision(4));
const pct = v => v === null || v === undefined ? '–' : (v >= 0 ? '+' : '') + (100 * v).toFixed(1) + '%';
function evidenceTable(ev) {
  const rows = (ev.tests || []).map(t => `<tr><td>${esc(t.metric)} (${esc(t.direction)})</td>
    <td>${fmt(t.baseline.value)} [${fmt(t.baseline.interval[0])}, ${fmt(t.baseline.interval[1])}] n=${fmt(t.baseline.n)}</td>
    <td>${fmt(t.now.value)} [${fmt(t.now.interval[0])}, ${fmt(t.now.interval[1])}] n=${fmt(t.now.n)}</td>
    <td>${pct(t.relative_change.value)} [${pct(t.relative_change.interval[0])}, ${pct(t.relative_change.interval[1])}]</td>
    <td>${fmt(t.cusum)} / ${fmt(ev.threshold_h)}</td></tr>`).join('');
  return `<table class="evidence"><tr><th>metric</th><th>baseline (${esc(ev.baseline)})</th><th>now</th>
    <th>change (${Math.round(100 * ((ev.tests || [{}])[0].confidence || .95))}% CI)</th><th>CUSUM / h</th></tr>${rows}</table>
    <p class="muted">${esc(ev.statistic)}; false alarms ≤ 1 per ${Number(ev.false_alarm_bound_windows).toLocaleString()} windows per key and test.</p>`;
}
function alertCard(a) {
  const state = a.silenced_by ? 'silenced' : a.status;
  const open = a.status !== 'resolved';
  const labels = ['checkpoint', 'arm', 'org'].map(k => `<code>${k}=${esc(a.labels[k])}</code>`).join('');
  const who = a.acknowledged_by ? ` · acknowledged by ${esc(a.acknowledged_by)}` : '';
  const done = a.resolved_by ? ` · resolved by ${esc(a.resolved_by)}` : '';
  const actions = open ? `<div class="actions">
    ${a.status === 'firing' ? `<button data-action="ack" data-fp="${a.fingerprint}">Acknowledge</button>` : ''}
    ${a.silenced_by ? '' : `<select data-silence-duration="${a.fingerprint}"><option value="3600">1 h</option>
      <option value="14400">4 h</option><option value="86400">24 h</option></select>
      <button data-action="silence" data-fp="${a.fingerprint}">Silence</button>`}
    <button data-action="resolve" data-fp="${a.fingerprint}">Resolve</button>
    <button class="danger" data-action="rollback" data-fp="${a.fingerprint}" data-checkpoint="${esc(a.labels.checkpoint)}">Roll back ${esc(a.labels.checkpoint)}</button>
  </div>` : '';
  return `<div class="alert ${a.severity} ${a.status}" id="alert-${a.fingerprint}" data-status="${state}">
    <h3><span class="badge ${state}">${state}</span><span class="badge ${a.severity}">${a.severity}</span>${esc(a.title)}</h3>
    <div class="labels">${labels} <span class="muted">since ${new Date(a.started_at).toLocaleString()}${who}${done}
      ${a.duplicates ? ` · ${a.duplicates} repeats` : ''}${a.silenced_by ? ` · silenced until ${new Date(a.silenced_by.ends_at).toLocaleString()}` : ''}</span></div>
    <div class="summary">${esc(a.summary)}</div>
    <details ${open ? 'open' : ''}><summary>Evidence and runbook</summary>${evidenceTable(a.evidence)}
      <div class="runbook"><b>Runbook.</b> ${esc(a.runbook)}</div></details>${actions}</div>`;
}
async function act(btn) {
  const fp = btn.dataset.fp, action = btn.dataset.action;
  try {
    if (action === 'ack') await api(`/api/alerts/${fp}/acknowledge`, {note: ''});
    if (action === 'resolve') await api(`/api/alerts/${fp}/resolve`, {note: 'resolved in the console'});
    if (action === 'silence') await api(`/api/alerts/${fp}/silence`, {duration_s: +$(`[data-silence-duration="${fp}"]`).value, comment: 'silenced in the console'});
    if (action === 'rollback') {
      const reason = `alert ${fp}: ${btn.closest('.alert').querySelector('h3').textContent}`;
      await api(`/api/checkpoints/${encodeURIComponent(btn.dataset.checkpoint)}/rollback`, {reason, alert_fingerprint: fp});
    }
    toast(`${action}: done`);
  } catch (e) { toast(`${action} failed: ${e.message}`); }
  refresh();
}
function drawChart(series) {
  const W = 1180, H = 260, L = 60, R = 40, T = 12, B = 30;
  const pts = series.flatMap(s => s.points);
  if (!pts.length) return '<p class="muted">No windows for this metric yet.</p>';
  const xs = pts.map(p => p[0]), ys = pts.map(p => p[1]);
  let [x0, x1, y0, y1] = [Math.min(...xs), Math.max(...xs), Math.min(0, ...ys), Math.max(...ys)];
  if (x1 === x0) x1 = x0 + 60000; if (y1 === y0) y1 = y0 + 1;
  const X = x => L + (x - x0) / (x1 - x0) * (W - L - R), Y = y => H - B - (y - y0) / (y1 - y0) * (H - T - B);
  let svg = `<svg viewBox="0 0 ${W} ${H}" width="100%" role="img">`;
  for (let i = 0; i <= 4; i++) { const v = y0 + (y1 - y0) * i / 4;
    svg += `<line x1="${L}" x2="${W - R}" y1="${Y(v)}" y2="${Y(v)}" stroke="#eceef2"/><text x="${L - 6}" y="${Y(v) + 4}" font-size="11" text-anchor="end" fill="#666">${fmt(v)}</text>`; }
  for (let i = 0; i <= 5; i++) { const t = x0 + (x1 - x0) * i / 5;
    svg += `<text x="${X(t)}" y="${H - 10}" font-size="11" text-anchor="middle" fill="#666">${new Date(t).toLocaleTimeString([], {hour: '2-digit', minute: '2-digit'})}</text>`; }
  series.forEach((s, i) => { if (!s.points.length) return;
    const d = s.points.map((p, j) => `${j ? 'L' : 'M'}${X(p[0]).toFixed(1)},${Y(p[1]).toFixed(1)}`).join('');
    svg += `<path d="${d}" fill="none" stroke="${COLORS[i % COLORS.length]}" stroke-width="2"><title>${esc(s.checkpoint)} / ${esc(s.arm)}</title></path>`; });
  const legend = series.map((s, i) => `<span><i style="background:${COLORS[i % COLORS.length]}"></i>${esc(s.checkpoint)} / ${esc(s.arm)}</span>`).join('');
  return svg + `</svg><div class="legend">${legend}</div>`;
}
async function refreshChart() {
  const [scope, metric] = $('#metric').value.split(':');
  const data = await api(`/api/series?scope=${scope}&metric=${encodeURIComponent(metric)}`);
  $('#chart').innerHTML = drawChart(data.series);
}
async function refresh() {
  const data = await api('/api/alerts');
  const open = data.alerts.filter(a => a.status !== 'resolved'), done = data.alerts.filter(a => a.status === 'resolved');
  $('#alert-count').textContent = `${open.length} open, ${done.length} resolved, ${data.silences.length} silences`;
  $('#alerts').innerHTML = open.length ? open.map(alertCard).join('') : '<p class="muted">No open alerts.</p>';
  $('#resolved').innerHTML = done.slice(0, 20).map(alertCard).join('');
  const cps = (await api('/api/checkpoints')).checkpoints;
  $('#checkpoints').innerHTML = cps.length ? `<table><tr><th>seq</th><th>time</th><th>checkpoint</th><th>event</th><th>status</th><th>parent</th><th>actor</th><th>evidence</th></tr>` +
    cps.map(c => `<tr><td>${c.sequence}</td><td>${new Date(c.occurred_at).toLocaleString()}</td><td><code>${esc(c.checkpoint_id)}</code></td>
      <td>${esc(c.kind)}</td><td><span class="badge">${esc(c.status)}</span></td><td>${esc(c.parent_id || '')}</td><td>${esc(c.actor)}</td>
      <td class="muted">${esc(JSON.stringify(c.evidence)).slice(0, 160)}</td></tr>`).join('') + '</table>' : '<p class="muted">No checkpoint events.</p>';
  await refreshChart();
  document.body.dataset.loaded = 'yes';
}
async function init() {
  const names = await api('/api/metrics');
  $('#metric').innerHTML = [...names.rewards.map(m => `<option value="rewards:${m}">${m}</option>`),
    ...names.ingest.map(m => `<option value="ingest:${m}">${m} (ingest)</option>`)].join('');
  $('#metric').addEventListener('change', refreshChart);
  document.addEventListener('click', e => { const b = e.target.closest('button[data-action]'); if (b) act(b); });
  $('#sign-out').addEventListener('click', () => { localStorage.removeItem('staffKey');
    document.cookie = 'rewardstream_staff_key=; path=/; max-age=0'; location.reload(); });
  await refresh();
  setInterval(refresh, 4000);
}
init();
"""

PAGE_HTML = f"""<!doctype html><html lang="en"><head><meta charset="utf-8">
<title>rewardstream console</title><style>{_STYLE}</style></head><body>
<header><h1>rewardstream · monitoring console</h1>
<span>signed in as <b>{{{{staff}}}}</b> <button id="sign-out">Sign out</button></span></header>
<main>
<section><h2>Alerts <span class="muted" id="alert-count"></span></h2><div id="alerts"></div>
<details><summary>Recently resolved</summary><div id="resolved"></div></details></section>
<section><h2>Metrics per checkpoint and arm</h2>
<div class="chart-controls"><label>metric <select id="metric"></select></label>
<span class="muted">one point per event-time window</span></div><div id="chart"></div></section>
<section><h2>Checkpoint history</h2><div id="checkpoints"></div></section>
</main><div id="toast"></div>
<script>{_SCRIPT}</script></body></html>"""
