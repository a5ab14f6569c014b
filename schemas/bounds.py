"""The bound of every field of every event, in one place: models, docs and tests use these.

Each number is chosen so that a legitimate event never comes near it and a broken or hostile
one cannot push a consumer into overflow, ``inf`` or unbounded memory:

* durations are at most a day (a served completion or a tool call that took longer is a bug);
* token ids are below 2**20, larger than any tokenizer's vocabulary in use (~256k);
* behaviour logprobs are finite, at most 0 and at least -10,000 (OpenAI and vLLM write -9999
  for an impossible token; a sampled token is never below about -100 in float32);
* the token arrays are sized so that the largest valid ``completion.served`` (every array full,
  every id and logprob at its longest spelling) stays well under the 1 MiB event cap and the
  broker's 1 MiB record limit, stored envelope included;
* timestamps lie in a static sanity range here (years 2000 to 2099); ingest checks the much
  tighter window around its own clock (``serving.ingest.config``).
"""

from __future__ import annotations

import re
from datetime import UTC, datetime

# Ids and names: the producers' SDK refuses a control character at the call, ingest again.
from rewardstream_telemetry.validation import control_character_problem

__all__ = [
    "EARLIEST_TIME",
    "IDENTIFIER_MAX_CHARS",
    "LATEST_TIME",
    "COMPLETION_TEXT_MAX_BYTES",
    "MAX_CLOCK_SKEW_MS",
    "MAX_COMPLETION_TOKENS",
    "MAX_DURATION_MS",
    "MAX_HORIZON_S",
    "MAX_LINES_CHANGED",
    "MAX_PARALLEL_GROUP",
    "MAX_PROMPT_TOKENS",
    "MAX_SEED",
    "MAX_TEMPERATURE",
    "MAX_TOOLS_OFFERED",
    "MAX_TURNS",
    "MIN_LOGPROB",
    "MIN_SEED",
    "ORG_ID_MAX_CHARS",
    "PATH_MAX_CHARS",
    "PROMPT_TEXT_MAX_BYTES",
    "TOKEN_ID_BOUND",
    "TOOL_NAME_MAX_CHARS",
    "USER_MAX_CHARS",
    "control_character_problem",
    "org_id_problem",
    "text_problem",
]

# Strings (characters).
IDENTIFIER_MAX_CHARS = 128  # ids, names, model, arm, task family
# An org id names directories, Kafka keys, metric labels and key-file entries: letters, digits,
# '.', '_' and '-', starting with a letter or digit, so it needs no escaping anywhere.
ORG_ID_MAX_CHARS = 64
_ORG_ID = re.compile(rf"[A-Za-z0-9][A-Za-z0-9._-]{{0,{ORG_ID_MAX_CHARS - 1}}}")
USER_MAX_CHARS = 256
TOOL_NAME_MAX_CHARS = 64
PATH_MAX_CHARS = 1024
# Prompt and completion text (UTF-8 bytes): a prompt keeps its end, a completion its start when
# the gateway cuts one. Text may hold tabs and line breaks but no other C0 control character,
# so every byte costs at most two in JSON and the largest event stays under the caps.
PROMPT_TEXT_MAX_BYTES = 32 << 10
COMPLETION_TEXT_MAX_BYTES = 32 << 10
TEXT_CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f]")
MAX_TOOLS_OFFERED = 128  # OpenAI's own limit on a request's tools

# Numbers.
MAX_DURATION_MS = 86_400_000.0  # ttft_ms, latency_ms, duration_ms: one day
TOKEN_ID_BOUND = 1 << 20  # 0 <= token id < 2**20
MIN_LOGPROB = -10_000.0
MAX_PROMPT_TOKENS = 1 << 16
MAX_COMPLETION_TOKENS = 1 << 13  # also the largest sampling.max_tokens
MAX_TEMPERATURE = 100.0
MIN_SEED = -(1 << 63)  # seeds are int64
MAX_SEED = (1 << 63) - 1
MAX_TURNS = 100_000
MAX_LINES_CHANGED = 10_000_000
MAX_PARALLEL_GROUP = 1_000_000
MAX_HORIZON_S = 30 * 86_400  # edit persistence checked at most 30 days after the edit

# Timestamps: every datetime of an envelope lies in [EARLIEST_TIME, LATEST_TIME).
EARLIEST_TIME = datetime(2000, 1, 1, tzinfo=UTC)
LATEST_TIME = datetime(2100, 1, 1, tzinfo=UTC)
MAX_CLOCK_SKEW_MS = int((LATEST_TIME - EARLIEST_TIME).total_seconds() * 1000)


def org_id_problem(org_id: str) -> str | None:
    """Why ``org_id`` is not an org id, or None when it is one."""
    if _ORG_ID.fullmatch(org_id):
        return None
    return (f"{org_id[:80]!r} is not an org id: 1 to {ORG_ID_MAX_CHARS} letters, digits, '.', "
            "'_' or '-', starting with a letter or digit")



def text_problem(text: str, max_bytes: int) -> str | None:
    """Why ``text`` cannot be a prompt or completion text, or None when it can."""
    found = TEXT_CONTROL.search(text)
    if found is not None:
        return (f"contains the control character U+{ord(found.group()):04X} at index "
                f"{found.start()}; text may hold tabs and line breaks, no other control "
                "character")
    size = len(text.encode("utf-8", "surrogatepass"))
    if size > max_bytes:
        return f"is {size} bytes of UTF-8, over the {max_bytes} byte limit"
    return None
