"""The two pipelines the report is built around, timed for any list of tools: the seed
pipeline (``bzip2 -dc corpus.tar.bz2 | X | gzip -N``, beside its two stages alone and side
by side) and the stream (``dd if=/dev/zero bs=1M | X | cat``). The seed and throughput
measures run them on every tool; hash runs the seed pipeline on accel with and without a
hash, asmbuffer both on accel behind an mbuffer link. What the columns mean is in the seed
and throughput measures' docstrings (`bench/run.py --help`).
"""

from __future__ import annotations

import os
import threading

from .context import GIB, MIB, Context, note
from .corpus import build_corpus, warm_cache
from .markdown import code, md_table
from .processes import RunResult, run_pipeline, stolen
from .stats import Samples, fmt_spread, interleaved, med
from .tools import Tool


# --------------------------------------------------------------------------------------------
# The seed pipeline


COLUMNS = ["X", "command", "wall s median [min–max]", "ratio", "same-run ratio", "X CPU s",
           "X cs", "all CPU s", "steal %", "status"]


def seed_tables(ctx: Context) -> str:
    """The seed measure's section: a table of `seed_rows` on ctx.tools for each of
    ctx.gzip_levels."""
    tables = []
    for level in ctx.gzip_levels:
        rows, corpus = seed_rows(ctx, ctx.tools, level=level)
        head = (f"## Seed pipeline: `bzip2 -dc corpus.tar.bz2 | X | gzip -{level} > /dev/null`"
                f"\n\n{corpus} {ctx.rounds} rounds, rotating order. ratio = median wall / "
                f"max(median of the two stages alone); 1.000 = optimum. CPU columns are "
                f"medians of user+sys.\n")
        tables.append(head + "\n" + md_table(COLUMNS, rows) + "\n")
    return "\n".join(tables)


SIDE = "side by side"


def seed_rows(ctx: Context, tools: list[Tool], tag: str = "seed", level: int = 6,
              floor: bool = True) -> tuple[list[list[str]], str]:
    """Times the two stages alone and ``bzip2 -dc | X | gzip -level`` for each of `tools`
    (the bare pipe for a tool without argv), in interleaved rounds; returns the rows of a
    COLUMNS table, the stages first, and a sentence saying what the corpus is. `tag` starts
    the progress lines; `floor` adds the stages side by side, unpiped. (The hash measure
    runs it with accel with and without a hash.)"""
    accel, rounds, timeout = ctx.accel, ctx.rounds, ctx.timeout
    tar_path, bz_path, meta = build_corpus(ctx.corpus_bytes)
    warm_cache(tar_path, bz_path)
    bz = ["bzip2", "-dc", str(bz_path)]
    gz = ["gzip", f"-{level}"]
    jobs: list[tuple[str, str, object]] = [("stage", "bzip2", None), ("stage", "gzip", None)]
    if floor:
        jobs.append(("side", SIDE, None))
    jobs += [("x", t.name, t) for t in tools]
    samples = {name: Samples.for_tool(t) for _, name, t in jobs}
    # Per piped row: wall / max(stage CPU) of each run, and X's voluntary context switches.
    same_run: dict[str, list[float]] = {name: [] for _, name, _ in jobs}
    switches: dict[str, list[float]] = {name: [] for _, name, _ in jobs}
    steal: dict[str, list[float]] = {name: [] for _, name, _ in jobs}  # % of all CPU time
    cpus = os.cpu_count() or 1
    for r, (kind, name, t), s in interleaved(jobs, rounds, samples, key=lambda j: j[1]):
        if kind == "stage" and name == "bzip2":
            rr = run_pipeline([bz], timeout=timeout)
            s.add(rr, None)
        elif kind == "stage":
            rr = run_pipeline([gz], stdin_path=str(tar_path), timeout=timeout)
            s.add(rr, None)
        elif kind == "side":
            rr = side_by_side(bz, gz, str(tar_path), timeout)
            s.add(rr, None)
        elif t.argv is None:
            rr = run_pipeline([bz, gz], timeout=timeout)
            s.add(rr, None)
        else:
            rr = run_pipeline([bz, t.argv, gz], timeout=timeout)
            s.add(rr, 1)
            if rr.ok:
                switches[name].append(rr.procs[1].vcsw)
        if rr.ok and rr.wall > 0:
            steal[name].append(100 * rr.steal / (rr.wall * cpus))
        if kind in ("x", "side") and rr.ok:
            stage_cpu = max(rr.procs[0].cpu, rr.procs[-1].cpu)
            if stage_cpu > 0:
                same_run[name].append(rr.wall / stage_cpu)
        note(f"{tag} -{level} round {r + 1}/{rounds}: {name:<12} "
             + (f"{rr.wall:7.2f} s" if rr.ok else f"FAILED: {rr.error}"))
    stage_meds = [med(samples[n].wall) for n in ("bzip2", "gzip") if samples[n].wall]
    optimum = max(stage_meds) if len(stage_meds) == 2 else None
    rows = []
    labels = {"bzip2": code(f"bzip2 -dc {bz_path.name} > /dev/null") + " alone",
              "gzip": code(f"gzip -{level} < {tar_path.name} > /dev/null") + " alone"}
    for kind, name, t in jobs:
        s = samples[name]
        if kind == "stage":
            label, cmd = labels[name], "—"
        elif kind == "side":
            label, cmd = f"{SIDE} (the two alone, at once, unpiped)", "—"
        else:
            label = name if t.argv else "bare pipe"
            cmd = code(t.display(accel)) if t.argv else "—"
        ratio = f"{med(s.wall) / optimum:.3f}" if optimum and s.wall else "—"
        xcpu = f"{med(s.x_cpu):.2f}" if s.x_cpu else "—"
        acpu = f"{med(s.all_cpu):.2f}" if s.all_cpu else "—"
        same = same_run[name]
        same = f"{med(same):.3f} [{min(same):.3f}–{max(same):.3f}]" if same else "—"
        cs = f"{med(switches[name]) / 1000:.1f}k" if switches[name] else "—"
        stolen = fmt_spread(steal[name], 1)
        rows.append([label, cmd, fmt_spread(s.wall), ratio, same, xcpu, cs, acpu, stolen,
                     s.status()])
    corpus = (f"Corpus: {meta['tar_bytes'] / MIB:.0f} MiB tar of {meta['files']} real files "
              f"({', '.join(meta['per_root_bytes'])}), {meta['bz2_bytes'] / MIB:.1f} MiB as "
              f"bzip2 -9.")
    return rows, corpus


def side_by_side(bz: list[str], gz: list[str], tar_path: str, timeout: float) -> RunResult:
    """Runs ``bz > /dev/null`` and ``gz < tar_path > /dev/null`` at the same time, each on a
    thread of its own; one result: the later wall, both processes, the first error."""
    got: list[RunResult] = []
    steal0 = stolen()
    threads = [threading.Thread(target=lambda: got.append(run_pipeline([bz], timeout=timeout))),
               threading.Thread(target=lambda: got.append(
                   run_pipeline([gz], stdin_path=tar_path, timeout=timeout)))]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    error = next((rr.error for rr in got if rr.error), None)
    return RunResult(max(rr.wall for rr in got), [p for rr in got for p in rr.procs], error,
                     any(rr.timed_out for rr in got), min(rr.t0 for rr in got),
                     stolen() - steal0)


# --------------------------------------------------------------------------------------------
# The stream


def stream_table(ctx: Context) -> str:
    """The throughput measure's section: `dd | X | cat` for each of ctx.tools (the bare
    pipe for a tool without argv), GiB/s and CPU per GiB."""
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
