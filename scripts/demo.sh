#!/usr/bin/env bash
# mcprec end to end on the bundled example (examples/weather_server.py):
#   1. record a real session: the example client talks to the real server through `mcprec record`
#   2. replay it: the same client talks to `mcprec replay`, the server gone; the results must match
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
rm -rf "$OUT"
