"""HTTP client of an OpenAI-compatible backend with runtime LoRA loading: ``vllm serve
--enable-lora`` (with ``VLLM_ALLOW_RUNTIME_LORA_UPDATING=True``) or the torch engine, which
speaks the same protocol. See ``serving/gateway/VLLM.md``."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx

from infra.redact import redact_text, redact_url
from serving.gateway.errors import BackendError, refused_by_backend
from serving.sse import DONE, SseFormatError, parse_sse_line

__all__ = ["BackendClient", "BackendStream"]


def _message(response: httpx.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        return response.text[:500]
    error = body.get("error", body) if isinstance(body, dict) else body
    return str(error.get("message", error) if isinstance(error, dict) else error)[:500]


class BackendStream:
    """An open streaming response; iterate for JSON chunks, then :meth:`aclose`."""

    def __init__(self, response: httpx.Response) -> None:
        self._response = response

    async def __aiter__(self) -> AsyncIterator[dict[str, Any]]:
        try:
            async for line in self._response.aiter_lines():
                payload = parse_sse_line(line)
                if payload == DONE:
                    return
                if isinstance(payload, dict):
                    yield payload
        except (httpx.HTTPError, SseFormatError) as exc:  # the backend died or spoke nonsense
            raise BackendError(f"the backend's stream broke off: {exc}", 502) from exc

    async def aclose(self) -> None:
        await self._response.aclose()


class BackendClient:
    def __init__(self, base_url: str, api_key: str | None = None, timeout_s: float = 600.0,
                 transport: httpx.AsyncBaseTransport | None = None) -> None:
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.base_url = base_url.rstrip("/")
        self._client = httpx.AsyncClient(
            base_url=self.base_url, headers=headers, transport=transport,
            timeout=httpx.Timeout(timeout_s, connect=10.0),
        )

    async def models(self) -> list[dict[str, Any]]:
        response = await self._client.get("/v1/models")
        if response.status_code != 200:
            raise BackendError(f"GET /v1/models: {_message(response)}", response.status_code)
        return list(response.json().get("data", []))

    async def base_model(self) -> str:
        """The served name of the backend's base model (the entry without a parent)."""
        models = await self.models()
        bases = [m["id"] for m in models if not m.get("parent")]
        if not bases:
            raise BackendError(f"backend at {redact_url(self.base_url)} lists no base model")
        return bases[0]

    async def loaded_adapters(self) -> dict[str, str]:
        return {m["id"]: m.get("root", "") for m in await self.models() if m.get("parent")}

    async def load_adapter(self, name: str, path: str) -> None:
        """Load ``path`` under ``name``; already loaded counts as success."""
        response = await self._client.post(
            "/v1/load_lora_adapter", json={"lora_name": name, "lora_path": path}
        )
        if response.status_code != 200 and "already been loaded" not in response.text:
            raise BackendError(f"loading adapter {name} from {path}: {_message(response)}",
                               response.status_code)

    async def unload_adapter(self, name: str) -> None:
        """Unload ``name``; not loaded counts as success."""
        response = await self._client.post("/v1/unload_lora_adapter", json={"lora_name": name})
        if response.status_code not in (200, 404) and "cannot be found" not in response.text:
            raise BackendError(f"unloading adapter {name}: {_message(response)}",
                               response.status_code)

    async def open_stream(self, path: str, body: dict[str, Any]) -> BackendStream:
        """POST a ``stream: true`` request; raises :class:`BackendError` with the backend's
        status and message when it refuses."""
        request = self._client.build_request("POST", path, json=body)
        try:
            response = await self._client.send(request, stream=True)
        except httpx.HTTPError as exc:
            raise BackendError(f"backend at {redact_url(self.base_url)} unreachable: "
                               f"{redact_text(str(exc))}", 502) from exc
        if response.status_code != 200:
            await response.aread()
            await response.aclose()
            try:
                refusal: object = response.json()
            except ValueError:
                refusal = response.text
            raise refused_by_backend(response.status_code, refusal, "the backend refused")
        return BackendStream(response)

    async def aclose(self) -> None:
        await self._client.aclose()
