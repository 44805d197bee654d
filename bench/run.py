#!/usr/bin/env python3
"""Benchmark accel against a bare pipe and its peers (mbuffer, pv -B, buffer).

What it measures (every X is run as a real process between real OS pipes):

  seed        The pipeline accel exists for:
              ``bzip2 -dc corpus.tar.bz2 | X | gzip -6 > /dev/null`` on a tar of real files
              from this machine (cached in bench/work/).  Both stages are also timed alone.  Two CPU-bound stages that take turns (bare pipe, 64 KiB) run
              slower than the slower stage alone; a good buffer lets them overlap, so the wall
              time approaches that of the slower stage.
              ratio = median wall / max(median wall of the two stages alone).
              1.00 is the optimum (the slower stage is never kept waiting); the bare-pipe row
              shows how far from it the pipeline starts.  "X CPU s" is user+sys of X itself.
  throughput  ``dd if=/dev/zero bs=1M count=8192 | X | cat > /dev/null``: GiB/s of the
              pipeline and X's own CPU seconds per GiB moved (lower is better; the cost an
              intermediary adds to every pipeline it sits in).  "× bare" = GiB/s / bare pipe's.
  latency     A Python producer writes a short line into X's stdin every 50 ms (10 lines,
              stdin kept open) and a reader thread times its arrival on X's stdout.  Tools
              that hold partial blocks until a block fills or EOF show timeouts (>5000 ms).
              Baseline: the producer writes straight into a pipe read by the reader.
  rss         Peak RSS of X (VmHWM of its processes, read while X is still running) when
              1 MiB passes through X configured with a 1 GiB buffer: what an oversized -m
              costs when little data flows.  (wait4's ru_maxrss is not usable for this: Linux
              carries the spawning Python process's RSS high-water mark across exec into the
              child's ru_maxrss.)  And, for each accel variant, "given back": ``accel -m 512M``
              absorbs 256 MiB while the consumer does not read, then the consumer drains it
              all while stdin stays open; reported are VmHWM (peak), VmRSS when full, and
              VmRSS after the drain (polled up to 5 s until it has not fallen for 2 s).

How to read it: the machine is shared and noisy, so every timed figure is the median over
``--rounds`` rounds, and within a round the tools run in a rotating order (round r starts
at tool r), so slow drifts in background load hit all tools alike.  [min-max] is the spread
over rounds; compare ratios rather than absolute seconds, and distrust differences smaller
than the spread.  A tool that exits non-zero (checked for every process of a pipeline, like
``set -o pipefail``) is reported as FAILED with its exit status and the first stderr line;
its median then covers only the successful runs.  Before anything is timed, 8 MiB of random
data goes through each X and must come out unchanged; a tool that fails this is excluded.

Usage:
  bench/run.py [--rounds N] [--quick] [--accel PATH] [--only seed,throughput,latency,rss]
               [--variants 'accel=accel,accel-copy=accel --engine copy']

In --variants, each comma-separated item is NAME=COMMAND; the word ``accel`` in COMMAND is
replaced by the accel binary.  Without --accel, ``cargo build --release`` runs in the repo
root and target/release/accel is used.  --quick shrinks the corpus (20 MiB) and the stream
(512 MiB) so the whole run takes about a minute; it is for testing this script, its numbers
are not meaningful.  Tables go to stdout (Markdown), progress to stderr.
"""

from __future__ import annotations

import argparse
import fcntl
import os
import select
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import termios
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from accelbench.corpus import build_corpus, warm_cache  # noqa: E402
from accelbench.runner import (  # noqa: E402
    GIB, MIB, REPO, WORK, Samples, Tool, code, excluded_status, fmt_spread, machine_header,
    md_table, med, note, parse_variants, peer_tools, reap, rotated, run_pipeline,
    sanity_check, show)

DEFAULT_VARIANTS = "accel=accel,accel-copy=accel --engine copy"
SECTIONS = ("seed", "throughput", "cpu", "latency", "rss")


# --------------------------------------------------------------------------------------------
# Sections


def section_seed(tools: list[Tool], accel: str, rounds: int, corpus_bytes: int,
                 timeout: float) -> str:
    tar_path, bz_path, meta = build_corpus(corpus_bytes)
    warm_cache(tar_path, bz_path)
    bz = ["bzip2", "-dc", str(bz_path)]
    gz = ["gzip", "-6"]
    jobs: list[tuple[str, str, object]] = [("stage", "bzip2", None), ("stage", "gzip", None)]
    jobs += [("x", t.name, t) for t in tools]
    samples = {name: Samples.for_tool(t) for _, name, t in jobs}
    for r in range(rounds):
        for kind, name, t in rotated(jobs, r):
            s = samples[name]
            if s.dropped:
                continue
            if kind == "stage" and name == "bzip2":
                rr = run_pipeline([bz], timeout=timeout)
                s.add(rr, None)
            elif kind == "stage":
                rr = run_pipeline([gz], stdin_path=str(tar_path), timeout=timeout)
                s.add(rr, None)
            elif t.argv is None:
                rr = run_pipeline([bz, gz], timeout=timeout)
                s.add(rr, None)
            else:
                rr = run_pipeline([bz, t.argv, gz], timeout=timeout)
                s.add(rr, 1)
            note(f"seed round {r + 1}/{rounds}: {name:<12} "
                 + (f"{rr.wall:7.2f} s" if rr.ok else f"FAILED: {rr.error}"))
    stage_meds = [med(samples[n].wall) for n in ("bzip2", "gzip") if samples[n].wall]
    optimum = max(stage_meds) if len(stage_meds) == 2 else None
    rows = []
    labels = {"bzip2": code(f"bzip2 -dc {bz_path.name} > /dev/null") + " alone",
              "gzip": code(f"gzip -6 < {tar_path.name} > /dev/null") + " alone"}
    for kind, name, t in jobs:
        s = samples[name]
        if kind == "stage":
            label, cmd = labels[name], "—"
        else:
            label = name if t.argv else "bare pipe"
            cmd = code(t.display(accel)) if t.argv else "—"
        ratio = f"{med(s.wall) / optimum:.3f}" if optimum and s.wall else "—"
        xcpu = f"{med(s.x_cpu):.2f}" if s.x_cpu else "—"
        acpu = f"{med(s.all_cpu):.2f}" if s.all_cpu else "—"
        rows.append([label, cmd, fmt_spread(s.wall), ratio, xcpu, acpu, s.status()])
    head = (f"## Seed pipeline: `bzip2 -dc corpus.tar.bz2 | X | gzip -6 > /dev/null`\n\n"
            f"Corpus: {meta['tar_bytes'] / MIB:.0f} MiB tar of {meta['files']} real files "
            f"({', '.join(meta['per_root_bytes'])}), {meta['bz2_bytes'] / MIB:.1f} MiB as "
            f"bzip2 -9. {rounds} rounds, rotating order. ratio = median wall / max(median of "
            f"the two stages alone); 1.000 = optimum. CPU columns are medians of user+sys.\n")
    table = md_table(["X", "command", "wall s median [min–max]", "ratio", "X CPU s",
                      "all CPU s", "status"], rows)
    return head + "\n" + table + "\n"


def section_throughput(tools: list[Tool], accel: str, rounds: int, count: int,
                       timeout: float) -> str:
    gib = count * MIB / GIB
    dd = ["dd", "if=/dev/zero", "bs=1M", f"count={count}", "status=none"]
    cat = ["cat"]
    samples = {t.name: Samples.for_tool(t) for t in tools}
    for r in range(rounds):
        for t in rotated(tools, r):
            s = samples[t.name]
            if s.dropped:
                continue
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


def section_cpu(tools: list[Tool], accel: str, rounds: int, count: int,
                timeout: float) -> str:
    """X's own CPU per GiB in the regimes that matter, the pace set by `pv -L` outside X (not
    counted): a consumer that keeps up (the producer is paced; with pieces of 1 MiB, as from
    `dd bs=1M`, and of 64 KiB, pv's default pipe), and a standing backlog (the consumer is
    paced, so X's buffer stays full). A relay pays about one wakeup per piece it is handed,
    so the piece size, not the byte count, sets the cost when the consumer keeps up."""
    if shutil.which("pv") is None:
        return "## CPU per GiB\n\nSkipped: needs pv (`apt-get install pv`) to pace the pipeline.\n"
    rate = "1G"
    count = max(count // 4, 256)
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


def section_latency(tools: list[Tool], accel: str) -> str:
    rows = []
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
        note(f"latency: {label:<18} median {median_s} ms, max {max_s} ms, "
             f"timeouts {timeouts}" + (f", {err}" if err else ""))
    head = ("## Line latency: producer writes a short line into X, reader times its arrival\n\n"
            "10 lines of 20 bytes, written 50 ms apart, producer's stdin kept open; per-line "
            "timeout 5 s (counted as >5000 ms). Single run per tool (ms-scale, not "
            "throughput).\n")
    table = md_table(["X", "command", "median ms", "max ms", "timeouts", "status"], rows)
    return head + "\n" + table + "\n"


def proc_status(pid: int) -> dict[str, int]:
    out = {}
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            k, _, v = line.partition(":")
            if k in ("VmRSS", "VmHWM"):
                out[k] = int(v.split()[0])  # kB
    except (OSError, ValueError):
        pass
    return out


def _pipe_queued(fd: int) -> int:
    buf = fcntl.ioctl(fd, termios.FIONREAD, struct.pack("i", 0))
    return struct.unpack("i", buf)[0]


def _settle_rss(pid: int, limit: float = 5.0, step: float = 0.1, still: int = 20):
    """Poll VmRSS every `step` s until it has not fallen for `still` polls, at most `limit` s.

    `still` spans 2 s: accel keeps a drained backlog's memory for 1 s (a backlog that only
    touched empty refills at once), and gives it back if the backlog stays empty."""
    t0 = time.perf_counter()
    best = proc_status(pid).get("VmRSS")
    quiet = 0
    while time.perf_counter() - t0 < limit and quiet < still:
        time.sleep(step)
        cur = proc_status(pid).get("VmRSS")
        if cur is None:
            break
        if best is None or cur < best:
            best, quiet = cur, 0
        else:
            quiet += 1
    return best, time.perf_counter() - t0


def measure_giveback(argv: list[str], push: int = 256 * MIB, timeout: float = 120.0) -> dict:
    """Fill X with `push` bytes while nothing reads its stdout, then drain it with stdin open."""
    res: dict = {"error": None}
    errf = tempfile.TemporaryFile(dir=WORK)
    try:
        p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=errf)
    except OSError as e:
        errf.close()
        return {"error": f"cannot start: {e.strerror or e}"}
    w, r = p.stdin.fileno(), p.stdout.fileno()
    os.set_blocking(w, False)
    block = memoryview(os.urandom(MIB))
    try:
        written = 0
        deadline = time.perf_counter() + timeout
        while written < push:
            left = deadline - time.perf_counter()
            if left <= 0:
                raise TimeoutError(f"absorbed only {written / MIB:.1f} of {push / MIB:.0f} MiB "
                                   f"in {timeout:.0f} s while the consumer did not read")
            _, wl, _ = select.select([], [w], [], min(left, 1.0))
            if not wl:
                continue
            off = written % MIB
            try:
                written += os.write(w, block[off:min(MIB, off + push - written)])
            except BlockingIOError:
                pass
        # Wait for X to take everything out of its stdin pipe, then for RSS to settle.
        t_end = time.perf_counter() + 10
        while _pipe_queued(w) and time.perf_counter() < t_end:
            time.sleep(0.02)
        time.sleep(0.2)
        st = proc_status(p.pid)
        res["full_kib"] = st.get("VmRSS")
        hwm_full = st.get("VmHWM")
        # Drain everything while stdin stays open.
        got = 0
        deadline = time.perf_counter() + timeout
        while got < push:
            left = deadline - time.perf_counter()
            if left <= 0:
                raise TimeoutError(f"drained only {got / MIB:.0f} of {push / MIB:.0f} MiB")
            rl, _, _ = select.select([r], [], [], min(left, 1.0))
            if rl:
                chunk = os.read(r, 4 * MIB)
                if not chunk:
                    raise RuntimeError(f"EOF after {got / MIB:.1f} MiB of {push / MIB:.0f}")
                got += len(chunk)
        res["after_kib"], res["settle_s"] = _settle_rss(p.pid)
        # VmHWM = max(mm's high-water mark, current RSS); the mark is updated lazily, so
        # keep the larger of the readings taken when full and after the drain.
        hwms = [h for h in (hwm_full, proc_status(p.pid).get("VmHWM")) if h is not None]
        res["hwm_kib"] = max(hwms) if hwms else None
    except BrokenPipeError:
        res["error"] = "X closed its stdin early (EPIPE)"
    except (TimeoutError, RuntimeError, OSError) as e:
        res["error"] = str(e)
    # Close stdin: X should exit 0 with nothing more to write.
    try:
        p.stdin.close()
    except OSError:
        pass
    while True:
        rl, _, _ = select.select([r], [], [], 15)
        if not rl or not os.read(r, 4 * MIB):
            break
    _, res["error"] = reap(p, errf, res["error"])
    return res


def process_tree(pid: int) -> list[int]:
    """pid and all its descendants (buffer forks a writer process)."""
    kids: dict[int, list[int]] = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            stat = Path(f"/proc/{d}/stat").read_text()
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        kids.setdefault(ppid, []).append(int(d))
    out = [pid]
    i = 0
    while i < len(out):
        out += kids.get(out[i], [])
        i += 1
    return out


def measure_peak_rss(argv: list[str], nbytes: int = MIB, timeout: float = 60.0):
    """Pass nbytes through X (stdin kept open), read VmHWM of X's process tree while X is
    still alive, then close stdin and check that all bytes came out. Returns (KiB, error).

    Not ru_maxrss: Linux carries the parent's pre-exec RSS high-water mark into the
    child's ru_maxrss, so every child of this Python process would report >= its RSS.
    """
    errf = tempfile.TemporaryFile(dir=WORK)
    try:
        p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=errf)
    except OSError as e:
        errf.close()
        return None, f"cannot start: {e.strerror or e}"
    w, r = p.stdin.fileno(), p.stdout.fileno()
    os.set_blocking(w, False)
    data = os.urandom(nbytes)
    out = bytearray()
    sent = 0
    hwm = None
    error = None
    try:
        deadline = time.perf_counter() + timeout
        quiet_since = None
        # Push everything while reading what comes out; then wait until X has taken all of
        # its input and its output has been quiet for 0.3 s (tools that hold partial blocks
        # keep the tail until EOF).
        while True:
            now = time.perf_counter()
            if now > deadline:
                raise TimeoutError(f"X took only {sent} of {nbytes} bytes in {timeout:.0f} s")
            rl, wl, _ = select.select([r], [w] if sent < nbytes else [], [], 0.05)
            if wl:
                try:
                    sent += os.write(w, data[sent:sent + 256 * 1024])
                except BlockingIOError:
                    pass
            if rl:
                chunk = os.read(r, MIB)
                if not chunk:
                    raise RuntimeError("X closed its stdout before its stdin did")
                out += chunk
                quiet_since = None
            elif sent == nbytes and _pipe_queued(w) == 0:
                quiet_since = quiet_since or now
                if now - quiet_since >= 0.3:
                    break
        for pid in process_tree(p.pid):
            v = proc_status(pid).get("VmHWM")
            if v is not None:
                hwm = max(hwm or 0, v)
    except BrokenPipeError:
        error = "X closed its stdin early (EPIPE)"
    except (TimeoutError, RuntimeError, OSError) as e:
        error = str(e)
    try:
        p.stdin.close()
    except OSError:
        pass
    os.set_blocking(r, True)
    end = time.perf_counter() + 15
    while time.perf_counter() < end:
        rl, _, _ = select.select([r], [], [], max(0.0, end - time.perf_counter()))
        if not rl:
            break
        chunk = os.read(r, MIB)
        if not chunk:
            break
        out += chunk
    _, error = reap(p, errf, error)
    if not error and bytes(out) != data:
        error = f"output differs from input ({len(out)} of {nbytes} bytes)"
    return hwm, error


def section_rss(tools: list[Tool], accel: str, rounds: int, timeout: float) -> str:
    xs = [t for t in tools if t.rss_argv]
    samples = {t.name: Samples.for_tool(t) for t in xs}
    for r in range(rounds):
        for t in rotated(xs, r):
            s = samples[t.name]
            if s.dropped:
                continue
            hwm, err = measure_peak_rss(t.rss_argv, timeout=timeout)
            s.runs += 1
            if err:
                s.failures.append(err)
            elif hwm is not None:
                s.rss_kib.append(hwm)
            note(f"rss round {r + 1}/{rounds}: {t.name:<12} "
                 + (f"{hwm / 1024:8.1f} MiB" if not err and hwm else f"FAILED: {err}"))
    rows = []
    for t in xs:
        s = samples[t.name]
        rss = [k / 1024 for k in s.rss_kib]
        rows.append([t.name, code(show(t.rss_argv, accel)), fmt_spread(rss, 1), s.status()])
    out = ("## Memory: peak RSS passing 1 MiB through X with a 1 GiB buffer\n\n"
           f"1 MiB of random bytes written into X's stdin and read back (checked); peak = "
           f"VmHWM of X's processes read just before X's stdin is closed, MiB, median over "
           f"{rounds} rounds. (ru_maxrss from wait4 is not used: on Linux it includes the "
           "spawning Python process's own RSS high-water mark, carried across exec.) buffer "
           "is given `-m 1024M` (it parses K/M suffixes only; `1G` means 1 byte).\n\n")
    out += md_table(["X", "command", "peak RSS MiB median [min–max]", "status"], rows) + "\n"

    gb_rows = []
    for t in tools:
        if not t.giveback_argv:
            continue
        if t.excluded:
            gb_rows.append([t.name, code(show(t.giveback_argv, accel)), "—", "—", "—", "—",
                            excluded_status(t.excluded)])
            continue
        res = measure_giveback(t.giveback_argv)

        def mib(k):
            return f"{k / 1024:.1f}" if k is not None else "—"

        status = "ok" if not res.get("error") else f"FAILED: {res['error']}".replace("|", "\\|")
        gb_rows.append([t.name, code(show(t.giveback_argv, accel)),
                        mib(res.get("hwm_kib")), mib(res.get("full_kib")),
                        mib(res.get("after_kib")),
                        f"{res['settle_s']:.1f}" if "settle_s" in res else "—", status])
        note(f"given back: {t.name:<12} HWM {mib(res.get('hwm_kib'))} MiB, full "
             f"{mib(res.get('full_kib'))} MiB, after drain {mib(res.get('after_kib'))} MiB"
             + (f", {res['error']}" if res.get("error") else ""))
    if gb_rows:
        out += ("\n### Given back: accel holds a 256 MiB burst, then drains it (stdin still "
                "open)\n\n"
                "The consumer does not read while 256 MiB are pushed, then reads all of it; "
                "VmRSS after drain is polled up to 5 s until it has not fallen for 2 s (settle s).\n\n")
        out += md_table(["variant", "command", "VmHWM MiB", "VmRSS full MiB",
                         "VmRSS after drain MiB", "settle s", "status"], gb_rows) + "\n"
    return out


def main() -> int:
    ap = argparse.ArgumentParser(
        description="Benchmark accel against a bare pipe, mbuffer, pv -B and buffer.",
        epilog="See the module docstring (head of this file) for how to read the output.")
    ap.add_argument("--rounds", type=int, default=5, help="rounds per timed section (min 3)")
    ap.add_argument("--quick", action="store_true",
                    help="small sizes (~1 minute in total), for testing this script")
    ap.add_argument("--accel", metavar="PATH", help="accel binary (default: cargo build --release)")
    ap.add_argument("--only", metavar="LIST", default=",".join(SECTIONS),
                    help="comma-separated subset of: " + ",".join(SECTIONS))
    ap.add_argument("--variants", metavar="SPEC", default=DEFAULT_VARIANTS,
                    help=f"NAME=COMMAND,... ('accel' is replaced by the binary); "
                         f"default {DEFAULT_VARIANTS!r}")
    ap.add_argument("--corpus-mb", type=int, metavar="MIB",
                    help="corpus tar size in MiB (default 300, --quick 20)")
    ap.add_argument("--timeout", type=float, metavar="S",
                    help="kill a pipeline run after S seconds (default 600, --quick 60)")
    args = ap.parse_args()
    if args.rounds < 3:
        ap.error("--rounds must be at least 3")
    only = [s.strip() for s in args.only.split(",") if s.strip()]
    bad = [s for s in only if s not in SECTIONS]
    if bad or not only:
        ap.error(f"--only: unknown section(s) {', '.join(bad) or '(none)'}; "
                 f"choose from {','.join(SECTIONS)}")
    sizes = {
        "corpus": (args.corpus_mb or (20 if args.quick else 300)) * MIB,
        "count": 512 if args.quick else 8192,
    }
    timeout = args.timeout or (60.0 if args.quick else 600.0)

    missing = [c for c in ("bzip2", "gzip", "dd", "cat", "head") if not shutil.which(c)]
    if missing:
        print(f"run.py: required tools missing: {', '.join(missing)}", file=sys.stderr)
        return 2

    if args.accel:
        accel = os.path.abspath(args.accel)
        accel_origin = accel
        if not os.access(accel, os.X_OK):
            print(f"run.py: --accel {args.accel}: not an executable file", file=sys.stderr)
            return 2
    else:
        note("cargo build --release")
        r = subprocess.run(["cargo", "build", "--release"], cwd=REPO, stdout=sys.stderr)
        if r.returncode != 0:
            print("run.py: cargo build --release failed", file=sys.stderr)
            return 1
        built = REPO / "target" / "release" / "accel"
        # Snapshot the binary so that a rebuild by someone else during the run cannot mix
        # two versions of accel into one set of medians.
        WORK.mkdir(parents=True, exist_ok=True)
        snap = WORK / "accel-under-test"
        tmp = WORK / "accel-under-test.tmp"
        shutil.copy2(built, tmp)
        os.replace(tmp, snap)
        accel = str(snap)
        accel_origin = f"{built} (snapshot: {snap})"
    WORK.mkdir(parents=True, exist_ok=True)

    notes: list[str] = []
    variants = parse_variants(args.variants, accel)
    tools = [Tool("bare", None, "bare")] + variants + peer_tools(notes)
    for t in tools:
        if t.argv is None:
            continue
        err = sanity_check(t)
        if err:
            t.excluded = err
            notes.append(f"{t.name} (`{t.display(accel)}`) excluded: 8 MiB sanity check "
                         f"failed: {err}")
            note(f"sanity: {t.name}: FAILED: {err}")
        else:
            note(f"sanity: {t.name}: ok")

    t_start = time.perf_counter()
    print(machine_header(accel, accel_origin, args, sizes))
    sys.stdout.flush()
    for sec in SECTIONS:
        if sec not in only:
            continue
        note(f"--- {sec}")
        if sec == "seed":
            text = section_seed(tools, accel, args.rounds, sizes["corpus"], timeout)
        elif sec == "throughput":
            text = section_throughput(tools, accel, args.rounds, sizes["count"], timeout)
        elif sec == "cpu":
            text = section_cpu(tools, accel, args.rounds, sizes["count"], timeout)
        elif sec == "latency":
            text = section_latency(tools, accel)
        else:
            text = section_rss(tools, accel, args.rounds, timeout)
        print(text)
        sys.stdout.flush()
    loadavg = " ".join(Path("/proc/loadavg").read_text().split()[:3])
    notes.append(f"load average at end: {loadavg}; total {time.perf_counter() - t_start:.0f} s.")
    print("## Notes\n")
    for n in notes:
        print(f"- {n}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
