"""Running the fenced blocks of a Markdown page that are marked for a doc test.

A block is marked by an HTML comment on the line before its opening fence (invisible on the
rendered page):

- ``<!-- test: NAME -->`` before a ``bash`` block: run it in the page's shell;
- ``<!-- test: NAME file=PATH -->`` before any block: write it to ``PATH``, relative to the
  shell's directory at that point ("save this as PATH");
- ``<!-- test: NAME output -->`` before a ``text`` block: lines the run block before it must
  print, in any order (``...`` in a line matches any text).

:func:`shell_script` turns a page's run and file blocks into one bash script, so blocks share
variables, the working directory and background jobs, as they do for a reader typing them into
one shell. It runs with ``set -euo pipefail``, prints a marker before each block (to tell which
block failed and what each printed), and ends with ``jobs -l``: every service a block started
in the background must still be running then (:func:`stopped_jobs`). Run it from a file
(``bash script.sh``): ``bash -c`` forgets jobs that have finished before ``jobs -l``.
"""

from __future__ import annotations

import os
import re
import signal
import time
from dataclasses import dataclass
from pathlib import Path

__all__ = ["DocBlock", "DocBlockError", "block_outputs", "marked_blocks", "missing_lines",
           "port_variables", "shell_script", "stop_process_group", "stopped_jobs"]

_MARKER = re.compile(r"^<!--\s*test:\s*([\w-]+)(?:\s+(.*?))?\s*-->\s*$")
_FENCE = re.compile(r"^(`{3,})\s*([\w+-]*)\s*$")
_RELATIVE_PATH = re.compile(r"^(?!/)(?!.*\.\.)[\w./-]+$")
_EOF = "__DOC_BLOCK_EOF__"
_BLOCK_LINE = "@@doc block {}@@"
_END = "end"
# A variable a run block defaults the way a reader may override it: NAME=${NAME:-8400}.
_PORT_DEFAULT = re.compile(r"\b([A-Z][A-Z0-9_]*_PORT)=\$\{\1:-\d+\}")
_JOB = re.compile(r"^\[\d+\][+-]?\s+\d+\s+(Running|Stopped|Done|Exit \d+|Killed|Terminated"
                  r"|[A-Z][\w ]*?)\s{2,}(.*)$")


class DocBlockError(ValueError):
    """A marked block the doc test cannot use, with the page's line number."""


@dataclass(frozen=True)
class DocBlock:
    kind: str  # "run", "file" or "output"
    text: str
    line: int  # the opening fence's line (1-based)
    path: str | None = None  # file blocks: where the block is written

    @property
    def label(self) -> str:
        return f"the {self.kind} block at line {self.line}"


def _option(options: str, line: int) -> tuple[str, str | None]:
    if not options:
        return "run", None
    if options == "output":
        return "output", None
    if options.startswith("file="):
        path = options.removeprefix("file=")
        if not _RELATIVE_PATH.match(path):
            raise DocBlockError(f"line {line}: file={path!r} must be a relative path of letters, "
                                "digits, '.', '_', '-' and '/'")
        return "file", path
    raise DocBlockError(f"line {line}: unknown option {options!r} (known: file=PATH, output)")


def marked_blocks(markdown: str, name: str) -> list[DocBlock]:
    """The blocks of ``markdown`` marked ``<!-- test: name ... -->``, in page order."""
    lines = markdown.splitlines()
    blocks: list[DocBlock] = []
    for index, line in enumerate(lines):
        marker = _MARKER.match(line)
        if marker is None or marker.group(1) != name:
            continue
        kind, path = _option(marker.group(2) or "", index + 1)
        fence = _FENCE.match(lines[index + 1]) if index + 1 < len(lines) else None
        if fence is None:
            raise DocBlockError(f"line {index + 1}: a test marker must be followed by a fence")
        ticks, language, start = fence.group(1), fence.group(2), index + 2
        end = next((i for i in range(start, len(lines)) if lines[i].strip() == ticks), None)
        if end is None:
            raise DocBlockError(f"line {start}: the marked block is never closed")
        block = DocBlock(kind, "\n".join(lines[start:end]) + "\n", start, path)
        if kind == "run" and language not in ("bash", "sh"):
            raise DocBlockError(f"{block.label}: a run block must be bash, not {language!r}")
        if kind == "output" and (not blocks or blocks[-1].kind != "run"):
            raise DocBlockError(f"{block.label}: an output block must follow a run block")
        if kind == "file" and _EOF in block.text:
            raise DocBlockError(f"{block.label}: holds {_EOF}, which ends the here-document")
        blocks.append(block)
    if not blocks:
        raise DocBlockError(f"no block is marked <!-- test: {name} -->")
    return blocks


def shell_script(blocks: list[DocBlock]) -> str:
    """The run and file blocks as one bash script; block ``i`` (its index in ``blocks``) is
    announced by a marker line, and the script ends with ``jobs -l``."""
    parts = ["set -euo pipefail"]
    for index, block in enumerate(blocks):
        if block.kind == "output":
            continue
        parts.append(f"printf '\\n%s\\n' '{_BLOCK_LINE.format(index)}'")
        if block.kind == "file":
            parts.append(f"cat > '{block.path}' <<'{_EOF}'\n{block.text}{_EOF}")
        else:
            parts.append(block.text.rstrip("\n"))
    parts += [f"printf '\\n%s\\n' '{_BLOCK_LINE.format(_END)}'", "jobs -l"]
    return "\n".join(parts) + "\n"


def block_outputs(output: str) -> tuple[dict[int, str], str | None]:
    """What each block printed, by its index; and what came after the last block (the job
    list), or None when the script did not get there."""
    found: dict[int, str] = {}
    ending: str | None = None
    pieces = re.split(r"^@@doc block (\w+)@@$", output, flags=re.MULTILINE)
    for label, text in zip(pieces[1::2], pieces[2::2], strict=True):
        if label == _END:
            ending = text
        else:
            found[int(label)] = text
    return found, ending


def missing_lines(expected: str, printed: str) -> list[str]:
    """The non-blank lines of ``expected`` that no line of ``printed`` matches."""
    lines = [line.strip() for line in printed.splitlines()]
    missing = []
    for want in filter(None, (line.strip() for line in expected.splitlines())):
        pattern = re.compile(".*".join(re.escape(part) for part in want.split("...")))
        if not any(pattern.fullmatch(line) for line in lines):
            missing.append(want)
    return missing


def port_variables(blocks: list[DocBlock]) -> list[str]:
    """The ``*_PORT`` variables the run blocks default with ``NAME=${NAME:-N}``: a test gives
    each a free port, so the page's defaults need not be free."""
    names = (_PORT_DEFAULT.findall(b.text) for b in blocks if b.kind == "run")
    return sorted({name for found in names for name in found})


def stopped_jobs(job_list: str) -> list[str]:
    """The lines of a ``jobs -l`` listing whose job is no longer running."""
    return [line for line in job_list.splitlines()
            if (job := _JOB.match(line.strip())) and job.group(1) != "Running"]


def _group_members(pgid: int) -> list[int]:
    members = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # the process ended while we looked
        if fields[0] != "Z" and int(fields[2]) == pgid:  # state, ppid, pgrp
            members.append(int(stat.parent.name))
    return members


def _signal(pgid: int, sig: int) -> bool:
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        return False
    return True


def _emptied(pgid: int, wait_s: float) -> bool:
    deadline = time.monotonic() + wait_s
    while _group_members(pgid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.2)
    return True


def stop_process_group(pgid: int, grace_s: float = 30.0) -> list[int]:
    """SIGTERM every live process of the group, then SIGKILL what is left after ``grace_s``;
    the pids that had to be killed. The group outlives its leader: the background jobs of a
    finished script are still in it."""
    if not _group_members(pgid) or not _signal(pgid, signal.SIGTERM) or _emptied(pgid, grace_s):
        return []
    stubborn = _group_members(pgid)
    _signal(pgid, signal.SIGKILL)
    _emptied(pgid, 5.0)
    return stubborn
