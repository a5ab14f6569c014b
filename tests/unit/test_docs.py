"""The front page and docs/ hold together: every link between them lands on a page and a
heading that exist, the front page stays short, and its demo table is the measured one."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
_LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
_FENCE = re.compile(r"^```.*?^```", re.MULTILINE | re.DOTALL)


def _anchors(page: Path) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation dropped, spaces as hyphens, repeats
    numbered."""
    seen: dict[str, int] = {}
    for heading in re.findall(r"^#+\s+(.+?)\s*$", _FENCE.sub("", page.read_text()), re.MULTILINE):
        slug = re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        if count:
            seen[f"{slug}-{count}"] = 1
    return set(seen)


def _links(page: Path) -> list[str]:
    return [target for target in _LINK.findall(_FENCE.sub("", page.read_text()))
            if not re.match(r"[a-z]+:", target)]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_link_lands_on_a_page_and_heading_that_exist(page: Path) -> None:
    broken = []
    for target in _links(page):
        path, _, anchor = target.partition("#")
        linked = (page.parent / path).resolve() if path else page
        if not linked.exists():
            broken.append(f"{target}: no such file")
        elif anchor and linked.suffix == ".md" and anchor not in _anchors(linked):
            broken.append(f"{target}: no heading #{anchor} in {linked.relative_to(ROOT)}")
    assert not broken, broken


def test_the_anchor_rule_is_githubs() -> None:
    page = ROOT / "docs" / "trainer-and-release.md"
    assert {"the-canary-ab", "narrowing-the-interval-cuped"} <= _anchors(page)


def test_every_docs_page_is_in_the_index() -> None:
    index = (ROOT / "docs" / "README.md").read_text()
    unlisted = [p.name for p in PAGES[1:] if p.name != "README.md" and f"]({p.name})" not in index]
    assert not unlisted, unlisted


def test_the_front_page_stays_a_front_page() -> None:
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= 200, f"README.md has {len(lines)} lines; move reference into docs/"


def _table(text: str, header_start: str) -> list[dict[str, str]]:
    lines = next(block for block in text.split("\n\n") if block.startswith(header_start))
    rows = [[cell.strip() for cell in line.strip("|").split(" | ")] for line in lines.splitlines()]
    return [dict(zip(rows[0], row, strict=True)) for row in rows[2:]]


def test_the_front_page_quotes_no_measured_figure() -> None:
    """Measured figures live in docs/, each in one place; the front page links to them."""
    readme = (ROOT / "README.md").read_text()
    figures = [line for line in readme.splitlines()
               if re.search(r"[+−]\d", line) or line.startswith("|") and re.search(r"\d\.\d", line)]
    assert not figures, figures
