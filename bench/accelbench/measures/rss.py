"""Peak RSS of X (VmHWM of its processes, read while X is still running) when
1 MiB passes through X configured with a 1 GiB buffer: what an oversized -m
costs when little data flows.  (wait4's ru_maxrss is not usable for this: Linux
carries the spawning Python process's RSS high-water mark across exec into the
child's ru_maxrss.)  And, for each accel variant, "given back": ``accel -m 512M``
absorbs 256 MiB while the consumer does not read, then the consumer drains it
all while stdin stays open; reported are VmHWM (peak), VmRSS when full, and
VmRSS after the drain (polled up to 5 s until it has not fallen for 2 s).
"""

from __future__ import annotations

import os
import select
import subprocess
import tempfile
import time
from pathlib import Path

from ..context import MIB, WORK, Context, note
from ..markdown import code, md_table
from ..processes import pipe_queued, proc_status, reap
from ..stats import Samples, excluded_status, fmt_spread, interleaved
from ..tools import show


def run(ctx: Context) -> str:
    tools, accel, rounds, timeout = ctx.tools, ctx.accel, ctx.rounds, ctx.timeout
    xs = [t for t in tools if t.rss_argv]
    samples = {t.name: Samples.for_tool(t) for t in xs}
    for r, t, s in interleaved(xs, rounds, samples):
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
        while pipe_queued(w) and time.perf_counter() < t_end:
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
            elif sent == nbytes and pipe_queued(w) == 0:
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
