"""``dd if=/dev/zero bs=1M count=8192 | X | cat > /dev/null``: GiB/s of the
pipeline and X's own CPU seconds per GiB moved (lower is better; the cost an
intermediary adds to every pipeline it sits in).  "× bare" = GiB/s / bare pipe's.
"""

from __future__ import annotations

from ..runner import (
    GIB, MIB, Context, Samples, code, fmt_spread, interleaved, md_table, med, note,
    run_pipeline,
)


def run(ctx: Context) -> str:
    tools, accel, rounds, timeout = ctx.tools, ctx.accel, ctx.rounds, ctx.timeout
    count = ctx.stream_mib
    gib = count * MIB / GIB
    dd = ["dd", "if=/dev/zero", "bs=1M", f"count={count}", "status=none"]
    cat = ["cat"]
    samples = {t.name: Samples.for_tool(t) for t in tools}
    for r, t, s in interleaved(tools, rounds, samples):
        if t.argv is None:
            rr = run_pipeline([dd, cat], timeout=timeout)
            s.add(rr, None)
        else:
            rr = run_pipeline([dd, t.argv, cat], timeout=timeout)
            s.add(rr, 1)
        note(f"throughput round {r + 1}/{rounds}: {t.name:<12} "
             + (f"{gib / rr.wall:6.2f} GiB/s" if rr.ok else f"FAILED: {rr.error}"))
    bare = next((t for t in tools if t.argv is None), None)
    bare_rate = (med([gib / w for w in samples[bare.name].wall])
                 if bare and samples[bare.name].wall else None)
    rows = []
    for t in tools:
        s = samples[t.name]
        rates = [gib / w for w in s.wall]
        rel = f"{med(rates) / bare_rate:.2f}" if rates and bare_rate else "—"
        xcpu = f"{med([c / gib for c in s.x_cpu]):.3f}" if s.x_cpu else "—"
        acpu = f"{med([c / gib for c in s.all_cpu]):.3f}" if s.all_cpu else "—"
        rows.append([t.name if t.argv else "bare pipe",
                     code(t.display(accel)) if t.argv else "—",
                     fmt_spread(rates), rel, xcpu, acpu, s.status()])
    head = (f"## Throughput: `dd if=/dev/zero bs=1M count={count} | X | cat > /dev/null`\n\n"
            f"{gib:g} GiB per run, {rounds} rounds, rotating order. CPU columns: median "
            f"user+sys seconds per GiB, of X alone and of all processes.\n")
    table = md_table(["X", "command", "GiB/s median [min–max]", "× bare", "X CPU s/GiB",
                      "all CPU s/GiB", "status"], rows)
    return head + "\n" + table + "\n"
