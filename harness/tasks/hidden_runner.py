"""Runs a hidden test script; prints the nonce line only when the whole script ran through.

The sandbox runs this file's copy as ``python _hidden_runner.py TEST`` with a nonce on stdin.
It imports only ``sys`` (built in, so no workspace file can shadow it). Leaving early in any
way (an exception, ``sys.exit``, ``os._exit``, a signal) skips the nonce line, so it fails.
"""

import sys

__all__: list[str] = []


def _run(test_path: str) -> None:
    nonce = sys.stdin.readline().strip()
    with open(test_path) as handle:
        code = compile(handle.read(), test_path, "exec")
    exec(code, {"__name__": "__main__", "__file__": test_path})
    sys.stdout.write(f"\n{nonce} all hidden tests passed\n")
    sys.stdout.flush()


if __name__ == "__main__":
    _run(sys.argv[1])
