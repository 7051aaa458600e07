#!/usr/bin/env bash
# mcprec end to end on the bundled example (examples/weather_server.py):
#   1. record a real session: the example client talks to the real server through `mcprec record`
#   2. replay it: the same client talks to `mcprec replay`, the server gone; the results must match
#   3. diff it: record release 2 of the server the same way and show what changed
#   4. verify: re-drive release 1 with the recorded client traffic; it must pass
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then "$PY" -m venv .venv; fi
.venv/bin/python -m pip install --quiet --disable-pip-version-check -e '.[test]'
export PATH="$PWD/.venv/bin:$PATH"
CASSETTE=cassettes/weather.db
OUT=$(mktemp -d)
rm -f "$CASSETTE" "$CASSETTE-wal" "$CASSETTE-shm"

echo "== 1. record: example client -> mcprec record -> weather server (v1)"
python examples/weather_client.py -- \
  mcprec record -c "$CASSETTE" -s weather-v1 -- python examples/weather_server.py > "$OUT/live.json"
mcprec sessions "$CASSETTE"
mcprec show "$CASSETTE" weather-v1

echo
echo "== 2. replay: example client -> mcprec replay (no server running)"
python examples/weather_client.py -- mcprec replay "$CASSETTE" -s weather-v1 > "$OUT/replayed.json"
if diff -u "$OUT/live.json" "$OUT/replayed.json"; then
  echo "replay OK: the client saw exactly what it saw live ($(wc -c < "$OUT/live.json") bytes of results)"
else
  echo "replay differs from the live run" >&2
  exit 1
fi

echo
echo "== 3. diff: record release 2 of the server, then compare the two sessions"
python examples/weather_client.py -- \
  mcprec record -c "$CASSETTE" -s weather-v2 -- python examples/weather_server.py --v2 > "$OUT/v2.json"
set +e
mcprec diff "$CASSETTE:weather-v1" "$CASSETTE:weather-v2"
status=$?
set -e
if [ "$status" -ne 1 ]; then
  echo "expected the diff to find release 2's changes (exit 1), got exit $status" >&2
  exit 1
fi

echo
echo "== 4. verify: replay the recorded client against release 1 again (a regression test)"
mcprec verify "$CASSETTE" -s weather-v1 -- python examples/weather_server.py
echo "verify OK: release 1 still behaves as recorded"
rm -rf "$OUT"
