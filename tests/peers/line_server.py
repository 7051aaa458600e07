"""A line-at-a-time JSON-RPC "server" with switchable faults, for tap and fault tests.

Reads one line at a time (blocking) and answers it at once: a request with
``{"jsonrpc": "2.0", "id": <id>, "result": {"echo": <method>, "n": <count>}}``, anything else
(notifications, garbage) with nothing. Options:

  --crash-after N CODE   exit with CODE right after reading the Nth line, answering nothing
  --trap SIG MARKER CODE on signal SIG write "got SIG" to MARKER and exit with CODE
  --ignore-term          ignore SIGTERM, SIGINT, SIGHUP and stdin EOF (sleeps until killed)
  --pid-file PATH        write our pid to PATH at start
  --stderr TEXT          write TEXT and a newline to stderr at start
  --on-eof MARKER        write "eof" to MARKER when stdin reaches EOF, then exit 0
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--crash-after", nargs=2, type=int)
    p.add_argument("--trap", nargs=3)
    p.add_argument("--ignore-term", action="store_true")
    p.add_argument("--pid-file")
    p.add_argument("--stderr")
    p.add_argument("--on-eof")
    args = p.parse_args()

    if args.pid_file:
        with open(args.pid_file, "w") as f:
            f.write(str(os.getpid()))
    if args.trap:
        name, marker, code = args.trap

        def on_signal(signum: int, frame: object) -> None:
            with open(marker, "w") as f:
                f.write(f"got {signal.Signals(signum).name}")
            os._exit(int(code))

        signal.signal(getattr(signal, name), on_signal)
    if args.ignore_term:
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(sig, signal.SIG_IGN)
    if args.stderr:
        sys.stderr.write(args.stderr + "\n")
        sys.stderr.flush()

    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    count = 0
    while line := stdin.readline():
        count += 1
        if args.crash_after and count >= args.crash_after[0]:
            sys.stderr.write(f"crashing after line {count}\n")
            sys.stderr.flush()
            os._exit(args.crash_after[1])
        try:
            msg = json.loads(line)
        except ValueError:
            continue
        if isinstance(msg, dict) and "method" in msg and "id" in msg:
            reply = {"jsonrpc": "2.0", "id": msg["id"], "result": {"echo": msg["method"], "n": count}}
            stdout.write(json.dumps(reply).encode() + b"\n")
            stdout.flush()
    if args.on_eof:
        with open(args.on_eof, "w") as f:
            f.write("eof")
    if args.ignore_term:
        while True:
            time.sleep(60)
    return 0


if __name__ == "__main__":
    sys.exit(main())
