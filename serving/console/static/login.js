// The sign-in form: the staff key is exchanged for a session cookie (HttpOnly, set by the
// server) and then forgotten; nothing is kept in the browser's storage.
document.getElementById('login').addEventListener('submit', async e => {
  e.preventDefault();
  const input = document.getElementById('staff-key');
  const error = document.getElementById('login-error');
  const r = await fetch('/api/session', {method: 'POST', credentials: 'same-origin',
    headers: {'Content-Type': 'application/json'},
    body: JSON.stringify({key: input.value.trim()})});
  input.value = '';
  if (r.ok) { location.reload(); return; }
  const body = await r.json().catch(() => ({}));
  error.textContent = r.status === 429
    ? `Too many wrong keys from this address; try again in ${r.headers.get('Retry-After')} s.`
    : (body.detail || `Sign-in failed (${r.status}).`);
});
