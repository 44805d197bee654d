"""A consumer for the benchmark's outputs, run as a script: ``python3 reader.py BYTES
[BURST PAUSE] [--stamps FILE]`` reads stdin to EOF and exits 0 if it got exactly BYTES
bytes (1 with a message if not).  Without BURST it reads as fast as it can; with it, it reads
BURST bytes as fast as it can, then sleeps PAUSE seconds, and so on: a consumer that stalls
in bursts.  On stderr it prints ``time.perf_counter()`` at the moment it had all BYTES bytes,
before it saw EOF (CLOCK_MONOTONIC, the parent's clock too).  With --stamps it also writes
FILE, a line each: ``first T`` (when its first read returned bytes), ``half T`` (when it had
half of BYTES) and ``all T`` (when it had all BYTES), on the same clock: a consumer at the
far end of a link, whose stderr goes who knows where, so says when the stream started to
arrive and how fast its second half came.  It waits for input with select
before its first read, so it may be started on a FIFO before the FIFO's writer opens it.
"""

import argparse
import os
import select
import sys
import time


def main() -> int:
    ap = argparse.ArgumentParser(description="Reads stdin to EOF; checks the byte count.")
    ap.add_argument("bytes", type=int)
    ap.add_argument("burst", type=int, nargs="?", default=0)
    ap.add_argument("pause", type=float, nargs="?", default=0.0)
    ap.add_argument("--stamps", metavar="FILE")
    args = ap.parse_args()
    expect, burst, pause = args.bytes, args.burst, args.pause
    buf = bytearray(1 << 20)
    view = memoryview(buf)
    got = 0
    in_burst = 0
    first_at = half_at = all_at = None
    select.select([0], [], [])
    while True:
        want = len(buf) if not burst else min(len(buf), burst - in_burst)
        n = os.readv(0, [view[:want]])
        if not n:
            break
        if first_at is None:
            first_at = time.perf_counter()
        got += n
        if half_at is None and 2 * got >= expect:
            half_at = time.perf_counter()
        if all_at is None and got >= expect:
            all_at = time.perf_counter()
        in_burst += n
        if burst and in_burst >= burst:
            time.sleep(pause)
            in_burst = 0
    if args.stamps:
        with open(args.stamps, "w") as f:
            for name, at in (("first", first_at), ("half", half_at), ("all", all_at)):
                if at is not None:
                    f.write(f"{name} {at:.6f}\n")
    if got != expect:
        print(f"reader: got {got} bytes, expected {expect}", file=sys.stderr)
        return 1
    print(f"{all_at if all_at is not None else time.perf_counter():.6f}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
