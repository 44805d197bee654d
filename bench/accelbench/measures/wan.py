"""Between hosts, over an emulated WAN (needs root): two network namespaces joined by
a packet-level delay line of the benchmark's own (tun devices; no netem here),
40 ms round trip, 1 Gbit/s by tbf each way, and the seed pipeline split across
it: ``bzip2 -dc corpus.tar.bz2 | SENDER`` there, ``RECEIVER | gzip -6`` here,
for accel at both ends, mbuffer at both ends, and a bare nc.  ratio = median
wall / the slower stage alone (1.000 = optimum).  Another accel binary in
--variants (``before=/path/to/accel``) adds a row for that build at both ends.
"""

from __future__ import annotations

import shutil

from ..context import MIB, Context, note
from ..corpus import build_corpus, warm_cache
from ..markdown import code, md_table
from ..netlab import WAN_ONE_WAY_MS, WAN_RATE, WAN_RECEIVER, DelayLine, Netns, lab_section
from ..processes import run_pipeline
from ..stats import Samples, fmt_spread, interleaved, med
from ..tools import other_builds
from ..transfers import PLAIN_WIRE, Pair, key_file, show_across, transfer


def run(ctx: Context) -> str:
    return lab_section("## Between hosts: an emulated WAN", wan, ctx)


def wan(ctx: Context) -> str:
    tar_path, bz_path, meta = build_corpus(ctx.corpus_bytes)
    warm_cache(tar_path, bz_path)
    accel, key = ctx.accel, key_file(ctx.accel)
    here = f"{WAN_RECEIVER}:9201"
    pairs = [
        Pair("accel", [accel, "--from", here, "--key-file", key],
             [[accel, "--to", here, "--key-file", key] + PLAIN_WIRE], 9201),
        Pair("mbuffer", ["mbuffer", "-q", "-m", "32M", "-I", "9201"],
             [["mbuffer", "-q", "-m", "32M", "-O", here]], 9201),
        Pair("nc", ["nc", "-l", WAN_RECEIVER, "9201"], [["nc", "-N", WAN_RECEIVER, "9201"]], 9201),
    ]
    for name, binary in other_builds(ctx).items():
        pairs.append(Pair(name, [binary, "--from", here, "--key-file", key],
                          [[binary, "--to", here, "--key-file", key]], 9201))
    pairs = [p for p in pairs if shutil.which(p.receiver[0]) or p.receiver[0] == accel]
    bz = ["bzip2", "-dc", str(bz_path)]
    gz = ["gzip", "-6"]
    jobs = ["bzip2", "gzip"] + [p.name for p in pairs]
    samples = {j: Samples() for j in jobs}
    with Netns("a") as a, Netns("b") as b, DelayLine(a, b):
        for r, job, s in interleaved(jobs, ctx.rounds, samples, key=lambda j: j):
            if job == "bzip2":
                rr = run_pipeline([bz], timeout=ctx.timeout)
                wall, error = rr.wall, rr.error
            elif job == "gzip":
                rr = run_pipeline([gz], stdin_path=str(tar_path), timeout=ctx.timeout)
                wall, error = rr.wall, rr.error
            else:
                p = next(p for p in pairs if p.name == job)
                timed = Pair(p.name, p.receiver, [bz] + p.sender, p.port)
                wall, _, error = transfer(timed, b, a, ctx.timeout, consumer=gz)
            s.runs += 1
            if error:
                s.failures.append(error)
            else:
                s.wall.append(wall)
            note(f"net wan round {r + 1}/{ctx.rounds}: {job:<8} "
                 + (f"{wall:7.2f} s" if not error else f"FAILED: {error}"))
    stages = [med(samples[n].wall) for n in ("bzip2", "gzip") if samples[n].wall]
    slowest = max(stages) if len(stages) == 2 else None
    rows = []
    for job in jobs:
        s = samples[job]
        if job in ("bzip2", "gzip"):
            label, cmd = f"{job} alone", "—"
        else:
            p = next(p for p in pairs if p.name == job)
            label = job
            cmd = " … ".join(code(show_across(argv, accel)) for argv in p.sender + [p.receiver])
        ratio = f"{med(s.wall) / slowest:.3f}" if slowest and s.wall else "—"
        rows.append([label, cmd, fmt_spread(s.wall), ratio, s.status()])
    return (f"`bzip2 -dc | SENDER` → {WAN_RATE}/s, {2 * WAN_ONE_WAY_MS} ms RTT → "
            f"`RECEIVER | gzip -6`. Corpus {meta['tar_bytes'] / MIB:.0f} MiB tar ({meta['bz2_bytes'] / MIB:.1f} MiB "
            f"bzip2). Two namespaces joined by a delay line of the benchmark's own (a tun "
            f"device in each, every packet handed over {WAN_ONE_WAY_MS} ms after it left, "
            f"each way; tbf {WAN_RATE} on each). {ctx.rounds} rounds; ratio = median wall / "
            f"the slower stage alone (1.000 = optimum).\n\n"
            + md_table(["X", "command", "wall s median [min–max]", "ratio", "status"], rows)
            + "\n")
