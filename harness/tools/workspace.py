"""A task workspace: a directory whose paths the tools may touch, and nothing outside it.

Every path a tool receives goes through :meth:`Workspace.resolve`, which refuses absolute paths,
``..`` that climbs out, and symlinks (anywhere along the path) whose target lies outside the
root. Copies for the sandbox drop outward symlinks instead of following them, so a link to
``/etc`` never carries outside content into a run.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator, Sequence
from pathlib import Path

from harness.errors import SandboxViolation, ToolError

__all__ = ["Workspace"]

# Files the tools never list or search: caches and VCS metadata are noise to a policy.
_SKIPPED_DIRS = frozenset({"__pycache__", ".git", ".pytest_cache"})


class Workspace:
    """``fixes``: the quick fixes the workspace offers, as (path, search, replace), the way an
    editor offers code actions; ``lint`` and ``read_file`` list them by number (1-based) and
    ``edit_file`` applies one by its number."""

    def __init__(self, root: Path, fixes: Sequence[tuple[str, str, str]] = ()) -> None:
        self.root = Path(root).resolve()
        if not self.root.is_dir():
            raise ToolError(f"workspace {root} is not a directory")
        self.fixes = tuple(fixes)

    def resolve(self, path: str) -> Path:
        """The real path of ``path`` (relative to the root), if it stays inside the workspace."""
        if not isinstance(path, str) or not path.strip():
            raise ToolError("path must be a non-empty string relative to the workspace")
        if os.path.isabs(path):
            raise SandboxViolation(f"path {path!r} is absolute; give a path inside the workspace")
        candidate = self.root / path
        real = Path(os.path.realpath(candidate))
        if not real.is_relative_to(self.root):
            lexical = Path(os.path.normpath(candidate))
            if lexical.is_relative_to(self.root):
                raise SandboxViolation(
                    f"path {path!r} is a symlink that leads outside the workspace")
            raise SandboxViolation(f"path {path!r} escapes the workspace")
        return real

    def read_text(self, path: str) -> str:
        real = self.resolve(path)
        if not real.is_file():
            raise ToolError(f"no file {path!r} in the workspace")
        return real.read_text(errors="replace")

    def write_text(self, path: str, text: str) -> None:
        real = self.resolve(path)
        real.parent.mkdir(parents=True, exist_ok=True)
        real.write_text(text)

    def files(self, under: str = ".") -> Iterator[str]:
        """Relative paths of the regular files under ``under``, sorted, never leaving the root."""
        start = self.resolve(under)
        for dirpath, dirnames, filenames in os.walk(start):
            dirnames[:] = sorted(d for d in dirnames if d not in _SKIPPED_DIRS)
            for name in sorted(filenames):
                full = Path(dirpath) / name
                if self._inside(full) and full.is_file():
                    yield full.relative_to(self.root).as_posix()

    def copy_to(self, dest: Path) -> list[str]:
        """Copy the workspace into ``dest``; returns the outward symlinks that were left out."""
        skipped: list[str] = []

        def ignore(dirpath: str, names: list[str]) -> set[str]:
            dropped = {n for n in names if n in _SKIPPED_DIRS}
            for name in names:
                full = Path(dirpath) / name
                if full.is_symlink() and not self._inside(full):
                    skipped.append(full.relative_to(self.root).as_posix())
                    dropped.add(name)
            return dropped

        # Inward links are copied as the files they name, so no link in the copy points back.
        shutil.copytree(self.root, dest, symlinks=False, ignore=ignore, dirs_exist_ok=True)
        return skipped

    def _inside(self, full: Path) -> bool:
        return Path(os.path.realpath(full)).is_relative_to(self.root)
