// The session cookie is HttpOnly: this script never sees it. Actions carry the session's CSRF
// token, which the server wrote into the page.
const CSRF = document.querySelector('meta[name="csrf-token"]').content;
const COLORS = ['#1565c0','#c62828','#2e7d32','#ef8f00','#6a1b9a','#00838f','#5d4037','#ad1457'];
const $ = s => document.querySelector(s);
const esc = s => String(s ?? '').replace(/[&<>"']/g, c => ({'&':'&amp;','<':'&lt;','>':'&gt;','"':'&quot;',"'":'&#39;'}[c]));
async function api(path, body) {
  const opts = {headers: {'X-CSRF-Token': CSRF, 'Content-Type': 'application/json'},
                credentials: 'same-origin'};
  if (body !== undefined) { opts.method = 'POST'; opts.body = JSON.stringify(body); }
  const r = await fetch(path, opts);
  if (r.status === 401) { location.reload(); throw new Error('signed out'); }
  const data = await r.json();
  if (!r.ok) throw new Error(data.detail || r.status);
  return data;
}
function toast(text) { const t = $('#toast'); t.textContent = text; t.style.display = 'block';
  setTimeout(() => t.style.display = 'none', 3000); }
const fmt = v => v === null || v === undefined ? '–' : (Math.abs(v) >= 100 ? v.toFixed(0) : (+v).toPrecision(4));
const pct = v => v === null || v === undefined ? '–' : (v >= 0 ? '+' : '') + (100 * v).toFixed(1) + '%';
const signed = v => v === null || v === undefined ? '–' : (v >= 0 ? '+' : '') + (+v).toFixed(3);
// A change is relative (now ÷ baseline − 1) or, for a signed score such as the reward, a
// difference; alerts written before the scale was recorded carry relative_change.
function change(t) {
  const c = t.change || {scale: 'relative', ...t.relative_change};
  const f = c.scale === 'difference' ? signed : pct;
  return `${f(c.value)} [${f(c.interval[0])}, ${f(c.interval[1])}]`;
}
const parts = t => (t.parts || []).filter(p => Math.abs(p.change) >= 0.005).map(p =>
  `${esc(p.part)} ${signed(p.change)} [${signed(p.interval[0])}, ${signed(p.interval[1])}]`).join(', ');
function evidenceTable(ev) {
  const rows = (ev.tests || []).map(t => `<tr><td>${esc(t.metric)} (${esc(t.direction)})</td>
    <td>${fmt(t.baseline.value)} [${fmt(t.baseline.interval[0])}, ${fmt(t.baseline.interval[1])}] n=${fmt(t.baseline.n)}</td>
    <td>${fmt(t.now.value)} [${fmt(t.now.interval[0])}, ${fmt(t.now.interval[1])}] n=${fmt(t.now.n)}</td>
    <td>${change(t)}</td>
    <td>${fmt(t.cusum)} / ${fmt(ev.threshold_h)}</td></tr>${parts(t) ? `<tr><td></td><td colspan="4" class="muted">components that moved: ${parts(t)}</td></tr>` : ''}`).join('');
  return `<table class="evidence"><tr><th>metric</th><th>baseline (${esc(ev.baseline)})</th><th>now</th>
    <th>change (${Math.round(100 * ((ev.tests || [{}])[0].confidence || .95))}% CI)</th><th>CUSUM / h</th></tr>${rows}</table>
    <p class="muted">${esc(ev.statistic)}; false alarms ≤ 1 per ${Number(ev.false_alarm_bound_windows).toLocaleString()} windows per key and test.</p>`;
}
// Checkpoints the platform serves now: only those can be rolled back from here.
let SERVED = new Set();
function canaryCard(c) {
  const s = c.canary, look = c.look || {}, b = look.primary_bound;
  const scope = s ? `${Math.round(100 * s.share)}% of ${s.org ? 'org ' + esc(s.org) : 'the fleet'} against <code>${esc(s.baseline)}</code> since ${new Date(s.started_at).toLocaleString()}`
    : 'passed the gate; its canary has not started';
  const rows = (look.rows || []).map(r => { const f = r.scale === 'relative' ? pct : fmt;
    return `<tr><td>${esc(r.metric)}</td><td>${fmt(r.baseline)}</td><td>${fmt(r.candidate)}</td><td>${f(r.change)}</td>
    <td>[${f(r.low)}, ${f(r.high)}]</td><td>${esc(r.verdict)}</td></tr>`; }).join('');
  const table = rows ? `<table class="evidence"><tr><th>metric</th><th>production (n=${look.n_baseline})</th><th>canary (n=${look.n_candidate})</th>
    <th>change</th><th>95% interval (one look)</th><th>verdict</th></tr>${rows}</table>` : '';
  const margin = (look.parameters || {}).margin;
  const bound = b ? `<p>reward, canary − production: <b>${fmt(b.change)}</b>, always-valid bounds <b>[${fmt(b.low)}, ${fmt(b.high)}]</b>:
    promote once the lower is above −${fmt(margin)}, reject once the upper is below 0.</p>` : '';
  const needed = look.decision === 'continue' ? `<p>${look.needed === null || look.needed === undefined ? 'no decision in sight at the current effect'
    : `a decision needs about <b>${look.needed}</b> more trajectories at the current effect`}</p>` : '';
  const state = look.decision ? `<div class="summary"><span class="badge">${esc(look.decision)}</span> ${esc(look.reason)}</div>` : '';
  return `<div class="canary" id="canary-${esc(c.checkpoint_id)}"><h3><code>${esc(c.checkpoint_id)}</code> <span class="muted">${scope}</span></h3>
    ${state}${bound}${needed}${table}${look.rule ? `<p class="muted">${esc(look.rule)}</p>` : ''}</div>`;
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
    ${SERVED.has(a.labels.checkpoint) ? `<button class="danger" data-action="rollback" data-fp="${a.fingerprint}" data-checkpoint="${esc(a.labels.checkpoint)}">Roll back ${esc(a.labels.checkpoint)}</button>`
      : `<span class="muted">${esc(a.labels.checkpoint)} is not served by the platform: roll it back where it is served</span>`}
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
const seriesName = s => [s.checkpoint, s.arm, s.org === '*' ? null : s.org].filter(x => x).map(esc).join(' / ');
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
    svg += `<path d="${d}" fill="none" stroke="${COLORS[i % COLORS.length]}" stroke-width="2"><title>${seriesName(s)}</title></path>`; });
  const legend = series.map((s, i) => `<span><i class="c${i % COLORS.length}"></i>${seriesName(s)}</span>`).join('');
  return svg + `</svg><div class="legend">${legend}</div>`;
}
async function refreshChart() {
  const [scope, metric] = $('#metric').value.split(':');
  const data = await api(`/api/series?scope=${scope}&metric=${encodeURIComponent(metric)}`);
  $('#chart').innerHTML = drawChart(data.series);
}
async function refresh() {
  const cps = (await api('/api/checkpoints')).checkpoints;
  SERVED = new Set(cps.filter(c => c.served_by_platform).map(c => c.checkpoint_id));
  const canaries = (await api('/api/canaries')).canaries;
  $('#canary').innerHTML = canaries.length ? canaries.map(canaryCard).join('') : '<p class="muted">No canary: nothing waits for an A/B.</p>';
  const data = await api('/api/alerts');
  const open = data.alerts.filter(a => a.status !== 'resolved'), done = data.alerts.filter(a => a.status === 'resolved');
  $('#alert-count').textContent = `${open.length} open, ${done.length} resolved, ${data.silences.length} silences`;
  $('#alerts').innerHTML = open.length ? open.map(alertCard).join('') : '<p class="muted">No open alerts.</p>';
  $('#resolved').innerHTML = done.slice(0, 20).map(alertCard).join('');
  $('#checkpoints').innerHTML = cps.length ? `<table><tr><th>seq</th><th>time</th><th>checkpoint</th><th>event</th><th>status</th><th>parent</th><th>actor</th><th>evidence</th></tr>` +
    cps.map(c => `<tr><td>${c.sequence}</td><td>${new Date(c.occurred_at).toLocaleString()}</td><td><code>${esc(c.checkpoint_id)}</code></td>
      <td>${esc(c.kind)}</td><td><span class="badge">${esc(c.status)}</span></td><td>${esc(c.parent_id || '')}</td><td>${esc(c.actor)}</td>
      <td class="muted">${esc(JSON.stringify(c.evidence)).slice(0, 160)}</td></tr>`).join('') + '</table>' : '<p class="muted">No checkpoint events.</p>';
  const q = await api('/api/quarantine');
  $('#quarantine-count').textContent = q.fleet_only ? '' : `${q.total} records`;
  $('#quarantine').innerHTML = q.fleet_only ? '<p class="muted">Shown to staff who see every org: quarantined records belong to no org until read.</p>' : q.total ? `<table><tr><th>consumer</th><th>source topic</th><th>records</th></tr>` +
    q.by_consumer.map(r => `<tr><td>${esc(r.consumer)}</td><td><code>${esc(r.source_topic)}</code></td><td>${r.records}</td></tr>`).join('') +
    `</table><details><summary>Most recent</summary><table><tr><th>time</th><th>consumer</th><th>where</th><th>bytes</th><th>reason</th></tr>` +
    q.recent.map(r => `<tr><td>${new Date(r.at).toLocaleString()}</td><td>${esc(r.consumer)}</td><td><code>${esc(r.source)}</code></td>
      <td>${r.bytes}</td><td class="summary">${esc(r.reason)}</td></tr>`).join('') + '</table></details>'
    : '<p class="muted">Nothing quarantined.</p>';
  await refreshChart();
  document.body.dataset.loaded = 'yes';
}
async function init() {
  const names = await api('/api/metrics');
  $('#metric').innerHTML = [...names.rewards.map(m => `<option value="rewards:${m}">${m}</option>`),
    ...names.ingest.map(m => `<option value="ingest:${m}">${m} (ingest)</option>`)].join('');
  $('#metric').addEventListener('change', refreshChart);
  document.addEventListener('click', e => { const b = e.target.closest('button[data-action]'); if (b) act(b); });
  $('#sign-out').addEventListener('click', async () => {
    await fetch('/api/session', {method: 'DELETE', headers: {'X-CSRF-Token': CSRF}});
    location.reload();
  });
  await refresh();
  setInterval(refresh, 4000);
}
init();
