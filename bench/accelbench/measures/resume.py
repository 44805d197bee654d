"""A dropped connection, resumed (needs root; issue 20): over the WAN of ``wan`` (two
namespaces, the delay line, 40 ms round trip) at 200 Mbit/s (RESUME_RATE), 1 GiB of a checked
pattern (``pattern.py produce | accel --to`` there, ``accel --from | pattern.py
consume`` here, every byte compared) sent three ways: straight; through a TCP proxy
of the benchmark's own (in the receiver's namespace) that cuts nothing, to show it
keeps up; and through the same proxy resetting the connection (SO_LINGER 0, both
sides) 5 s after it accepted it, so that accel reconnects over and over.  The
table has the sender's reconnections and resent bytes (its --json summary), the
outages (accel's own total, ``outage_s`` in its --json summary, and the
proxy's own clock from each cut to the next connection), and the goal: wall(cut)
≤ wall(proxy) + outages + 10 % of wall(straight).  Then on loopback, ``dd
if=/dev/zero bs=1M count=2048 | accel --to`` into ``accel --from > /dev/null`` for
this build and any other accel in --variants (``before=/path/to/accel``): GiB/s, and
× the first other build (goal: ≥ 0.97).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time

from ..context import BENCH, GIB, MIB, WORK, Context, note
from ..markdown import code, md_table
from ..netlab import WAN_ONE_WAY_MS, WAN_RECEIVER, DelayLine, Netns, lab_section
from ..stats import Samples, fmt_spread, interleaved, med
from ..tools import other_builds
from ..transfers import (
    PLAIN_WIRE, RECEIVER_ERR, SENDER_ERR, Pair, key_file, loopback_pairs, sane_samples,
    show_across, transfer,
)

# Lower than wan's 1 Gbit/s, so that 1 GiB takes about 45 s and sees some nine cuts.
RESUME_RATE = "200mbit"
CUT_EVERY_S = 5.0  # each connection through the cutting proxy lives this long
RECEIVER_PORT, PROXY_PORT = 9301, 9302
LOOPBACK_MIB = 2048

STRAIGHT, PROXIED, CUT = "accel", "accel via proxy", f"accel via proxy, cut every {CUT_EVERY_S:g} s"


# --------------------------------------------------------------------------------------------
# The cutting proxy


def proxy_main(listen_host: str, listen_port: int, to_host: str, to_port: int,
               cut_every: float) -> None:
    """A TCP forwarder, one connection at a time: accepts on listen_host:listen_port,
    connects to to_host:to_port, and copies both ways (a half-close is passed on) until both
    ends are done, or, when cut_every > 0, until the connection is that old: then both
    sockets are reset (SO_LINGER 0, then close: an RST each way) and the next connection is
    accepted; an end that resets or fails has the other reset too. One thread, non-blocking
    sockets, 1 MiB reads. Prints `accept T`, then `cut T`, `reset T` (an end did) or `end T`
    (time.monotonic(), the same clock in every process) on stdout, one line each, for the
    harness to count the cuts and time the outages. Runs until killed."""
    import selectors
    import socket
    import struct

    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind((listen_host, listen_port))
    listener.listen(8)
    chunk = 1 << 20
    while True:
        down, _ = listener.accept()
        print(f"accept {time.monotonic():.6f}", flush=True)
        deadline = time.monotonic() + cut_every if cut_every > 0 else None
        try:
            up = socket.create_connection((to_host, to_port))
        except OSError:
            down.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            down.close()
            continue
        for s in (down, up):
            s.setblocking(False)
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        peer = {down: up, up: down}
        pending = {down: b"", up: b""}  # bytes still to write to that socket
        ended = {down: False, up: False}  # that socket's peer said EOF, passed on
        failed = False
        while not failed and not (all(ended.values()) and not any(pending.values())):
            now = time.monotonic()
            if deadline is not None and now >= deadline:
                break
            sel = selectors.DefaultSelector()
            for s in (down, up):
                events = 0
                if not ended[s] and not pending[peer[s]]:
                    events |= selectors.EVENT_READ
                if pending[s]:
                    events |= selectors.EVENT_WRITE
                if events:
                    sel.register(s, events)
            ready = sel.select(None if deadline is None else max(deadline - now, 0.0))
            sel.close()
            try:
                for key, events in ready:
                    s = key.fileobj
                    if events & selectors.EVENT_WRITE and pending[s]:
                        n = s.send(pending[s])
                        pending[s] = pending[s][n:]
                    if events & selectors.EVENT_READ:
                        data = s.recv(chunk)
                        if not data:
                            ended[s] = True
                            peer[s].shutdown(socket.SHUT_WR)
                        else:
                            try:
                                n = peer[s].send(data)
                            except BlockingIOError:
                                n = 0
                            pending[peer[s]] = data[n:]
            except (BlockingIOError, InterruptedError):
                pass
            except OSError:
                failed = True  # one end reset or went: the other is reset too
        done = all(ended.values()) and not any(pending.values())
        for s in (down, up):
            if not done:
                s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            s.close()
        said = "end" if done else "reset" if failed else "cut"
        print(f"{said} {time.monotonic():.6f}", flush=True)


def start_proxy(ns: Netns, cut_every: float, log) -> subprocess.Popen:
    """The proxy in `ns`, on WAN_RECEIVER:PROXY_PORT to the receiver at RECEIVER_PORT, its
    events to `log`; returns once it listens."""
    code_ = (f"import sys; sys.path.insert(0, {str(BENCH)!r}); "
             f"from accelbench.measures.resume import proxy_main; "
             f"proxy_main({WAN_RECEIVER!r}, {PROXY_PORT}, {WAN_RECEIVER!r}, {RECEIVER_PORT}, "
             f"{cut_every})")
    p = subprocess.Popen(ns.argv([sys.executable, "-c", code_]), stdin=subprocess.DEVNULL,
                         stdout=log, stderr=subprocess.PIPE)
    if not ns.listening(PROXY_PORT):
        p.kill()
        p.wait()
        raise RuntimeError(f"the proxy did not start: {p.stderr.read().decode().strip()}")
    return p


def proxy_outages(events: str) -> tuple[int, float]:
    """(cuts, seconds from each cut to the next connection accepted, summed)."""
    cuts, total, cut_at = 0, 0.0, None
    for line in events.splitlines():
        what, at = line.split()
        if what == "cut":
            cuts, cut_at = cuts + 1, float(at)
        elif what == "accept" and cut_at is not None:
            total, cut_at = total + float(at) - cut_at, None
    return cuts, total


# --------------------------------------------------------------------------------------------
# What accel said


def summary_output(path) -> dict | None:
    """The first output of the `"event":"summary"` line of a --json file."""
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        if '"summary"' in line:
            event = json.loads(line)
            if event.get("event") == "summary" and event.get("outputs"):
                return event["outputs"][0]
    return None


# --------------------------------------------------------------------------------------------
# The measure


def run(ctx: Context) -> str:
    return lab_section("## A dropped connection, resumed", body, ctx)


def body(ctx: Context) -> str:
    return wan_cuts(ctx) + "\n" + loopback(ctx)


class Outage:
    """One row's figures from each run, beside its Samples."""

    def __init__(self) -> None:
        self.reconnections: list[int] = []
        self.resent: list[int] = []
        self.longest: list[float] = []
        self.said: list[float] = []  # summed from the sender's stderr
        self.cuts: list[int] = []
        self.gaps: list[float] = []  # the proxy's cut → next accept, summed


def wan_cuts(ctx: Context) -> str:
    mib = 256 if ctx.quick else 1024
    accel, key = ctx.accel, key_file(ctx.accel)
    pattern = str(BENCH / "accelbench" / "pattern.py")
    produce = [sys.executable, pattern, "produce", str(mib)]
    consume = [sys.executable, pattern, "consume", str(mib)]
    sender_json, receiver_json = WORK / "resume-sender.json", WORK / "resume-receiver.json"
    receiver = [accel, "--from", f"{WAN_RECEIVER}:{RECEIVER_PORT}", "--key-file", key,
                f"--json={receiver_json}"]

    def sender(port: int) -> list[str]:
        return [accel, "--to", f"{WAN_RECEIVER}:{port}", "--key-file", key,
                f"--json={sender_json}", *PLAIN_WIRE]

    jobs = {STRAIGHT: (sender(RECEIVER_PORT), None), PROXIED: (sender(PROXY_PORT), 0.0),
            CUT: (sender(PROXY_PORT), CUT_EVERY_S)}
    samples = {j: Samples() for j in jobs}
    outages = {j: Outage() for j in jobs}
    proxy_log = WORK / "resume-proxy.log"
    with Netns("a") as a, Netns("b") as b, DelayLine(a, b, rate=RESUME_RATE):
        for r, job, s in interleaved(list(jobs), ctx.rounds, samples, key=lambda j: j):
            send, cut_every = jobs[job]
            sender_json.unlink(missing_ok=True)
            with open(proxy_log, "w+") as log:
                proxy = start_proxy(b, cut_every, log) if cut_every is not None else None
                try:
                    wall, _, error = transfer(Pair(job, receiver, [produce, send],
                                                   RECEIVER_PORT), b, a, ctx.timeout,
                                              consumer=consume)
                finally:
                    if proxy:
                        proxy.kill()
                        proxy.wait()
                log.seek(0)
                cuts, gaps = proxy_outages(log.read()) if proxy else (0, 0.0)
            s.runs += 1
            o = outages[job]
            summary = summary_output(sender_json)
            said = summary["outage_s"] if summary else 0.0
            if error is None and summary is None:
                error = "the sender wrote no JSON summary"
            if error:
                s.failures.append(error)
            else:
                s.wall.append(wall)
                o.reconnections.append(summary["reconnections"])
                o.resent.append(summary["resent_bytes"])
                o.longest.append(summary["longest_outage_s"])
                o.said.append(said)
                o.cuts.append(cuts)
                o.gaps.append(gaps)
            if cut_every:  # kept for a look at what accel said about the cuts
                shutil.copy(SENDER_ERR, WORK / "resume-cut-sender.err")
                shutil.copy(RECEIVER_ERR, WORK / "resume-cut-receiver.err")
            note(f"resume wan round {r + 1}/{ctx.rounds}: {job:<28} "
                 + (f"{wall:7.2f} s, {summary['reconnections']} reconnections, "
                    f"{cuts} cuts, outages {said:.2f} s said / {gaps:.2f} s by the proxy"
                    if not error else f"FAILED: {error}"))
            if error:
                tail = SENDER_ERR.read_text(errors="replace")[-1500:]
                note(f"  sender's stderr ends: {tail}")
                note(f"  receiver's stderr ends: "
                     f"{RECEIVER_ERR.read_text(errors='replace')[-1500:]}")

    def m(xs: list[float], fmt: str = "{:.1f}") -> str:
        return fmt.format(med(xs)) if xs else "—"

    rows = []
    for job, (send, cut_every) in jobs.items():
        s, o = samples[job], outages[job]
        shown = f"{code(show_across(send, accel))} → " + (
            "" if cut_every is None else f"proxy{' (cuts)' if cut_every else ''} → ")
        shown += code(show_across(receiver, accel))
        rate = f"{mib / med(s.wall):.1f}" if s.wall else "—"
        rows.append([job, shown, fmt_spread(s.wall), rate, m(o.reconnections, "{:g}"),
                     m(o.cuts, "{:g}"), m(o.said, "{:.2f}"), m(o.gaps, "{:.2f}"),
                     m(o.longest, "{:.2f}"), m([x / MIB for x in o.resent]), s.status()])
    goal = "—"
    walls = {j: med(samples[j].wall) for j in jobs if samples[j].wall}
    if len(walls) == 3 and outages[CUT].gaps:
        out_s = max(med(outages[CUT].gaps), med(outages[CUT].said))
        bound = walls[PROXIED] + out_s + 0.10 * walls[STRAIGHT]
        goal = (f"median wall with cuts {walls[CUT]:.1f} s ≤ {walls[PROXIED]:.1f} s (via the "
                f"proxy, no cut) + {out_s:.1f} s (outages: the larger of the two medians) + "
                f"{0.10 * walls[STRAIGHT]:.1f} s (10 % of the straight run) = {bound:.1f} s: "
                f"**{'met' if walls[CUT] <= bound else 'NOT met'}** (overhead beyond the "
                f"outages {walls[CUT] - walls[PROXIED] - out_s:+.1f} s)")
    return (f"`pattern.py produce {mib} | accel --to` → {RESUME_RATE}/s, "
            f"{2 * WAN_ONE_WAY_MS} ms RTT → `accel --from | pattern.py consume {mib}` (every "
            f"MiB compared). The WAN of the previous section, slower. The proxy is the "
            f"benchmark's own, in the receiver's namespace; with cuts it resets each "
            f"connection {CUT_EVERY_S:g} s after accepting it. {ctx.rounds} rounds, rotating "
            f"order; the figures after MiB/s are medians over the runs that succeeded. "
            f"Reconnections and resent MiB: the sender's --json summary; longest: its "
            f"`longest_outage_s`. Outages said: the sender's own total (`outage_s` in its "
            f"--json summary: from each drop it noticed to the connection back); by proxy: "
            f"from each cut to the next connection the proxy accepted.\n\n"
            + md_table(["X", "sender → receiver", "wall s median [min–max]", "MiB/s",
                        "reconnections", "cuts", "outages said s", "outages by proxy s",
                        "longest s", "resent MiB", "status"], rows)
            + f"\n\nGoal (issue 20): {goal}. The last run's stderr with cuts: "
            f"work/resume-cut-sender.err, work/resume-cut-receiver.err.\n")


def loopback(ctx: Context) -> str:
    """net's loopback transfer, encrypted accel rows only: this build and the other builds."""
    count = 512 if ctx.quick else LOOPBACK_MIB
    gib = count * MIB / GIB
    dd = ["dd", "if=/dev/zero", "bs=1M", f"count={count}", "status=none"]
    builds = other_builds(ctx)
    names = ["accel", *builds]
    with Netns("lo") as ns:
        pairs = [p for p in loopback_pairs(ctx.accel, "/dev/null", builds) if p.name in names]
        samples, notes = sane_samples(pairs, ns, ctx.accel, builds, "resume")
        for r, p, s in interleaved(pairs, ctx.rounds, samples):
            wall, x_cpu, error = transfer(Pair(p.name, p.receiver, [dd] + p.sender, p.port),
                                          ns, ns, ctx.timeout)
            s.add_transfer(wall, x_cpu, error)
            note(f"resume loopback round {r + 1}/{ctx.rounds}: {p.name:<12} "
                 + (f"{gib / wall:6.2f} GiB/s" if not error else f"FAILED: {error}"))
    base = next((n for n in names[1:] if samples[n].wall), None)
    rows = []
    for p in pairs:
        s = samples[p.name]
        rates = [gib / w for w in s.wall]
        ratio = (f"{med(rates) / med([gib / w for w in samples[base].wall]):.3f}"
                 if base and rates else "—")
        xcpu = f"{med([c / gib for c in s.x_cpu]):.3f}" if s.x_cpu else "—"
        shown = " → ".join(code(show_across(argv, ctx.accel)) for argv in p.sender + [p.receiver])
        rows.append([p.name, shown, fmt_spread(rates), ratio, xcpu, s.status()])
    text = (f"Loopback, no proxy: `dd if=/dev/zero bs=1M count={count} | SENDER`, "
            f"`RECEIVER > /dev/null`, {gib:g} GiB per run, {ctx.rounds} rounds, rotating "
            f"order, in a network namespace of its own. × {base or 'before'}: GiB/s ratio "
            f"(goal: ≥ 0.97; on a shared machine, trust only a difference larger than both "
            f"spreads). CPU: sender and receiver together, per GiB."
            + ("" if base else " No other build was given: add one with "
               "`--variants accel=accel,before=/path/to/accel`.")
            + "\n\n" + md_table(["X", "sender → receiver", "GiB/s median [min–max]",
                                 f"× {base or 'before'}", "X CPU s/GiB", "status"], rows) + "\n")
    if notes:
        text += "\n" + "\n".join(f"- {n}" for n in notes) + "\n"
    return text
