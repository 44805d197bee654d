"""X's own CPU seconds per GiB in the regimes that matter, the pace set by
``pv -q -L 1G`` outside X (not counted): a consumer that keeps up
(``dd | pv -L 1G | X | cat``: the producer is paced; with pieces of 1 MiB, as
from ``dd bs=1M``, and of 64 KiB, pv's default pipe), and a standing backlog
(``dd | X | pv -L 1G``: the consumer is paced, so X's buffer stays full).  A
relay pays about one wakeup per piece it is handed, so the piece size, not the
byte count, sets the cost when the consumer keeps up.  The floor of any relay,
a bare splice loop with no buffer (``pv -q``), is measured too.  Needs pv.
"""

from __future__ import annotations

import shutil

from ..context import GIB, MIB, Context, NotMeasured, note
from ..markdown import code, md_table
from ..processes import run_pipeline
from ..stats import Samples, fmt_spread, rotated
from ..tools import Tool


def run(ctx: Context) -> str:
    tools, accel, rounds, timeout = ctx.tools, ctx.accel, ctx.rounds, ctx.timeout
    if shutil.which("pv") is None:
        raise NotMeasured("## CPU per GiB\n\nSkipped: needs pv (`apt-get install pv`) to pace "
                          "the pipeline.\n")
    rate = "1G"
    count = max(ctx.stream_mib // 4, 256)
    gib = count * MIB / GIB
    dd = ["dd", "if=/dev/zero", "bs=1M", f"count={count}", "status=none"]
    pace = ["pv", "-q", "-L", rate]
    # (stages, index of X, pipe sizes): pv moves what its input pipe holds, so a 1 MiB pipe
    # into pv makes it hand X 1 MiB pieces.
    regimes = {
        "keeps up, 1 MiB pieces": (lambda x: [dd, pace, x, ["cat"]], {0: MIB}),
        "keeps up, 64 KiB pieces": (lambda x: [dd, pace, x, ["cat"]], {}),
        "standing backlog": (lambda x: [dd, x, pace], {}),
    }
    relay = Tool("splice relay (pv -q, no buffer)", ["pv", "-q"], "peer")
    measured = [t for t in tools if t.argv is not None] + [relay]
    samples = {(t.name, r): Samples.for_tool(t) for t in measured for r in regimes}
    for rnd in range(rounds):
        for t in rotated(measured, rnd):
            for regime, (stages, sizes) in regimes.items():
                s = samples[(t.name, regime)]
                if s.dropped or (t is relay and regime == "standing backlog"):
                    continue
                pipeline = stages(t.argv)
                x = pipeline.index(t.argv)
                rr = run_pipeline(pipeline, timeout=timeout, pipe_sizes=sizes)
                s.add(rr, x)
                note(f"cpu round {rnd + 1}/{rounds}: {t.name:<12} {regime:<24} "
                     + (f"{rr.procs[x].cpu / gib:.3f} s/GiB" if rr.ok else f"FAILED: {rr.error}"))
    rows = []
    for t in measured:
        row = [t.name, code(t.display(accel))]
        for regime in regimes:
            s = samples[(t.name, regime)]
            row.append(fmt_spread([c / gib for c in s.x_cpu], 3) if s.x_cpu else "—")
        rows.append(row)
    head = (f"## CPU per GiB of X, paced by `pv -q -L {rate}`\n\n"
            f"{gib:g} GiB per run, {rounds} rounds, rotating order; median user+sys seconds "
            f"of X per GiB [min–max]. Keeps up: `dd | pv -L {rate} | X | cat`, pv handing X "
            f"pieces of 1 MiB (its input pipe enlarged) or 64 KiB (default pipe). Standing "
            f"backlog: `dd | X | pv -L {rate}` (X's buffer stays full). The last row is the "
            f"floor of any relay: a bare splice loop with no buffer.\n")
    table = md_table(["X", "command"] + [f"{r} s/GiB" for r in regimes], rows)
    return head + "\n" + table + "\n"
