// How the console writes what it shows: times as "5 min ago (14:03:12 UTC)" in the browser's
// zone, named; values in the units staff read (%, ms, counts); chart ticks on round steps; and
// text with `code` spans set as code, so no markup character reaches the page as itself.
// Plain functions without the DOM: the unit tests run this file under node.
'use strict';

const esc = s => String(s ?? '').replace(/[&<>"']/g, c => ({'&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;'}[c]));
// Runbooks and error messages name commands in backticks: shown as code, never as backticks.
const withCode = s => esc(s).replace(/`([^`\n]+)`/g, '<code>$1</code>').replace(/`/g, '');
const MINUS = '\u2212';

// ------------------------------------------------------------------------------------- times

const pad = n => String(n).padStart(2, '0');
function zoneName(date) {
  const part = new Intl.DateTimeFormat('en-US', {timeZoneName: 'short'}).formatToParts(date)
    .find(p => p.type === 'timeZoneName');
  return part ? part.value : 'UTC';
}
function dayOf(date) { return `${date.getFullYear()}-${pad(date.getMonth() + 1)}-${pad(date.getDate())}`; }
function clockOf(date, seconds = true) {
  return `${pad(date.getHours())}:${pad(date.getMinutes())}${seconds ? ':' + pad(date.getSeconds()) : ''}`;
}
// "14:03:12 UTC", or "2026-01-05 14:03:12 UTC" for another day than ``now``'s.
function clock(date, now = Date.now()) {
  const sameDay = dayOf(date) === dayOf(new Date(now));
  return `${sameDay ? '' : dayOf(date) + ' '}${clockOf(date)} ${zoneName(date)}`;
}
function relative(deltaMs) {
  const s = Math.abs(deltaMs) / 1000;
  if (s < 10) return 'just now';
  const amount = s < 90 ? `${Math.round(s)} s` : s < 90 * 60 ? `${Math.round(s / 60)} min`
    : s < 48 * 3600 ? `${Math.round(s / 3600)} h` : `${Math.round(s / 86400)} d`;
  return deltaMs < 0 ? `${amount} ago` : `in ${amount}`;
}
// An instant as staff read it: how long ago, and the clock time with its zone.
function when(iso, now = Date.now()) {
  const date = new Date(iso ?? NaN);
  if (iso === null || iso === undefined || isNaN(date)) return '–';
  return `${relative(date - now)} (${clock(date, now)})`;
}
// An event-time range: "14:02:00–14:05:00 UTC (12 min ago)", days named when not today's.
function span(since, until, now = Date.now()) {
  const a = new Date(since), b = new Date(until);
  const start = (dayOf(a) === dayOf(new Date(now)) ? '' : dayOf(a) + ' ') + clockOf(a);
  const end = (dayOf(b) === dayOf(a) ? '' : dayOf(b) + ' ') + clockOf(b);
  return `${start}–${end} ${zoneName(b)} (${relative(b - now)})`;
}

// ------------------------------------------------------------------------------------ values

// An object's fields as [dotted name, value] pairs, nested objects flattened, gaps left out.
function fields(obj, prefix = '') {
  return Object.entries(obj || {}).flatMap(([k, v]) => v === null || v === undefined ? []
    : typeof v === 'object' && !Array.isArray(v) ? fields(v, `${prefix}${k}.`) : [[prefix + k, v]]);
}

// Decimals that show every multiple of ``step`` exactly (2.5 needs one more than 2 or 5).
function decimalsFor(step) {
  if (!(step > 0)) return 0;
  const exponent = Math.floor(Math.log10(step) + 1e-9);
  const mantissa = step / 10 ** exponent;
  return Math.max(0, -exponent + (Math.abs(mantissa - 2.5) < 1e-6 ? 1 : 0));
}
function number(v, decimals) {
  const text = new Intl.NumberFormat('en-US', {minimumFractionDigits: decimals, maximumFractionDigits: decimals}).format(Math.abs(v));
  return (v < 0 && Number(text.replace(/,/g, '')) !== 0 ? MINUS : '') + text;
}
// A value in its unit ("share" 0..1 as %, "ms", "log_ms" shown as ms, "count", "value"). With
// ``step`` (a tick step) the decimals are the step's; without, enough for 3 significant digits.
function formatValue(v, unit, step) {
  if (v === null || v === undefined || !Number.isFinite(+v)) return '–';
  v = +v;
  if (unit === 'log_ms') return formatValue(Math.exp(v), 'ms');
  const scale = unit === 'share' ? 100 : 1, x = v * scale;
  const decimals = step ? decimalsFor(step * scale)
    : Math.abs(x) >= 100 || Number.isInteger(x) ? 0 : Math.min(8, Math.max(0, 2 - Math.floor(Math.log10(Math.abs(x)))));
  // Without a step, trailing zeros say nothing: 0.04, not 0.0400.
  const text = step ? number(x, decimals) : number(x, decimals).replace(/(\.\d*?)0+$/, '$1').replace(/\.$/, '');
  return unit === 'share' ? text + '%' : unit === 'ms' ? text + ' ms' : text;
}
// A change: relative ("+12.5%") or, for a signed score, a difference in the metric's units.
function formatChange(v, scale, unit) {
  if (v === null || v === undefined || !Number.isFinite(+v)) return '–';
  const sign = v > 0 ? '+' : '';
  if (scale === 'difference') return sign + formatValue(v, unit === 'share' ? 'share' : 'value');
  return sign + formatValue(v, 'share');
}

// ------------------------------------------------------------------------------------- ticks

// A round step near ``raw``: 1, 2, 2.5 or 5 times a power of ten.
function niceStep(raw) {
  const power = 10 ** Math.floor(Math.log10(raw));
  const f = raw / power;
  return (f <= 1 ? 1 : f <= 2 ? 2 : f <= 2.5 ? 2.5 : f <= 5 ? 5 : 10) * power;
}
// Ticks covering [lo, hi] on a round step, about ``target`` of them.
function niceTicks(lo, hi, target = 5) {
  if (!Number.isFinite(lo) || !Number.isFinite(hi)) return {ticks: [0, 1], step: 1, lo: 0, hi: 1};
  if (hi < lo) [lo, hi] = [hi, lo];
  if (hi === lo) { const d = Math.abs(lo) / 2 || 1; lo -= d; hi += d; }
  const step = niceStep((hi - lo) / Math.max(1, target - 1));
  const decimals = decimalsFor(step) + 2;
  const first = Math.floor(lo / step + 1e-9) * step, last = Math.ceil(hi / step - 1e-9) * step;
  const ticks = [];
  for (let i = 0; first + i * step <= last + step * 1e-6; i++) ticks.push(+(first + i * step).toFixed(decimals));
  return {ticks, step, lo: ticks[0], hi: ticks[ticks.length - 1]};
}
const TIME_STEPS_MS = [1, 2, 5, 10, 15, 30].map(s => s * 1000)
  .concat([1, 2, 5, 10, 15, 30].map(m => m * 60000), [1, 2, 3, 6, 12].map(h => h * 3600000),
          [1, 2, 7].map(d => d * 86400000));
// Time ticks on a round step, aligned in the browser's zone: {ticks (ms), step, label(t)}.
function timeTicks(t0, t1, target = 6) {
  const step = TIME_STEPS_MS.find(s => s >= (t1 - t0) / target) || TIME_STEPS_MS[TIME_STEPS_MS.length - 1];
  const offset = new Date(t0).getTimezoneOffset() * 60000;  // local = UTC - offset
  const ticks = [];
  for (let t = Math.ceil((t0 - offset) / step) * step + offset; t <= t1; t += step) ticks.push(t);
  const label = t => step >= 86400000 ? dayOf(new Date(t)).slice(5) : clockOf(new Date(t), step < 60000);
  return {ticks, step, label};
}

if (typeof module === 'object') {
  module.exports = {esc, withCode, fields, when, span, relative, clock, zoneName, formatValue, formatChange, niceTicks, niceStep, timeTicks, decimalsFor};
}
