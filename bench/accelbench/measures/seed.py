"""The pipeline accel exists for:
``bzip2 -dc corpus.tar.bz2 | X | gzip -6 > /dev/null`` on a tar of real files
from this machine (cached in bench/work/).  Both stages are also timed alone.
Two CPU-bound stages that take turns (bare pipe, 64 KiB) run slower than the
slower stage alone; a good buffer lets them overlap, so the wall time
approaches that of the slower stage.
ratio = median wall / max(median wall of the two stages alone).
1.00 is the optimum (the slower stage is never kept waiting); the bare-pipe row
shows how far from it the pipeline starts.  "X CPU s" is user+sys of X itself.
On a shared machine whose speed drifts, "same-run ratio" is steadier: each run's wall
over the CPU seconds of its slower stage in that same run (median [min–max]); "X cs" is
X's voluntary context switches (each a wakeup on a CPU the stages need).
"Steal %" is the share of the machine's CPU time during the run that a CPU wanted and its
host gave to someone else (/proc/stat): it lifts the wall clock and not the stages' CPU
time. Part of it is other guests (noise that drifts between rounds), part the pipeline's
own doing: a CPU left idle at each wait is handed back to the host and may have to wait to
be given it again.
The "side by side" row runs the two stages at once, unpiped (bzip2 -dc > /dev/null beside
gzip < corpus.tar): two CPU-bound processes that never wait for each other. Its same-run
ratio is what this machine gives away with nothing coupling them (the host, the kernel's
own threads, the bench): the floor a buffer can come down to, not below.
--gzip 6,9 runs one table per level: with -6 bzip2 is the slower stage (the buffer must
never keep it waiting), with -9 gzip is (it must never find its input empty).
"""

from __future__ import annotations

import os
import threading

from ..corpus import build_corpus, warm_cache
from ..runner import (
    MIB, Context, RunResult, Samples, Tool, code, fmt_spread, interleaved, md_table, med, note,
    run_pipeline, stolen,
)


COLUMNS = ["X", "command", "wall s median [min–max]", "ratio", "same-run ratio", "X CPU s",
           "X cs", "all CPU s", "steal %", "status"]


def run(ctx: Context) -> str:
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
