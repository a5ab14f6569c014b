"""Request bodies of the HTTP services: read within a cap while they arrive, and (for the JSON
APIs) parsed as one bounded JSON object, so a malformed request gets a 4xx naming the problem.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterable, Mapping, Sequence
from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from pydantic import BaseModel
from starlette.requests import Request

from schemas.errors import RewardstreamError
from serving.jsonscan import DEFAULT_MAX_DEPTH, MalformedJson, load_object

__all__ = ["BODY_ERRORS", "BodyTooLarge", "UnsupportedMediaType", "invalid_field",
           "json_object", "openapi_document", "read_capped", "validation_message"]


class BodyTooLarge(RewardstreamError):
    """The body is over the service's cap; ``status_code`` is 413."""

    status_code = 413


class UnsupportedMediaType(RewardstreamError):
    """The Content-Type says the body is not JSON; ``status_code`` is 415."""

    status_code = 415


# How pydantic names a union's member in an error's location: a type, not a field.
_UNION_MEMBER = re.compile(r"^(str|int|float|bool|constrained-\w+|[\w-]+\[.*\])$")
# What json_object raises; each has the HTTP ``status_code`` to answer with.
BODY_ERRORS = (MalformedJson, BodyTooLarge, UnsupportedMediaType)


async def read_capped(chunks: AsyncIterable[bytes], content_length: str | None,
                      max_bytes: int) -> bytes:
    """The body as sent, refused as soon as it is over ``max_bytes``: at once when
    ``Content-Length`` says so, else once the bytes read pass the cap (nothing more is read)."""
    if content_length is not None and content_length.strip().isdigit() \
            and int(content_length) > max_bytes:
        raise BodyTooLarge(f"the body is {int(content_length)} bytes, over the {max_bytes} byte "
                           "cap")
    body = bytearray()
    async for chunk in chunks:
        body += chunk
        if len(body) > max_bytes:
            raise BodyTooLarge(f"the body is over the {max_bytes} byte cap")
    return bytes(body)


def _is_json(content_type: str) -> bool:
    media = content_type.split(";", 1)[0].strip().lower()
    return media == "application/json" or (media.startswith("application/")
                                           and media.endswith("+json"))


async def json_object(request: Request, max_bytes: int,
                      max_depth: int = DEFAULT_MAX_DEPTH) -> dict[str, Any]:
    """The request's body as one JSON object; raises :class:`UnsupportedMediaType`,
    :class:`BodyTooLarge` or :class:`serving.jsonscan.MalformedJson`, each naming the problem."""
    content_type = request.headers.get("content-type")
    if content_type is not None and not _is_json(content_type):
        raise UnsupportedMediaType(f"Content-Type {content_type[:100]!r} is not JSON; send "
                                   "Content-Type: application/json")
    body = await read_capped(request.stream(), request.headers.get("content-length"), max_bytes)
    return load_object(body, max_depth)


def invalid_field(errors: Sequence[Any]) -> tuple[str | None, str]:
    """(field path, problem) of the first of pydantic's validation errors, without echoing the
    input (which may be a float JSON cannot write, like the inf that 1e999 parses to), and
    without the names pydantic gives the members of a union (``content.str``)."""
    if not errors:
        return None, "the request is invalid"
    first = errors[0]
    where = [str(part) for part in first.get("loc", ())
             if part != "body" and not (isinstance(part, str) and _UNION_MEMBER.match(part))]
    return ".".join(where)[:200] or None, str(first.get("msg", "invalid"))


def validation_message(errors: Sequence[Any]) -> str:
    """The first of FastAPI's request validation errors as ``field: problem``."""
    field, problem = invalid_field(errors)
    return f"{field or '(body)'}: {problem}" if errors else problem


def openapi_document(app: FastAPI, bodies: Mapping[str, type[BaseModel]]) -> dict[str, Any]:
    """FastAPI's document plus the JSON request bodies of the routes (by path) that read their
    body themselves with :func:`json_object`, to bound it before parsing."""
    if app.openapi_schema:
        return app.openapi_schema
    document = get_openapi(title=app.title, version=app.version, routes=app.routes)
    components = document.setdefault("components", {}).setdefault("schemas", {})
    for path, model in bodies.items():
        schema = model.model_json_schema(ref_template="#/components/schemas/{model}")
        components.update(schema.pop("$defs", {}))
        components[model.__name__] = schema
        document["paths"][path]["post"]["requestBody"] = {
            "required": True, "content": {"application/json": {
                "schema": {"$ref": f"#/components/schemas/{model.__name__}"}}}}
    app.openapi_schema = document
    return document
