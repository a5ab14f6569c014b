"""The console's pages: the sign-in page and the console, HTML only. Their CSS and scripts are
files under ``static/`` served by the app (no CDN, no network), so the Content-Security-Policy
allows no inline script or style at all.

``console.js`` reads the JSON API with the session cookie, re-renders every few seconds, draws
charts as inline SVG, and sends the session's CSRF token (written into the page) with actions;
``samples.js`` shows an alert's sample trajectories; ``format.js`` writes times (relative, with
the zone), values in their units and chart ticks for both.
"""

from __future__ import annotations

import html
from pathlib import Path

__all__ = ["CONTENT_SECURITY_POLICY", "LOGIN_HTML", "STATIC_FILES", "console_page"]

CONTENT_SECURITY_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'")

_STATIC_DIR = Path(__file__).parent / "static"
_MEDIA_TYPES = {".css": "text/css; charset=utf-8", ".js": "text/javascript; charset=utf-8"}
# name -> (bytes, media type), read once: the console serves these and nothing else
STATIC_FILES = {path.name: (path.read_bytes(), _MEDIA_TYPES[path.suffix])
                for path in sorted(_STATIC_DIR.iterdir()) if path.suffix in _MEDIA_TYPES}

_HEAD = ('<!doctype html><html lang="en"><head><meta charset="utf-8">'
         '<link rel="stylesheet" href="/static/console.css">')

LOGIN_HTML = f"""{_HEAD}
<title>rewardstream console: sign in</title></head><body>
<header><h1>rewardstream · monitoring console</h1></header>
<main><section class="signin">
<h2>Staff key required</h2>
<p class="muted">Enter your staff key to open a session. An administrator makes one with
<code>rewardstream keys create --for console --name NAME --org ORG</code>.</p>
<form id="login"><input id="staff-key" type="password" autocomplete="off" size="32"
 placeholder="staff key" autofocus> <button id="sign-in" type="submit">Sign in</button></form>
<p class="error" id="login-error"></p>
</section></main>
<script src="/static/login.js"></script></body></html>"""

_PAGE_HTML = f"""{_HEAD}
<meta name="csrf-token" content="{{csrf}}">
<title>rewardstream console</title></head><body>
<header><h1>rewardstream · monitoring console</h1>
<span>signed in as <b>{{staff}}</b> <span class="muted">({{orgs}})</span>
<button id="sign-out">Sign out</button></span></header>
<main>
<section id="samples" hidden></section>
<section><h2>Alerts <span class="muted" id="alert-count"></span></h2><div id="alerts"></div>
<details><summary>Recently resolved</summary><div id="resolved"></div></details></section>
<section><h2>Canary</h2><div id="canary"></div></section>
<section><h2>Metrics per checkpoint and arm</h2>
<div class="chart-controls"><label>metric <select id="metric"></select></label>
<span class="muted">one point per event-time window</span></div><div id="chart"></div></section>
<section><h2>Checkpoint history</h2><div id="checkpoints"></div></section>
<section><h2>Quarantined records <span class="muted" id="quarantine-count"></span></h2>
<p class="muted">Records a consumer found on a topic and could not use; each consumer went on
without them. <code>rewardstream quarantine list</code> shows them with their bytes.</p>
<div id="quarantine"></div></section>
</main><div id="toast"></div>
<script src="/static/format.js"></script><script src="/static/samples.js"></script>
<script src="/static/console.js"></script></body></html>"""


def console_page(staff: str, orgs: list[str], csrf_token: str) -> str:
    """The console for one session: who is signed in, which orgs they see, the CSRF token."""
    seen = "every org" if orgs == ["*"] else "orgs " + ", ".join(orgs)
    return _PAGE_HTML.format(staff=html.escape(staff), orgs=html.escape(seen),
                             csrf=html.escape(csrf_token))
