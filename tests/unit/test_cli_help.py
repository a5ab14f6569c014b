"""Every command's ``--help`` shows its text as written: the help is rendered as Markdown, which
drops what looks like an HTML tag (``runs/demo-<time>/`` became ``runs/demo-/``), so a
placeholder must be in backticks."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import typer
from typer.testing import CliRunner

from rewardstream.cli import app

_BOX = re.compile(r"[│╭╮╰╯─]")


def _commands(command: Any, path: list[str]) -> Iterator[tuple[list[str], Any]]:
    yield path, command
    for name, sub in getattr(command, "commands", {}).items():
        yield from _commands(sub, [*path, name])


def _plain(text: str) -> str:
    """Whitespace collapsed and code spans' backticks dropped, as the rendered help shows
    them."""
    return re.sub(r"\s+", " ", text.replace("`", "")).strip()


def _paragraphs(command: Any) -> Iterator[str]:
    texts = [command.help or "", *(getattr(p, "help", None) or "" for p in command.params)]
    for text in texts:
        for paragraph in re.split(r"\n\s*\n", text.split("\f")[0]):
            if paragraph.strip():
                yield _plain(paragraph)


def test_every_help_paragraph_is_shown_whole() -> None:
    runner = CliRunner()
    commands = list(_commands(typer.main.get_command(app), []))[1:]
    lost = []
    for path, command in commands:
        # Wide enough that no line wraps inside a paragraph.
        shown = runner.invoke(app, [*path, "--help"], env={"COLUMNS": "3000"}).output
        shown = _plain(_BOX.sub(" ", shown))
        lost += [f"{' '.join(path)}: {p}" for p in _paragraphs(command) if p not in shown]
    assert len(commands) > 40  # every group's commands were walked
    assert not lost, "help text lost in rendering:\n" + "\n".join(lost)
