"""File to file: ``accel -i F -o G`` (each accel variant) against ``cp F G`` and
``mbuffer -q -m 32M -i F -o G`` (which opens both files with O_DIRECT, so on
disk it reads F from the disk and writes G to it even when the page cache could
serve), F a 1 GiB file, on a tmpfs (one mounted under bench/work/ when root,
else /dev/shm) and on a disk directory (bench/work/). G is removed before each
run (accel and mbuffer refuse an existing output without -f), and ``sync`` runs,
so that one run's writeback does not overlap the next; with --drop-caches (root),
the page cache is dropped too (``echo 3 > /proc/sys/vm/drop_caches``), so F
comes from the disk. G's own writeback is not timed (no --sync; cp has
none). Wall seconds, GiB/s, "× cp" = GiB/s over cp's in the same directory, X's
CPU seconds per GiB. --quick: 64 MiB.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from ..context import GIB, MIB, WORK, Context, note
from ..markdown import code, md_table
from ..processes import run_pipeline
from ..stats import Samples, fmt_spread, interleaved, med
from ..tools import Tool, show


def run(ctx: Context) -> str:
    accel, rounds, timeout = ctx.accel, ctx.rounds, ctx.timeout
    mib = 64 if ctx.quick else 1024
    n = mib * MIB
    gib = n / GIB
    drop = ctx.drop_caches
    xs: list[Tool] = [t for t in ctx.tools if t.kind == "variant"]
    xs.append(Tool("cp", ["cp"], "peer"))
    xs += [t for t in ctx.tools if t.name == "mbuffer"]
    tmpfs, mounted = tmpfs_dir(2 * mib + 64)
    disk = WORK / "files"
    disk.mkdir(parents=True, exist_ok=True)
    dirs = {"tmpfs": tmpfs, "disk": disk}
    jobs = [(where, t) for where in dirs for t in xs]
    samples = {job_key(j): Samples.for_tool(j[1]) for j in jobs}
    try:
        for d in dirs.values():
            make_file(d / "F", n)
        for r, (where, t), s in interleaved(jobs, rounds, samples, key=job_key):
            f, g = dirs[where] / "F", dirs[where] / "G"
            g.unlink(missing_ok=True)
            os.sync()
            if drop:
                Path("/proc/sys/vm/drop_caches").write_text("3\n")
            rr = run_pipeline([command(t, f, g)], timeout=timeout)
            size = g.stat().st_size if g.exists() else None
            if rr.ok and size != n:
                rr.error = f"G has {size} bytes, not {n}"
            s.add(rr, 0)
            note(f"files round {r + 1}/{rounds}: {where:<5} {t.name:<12} "
                 + (f"{gib / rr.wall:6.2f} GiB/s" if rr.ok else f"FAILED: {rr.error}"))
    finally:
        for d in dirs.values():
            for name in ("F", "G"):
                (d / name).unlink(missing_ok=True)
        if mounted:
            subprocess.run(["umount", str(tmpfs)], check=False)
        for d in dirs.values():
            d.rmdir()
    rows = []
    for where, d in dirs.items():
        cp = samples[job_key((where, Tool("cp", None, "peer")))].wall
        cp_rate = med([gib / w for w in cp]) if cp else None
        for t in xs:
            s = samples[job_key((where, t))]
            rates = [gib / w for w in s.wall]
            ratio = f"{med(rates) / cp_rate:.2f}" if rates and cp_rate else "—"
            xcpu = f"{med([c / gib for c in s.x_cpu]):.3f}" if s.x_cpu else "—"
            cmd = show(command(t, d / "F", d / "G"), accel).replace(f"{d}/", "")
            rows.append([where, t.name, code(cmd), fmt_spread(s.wall), fmt_spread(rates),
                         ratio, xcpu, s.status()])
    cache = "dropped before each run" if drop else "not dropped (no --drop-caches)"
    out = (f"## File to file: `X -i F -o G`, `cp F G`\n\n"
           f"F: {mib} MiB. tmpfs: {tmpfs}{' (mounted for this run)' if mounted else ''}; "
           f"disk: {disk}. G removed and `sync` before each run; page cache {cache}. "
           f"{rounds} rounds, rotating order; median [min–max]. × cp: GiB/s over cp's in the "
           f"same directory. X CPU: user+sys seconds of X per GiB.\n\n")
    return out + md_table(["on", "X", "command", "wall s", "GiB/s", "× cp", "X CPU s/GiB",
                           "status"], rows) + "\n"


def job_key(job: tuple[str, Tool]) -> str:
    return f"{job[0]} {job[1].name}"


def command(t: Tool, f: Path, g: Path) -> list[str]:
    if t.name == "cp":
        return ["cp", str(f), str(g)]
    return t.argv + ["-i", str(f), "-o", str(g)]


def tmpfs_dir(size_mib: int) -> tuple[Path, bool]:
    """A tmpfs of size_mib mounted at bench/work/tmpfs when root and mount allows it (and
    True), else a directory in /dev/shm (and False)."""
    if os.geteuid() == 0:
        d = WORK / "tmpfs"
        d.mkdir(parents=True, exist_ok=True)
        r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size_mib}m", "accelbench",
                            str(d)], capture_output=True, text=True)
        if r.returncode == 0:
            return d, True
        note(f"files: cannot mount a tmpfs at {d} ({r.stderr.strip()}); using /dev/shm")
        d.rmdir()
    d = Path("/dev/shm/accelbench-files")
    d.mkdir(exist_ok=True)
    return d, False


def make_file(path: Path, n: int) -> None:
    """n bytes: one random MiB over and over (neither filesystem compresses or dedups)."""
    block = os.urandom(MIB)
    with open(path, "wb") as f:
        for off in range(0, n, MIB):
            f.write(block[:n - off])
