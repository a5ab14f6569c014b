// The drill-down from an alert to sample trajectories in its window: each one's reward and its
// components, its completions (text where the org allows it) and its events, a page at a time.
// The view is linkable: #samples=<fingerprint>.
let SAMPLES = null;  // {fp, next} of the view shown

// The components that moved the reward, largest first; with ``shown``, only that many.
function componentList(components, shown) {
  const entries = Object.entries(components), moved = entries.filter(([, v]) => v !== 0);
  const list = moved.slice(0, shown ?? moved.length).map(([name, v]) => `${esc(name)} ${formatChange(v, 'difference')}`).join(', ');
  const zero = entries.filter(([, v]) => v === 0).map(([name]) => esc(name));
  return shown || !zero.length ? list : `${list} <span class="muted">(0: ${zero.join(', ')})</span>`;
}
// A payload in a line: its fields as name=value, numbers in the units their names give (the
// text fields are shown apart, as blocks).
function payloadLine(payload) {
  return fields(payload).filter(([k]) => !/_text$/.test(k)).map(([k, v]) =>
    `<span class="kv">${esc(k)}=${typeof v === 'number' ? formatValue(v, /_ms$/.test(k) ? 'ms' : 'value')
      : esc(Array.isArray(v) ? v.join(', ') : v)}</span>`).join(' ');
}
function textBlock(label, text) {
  return text ? `<div class="text"><span class="muted">${label}</span><pre>${esc(text)}</pre></div>` : '';
}
const counted = (n, noun) => `${formatValue(n, 'count')} ${noun}${n === 1 ? '' : 's'}`;
// What users did with a completion's work, and the tools it called, in a line.
function labelsLine(l) {
  if (!l) return '';
  const kept = l.kept_fraction === null || l.kept_fraction === undefined ? '' : `, ${formatValue(l.kept_fraction, 'share')} kept`;
  return [l.edits_proposed ? `edits: ${l.edits_proposed} proposed, ${l.edits_accepted} accepted, ${l.edits_rejected} rejected, ${l.edits_reverted} reverted${kept}` : '',
    l.dissatisfied_followups ? counted(l.dissatisfied_followups, 'dissatisfied follow-up') : '',
    l.clarifications ? counted(l.clarifications, 'clarifying question') : ''].filter(x => x).join(' · ');
}
function toolsLine(calls) {
  return (calls || []).map(t => t.valid ? esc(t.tool) : `<span class="broken">${esc(t.tool)} (broken: ${esc(t.error_kind || 'invalid')})</span>`).join(', ');
}
function completionRow(c) {
  const tokens = `${formatValue(c.prompt_token_count, 'count')} → ${formatValue(c.completion_token_count, 'count')} tokens`;
  const texts = textBlock('prompt', c.prompt_text) + textBlock('completion', c.completion_text);
  const turn = c.turn === undefined ? '' : `turn ${c.turn} · `;
  const credit = c.credit === undefined ? '' : ` · credit ${formatChange(c.credit, 'difference')}`;
  const work = [labelsLine(c.labels), c.tools_called && c.tools_called.length ? `tools: ${toolsLine(c.tools_called)}` : ''].filter(x => x).join(' · ');
  return `<li><b>${esc(c.completion_id)}</b> <span class="muted">${turn}${c.event_time ? esc(when(c.event_time)) : 'no completion.served event found'}</span>
    · ${esc(c.model || c.sampled_by || '')} · ${tokens}${c.finish_reason ? ` · finished: ${esc(c.finish_reason)}` : ''}${credit}
    ${c.latency_ms !== undefined ? ` · ${formatValue(c.latency_ms, 'ms')} (first token ${formatValue(c.ttft_ms, 'ms')})` : ''}
    ${work ? `<div class="muted">${work}</div>` : ''}
    ${texts || (c.in_sample ? '<div class="muted">text not captured for this org</div>' : '')}</li>`;
}
function trajectoryRows(t, fleet) {
  const r = t.reward;
  const events = t.events.map(e => `<tr><td>${esc(when(e.event_time))}</td><td><code>${esc(e.type)}</code></td>
    <td>${payloadLine(e.payload)}</td></tr>`).join('');
  const missing = t.events_folded - t.events_found;
  return `<tr class="trajectory" data-trajectory="${esc(t.trajectory_id)}" data-org="${esc(t.org)}">
    <td class="time">${esc(when(t.event_time))}</td><td><code>${esc(t.trajectory_id)}</code></td>${fleet ? `<td>${esc(t.org)}</td>` : ''}
    <td>${esc(t.outcome)}</td><td class="num">${formatChange(r.total, 'difference')}</td>
    <td>${componentList(r.components, 3)}</td><td class="num">${t.completions.length}</td><td class="num">${t.events_found} of ${t.events_folded}</td></tr>
    <tr class="detail"><td colspan="${fleet ? 8 : 7}"><details><summary>Reward, completions and events</summary>
      <p><b>Reward</b> ${formatChange(r.total, 'difference')} <span class="muted">(spec ${esc(r.spec_version)}, finalised by ${esc(r.finalized_by)})</span>:
        ${componentList(r.components)}</p>
      <p class="muted">signals: ${payloadLine(r.signals)}</p>
      <b>Completions</b><ul class="completions">${t.completions.map(completionRow).join('') || '<li class="muted">none</li>'}</ul>
      <b>Events</b>${missing ? ` <span class="muted">(${missing} of the ${t.events_folded} folded not found within an hour before the trajectory ended)</span>` : ''}
      <table class="events"><tr><th>event time</th><th>type</th><th>payload</th></tr>${events}</table></details></td></tr>`;
}
function samplesHeader(data) {
  const s = data.scope;
  const scope = [s.org === '*' ? 'fleet (every org)' : `org ${esc(s.org)}`,
    s.checkpoint === '*' ? 'every checkpoint' : `checkpoint <code>${esc(s.checkpoint)}</code>`,
    s.arm === '*' ? 'every arm' : `arm ${esc(s.arm)}`].join(' · ');
  return `<p>${scope} · event time ${esc(span(data.window.since, data.window.until))}</p>`;
}
function samplesTable(data) {
  const fleet = data.scope.org === '*';
  return `<table class="samples"><tr><th>ended</th><th>trajectory</th>${fleet ? '<th>org</th>' : ''}<th>outcome</th>
    <th>reward</th><th>largest components</th><th>completions</th><th>events found</th></tr>
    ${data.trajectories.map(t => trajectoryRows(t, fleet)).join('')}</table>`;
}
function samplesFooter(data, shown) {
  const read = `read ${formatValue(data.read.rewards.read, 'count')} reward records and ${formatValue(data.read.events.read, 'count')} events`;
  return `<p class="muted" id="samples-status">${shown} trajectories shown; ${read}.</p>` +
    (data.next ? '<button data-samples="more">Next page</button>' : '<p class="muted">No more trajectories in this window.</p>');
}
async function openSamples(fp, cursor) {
  const section = $('#samples');
  const query = `limit=10${cursor ? '&cursor=' + encodeURIComponent(cursor) : ''}`;
  let data;
  try { data = await api(`/api/alerts/${encodeURIComponent(fp)}/trajectories?${query}`); }
  catch (e) { toast(`Sample trajectories failed: ${e.message}`); return; }
  section.hidden = false;
  if (!cursor) {
    section.innerHTML = `<div class="samples-head"><h2>Sample trajectories: ${esc(data.title)}</h2>
      <button data-samples="close">Back to alerts</button></div>${samplesHeader(data)}<div id="samples-body"></div><div id="samples-foot"></div>`;
    history.replaceState(null, '', `#samples=${fp}`);
    $('#samples-body').innerHTML = data.trajectories.length ? samplesTable(data)
      : '<p class="muted">No trajectories of this scope in the alert\'s window.</p>';
    section.scrollIntoView();
  } else {
    $('#samples-body table').insertAdjacentHTML('beforeend', data.trajectories.map(t => trajectoryRows(t, data.scope.org === '*')).join(''));
  }
  SAMPLES = {fp, next: data.next};
  $('#samples-foot').innerHTML = samplesFooter(data, document.querySelectorAll('#samples tr.trajectory').length);
  section.dataset.loaded = 'yes';
}
function closeSamples() {
  const section = $('#samples');
  section.hidden = true; section.innerHTML = ''; delete section.dataset.loaded; SAMPLES = null;
  history.replaceState(null, '', location.pathname);
}
function samplesFromHash() {
  const found = /^#samples=([0-9a-zA-Z_-]+)$/.exec(location.hash);
  if (found) openSamples(found[1]);
}
document.addEventListener('click', e => {
  const b = e.target.closest('button[data-samples]');
  if (!b) return;
  if (b.dataset.samples === 'close') closeSamples();
  if (b.dataset.samples === 'more' && SAMPLES && SAMPLES.next) openSamples(SAMPLES.fp, SAMPLES.next);
});
