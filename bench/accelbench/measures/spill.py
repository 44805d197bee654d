"""Beyond RAM: a burst of 8 GiB into a stalled consumer, then a full-speed drain,
through each accel variant ``-q -m 64M --spill DIR`` and ``mbuffer -q -m 8G -T
DIR/f`` (its whole buffer a mapped file), against ``dd`` writing a file in DIR
and then reading it back; DIR is bench/work/spill, on disk. Producer and
consumer are bench/accelbench/pattern.py (a numbered random pattern; the
consumer checks every byte). The consumer reads nothing until the producer has
finished, ``sync`` has run (timed: the writeback the fill left behind) and, with
--drop-caches (root), the page cache has been dropped; then it reads at
full speed to the end. Fill and drain seconds, GiB/s and × dd (ratio of median
GiB/s to dd's write or read), peak RSS of X (VmHWM, polled), peak disk
(st_blocks of the file X holds in DIR, polled), X's CPU seconds; 3 rounds.
Skipped when DIR has less than 2.5 times the burst free. Then a consumer that
keeps up: the throughput pipeline ``dd | X | cat`` with each variant with and
without ``--spill DIR``, interleaved; --spill must cost nothing (GiB/s within
3 %); every run has --json=FILE, whose summary says how much went through the
disk (nothing should). --quick: a 512 MiB burst and ``mbuffer -m 512M``.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from ..context import GIB, MIB, WORK, Context, note
from ..markdown import code, md_table
from ..processes import describe_exit, pipe_queued, proc_status, run_pipeline
from ..stats import Samples, fmt_spread, interleaved, med
from ..tools import Tool, set_size, show

PATTERN = str(Path(__file__).resolve().parent.parent / "pattern.py")
BURST_ROUNDS = 3  # each moves the burst to the disk and back
POLL = 0.1  # seconds between samples of X's RSS and disk


def run(ctx: Context) -> str:
    d = WORK / "spill"
    d.mkdir(parents=True, exist_ok=True)
    try:
        return burst_section(ctx, d) + "\n" + keep_up_section(ctx, d)
    finally:
        clear(d)
        d.rmdir()


# --------------------------------------------------------------------------------------------
# Burst then drain


@dataclass
class Burst:
    fill: float = 0.0  # seconds from the producer's start until X (or dd) had every byte
    sync: float = 0.0  # the `sync` right after
    drain: float = 0.0  # seconds from the consumer's release until it had every byte
    rss_kib: int = 0  # peak
    disk: int = 0  # peak bytes allocated to the file X holds in DIR
    cpu: float = 0.0  # X's user+sys seconds (dd: the writer's and the reader's)
    error: str | None = None
    timed_out: bool = False


def burst_section(ctx: Context, d: Path) -> str:
    mib = 512 if ctx.quick else 8192
    size = f"{mib // 1024}G" if mib % 1024 == 0 else f"{mib}M"
    gib = mib * MIB / GIB
    drop = ctx.drop_caches
    heading = (f"## Beyond RAM: a {size} burst into a stalled consumer, then a full-speed "
               f"drain\n\n")
    st = os.statvfs(d)
    free = st.f_bavail * st.f_frsize
    if free < 2.5 * mib * MIB:
        return (heading + f"Skipped: {free / GIB:.1f} GiB free in {d}; the burst needs "
                f"{2.5 * gib:g} GiB (2.5 times {size}).\n")
    jobs: list[tuple[Tool, list[str]]] = []
    for t in ctx.tools:
        if t.kind == "variant":
            jobs.append((t, set_size(t.argv + ["-q"], "64M") + ["--spill", str(d)]))
        elif t.name == "mbuffer":
            jobs.append((t, ["mbuffer", "-q", "-m", size, "-T", str(d / "f")]))
    dd = Tool("dd", ["dd"], "peer")
    jobs.append((dd, []))
    samples = {t.name: Samples.for_tool(t) for t, _ in jobs}
    got: dict[str, list[Burst]] = {t.name: [] for t, _ in jobs}
    for r, (t, argv), s in interleaved(jobs, BURST_ROUNDS, samples, key=lambda j: j[0].name):
        clear(d)
        settle(drop)
        b = dd_burst(mib, d, drop, ctx.timeout) if t is dd else \
            burst(argv, mib, d, drop, ctx.timeout)
        clear(d)
        s.runs += 1
        if b.error:
            s.failures.append(b.error)
            s.dropped = s.dropped or b.timed_out
        else:
            got[t.name].append(b)
        note(f"spill burst round {r + 1}/{BURST_ROUNDS}: {t.name:<12} "
             + (f"fill {gib / b.fill:.2f} GiB/s, sync {b.sync:.1f} s, drain "
                f"{gib / b.drain:.2f} GiB/s, RSS {b.rss_kib / 1024:.0f} MiB, disk "
                f"{b.disk / GIB:.2f} GiB" if not b.error else f"FAILED: {b.error}"))

    def rates(name: str, f) -> list[float]:
        return [gib / f(b) for b in got[name]]

    def ratio(name: str, f) -> str:
        mine, ref = rates(name, f), rates(dd.name, f)
        return f"{med(mine) / med(ref):.2f}" if mine and ref else "—"

    def fill(b: Burst) -> float:
        return b.fill

    def on_disk(b: Burst) -> float:
        return b.fill + b.sync

    def drain(b: Burst) -> float:
        return b.drain

    rows = []
    for t, argv in jobs:
        bs = got[t.name]
        if t is dd:
            cmd = (f"{code(f'dd of={d}/f bs=1M iflag=fullblock')}, then "
                   f"{code(f'dd if={d}/f bs=1M')}")
        else:
            cmd = code(show(argv, ctx.accel))
        rows.append([
            t.name, cmd.replace(f"{d}", "DIR"),
            fmt_spread([b.fill for b in bs]),
            f"{med(rates(t.name, fill)):.2f}" if bs else "—", ratio(t.name, fill),
            fmt_spread([b.sync for b in bs]), ratio(t.name, on_disk),
            fmt_spread([b.drain for b in bs]),
            f"{med(rates(t.name, drain)):.2f}" if bs else "—", ratio(t.name, drain),
            fmt_spread([b.rss_kib / 1024 for b in bs], 0) if t is not dd else "—",
            fmt_spread([b.disk / GIB for b in bs]),
            fmt_spread([b.cpu for b in bs], 1), samples[t.name].status(),
        ])
    cache = ("dropped before each run and before each drain" if drop else
             "not dropped (no --drop-caches)")
    text = (heading +
            f"`pattern.py produce {mib} | X | pattern.py consume {mib}`: bench/accelbench/"
            f"pattern.py writes {size} of a numbered random MiB; the consumer checks every "
            f"byte. It reads nothing before the harness writes to a pipe it waits on, which "
            f"happens once the producer has exited and X has emptied its input pipe (fill s, "
            f"from the producer's start) and `sync` has run (+sync s: the writeback the fill "
            f"left behind){', and the page cache has been dropped' * drop}; then it reads "
            f"at full speed to the end (drain s: from its release until it had every byte). "
            f"dd: the same producer into `dd of=DIR/f` (fill: until dd exited), the same "
            f"`sync`{' and drop' * drop}, then `dd if=DIR/f` into the same consumer, "
            f"released as dd starts: the file "
            f"system's own write and read through the same pipes. × dd: ratio of the median "
            f"GiB/s to dd's; fill+sync × dd compares the time until the burst is on the disk. "
            f"DIR: {d}; emptied and `sync`ed before each run. Page cache: {cache}. "
            f"mbuffer's buffer is a shared mapping of its file: a cache drop leaves its pages "
            f"in memory, so its drain reads what the kernel kept, and they count in its RSS; "
            f"accel's spill file is not mapped (each 8 MiB window is dropped from the page "
            f"cache once written back), and its pool pipes are not in RSS either. Peak RSS: "
            f"the largest VmHWM or VmRSS of X, polled every {POLL:g} s; peak disk: st_blocks "
            f"of the file X holds open in DIR (accel's unnamed spill file, mbuffer's unlinked "
            f"-T file, dd's file while dd reads it), polled alike. {BURST_ROUNDS} rounds, "
            f"rotating order; median [min–max]. X CPU s: user+sys of X over fill and drain "
            f"(dd: both dd processes).\n\n")
    return text + md_table(
        ["X", "command", "fill s", "fill GiB/s", "× dd write", "+sync s", "fill+sync × dd",
         "drain s", "drain GiB/s", "× dd read", "peak RSS MiB", "peak disk GiB", "X CPU s",
         "status"], rows) + "\n"


def burst(argv: list[str], mib: int, d: Path, drop: bool, timeout: float,
          produce: bool = True) -> Burst:
    """`produce | X | consume`, the consumer held until X has every byte, `sync` has run and
    (if drop) the page cache is dropped, then released. Without produce, X reads nothing
    (dd reading the file) and the consumer is released as soon as X has started."""
    res = Burst()
    consume = [sys.executable, "-S", PATTERN, "consume", str(mib)]
    producer_argv = [sys.executable, "-S", PATTERN, "produce", str(mib)]
    # producer -> X; this process keeps a read end, to see when X has taken everything.
    in_r, in_w = os.pipe() if produce else (None, None)
    out_r, out_w = os.pipe()  # X -> consumer
    gate_r, gate_w = os.pipe()  # the consumer reads nothing from out_r before a byte here
    names = ["pattern.py consume", os.path.basename(argv[0]), "pattern.py produce"]
    errs = [tempfile.TemporaryFile(dir=WORK) for _ in names]
    procs: list[subprocess.Popen] = []
    peaks = None
    released = t0 = time.perf_counter()
    try:
        procs.append(subprocess.Popen(consume + [str(gate_r)], stdin=out_r,
                                      stdout=subprocess.DEVNULL, stderr=errs[0],
                                      pass_fds=(gate_r,)))
        procs.append(subprocess.Popen(argv, stdin=in_r if produce else subprocess.DEVNULL,
                                      stdout=out_w, stderr=errs[1]))
        peaks = Peaks(procs[1].pid, d)
        t0 = time.perf_counter()
        if produce:
            procs.append(subprocess.Popen(producer_argv, stdout=in_w, stderr=errs[2]))
    except OSError as e:
        res.error = f"cannot start: {e.strerror or e}"
    finally:
        for fd in (out_r, out_w, gate_r, in_w):
            if fd is not None:
                os.close(fd)
    exits: dict[int, tuple[int, float]] = {}  # pid: status, CPU seconds
    try:
        if res.error is None:
            if produce:
                if not wait_exit(procs[2], t0 + timeout, exits):
                    res.timed_out = True
                    raise TimeoutError(f"the producer was still writing after {timeout:.0f} "
                                       f"s: X did not take the burst while the consumer waited")
                while pipe_queued(in_r) and time.perf_counter() < t0 + timeout:
                    time.sleep(0.001)
                res.fill = time.perf_counter() - t0
                res.sync = settle(drop)
            released = time.perf_counter()
            os.write(gate_w, b"go")
            for p in procs[:2]:
                if not wait_exit(p, released + timeout, exits):
                    res.timed_out = True
                    raise TimeoutError(f"the drain took more than {timeout:.0f} s")
    except TimeoutError as e:
        res.error = str(e)
    finally:
        if in_r is not None:
            os.close(in_r)
        os.close(gate_w)
        if peaks:
            peaks.stop()
        for p in procs:
            if p.returncode is None:
                p.kill()
                wait_exit(p, time.perf_counter() + 15, exits)
    texts = []
    for f in errs:
        f.seek(0)
        texts.append(f.read(4096).decode(errors="replace"))
        f.close()
    if res.error is None:
        for k in (1, 0, 2)[:len(procs)]:  # X first: a consumer or producer fails because of it
            if procs[k].returncode != 0:
                res.error = f"`{names[k]}` {describe_exit(procs[k].returncode, texts[k])}"
                break
    if res.error is None:
        res.drain = float(texts[0].split()[-1]) - released
        res.cpu = exits[procs[1].pid][1]
        res.rss_kib, res.disk = peaks.rss_kib, peaks.disk
    return res


def dd_burst(mib: int, d: Path, drop: bool, timeout: float) -> Burst:
    """The file system alone: the producer into `dd of=DIR/f`, sync and drop, then
    `dd if=DIR/f` into a consumer released as dd starts."""
    f = d / "f"
    rr = run_pipeline([[sys.executable, "-S", PATTERN, "produce", str(mib)],
                       ["dd", f"of={f}", "bs=1M", "iflag=fullblock", "status=none"]],
                      timeout=timeout)
    if not rr.ok:
        return Burst(error=rr.error, timed_out=rr.timed_out)
    sync = settle(drop)
    reader = burst(["dd", f"if={f}", "bs=1M", "status=none"], mib, d, False, timeout,
                   produce=False)
    reader.fill, reader.sync = rr.procs[1].end, sync
    reader.cpu += rr.procs[1].cpu
    return reader


def settle(drop: bool) -> float:
    """`sync`, then (if drop) drop the page cache; returns the seconds the sync took."""
    t = time.perf_counter()
    os.sync()
    took = time.perf_counter() - t
    if drop:
        Path("/proc/sys/vm/drop_caches").write_text("3\n")
    return took


def wait_exit(p: subprocess.Popen, deadline: float, exits: dict) -> bool:
    """Waits until p has exited (False if it has not by deadline) and reaps it with wait4:
    p.returncode is set, and exits[p.pid] = (status, user+sys CPU seconds)."""
    if p.returncode is not None:
        return True
    fd = os.pidfd_open(p.pid)
    try:
        ready, _, _ = select.select([fd], [], [], max(0.0, deadline - time.perf_counter()))
    finally:
        os.close(fd)
    if not ready:
        return False
    _, status, ru = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    exits[p.pid] = (p.returncode, ru.ru_utime + ru.ru_stime)
    return True


class Peaks:
    """Polls a process every POLL s until stopped: its RSS (VmHWM and VmRSS, KiB) and the
    disk taken by the file it holds open in directory d (st_blocks, via /proc/PID/fd, so an
    unnamed or unlinked file counts), keeping the largest of each."""

    def __init__(self, pid: int, d: Path):
        self.pid, self.prefix = pid, f"{d}/"
        self.rss_kib = 0
        self.disk = 0
        self.file: str | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while True:
            self.sample()
            if self._stop.wait(POLL):
                return

    def sample(self) -> None:
        self.rss_kib = max([self.rss_kib, *proc_status(self.pid).values()])
        if self.file is None:
            self.file = self._find()
        if self.file is not None:
            try:
                self.disk = max(self.disk, os.stat(self.file).st_blocks * 512)
            except OSError:
                pass

    def _find(self) -> str | None:
        fds = f"/proc/{self.pid}/fd"
        try:
            names = os.listdir(fds)
        except OSError:
            return None
        for name in names:
            try:
                if os.readlink(f"{fds}/{name}").startswith(self.prefix):
                    return f"{fds}/{name}"
            except OSError:
                pass
        return None

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


def clear(d: Path) -> None:
    for p in d.iterdir():
        p.unlink()


# --------------------------------------------------------------------------------------------
# A consumer that keeps up


def keep_up_section(ctx: Context, d: Path) -> str:
    count = ctx.stream_mib
    gib = count * MIB / GIB
    rounds = ctx.rounds if ctx.quick else max(ctx.rounds, 9)
    dd = ["dd", "if=/dev/zero", "bs=1M", f"count={count}", "status=none"]
    report = WORK / "spill-keep-up.json"  # outside DIR, which holds only the spill
    jobs: list[tuple[Tool, str, list[str]]] = []  # tool, label, X
    for t in ctx.tools:
        if t.kind == "variant":
            x = t.argv + [f"--json={report}"]
            jobs += [(t, t.name, x), (t, f"{t.name} --spill", x + ["--spill", str(d)])]
    samples = {label: Samples.for_tool(t) for t, label, _ in jobs}
    by_round: dict[str, dict[int, float]] = {label: {} for _, label, _ in jobs}
    spilled: dict[str, list[int]] = {label: [] for _, label, _ in jobs}  # tiers.disk per run
    peak: dict[str, list[int]] = {label: [] for _, label, _ in jobs}  # peak_disk_bytes
    try:
        for r, (t, label, argv), s in interleaved(jobs, rounds, samples, key=lambda j: j[1]):
            rr = run_pipeline([dd, argv, ["cat"]], timeout=ctx.timeout)
            summary = json_summary(report) if rr.ok else {}
            if rr.ok and "peak_disk_bytes" not in summary:
                rr.error = "no peak_disk_bytes in the --json summary"
            s.add(rr, 1)
            if rr.ok:
                by_round[label][r] = gib / rr.wall
                spilled[label].append(summary.get("tiers", {}).get("disk", 0))
                peak[label].append(summary["peak_disk_bytes"])
            note(f"spill keep-up round {r + 1}/{rounds}: {label:<20} "
                 + (f"{gib / rr.wall:6.2f} GiB/s, {spilled[label][-1] / MIB:.0f} MiB spilled"
                    if rr.ok else f"FAILED: {rr.error}"))
    finally:
        report.unlink(missing_ok=True)
    rows = []
    for t, label, argv in jobs:
        s = samples[label]
        rates = [gib / w for w in s.wall]
        xcpu = fmt_spread([c / gib for c in s.x_cpu], 3) if s.x_cpu else "—"
        row = [label, code(show(argv, ctx.accel).replace(str(report), "FILE")
                           .replace(str(d), "DIR")), fmt_spread(rates), xcpu]
        if label == t.name:  # without --spill: the reference of the next row
            ref, ref_rates = s, rates
            rows.append(row + ["—"] * 6 + [s.status()])
            continue
        pairs = [by_round[label][r] / by_round[t.name][r]
                 for r in by_round[label] if r in by_round[t.name]]
        ratio = med(rates) / med(ref_rates) if rates and ref_rates else None
        cpu_ratio = (f"{med(s.x_cpu) / med(ref.x_cpu):.2f}" if s.x_cpu and ref.x_cpu
                     else "—")
        went = spilled[label]
        rows.append(row + [
            f"{ratio:.3f}" if ratio else "—", fmt_spread(pairs, 3), cpu_ratio,
            "—" if ratio is None else "yes" if ratio >= 0.97 else "no",
            fmt_spread([b / MIB for b in went], 0),
            f"{sum(1 for b in went if b)}/{len(went)}; max {max(peak[label], default=0) / MIB:.0f}",
            s.status()])
    head = (f"### A consumer that keeps up: `dd if=/dev/zero bs=1M count={count} | X | cat > "
            f"/dev/null`, with and without `--spill DIR`\n\n"
            f"The throughput pipeline, {gib:g} GiB per run, each variant as in `throughput` "
            f"and again with `--spill DIR`, both with `--json=FILE` (the same cost to both), "
            f"whose summary says what went through the spill (`tiers.disk`) and its peak "
            f"(`peak_disk_bytes`). {rounds} rounds, rotating order, median [min–max]. "
            f"× without: ratio of the median GiB/s to the row above's; per round: the same "
            f"ratio within each round (both ran in it); CPU × without: of X's median CPU "
            f"s/GiB. Within 3 %: × without ≥ 0.970. Spilled: MiB that went to the disk per "
            f"run; runs that spilled, and the largest peak on disk (MiB).\n\n")
    return head + md_table(["X", "command", "GiB/s median [min–max]", "X CPU s/GiB",
                            "× without", "per round × without", "CPU × without",
                            "within 3 %", "spilled MiB", "runs spilled; max peak MiB",
                            "status"], rows) + "\n"


def json_summary(path: Path) -> dict:
    """The summary line of accel's --json file; {} if there is none."""
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return {}
    for line in reversed(lines):
        if '"summary"' in line:
            try:
                return json.loads(line)
            except ValueError:
                return {}
    return {}
