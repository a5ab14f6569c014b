"""A minimal Chrome DevTools Protocol driver for headless Chromium (aiohttp websocket).

Chromium is started with the project's headless flags and a fresh profile; under CI=true a
missing browser fails the test instead of skipping it.
"""

from __future__ import annotations

import asyncio
import base64
import itertools
import json
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import aiohttp

from tests.support.ports import free_port
from tests.support.required import unavailable

__all__ = ["Browser", "chromium_binary", "require_binary"]

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run",
         "--remote-allow-origins=*"]


def require_binary(*names: str) -> str:
    """The first binary found; fails under CI=true, skips elsewhere, when none is installed."""
    for name in names:
        found = shutil.which(name)
        if found:
            return found
    unavailable(f"{' or '.join(names)} not installed (apt-get install -y the Debian package)")


def chromium_binary() -> str:
    return require_binary("chromium", "chromium-browser", "google-chrome")


class Browser:
    """One headless Chromium with one page, driven over CDP."""

    def __init__(self, profile_dir: Path, width: int = 1360, height: int = 1000) -> None:
        self.port = free_port()
        self.process = subprocess.Popen(
            [chromium_binary(), *FLAGS, f"--user-data-dir={profile_dir}",
             f"--remote-debugging-port={self.port}", f"--window-size={width},{height}",
             "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.width, self.height = width, height
        self.loop = asyncio.new_event_loop()
        self._ids = itertools.count(1)
        self.session: aiohttp.ClientSession | None = None
        self.ws: aiohttp.ClientWebSocketResponse | None = None
        self.loop.run_until_complete(self._connect())

    async def _connect(self) -> None:
        self.session = aiohttp.ClientSession()
        deadline = time.monotonic() + 30
        while True:
            try:
                async with self.session.get(f"http://127.0.0.1:{self.port}/json/list") as r:
                    pages = [t for t in await r.json() if t["type"] == "page"]
                if pages:
                    break
            except aiohttp.ClientError:
                pass
            if time.monotonic() > deadline:
                raise AssertionError("chromium did not open its DevTools port within 30 s")
            await asyncio.sleep(0.2)
        self.ws = await self.session.ws_connect(pages[0]["webSocketDebuggerUrl"], max_msg_size=0)

    async def _call(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        assert self.ws is not None
        call_id = next(self._ids)
        await self.ws.send_str(json.dumps({"id": call_id, "method": method, "params": params}))
        while True:
            message = json.loads((await self.ws.receive(timeout=60)).data)
            if message.get("id") == call_id:
                if "error" in message:
                    raise AssertionError(f"CDP {method}: {message['error']}")
                return message["result"]

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        return self.loop.run_until_complete(self._call(method, params))

    def goto(self, url: str) -> None:
        self.call("Page.navigate", url=url)
        self.wait_for("document.readyState === 'complete'", what=f"{url} to load")

    def evaluate(self, expression: str) -> Any:
        result = self.call("Runtime.evaluate", expression=expression, awaitPromise=True,
                           returnByValue=True)
        if "exceptionDetails" in result:
            raise AssertionError(f"page script failed: {result['exceptionDetails']}")
        return result["result"].get("value")

    def wait_for(self, expression: str, timeout_s: float = 30.0, what: str = "") -> Any:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            value = self.evaluate(expression)
            if value:
                return value
            time.sleep(0.2)
        raise AssertionError(f"timed out waiting for {what or expression}")

    def screenshot(self, path: Path) -> None:
        height = int(self.evaluate("document.documentElement.scrollHeight")) or self.height
        self.call("Emulation.setDeviceMetricsOverride", width=self.width, height=height,
                  deviceScaleFactor=1, mobile=False)
        data = self.call("Page.captureScreenshot", format="png")["data"]
        path.write_bytes(base64.b64decode(data))

    def screenshot_element(self, selector: str, path: Path) -> None:
        """The element ``selector`` finds, alone, at the page's scale."""
        box = self.evaluate(
            f"(() => {{ const r = document.querySelector({json.dumps(selector)})"
            ".getBoundingClientRect(); return [r.left + scrollX, r.top + scrollY, r.width, "
            "r.height]; })()")
        clip = dict(zip(("x", "y", "width", "height"), box, strict=True), scale=1)
        data = self.call("Page.captureScreenshot", format="png", clip=clip,
                         captureBeyondViewport=True)["data"]
        path.write_bytes(base64.b64decode(data))

    def set_timezone(self, zone: str) -> None:
        """The page's time zone from now on (an IANA name: "UTC", "Asia/Tokyo")."""
        self.call("Emulation.setTimezoneOverride", timezoneId=zone)

    def close(self) -> None:
        async def shutdown() -> None:
            if self.ws is not None:
                await self.ws.close()
            if self.session is not None:
                await self.session.close()
        self.loop.run_until_complete(shutdown())
        self.loop.close()
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
