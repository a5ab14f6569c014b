"""The tool-calling test model: what it answers to each request, and the tools it is offered."""

from __future__ import annotations

from pathlib import Path

__all__ = ["LINT_TOOL", "READ_FILE_TOOL", "REPLIES", "TOOLS", "build"]

REPLIES = {
    "Read calc.py.": '<tool>read_file {"path": "calc.py"}</tool>',
    "Look around.": '<tool>lint {}</tool><tool>read_file {"path": "src/app/calc.py"}</tool>',
    "Break it.": '<tool>read_file {"path": calc.py}</tool>',
    "Open calc.py.": '<tool>read_file {"file": "calc.py"}</tool>',
    "Say done.": "Done.",
}
READ_FILE_TOOL = {"type": "function", "function": {
    "name": "read_file", "description": "Read a file of the workspace.",
    "parameters": {"type": "object", "properties": {"path": {"type": "string"}},
                   "required": ["path"], "additionalProperties": False}}}
LINT_TOOL = {"type": "function", "function": {"name": "lint", "description": "Lint the code."}}
TOOLS = [READ_FILE_TOOL, LINT_TOOL]


def build(out_dir: Path) -> Path:
    """A tiny model with the harness's transcript chat template (no tools section, so the
    engine's fallback applies, as for the demo's policy), trained to answer each request of
    REPLIES with its call: deterministic tool calls from a real model."""
    from harness.policy.base import TRANSCRIPT_TEMPLATE
    from tests.support.tool_model import build_tool_model

    return build_tool_model(out_dir, REPLIES, TRANSCRIPT_TEMPLATE, TOOLS)
