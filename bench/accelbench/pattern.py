"""A checked stream for the benchmark, run as a script: a producer and its consumer.

``python3 pattern.py produce MIB`` writes MIB MiB to stdout: one random MiB, the same in
every run, with the first 8 bytes of each MiB replaced by its number (big-endian). Nothing
is zeros, so a disk or file system that spots zeros gets no help, and no two MiB are alike.
It costs one write of 1 MiB per MiB, from memory.

``python3 pattern.py consume MIB [GATE_FD]`` reads stdin to EOF and exits 0 if it got
exactly what produce wrote, in order and unchanged (1 with a message if not); each MiB is
compared with memcmp, not hashed. Given GATE_FD, an inherited descriptor, it first waits
until a byte can be read from it, and reads nothing from stdin before: a consumer that is
stalled until the harness releases it. On stderr it prints ``time.perf_counter()`` at the
moment it had every byte, before it saw EOF (CLOCK_MONOTONIC, the parent's clock too).
"""

import os
import random
import sys
import time

MIB = 1 << 20
SEED = 20240801  # any; produce and consume only need the same


def pattern() -> bytearray:
    return bytearray(random.Random(SEED).randbytes(MIB))


def produce(mib: int) -> int:
    block = pattern()
    view = memoryview(block)
    for i in range(mib):
        block[:8] = i.to_bytes(8, "big")
        done = 0
        while done < MIB:
            done += os.write(1, view[done:])
    return 0


def consume(mib: int, gate: int | None) -> int:
    if gate is not None:
        os.read(gate, 1)
    tail = bytes(pattern()[8:])
    block = bytearray(MIB)
    view = memoryview(block)
    expect = mib * MIB
    got = 0
    first_bad = None
    all_at = None
    i = 0
    while True:
        have = 0
        while have < MIB:
            n = os.readv(0, [view[have:]])
            if not n:
                break
            have += n
        got += have
        if have == MIB and first_bad is None and not (
                block.startswith(i.to_bytes(8, "big")) and block.endswith(tail)):
            first_bad = i
        if all_at is None and got >= expect:
            all_at = time.perf_counter()
        if have < MIB:
            break
        i += 1
    if got != expect:
        print(f"pattern: got {got} bytes, expected {expect}", file=sys.stderr)
        return 1
    if first_bad is not None:
        print(f"pattern: MiB {first_bad} differs from what was produced", file=sys.stderr)
        return 1
    print(f"{all_at if all_at is not None else time.perf_counter():.6f}", file=sys.stderr)
    return 0


def main() -> int:
    mode, mib = sys.argv[1], int(sys.argv[2])
    if mode == "produce":
        return produce(mib)
    return consume(mib, int(sys.argv[3]) if len(sys.argv) > 3 else None)


if __name__ == "__main__":
    sys.exit(main())
