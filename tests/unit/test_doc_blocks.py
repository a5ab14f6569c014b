"""The doc-test mechanism (tests/support/doc_blocks.py): which blocks a page marks, the script
they become, and what a run of it reports, on small pages run by a real bash."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from rewardstream.stack.settings import SETTINGS
from tests.support.doc_blocks import (
    DocBlockError,
    block_outputs,
    marked_blocks,
    missing_lines,
    port_variables,
    shell_script,
    stop_process_group,
    stopped_jobs,
)

ROOT = Path(__file__).resolve().parents[2]

PAGE = """# A page

```bash
echo never run: not marked
```

<!-- test: demo -->
```bash
export GREETING_PORT=${GREETING_PORT:-8400}
sleep 60 &
(exit 3) &
```

<!-- test: other -->
```bash
echo another test's block
```

Save this as `hello.py`:

<!-- test: demo file=hello.py -->
```python
print("hello from", "a file block")
```

<!-- test: demo -->
```bash
python3 hello.py
echo "port $GREETING_PORT"
```

<!-- test: demo output -->
```text
hello from a file block
port ...
```
"""


def test_only_the_named_marked_blocks_are_taken_with_their_kind_and_line() -> None:
    blocks = marked_blocks(PAGE, "demo")
    assert [(b.kind, b.line, b.path) for b in blocks] == [
        ("run", 8, None), ("file", 22, "hello.py"), ("run", 27, None), ("output", 33, None)]
    assert blocks[1].text == 'print("hello from", "a file block")\n'
    assert "another test's block" not in shell_script(blocks)
    assert port_variables(blocks) == ["GREETING_PORT"]


@pytest.mark.parametrize(("page", "problem"), [
    ("<!-- test: demo -->\nno fence here\n", "must be followed by a fence"),
    ("<!-- test: demo -->\n```bash\necho open\n", "never closed"),
    ("<!-- test: demo copy -->\n```bash\necho\n```\n", "unknown option 'copy'"),
    ("<!-- test: demo -->\n```python\nprint()\n```\n", "must be bash, not 'python'"),
    ("<!-- test: demo output -->\n```text\nx\n```\n", "must follow a run block"),
    ("<!-- test: demo file=/etc/passwd -->\n```text\nx\n```\n", "must be a relative path"),
    ("<!-- test: demo file=../up.txt -->\n```text\nx\n```\n", "must be a relative path"),
    ("# nothing marked\n", "no block is marked"),
])
def test_a_page_the_test_cannot_use_is_refused_naming_the_line(page: str, problem: str) -> None:
    with pytest.raises(DocBlockError, match=problem):
        marked_blocks(page, "demo")


def test_shown_lines_match_in_any_order_with_dots_for_any_text() -> None:
    printed = "port 51234\nhello from a file block\n"
    assert missing_lines("hello from a file block\nport ...\n", printed) == []
    assert missing_lines("port 8400\nhello ... block\nbye\n", printed) == ["port 8400", "bye"]


def test_the_script_runs_blocks_in_one_shell_and_reports_each_block_and_its_jobs(
        tmp_path: Path) -> None:
    blocks = marked_blocks(PAGE, "demo")
    script, transcript = tmp_path / "page.sh", tmp_path / "out"
    script.write_text(shell_script(blocks))
    with transcript.open("w") as out:  # a file: the background jobs keep it open
        shell = subprocess.Popen(["bash", str(script)], cwd=tmp_path,
                                 stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
                                 env={**os.environ, "GREETING_PORT": "51234"})
    try:
        assert shell.wait(timeout=30) == 0, transcript.read_text()
        printed = transcript.read_text()
        outputs, job_list = block_outputs(printed)
        assert missing_lines(blocks[3].text, outputs[2]) == []
        assert "port 51234" in outputs[2]  # the test's port, not the page's default
        assert (tmp_path / "hello.py").exists()
        assert job_list is not None
        stopped = stopped_jobs(job_list)
        assert len(stopped) == 1 and "Exit 3" in stopped[0], job_list
        assert "Running" in job_list and "sleep 60" in job_list
    finally:
        shell.kill()
        shell.wait()
        assert stop_process_group(shell.pid, grace_s=5) == []


def test_a_failing_block_stops_the_script_and_is_the_last_one_announced(tmp_path: Path) -> None:
    page = ("<!-- test: demo -->\n```bash\necho one\n```\n"
            "<!-- test: demo -->\n```bash\necho two; false; echo never\n```\n"
            "<!-- test: demo -->\n```bash\necho three\n```\n")
    script = tmp_path / "page.sh"
    script.write_text(shell_script(marked_blocks(page, "demo")))
    run = subprocess.run(["bash", str(script)], text=True, capture_output=True, timeout=30)
    outputs, job_list = block_outputs(run.stdout)
    assert run.returncode == 1
    assert max(outputs) == 1 and outputs[1].strip() == "two"
    assert job_list is None


def test_the_group_is_stopped_after_its_leader_has_exited() -> None:
    leader = subprocess.Popen(["bash", "-c", "sleep 60 & sleep 60 &"], start_new_session=True,
                              stdout=subprocess.DEVNULL)
    assert leader.wait(timeout=30) == 0
    assert len(_live_members(leader.pid)) == 2
    assert stop_process_group(leader.pid, grace_s=5) == []  # sleep ends on SIGTERM
    assert _live_members(leader.pid) == []


def _live_members(pgid: int) -> list[str]:
    """The group's processes but zombies (no init reaps orphans in some containers)."""
    listing = subprocess.run(["ps", "-e", "-o", "pgid=,pid=,stat="], capture_output=True,
                             text=True, check=True).stdout
    return [pid for group, pid, stat in (line.split() for line in listing.splitlines())
            if int(group) == pgid and not stat.startswith("Z")]


def test_the_quickstart_marks_blocks_the_doc_test_can_run() -> None:
    blocks = marked_blocks((ROOT / "docs" / "quickstart.md").read_text(), "quickstart")
    kinds = {block.kind for block in blocks}
    assert kinds == {"run", "file", "output"}
    # The ports the page reads with a default are `rewardstream up`'s settings, with up's
    # defaults: the page's URLs are where up's services listen.
    read = {name: int(default) for block in blocks if block.kind == "run"
            for name, default in re.findall(r"\$\{(REWARDSTREAM_[A-Z_]+_PORT):-(\d+)\}",
                                            block.text)}
    ports = {s.env: s.default for s in SETTINGS if s.is_port}
    assert "REWARDSTREAM_INGEST_PORT" in read
    assert {name: ports.get(name) for name in read} == read
