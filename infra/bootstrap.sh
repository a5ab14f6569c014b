#!/usr/bin/env bash
# Sets up everything rewardstream needs on a fresh machine, then runs one job:
#   bash infra/bootstrap.sh demo [ARGS...]   the closed-loop demo on a local broker
#   bash infra/bootstrap.sh test [ARGS...]   the checks, then the test suite against a real broker
#                                            (pytest-xdist workers: REWARDSTREAM_TEST_WORKERS, 3)
#   bash infra/bootstrap.sh check            only the checks: lint (ruff), types (mypy), layers
#   bash infra/bootstrap.sh env              only set up; prints how to activate the venv
# Dependencies install once into a virtualenv cached outside the checkout, keyed by a hash of
# infra/requirements.lock and the Python version, so repeat runs never reinstall torch. The
# checkout gets a thin .venv that layers the project (editable) on top of that cache.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
job=${1:-env}
shift || true
cache=${REWARDSTREAM_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/rewardstream}
python=${PYTHON:-python3}

lock="$root/infra/requirements.lock"
key=$( (cat "$lock"; "$python" -c 'import sys; print(sys.version)') | sha256sum | cut -c1-16)
deps="$cache/deps-$key"

if [ ! -f "$deps/.complete" ]; then
  echo "==> installing dependencies into $deps (once per requirements.lock)"
  rm -rf "$deps"
  "$python" -m venv "$deps"
  "$deps/bin/python" -m pip install --quiet --upgrade pip
  "$deps/bin/python" -m pip install --quiet --progress-bar off -r "$lock"
  touch "$deps/.complete"
fi

# The end-to-end monitor tests drive a real Alertmanager and a real headless Chromium.
ensure_test_system_packages() {
  command -v chromium >/dev/null && command -v prometheus-alertmanager >/dev/null \
    && command -v prometheus >/dev/null && return 0
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "==> installing chromium, prometheus-alertmanager and prometheus (Debian packages)"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
      chromium prometheus-alertmanager prometheus >/dev/null
  else
    echo "note: chromium / prometheus-alertmanager / prometheus missing and not root: their tests will not pass" >&2
  fi
}

venv="$root/.venv"
purelib() { "$1" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])'; }
if [ ! -x "$venv/bin/python" ] || [ "$(cat "$venv/.deps" 2>/dev/null)" != "$deps" ]; then
  rm -rf "$venv"
  "$python" -m venv --without-pip "$venv"
  purelib "$deps/bin/python" > "$(purelib "$venv/bin/python")/rewardstream-deps.pth"
  echo "$deps" > "$venv/.deps"
fi
if [ ! -x "$venv/bin/rewardstream" ] || [ "$root/pyproject.toml" -nt "$venv/bin/rewardstream" ]; then
  # compat mode puts the checkout itself on sys.path, so new packages need no reinstall.
  "$venv/bin/python" -m pip install --quiet --no-deps --no-build-isolation \
    --config-settings editable_mode=compat -e "$root"
fi
# The telemetry SDK is its own package (harness/sdk-py); the platform imports it. Editable, like
# the project: its source directory goes on sys.path once, so edits need no reinstall.
sdk="$root/harness/sdk-py"
if [ ! -f "$venv/.sdk-installed" ] || [ "$sdk/pyproject.toml" -nt "$venv/.sdk-installed" ]; then
  "$venv/bin/python" -m pip install --quiet --no-deps --no-build-isolation \
    --config-settings editable_mode=compat -e "$sdk"
  touch "$venv/.sdk-installed"
fi
export PATH="$venv/bin:$PATH"

# ruff, mypy and import-linter: the code's own rules, before any test runs.
run_checks() {
  cd "$root"
  echo "==> ruff"; "$deps/bin/ruff" check .
  echo "==> mypy"; "$deps/bin/mypy"
  # The venv's Python: it sees the SDK (installed editable there), a root package of the layers.
  echo "==> layers"; "$venv/bin/python" -c \
    'import sys; from importlinter.cli import lint_imports_command; sys.exit(lint_imports_command())' \
    --no-cache
}

case "$job" in
  env)
    echo "ready: source $venv/bin/activate  (or run $venv/bin/rewardstream --help)"
    ;;
  demo)
    exec rewardstream demo "$@"
    ;;
  check)
    run_checks
    ;;
  test)
    run_checks
    ensure_test_system_packages
    # Every run gets a new broker: a reused one starts by recovering the thousands of topics
    # earlier runs left behind (after an unclean stop, every segment), and may miss its deadline.
    REWARDSTREAM_KAFKA_DATA_DIR=$(mktemp -d "${TMPDIR:-/tmp}/rewardstream-test-kafka.XXXXXX")
    export REWARDSTREAM_KAFKA_DATA_DIR
    trap 'rewardstream kafka stop >/dev/null 2>&1 || true; rm -rf "$REWARDSTREAM_KAFKA_DATA_DIR"' EXIT
    # Without a broker the Kafka tests would skip (fail under CI=true): a green run that tested
    # nothing. Stop here and say why instead.
    if ! rewardstream kafka start; then
      echo "error: the test broker did not start, so the suite cannot run; the lines above say" \
           "why, and its log ends:" >&2
      tail -n 15 "$REWARDSTREAM_KAFKA_DATA_DIR"/broker.log >&2 2>/dev/null || true
      echo "Only the fast tier runs without a broker: .venv/bin/python -m pytest -m" \
           "'not kafka and not slow and not abuse and not faults'" >&2
      exit 1
    fi
    cd "$root"
    # Tests run in parallel: loadgroup with no test in a group hands each test to a worker as
    # soon as it has at most two waiting (tests/conftest.py puts the longest first).
    # The 25 slowest tests are listed at the end: where the suite's time goes.
    python -m pytest -n "${REWARDSTREAM_TEST_WORKERS:-3}" --dist loadgroup --durations 25 "$@"
    ;;
  *)
    echo "usage: bash infra/bootstrap.sh {demo|test|check|env} [ARGS...]" >&2
    exit 2
    ;;
esac
