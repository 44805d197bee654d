"""``head -c SIZE /dev/zero | X | <timed reader>`` with X capping the rate: ``accel -r``,
``pv -L``, ``mbuffer -R`` at the same target.  A reader timestamps every read; the 100 ms
windows after the first second are compared with a tenth of the rate: the largest and the
smallest window as a fraction of it (1.00 is perfectly smooth; a limiter that sleeps once per
block or per tick swings between a burst and nothing), and the total time against the ideal
SIZE / RATE.  The reader's clock starts at its first read, by when X may have filled the pipe
for a while (the reader is a Python process starting up), so every X shows a few percent under
1.00 there; compare the rows with each other.  Medians over rounds.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

from ..context import MIB, Context, note
from ..markdown import code, md_table
from ..stats import fmt_spread, med

# The reader: reads stdin as it comes and prints the windows' stats as JSON.
READER = textwrap.dedent("""
    import json, os, sys, time
    rate = int(sys.argv[1])
    arrived, first = [], None
    while True:
        n = len(os.read(0, 1 << 16))
        if not n:
            break
        now = time.monotonic()
        first = first or now
        arrived.append((now - first, n))
    windows = {}
    for at, n in arrived:
        windows[int(at * 10)] = windows.get(int(at * 10), 0) + n
    last = max(windows) if windows else 0
    steady = [windows.get(w, 0) / (rate / 10) for w in range(10, last)]
    print(json.dumps({"seconds": arrived[-1][0] if arrived else 0,
                      "max": max(steady) if steady else 0,
                      "min": min(steady) if steady else 0}))
""")


def limiter(tool, accel: str, rate: int) -> list[str] | None:
    """X's command capping the rate at `rate` bytes per second; None for tools without one."""
    if tool.argv is None or tool.excluded:
        return None
    name = tool.argv[0]
    if name == accel:
        return tool.argv + ["-r", str(rate)]
    if name == "pv":
        return ["pv", "-q", "-L", str(rate)]
    if name == "mbuffer":
        return ["mbuffer", "-q", "-m", "32M", "-R", str(rate)]
    return None


def run(ctx: Context) -> str:
    quick = ctx.quick
    rate = (10 if quick else 20) * MIB
    size = (2 if quick else 5) * rate
    jobs = [(t, cmd) for t in ctx.tools if (cmd := limiter(t, ctx.accel, rate))]
    stats = {t.name: [] for t, _ in jobs}
    for r in range(ctx.rounds):
        for t, cmd in jobs[r % len(jobs):] + jobs[:r % len(jobs)]:
            producer = subprocess.Popen(["head", "-c", str(size), "/dev/zero"],
                                        stdout=subprocess.PIPE)
            x = subprocess.Popen(cmd, stdin=producer.stdout, stdout=subprocess.PIPE,
                                 stderr=subprocess.DEVNULL)
            producer.stdout.close()
            reader = subprocess.run([sys.executable, "-c", READER, str(rate)], stdin=x.stdout,
                                    capture_output=True, text=True, timeout=ctx.timeout)
            x.stdout.close()
            ok = x.wait() == 0 and producer.wait() == 0 and reader.returncode == 0
            if ok:
                stats[t.name].append(json.loads(reader.stdout))
            note(f"rate round {r + 1}/{ctx.rounds}: {t.name:<12} "
                 + (f"{stats[t.name][-1]['seconds']:.2f} s" if ok else "FAILED"))
    ideal = size / rate
    rows = []
    for t, cmd in jobs:
        s = stats[t.name]
        if not s:
            rows.append([t.name, code(" ".join(cmd)), "—", "—", "—", "—", "FAILED"])
            continue
        rows.append([t.name, code(" ".join(cmd)),
                     fmt_spread([x["max"] for x in s]), fmt_spread([x["min"] for x in s]),
                     fmt_spread([x["seconds"] for x in s]),
                     f"{med([x['seconds'] for x in s]) / ideal:.3f}", "ok"])
    head = (f"## Rate limits: `head -c {size // MIB}M /dev/zero | X | <timed reader>` at "
            f"{rate // MIB} MiB/s\n\n"
            f"{ctx.rounds} rounds, rotating order. Largest and smallest 100 ms window after the "
            f"first second as a fraction of a tenth of the rate (1.00 = smooth); total time, "
            f"and its ratio to the ideal {ideal:g} s.\n")
    table = md_table(["X", "command", "largest window", "smallest window", "seconds",
                      "× ideal", "status"], rows)
    return head + "\n" + table + "\n"
