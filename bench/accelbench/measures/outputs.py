"""Two outputs, one stalling in bursts: ``head -c 512M /dev/zero | X | fast`` with
X also writing a FIFO read by ``slow``. X is each accel variant
``-m 1G -o - -o FIFO``, ``mbuffer -m 1G -o - -f -o FIFO`` (its outputs move in
lockstep) and ``tee FIFO``. Both consumers are bench/accelbench/reader.py, a
Python script (pv -L smooths a rate, it does not stall): fast reads as fast as
it can; slow reads 8 MiB as fast as it can, then nothing for 0.1 s, and again
(at most 80 MiB/s, 6.4 s for the stream). The stream is half the buffer, so the
slow output's lag, at most the whole stream, stays within the buffer: accel
never holds the producer back, and its fast output should have every byte at the
producer's pace, long before the slow one; a lockstep tool's fast output
finishes with the slow one. "all bytes" = when fast had the whole stream;
"× accel" = that median over the first variant's; "EOF" = when fast, having seen
EOF, exited (a finished output kept open until the others are done shows here);
"run" = until every process has exited. --quick: 64 MiB through -m 128M.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from ..context import MIB, WORK, Context, note
from ..markdown import code, md_table
from ..processes import run_pipeline
from ..stats import Samples, fmt_spread, interleaved, med
from ..tools import Tool, set_size, show

READER = str(Path(__file__).resolve().parent.parent / "reader.py")  # the consumers
BURST = 8 * MIB  # what the slow consumer reads at full speed before each pause
PAUSE = 0.1  # seconds


def run(ctx: Context) -> str:
    accel, rounds, timeout = ctx.accel, ctx.rounds, ctx.timeout
    mib = 64 if ctx.quick else 512
    n = mib * MIB
    size = f"{2 * mib}M"
    fifo = str(WORK / "outputs.fifo")
    head = ["head", "-c", f"{mib}M", "/dev/zero"]
    fast = [sys.executable, "-S", READER, str(n)]
    slow = [sys.executable, "-S", READER, str(n), str(BURST), str(PAUSE)]
    xs: list[tuple[Tool, list[str]]] = []
    for t in ctx.tools:
        if t.kind == "variant":
            xs.append((t, set_size(t.argv, size) + ["-o", "-", "-o", fifo]))
        elif t.name == "mbuffer":  # -f applies to the next -o only; without it, "File exists"
            xs.append((t, set_size(t.argv, size) + ["-o", "-", "-f", "-o", fifo]))
    xs.append((Tool("tee", ["tee"], "peer"), ["tee", fifo]))
    samples = {t.name: Samples.for_tool(t) for t, _ in xs}
    all_bytes: dict[str, list[float]] = {t.name: [] for t, _ in xs}
    eof: dict[str, list[float]] = {t.name: [] for t, _ in xs}
    if os.path.exists(fifo):
        os.unlink(fifo)
    os.mkfifo(fifo)
    try:
        for r, (t, argv), s in interleaved(xs, rounds, samples, key=lambda x: x[0].name):
            rr = run_pipeline([head, argv, fast], readers=[(slow, fifo)], timeout=timeout)
            if rr.ok:
                try:
                    got_all = float(rr.procs[2].stderr.split()[-1]) - rr.t0
                except (ValueError, IndexError):
                    rr.error = f"fast reader printed no time: {rr.procs[2].stderr[:80]!r}"
            s.add(rr, 1)
            if rr.ok:
                all_bytes[t.name].append(got_all)
                eof[t.name].append(rr.procs[2].end)
            note(f"outputs round {r + 1}/{rounds}: {t.name:<12} "
                 + (f"fast output all bytes {got_all:.2f} s, EOF {rr.procs[2].end:.2f} s, "
                    f"run {rr.wall:.2f} s" if rr.ok else f"FAILED: {rr.error}"))
    finally:
        os.unlink(fifo)
    ref = xs[0][0].name if xs[0][0].kind == "variant" else None
    ref_all = med(all_bytes[ref]) if ref and all_bytes[ref] else None
    rows = []
    for t, argv in xs:
        s = samples[t.name]
        ratio = (f"{med(all_bytes[t.name]) / ref_all:.2f}"
                 if ref_all and all_bytes[t.name] else "—")
        xcpu = f"{med(s.x_cpu):.2f}" if s.x_cpu else "—"
        rows.append([t.name, code(show(argv, accel).replace(fifo, "FIFO")),
                     fmt_spread(all_bytes[t.name]), ratio, fmt_spread(eof[t.name]),
                     fmt_spread(s.wall), xcpu, s.status()])
    head_md = (f"## Two outputs, one stalling: `head -c {mib}M /dev/zero | X | fast`, "
               f"X also writing FIFO, read by slow\n\n"
               f"fast and slow are bench/accelbench/reader.py: fast reads as fast as it can; "
               f"slow reads {BURST // MIB} MiB as fast as it can, "
               f"then pauses {PAUSE:g} s, and again. The stream ({mib} MiB) is half the buffer "
               f"({size}), so the slow output's lag stays within it. Seconds from the start, "
               f"median [min–max] of {rounds} rounds, rotating order: when fast had all bytes "
               f"(× {ref or 'accel'}: ratio of medians), when it saw EOF and exited, and when "
               f"every process had exited. X CPU s: user+sys of X.\n")
    table = md_table(["X", "command", "fast: all bytes s", f"× {ref or 'accel'}",
                      "fast: EOF s", "run s", "X CPU s", "status"], rows)
    return head_md + "\n" + table + "\n"
