"""A Python producer writes a short line into X's stdin every 50 ms (10 lines,
stdin kept open) and a reader thread times its arrival on X's stdout.  Tools
that hold partial blocks until a block fills or EOF show timeouts (>5000 ms).
Baseline: the producer writes straight into a pipe read by the reader.

Then, for each X that delivered every line, against ``cat`` as the relay to beat:
300 lines a round, each written 2 ms after the last one arrived (one process
writes and reads, so the clock is the same), rounds interleaved; median, p90 and
p99 over all rounds, and the median over cat's; cat a second time as a control.
"""

from __future__ import annotations

import os
import select
import statistics
import subprocess
import tempfile
import threading
import time

from ..context import WORK, Context, note
from ..markdown import code, md_table
from ..processes import reap
from ..stats import excluded_status, fmt_spread
from ..tools import show


def run(ctx: Context) -> str:
    tools, accel = ctx.tools, ctx.accel
    rows = []
    relays = []  # the tools that passed every line on: against cat below
    for t in tools:
        if t.excluded:
            rows.append([t.name, code(t.display(accel)), "—", "—", "—",
                         excluded_status(t.excluded)])
            continue
        lat, err = measure_latency(t.argv)
        got = [x * 1000 for x in lat if x is not None]
        timeouts = sum(1 for x in lat if x is None)
        m = statistics.median([x * 1000 if x is not None else float("inf") for x in lat])
        median_s = ">5000" if m == float("inf") else f"{m:.2f}"
        max_s = ">5000" if timeouts else (f"{max(got):.2f}" if got else "—")
        status = "ok" if err is None else f"FAILED: {err}".replace("|", "\\|")
        label = t.name if t.argv else "direct pipe (no X)"
        rows.append([label, code(t.display(accel)) if t.argv else "—", median_s, max_s,
                     f"{timeouts}/{len(lat)}", status])
        if t.argv and not timeouts and err is None:
            relays.append((t.name, t.argv))
        note(f"latency: {label:<18} median {median_s} ms, max {max_s} ms, "
             f"timeouts {timeouts}" + (f", {err}" if err else ""))
    head = ("## Line latency: producer writes a short line into X, reader times its arrival\n\n"
            "10 lines of 20 bytes, written 50 ms apart, producer's stdin kept open; per-line "
            "timeout 5 s (counted as >5000 ms). Single run per tool (ms-scale, not "
            "throughput).\n")
    table = md_table(["X", "command", "median ms", "max ms", "timeouts", "status"], rows)
    return head + "\n" + table + "\n\n" + against_cat(relays, ctx.rounds, accel)


PING_LINES = 300
PING_GAP = 0.002
CAT_AGAIN = "cat again"


def against_cat(relays: list[tuple[str, list[str]]], rounds: int, accel: str) -> str:
    """The ping-pong table: each relay against cat, interleaved rounds; cat runs twice, the
    second time as a relay like the others, so its row shows how far two runs of one program
    differ here (the resolution of every other row)."""
    jobs = [("cat", ["cat"]), (CAT_AGAIN, ["cat"])] + relays
    got: dict[str, list[float]] = {name: [] for name, _ in jobs}
    per_round: dict[str, list[float | None]] = {name: [] for name, _ in jobs}  # medians
    failed: dict[str, str] = {}
    for r in range(rounds):
        for name, argv in jobs[r % len(jobs):] + jobs[:r % len(jobs)]:
            if name in failed:
                per_round[name].append(None)
                continue
            lat, err = ping_pong(argv)
            if err:
                failed[name] = err
            got[name] += lat
            per_round[name].append(statistics.median(lat) if lat and not err else None)
        note(f"latency against cat: round {r + 1}/{rounds} done")
    base = statistics.median(got["cat"]) if got["cat"] else None
    rows = []
    for name, argv in jobs:
        xs = sorted(got[name])
        if name in failed or not xs:
            rows.append([name, code(show(argv, accel)), "—", "—", "—", "—", "—",
                         f"FAILED: {failed.get(name, 'nothing')}".replace("|", "\\|")])
            continue
        pick = lambda f: xs[min(len(xs) - 1, int(f * len(xs)))]  # noqa: E731
        m = statistics.median(xs)
        ratios = [x / c for x, c in zip(per_round[name], per_round["cat"]) if x and c]
        rows.append([name, code(show(argv, accel)), f"{m:.3f}", f"{pick(0.9):.3f}",
                     f"{pick(0.99):.3f}", f"{m / base:.2f}" if base else "—",
                     fmt_spread(ratios) if ratios else "—", "ok"])
    head = ("## Line latency against cat: one line at a time\n\n"
            f"{PING_LINES} lines of 20 bytes a round, each written {PING_GAP * 1000:.0f} ms "
            f"after the last one arrived, {rounds} interleaved rounds; ms over all lines. "
            "X and the timing process share two CPUs: where the scheduler wakes each moves "
            "the figures by microseconds, so compare within one run. \"× cat\" is the median "
            "over all lines against cat's; \"per round\" is each round's median against cat's "
            f"in the same round (median [min–max]). `{CAT_AGAIN}` is cat timed as one more "
            "relay: what separates it from 1.00 is noise, and a row no further from 1.00 "
            "is as fast as cat as far as this run can tell.\n\n")
    return head + md_table(["X", "command", "median ms", "p90 ms", "p99 ms", "× cat",
                            "× cat per round", "status"], rows) + "\n"


def ping_pong(argv: list[str]) -> tuple[list[float], str | None]:
    """Latencies (ms) of PING_LINES lines through argv, each written once the last arrived."""
    r_fd, w_fd = os.pipe()
    errf = tempfile.TemporaryFile(dir=WORK)
    try:
        proc = subprocess.Popen(argv, stdin=r_fd, stdout=subprocess.PIPE, stderr=errf)
    except OSError as e:
        errf.close()
        os.close(r_fd)
        os.close(w_fd)
        return [], f"cannot start: {e.strerror or e}"
    os.close(r_fd)
    out = proc.stdout.fileno()
    lat: list[float] = []
    error = None
    try:
        for i in range(PING_LINES + 20):
            line = b"%019d\n" % i
            began = time.perf_counter()
            os.write(w_fd, line)
            got = b""
            while len(got) < len(line):
                if not select.select([out], [], [], 5)[0]:
                    raise TimeoutError(f"line {i} did not arrive within 5 s")
                chunk = os.read(out, 64)
                if not chunk:
                    raise EOFError(f"output ended at line {i}")
                got += chunk
            if got != line:
                raise ValueError(f"line {i} came back as {got!r}")
            if i >= 20:  # the first lines warm up both sides
                lat.append((time.perf_counter() - began) * 1000)
            time.sleep(PING_GAP)
    except (OSError, TimeoutError, EOFError, ValueError) as e:
        error = str(e)
    os.close(w_fd)
    _, error = reap(proc, errf, error)
    return lat, error



def measure_latency(argv: list[str] | None, n: int = 10, gap: float = 0.05,
                    limit: float = 5.0) -> tuple[list[float | None], str | None]:
    """Write n short lines gap seconds apart (fixed schedule) and time their arrival.
    Returns per-line latency in seconds (None = not within `limit`) and an error or None."""
    proc = None
    errf = None
    if argv is None:
        r_fd, w_fd = os.pipe()
    else:
        errf = tempfile.TemporaryFile(dir=WORK)
        try:
            proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                    stderr=errf)
        except OSError as e:
            errf.close()
            return [None] * n, f"cannot start: {e.strerror or e}"
        w_fd, r_fd = proc.stdin.fileno(), proc.stdout.fileno()
    arrivals: dict[int, float] = {}
    cond = threading.Condition()
    extra = []

    def reader() -> None:
        buf = b""
        while True:
            try:
                chunk = os.read(r_fd, 65536)
            except OSError:
                break
            t = time.perf_counter()
            if not chunk:
                break
            buf += chunk
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                try:
                    idx = int(line.split()[0][1:])
                except (ValueError, IndexError):
                    extra.append(line)
                    continue
                with cond:
                    arrivals.setdefault(idx, t)
                    cond.notify_all()
        if buf:
            extra.append(buf)

    th = threading.Thread(target=reader, daemon=True)
    th.start()
    writes: dict[int, float] = {}
    error = None
    t0 = time.perf_counter() + 0.1  # let X start up first
    try:
        for i in range(n):
            delay = t0 + i * gap - time.perf_counter()
            if delay > 0:
                time.sleep(delay)
            writes[i] = time.perf_counter()
            os.write(w_fd, f"L{i:02d} latency probe\n".encode())
    except OSError as e:
        error = f"write failed: {e.strerror}"
    if writes:
        deadline = writes[max(writes)] + limit
        with cond:
            while len(arrivals) < len(writes):
                left = deadline - time.perf_counter()
                if left <= 0:
                    break
                cond.wait(left)
    # Close stdin; a well-behaved X flushes and exits.
    if proc is None:
        os.close(w_fd)
    else:
        try:
            proc.stdin.close()
        except OSError:
            pass
    th.join(15)
    if proc is not None:
        rc, error = reap(proc, errf, error)
    else:
        os.close(r_fd)
    lat: list[float | None] = []
    for i in range(n):
        if i in writes and i in arrivals and arrivals[i] - writes[i] <= limit:
            lat.append(arrivals[i] - writes[i])
        else:
            lat.append(None)
    lost = [i for i in writes if i not in arrivals]
    if lost and not error:
        error = f"{len(lost)} line(s) never arrived, even after EOF"
    return lat, error
