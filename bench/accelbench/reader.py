"""A consumer for the benchmark's outputs, run as a script: ``python3 reader.py BYTES
[BURST PAUSE]`` reads stdin to EOF and exits 0 if it got exactly BYTES bytes (1 with a
message if not).  Without BURST it reads as fast as it can; with it, it reads BURST bytes
as fast as it can, then sleeps PAUSE seconds, and so on: a consumer that stalls in bursts.
On stderr it prints ``time.perf_counter()`` at the moment it had all BYTES bytes, before it
saw EOF (CLOCK_MONOTONIC, the parent's clock too).  It waits for input with select before
its first read, so it may be started on a FIFO before the FIFO's writer opens it.
"""

import os
import select
import sys
import time


def main() -> int:
    expect = int(sys.argv[1])
    burst = int(sys.argv[2]) if len(sys.argv) > 2 else 0
    pause = float(sys.argv[3]) if len(sys.argv) > 3 else 0.0
    buf = bytearray(1 << 20)
    view = memoryview(buf)
    got = 0
    in_burst = 0
    all_at = None
    select.select([0], [], [])
    while True:
        want = len(buf) if not burst else min(len(buf), burst - in_burst)
        n = os.readv(0, [view[:want]])
        if not n:
            break
        got += n
        if all_at is None and got >= expect:
            all_at = time.perf_counter()
        in_burst += n
        if burst and in_burst >= burst:
            time.sleep(pause)
            in_burst = 0
    if got != expect:
        print(f"reader: got {got} bytes, expected {expect}", file=sys.stderr)
        return 1
    print(f"{all_at if all_at is not None else time.perf_counter():.6f}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
