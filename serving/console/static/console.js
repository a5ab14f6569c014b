// The console page: problems (an alert's org and fleet scopes on one card), canaries, metric
// charts, checkpoint history, quarantined records. The session cookie is HttpOnly: this script never
// sees it. Actions carry the session's CSRF token, which the server wrote into the page.
// Formatting is format.js's; the drill-down to trajectories is samples.js's.
const CSRF = document.querySelector('meta[name="csrf-token"]').content;
const COLORS = ['#1565c0', '#c62828', '#2e7d32', '#ef8f00', '#6a1b9a', '#00838f', '#5d4037', '#ad1457'];
const $ = s => document.querySelector(s);
let UNITS = {};
const unitOf = metric => UNITS[metric] || 'value';
const scopeName = org => org === '*' ? 'fleet (every org)' : `org ${esc(org)}`;

async function api(path, body) {
  const opts = {headers: {'X-CSRF-Token': CSRF, 'Content-Type': 'application/json'}, credentials: 'same-origin'};
  if (body !== undefined) { opts.method = 'POST'; opts.body = JSON.stringify(body); }
  const r = await fetch(path, opts);
  if (r.status === 401) { location.reload(); throw new Error('signed out'); }
  const data = await r.json();
  if (!r.ok) throw new Error(data.detail || r.status);
  return data;
}
function toast(text) {
  const t = $('#toast'); t.innerHTML = withCode(text); t.style.display = 'block';
  setTimeout(() => t.style.display = 'none', 4000);
}

// ---------------------------------------------------------------------------------- evidence

const KNOWN_TEST = new Set(['metric', 'family', 'direction', 'confidence', 'baseline', 'now', 'change',
  'relative_change', 'cusum', 'null', 'alternative', 'parts']);
// The comparison (parent or the checkpoint's own past) is the alert's baseline label, on the card.
const KNOWN_EVIDENCE = new Set(['statistic', 'threshold_h', 'false_alarm_bound_windows', 'baseline', 'comparison', 'window_end', 'tests']);
const ISO_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}/;
// Any other evidence value, as it is: numbers and times formatted, the rest as text.
function anyValue(v) {
  if (typeof v === 'number') return formatValue(v, 'value');
  if (typeof v === 'string') return ISO_TIME.test(v) ? esc(when(v)) : withCode(v);
  if (v === null || v === undefined) return '–';
  if (Array.isArray(v)) return v.map(anyValue).join(', ');
  return fields(v).map(([k, x]) => `${esc(k)}=${anyValue(x)}`).join(' ');
}
const extras = (obj, known) => Object.entries(obj || {}).filter(([k]) => !known.has(k))
  .map(([k, v]) => `<span class="extra">${esc(k.replace(/_/g, ' '))}: ${anyValue(v)}</span>`).join(' ');
function side(s, unit) {
  if (!s) return '–';
  const [lo, hi] = s.interval || [];
  const per = s.unit ? ` ${esc(s.unit)}` : '';
  return `${formatValue(s.value, unit)}${per} [${formatValue(lo, unit)}, ${formatValue(hi, unit)}] <span class="muted">n=${formatValue(s.n, 'count')}</span>`;
}
function testRows(t, ev, scope) {
  const unit = unitOf(t.metric), c = t.change || {scale: 'relative', ...t.relative_change};
  const [lo, hi] = c.interval || [];
  const parts = (t.parts || []).filter(p => Math.abs(p.change) >= 0.005).map(p =>
    `${esc(p.part)} ${formatChange(p.change, 'difference')}`).join(', ');
  const more = [parts ? `components that moved: ${parts}` : '', extras(t, KNOWN_TEST)].filter(x => x).join(' · ');
  return `<tr>${scope === null ? '' : `<td>${scope}</td>`}<td>${esc(t.metric)} <span class="muted">(${esc(t.direction)})</span></td><td>${side(t.baseline, unit)}</td>
    <td>${side(t.now, unit)}</td><td>${formatChange(c.value, c.scale, unit)} [${formatChange(lo, c.scale, unit)}, ${formatChange(hi, c.scale, unit)}]</td>
    <td>${formatValue(t.cusum, 'value')} / ${formatValue(ev.threshold_h, 'value')}</td></tr>` +
    (more ? `<tr><td colspan="${scope === null ? 1 : 2}"></td><td colspan="4" class="muted">${more}</td></tr>` : '');
}
// The evidence of a problem's scopes in one table (a scope column when there are several),
// and what the tests are, once.
function evidenceTable(scopes) {
  const many = scopes.length > 1, first = scopes[0].evidence || {};
  const rows = scopes.map(a => (a.evidence.tests || []).map(t => testRows(t, a.evidence, many ? scopeName(a.labels.org) : null)).join('')).join('');
  const confidence = Math.round(100 * (((first.tests || [])[0] || {}).confidence || 0.95));
  const table = rows ? `<table class="evidence"><tr>${many ? '<th>scope</th>' : ''}<th>metric</th><th>baseline (${esc(first.baseline)})</th>
    <th>now</th><th>change (${confidence}% CI)</th><th>CUSUM / h</th></tr>${rows}</table>` : '';
  const bound = first.false_alarm_bound_windows ? `; false alarms ≤ 1 per ${formatValue(first.false_alarm_bound_windows, 'count')} windows per key and test` : '';
  const latest = scopes.map(a => a.evidence.window_end).filter(x => x).sort().pop();
  const rest = [...new Set(scopes.map(a => extras(a.evidence, KNOWN_EVIDENCE)).filter(x => x))].join(' ');
  return table + `<p class="muted">${withCode(first.statistic || '')}${bound}${latest ? `; latest window ended ${esc(when(latest))}` : ''}</p>` +
    (rest ? `<p class="muted">${rest}</p>` : '');
}

// ---------------------------------------------------------------------------------- problems

const open = s => s.status !== 'resolved';
function scopeLine(a) {
  const state = a.silenced_by && open(a) ? 'silenced' : a.status;
  const notes = [a.acknowledged_by ? `acknowledged by ${esc(a.acknowledged_by)}` : '',
    a.resolved_by ? `resolved by ${esc(a.resolved_by)} ${esc(when(a.resolved_at))}` : '',
    a.duplicates ? `${a.duplicates} repeats` : '',
    a.silenced_by && open(a) ? `silenced until ${esc(when(a.silenced_by.ends_at))}` : ''].filter(x => x);
  return `<div class="scope" id="alert-${esc(a.fingerprint)}" data-status="${state}"><span class="badge ${state}">${state}</span>
    <b>${scopeName(a.labels.org)}</b> <span class="muted">fired ${esc(when(a.started_at))}${notes.map(n => ' · ' + n).join('')}</span>
    <button data-action="samples" data-fp="${esc(a.fingerprint)}">Sample trajectories</button>
    <div class="summary">${esc(a.summary)}</div></div>`;
}
function problemCard(p) {
  const scopes = p.scopes, fps = state => scopes.filter(state).map(a => a.fingerprint).join(',');
  const labels = Object.entries(p.labels).filter(([k]) => k !== 'alertname' && k !== 'severity')
    .map(([k, v]) => `<code>${esc(k)}=${esc(v)}</code>`).join('');
  const firing = fps(a => a.status === 'firing'), unsilenced = fps(a => open(a) && !a.silenced_by), live = fps(open);
  const button = (action, list, text, cls = '') => list ? `<button class="${cls}" data-action="${action}" data-problem="${esc(p.id)}" data-fps="${esc(list)}">${text}</button>` : '';
  const checkpoint = p.labels.checkpoint;
  const actions = live ? `<div class="actions">${button('ack', firing, 'Acknowledge')}
    ${unsilenced ? `<select data-silence-duration="${esc(p.id)}"><option value="3600">1 h</option>
      <option value="14400">4 h</option><option value="86400">24 h</option></select>` : ''}${button('silence', unsilenced, 'Silence')}
    ${button('resolve', live, 'Resolve')}
    ${p.rollback_offered ? `<button class="danger" data-action="rollback" data-problem="${esc(p.id)}" data-checkpoint="${esc(checkpoint)}">Roll back ${esc(checkpoint)}</button>`
      : checkpoint && checkpoint !== '*' ? `<span class="muted">Roll back: ${esc(checkpoint)} is not served by the platform</span>` : ''}</div>` : '';
  const evidence = evidenceTable(scopes);
  return `<div class="alert ${esc(p.severity)} ${p.state}" id="problem-${esc(p.id)}" data-state="${p.state}" data-scopes="${scopes.length}">
    <h3><span class="badge ${p.state}">${p.state}</span><span class="badge ${esc(p.severity)}">${esc(p.severity)}</span>${esc(p.title)}</h3>
    <div class="labels">${labels} <span class="muted">since ${esc(when(p.started_at))} · ${scopes.length > 1 ? `${scopes.length} scopes` : '1 scope'}</span></div>
    ${scopes.map(scopeLine).join('')}
    <details ${live ? 'open' : ''}><summary>Evidence and runbook</summary>${evidence}
      <div class="runbook"><b>Runbook.</b> ${withCode(p.runbook)}</div></details>${actions}</div>`;
}
async function act(btn) {
  const action = btn.dataset.action;
  if (action === 'samples') { openSamples(btn.dataset.fp); return; }
  const fps = (btn.dataset.fps || '').split(',').filter(x => x), id = btn.dataset.problem;
  try {
    for (const fp of fps) {
      if (action === 'ack') await api(`/api/alerts/${fp}/acknowledge`, {note: ''});
      if (action === 'resolve') await api(`/api/alerts/${fp}/resolve`, {note: 'resolved in the console'});
      if (action === 'silence') await api(`/api/alerts/${fp}/silence`, {duration_s: +$(`[data-silence-duration="${id}"]`).value, comment: 'silenced in the console'});
    }
    if (action === 'rollback') {
      const reason = `alert ${id}: ${btn.closest('.alert').querySelector('h3').textContent}`;
      await api(`/api/checkpoints/${encodeURIComponent(btn.dataset.checkpoint)}/rollback`, {reason, alert_fingerprint: id});
    }
    toast(`${btn.textContent}: done`);
  } catch (e) { toast(`${btn.textContent} failed: ${e.message}`); }
  refresh();
}

// ------------------------------------------------------------------------------------ canary

function canaryCard(c) {
  const s = c.canary, look = c.look || {}, b = look.primary_bound;
  const value = v => formatValue(v, 'value');
  const scope = s ? `${formatValue(s.share, 'share')} of ${s.org ? 'org ' + esc(s.org) : 'the fleet'} against <code>${esc(s.baseline)}</code> since ${esc(when(s.started_at))}`
    : 'passed the gate; its canary has not started';
  const rows = (look.rows || []).map(r => { const f = v => r.scale === 'relative' ? formatChange(v, 'relative') : value(v);
    return `<tr><td>${esc(r.metric)}</td><td>${value(r.baseline)}</td><td>${value(r.candidate)}</td><td>${f(r.change)}</td>
    <td>[${f(r.low)}, ${f(r.high)}]</td><td>${esc(r.verdict)}</td></tr>`; }).join('');
  const table = rows ? `<table class="evidence"><tr><th>metric</th><th>production (n=${formatValue(look.n_baseline, 'count')})</th><th>canary (n=${formatValue(look.n_candidate, 'count')})</th>
    <th>change</th><th>95% interval (one look)</th><th>verdict</th></tr>${rows}</table>` : '';
  const margin = (look.parameters || {}).margin;
  const bound = b ? `<p>reward, canary − production: <b>${value(b.change)}</b>, always-valid bounds <b>[${value(b.low)}, ${value(b.high)}]</b>:
    promote once the lower is above −${value(margin)}, reject once the upper is below 0.</p>` : '';
  const needed = look.decision === 'continue' ? `<p>${look.needed === null || look.needed === undefined ? 'no decision in sight at the current effect'
    : `a decision needs about <b>${formatValue(look.needed, 'count')}</b> more trajectories at the current effect`}</p>` : '';
  const state = look.decision ? `<div class="summary"><span class="badge">${esc(look.decision)}</span> ${withCode(look.reason)}</div>` : '';
  return `<div class="canary" id="canary-${esc(c.checkpoint_id)}"><h3><code>${esc(c.checkpoint_id)}</code> <span class="muted">${scope}</span></h3>
    ${state}${bound}${needed}${table}${look.rule ? `<p class="muted">${withCode(look.rule)}</p>` : ''}</div>`;
}

// ------------------------------------------------------------------------------------- chart

const seriesName = s => [s.checkpoint, s.arm, s.org === '*' ? null : s.org].filter(x => x).map(esc).join(' / ');
function drawChart(series, unit) {
  const W = 1180, H = 270, L = 78, R = 30, T = 12, B = 40;
  const pts = series.flatMap(s => s.points);
  if (!pts.length) return '<p class="muted">No windows for this metric yet.</p>';
  const xs = pts.map(p => p[0]), ys = pts.map(p => p[1]);
  let [x0, x1] = [Math.min(...xs), Math.max(...xs)];
  if (x1 === x0) x1 = x0 + 60000;
  const y = niceTicks(Math.min(0, ...ys), Math.max(...ys), 5), x = timeTicks(x0, x1, 6);
  const X = t => L + (t - x0) / (x1 - x0) * (W - L - R), Y = v => H - B - (v - y.lo) / (y.hi - y.lo) * (H - T - B);
  let svg = `<svg viewBox="0 0 ${W} ${H}" width="100%" role="img">`;
  for (const v of y.ticks) {
    svg += `<line x1="${L}" x2="${W - R}" y1="${Y(v)}" y2="${Y(v)}" stroke="#eceef2"/><text class="ytick" x="${L - 6}" y="${Y(v) + 4}" font-size="11" text-anchor="end" fill="#666">${formatValue(v, unit, y.step)}</text>`;
  }
  for (const t of x.ticks) {
    svg += `<text class="xtick" x="${X(t)}" y="${H - 22}" font-size="11" text-anchor="middle" fill="#666">${x.label(t)}</text>`;
  }
  svg += `<text x="${W - R}" y="${H - 4}" font-size="11" text-anchor="end" fill="#888">event time (${esc(zoneName(new Date(x1)))})</text>`;
  series.forEach((s, i) => {
    if (!s.points.length) return;
    const d = s.points.map((p, j) => `${j ? 'L' : 'M'}${X(p[0]).toFixed(1)},${Y(p[1]).toFixed(1)}`).join('');
    svg += `<path d="${d}" fill="none" stroke="${COLORS[i % COLORS.length]}" stroke-width="2"><title>${seriesName(s)}</title></path>`;
  });
  const legend = series.map((s, i) => `<span><i class="c${i % COLORS.length}"></i>${seriesName(s)}</span>`).join('');
  return svg + `</svg><div class="legend">${legend}</div>`;
}
async function refreshChart() {
  const [scope, metric] = $('#metric').value.split(':');
  const data = await api(`/api/series?scope=${scope}&metric=${encodeURIComponent(metric)}`);
  $('#chart').innerHTML = drawChart(data.series, unitOf(metric));
}

// ------------------------------------------------------------------------------ page refresh

// A registry event's evidence in a line (its first 200 characters).
function evidenceLine(evidence) {
  const line = fields(evidence).map(([k, v]) => `${k}=${Array.isArray(v) ? v.join(', ') : v}`).join(' · ');
  return line.length > 200 ? line.slice(0, 199) + '…' : line;
}
function checkpointTable(cps) {
  if (!cps.length) return '<p class="muted">No checkpoint events.</p>';
  return '<table><tr><th>seq</th><th>time</th><th>checkpoint</th><th>event</th><th>status</th><th>parent</th><th>actor</th><th>evidence</th></tr>' +
    cps.map(c => `<tr><td>${c.sequence}</td><td>${esc(when(c.occurred_at))}</td><td><code>${esc(c.checkpoint_id)}</code></td>
      <td>${esc(c.kind)}</td><td><span class="badge">${esc(c.status)}</span></td><td>${esc(c.parent_id || '')}</td><td>${esc(c.actor)}</td>
      <td class="muted">${esc(evidenceLine(c.evidence))}</td></tr>`).join('') + '</table>';
}
function quarantineView(q) {
  if (q.fleet_only) return '<p class="muted">Shown to staff who see every org: quarantined records belong to no org until read.</p>';
  if (!q.total) return '<p class="muted">Nothing quarantined.</p>';
  return '<table><tr><th>consumer</th><th>source topic</th><th>records</th></tr>' +
    q.by_consumer.map(r => `<tr><td>${esc(r.consumer)}</td><td><code>${esc(r.source_topic)}</code></td><td>${r.records}</td></tr>`).join('') +
    '</table><details><summary>Most recent</summary><table><tr><th>time</th><th>consumer</th><th>where</th><th>bytes</th><th>reason</th></tr>' +
    q.recent.map(r => `<tr><td>${esc(when(r.at))}</td><td>${esc(r.consumer)}</td><td><code>${esc(r.source)}</code></td>
      <td>${r.bytes}</td><td class="summary">${esc(r.reason)}</td></tr>`).join('') + '</table></details>';
}
async function refresh() {
  const data = await api('/api/alerts');
  const live = data.problems.filter(p => p.state !== 'resolved'), done = data.problems.filter(p => p.state === 'resolved');
  $('#alert-count').textContent = `${live.length} open, ${done.length} resolved, ${data.silences.length} silences`;
  $('#alerts').innerHTML = live.length ? live.map(problemCard).join('') : '<p class="muted">No open alerts.</p>';
  $('#resolved').innerHTML = done.slice(0, 20).map(problemCard).join('');
  const canaries = (await api('/api/canaries')).canaries;
  $('#canary').innerHTML = canaries.length ? canaries.map(canaryCard).join('') : '<p class="muted">No canary: nothing waits for an A/B.</p>';
  $('#checkpoints').innerHTML = checkpointTable((await api('/api/checkpoints')).checkpoints);
  const q = await api('/api/quarantine');
  $('#quarantine-count').textContent = q.fleet_only ? '' : `${q.total} records`;
  $('#quarantine').innerHTML = quarantineView(q);
  await refreshChart();
  document.body.dataset.loaded = 'yes';
}
async function init() {
  const names = await api('/api/metrics');
  UNITS = names.units || {};
  $('#metric').innerHTML = [...names.rewards.map(m => `<option value="rewards:${esc(m)}">${esc(m)}</option>`),
    ...names.ingest.map(m => `<option value="ingest:${esc(m)}">${esc(m)} (ingest)</option>`)].join('');
  $('#metric').addEventListener('change', refreshChart);
  document.addEventListener('click', e => { const b = e.target.closest('button[data-action]'); if (b) act(b); });
  $('#sign-out').addEventListener('click', async () => {
    await fetch('/api/session', {method: 'DELETE', headers: {'X-CSRF-Token': CSRF}});
    location.reload();
  });
  await refresh();
  samplesFromHash();
  setInterval(refresh, 4000);
}
init();
