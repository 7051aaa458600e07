#!/usr/bin/env bash
# Install everything mcprec's tests need (Python deps in .venv, Node peers in node_modules,
# Debian's chromium for the view's browser tests) and run the whole test suite. Extra
# arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then "$PY" -m venv .venv; fi
.venv/bin/python -m pip install --quiet --disable-pip-version-check -e '.[test]'
npm ci --no-audit --no-fund --loglevel=error
# the view's browser tests drive Debian's Chromium (Playwright cannot download browsers here)
if ! command -v chromium >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ]; then SUDO=; elif command -v sudo >/dev/null 2>&1; then SUDO=sudo; else SUDO=no; fi
  if [ "$SUDO" = no ]; then
    echo "scripts/test.sh: chromium is missing and this user cannot install it; the view's browser tests will fail" >&2
  else
    $SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -qq
    $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
  fi
fi
# two workers (pytest-xdist): the suite's real servers and browsers keep both cores busy; the
# slowest tests named at the end. `scripts/test.sh -m "not slow"` is the fast subset.
.venv/bin/python -m pytest -n "${MCPREC_TEST_WORKERS:-2}" --durations=15 "$@"
# Hyperscan and uvloop are optional speed-ups: with no arguments, the redaction and tap tests run
# once more where neither can be imported (tests/no_speedups), so that the fallbacks are tested
if [ "$#" -eq 0 ]; then
  echo "scripts/test.sh: redaction and the tap again, without Hyperscan and uvloop"
  PYTHONPATH=tests/no_speedups exec .venv/bin/python -m pytest -n "${MCPREC_TEST_WORKERS:-2}" \
    -q tests/redact tests/record/test_tap_transparency.py tests/record/test_tap_loop.py \
    tests/record/test_record_sdk.py
fi
