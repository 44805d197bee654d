"""Between hosts, over an emulated WAN (needs root): two network namespaces joined by
a packet-level delay line of the benchmark's own (tun devices; no netem here),
40 ms round trip, 1 Gbit/s by tbf each way, and the seed pipeline split across
it: ``bzip2 -dc corpus.tar.bz2 | SENDER`` there, ``RECEIVER | gzip -6`` here,
for accel at both ends, mbuffer at both ends, and a bare nc.  ratio = median
wall / the slower stage alone (1.000 = optimum).  Another accel binary in
--variants (``before=/path/to/accel``) adds a row for that build at both ends.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections import deque

from ..corpus import build_corpus, warm_cache
from ..runner import (
    BENCH, MIB, Context, Samples, code, fmt_spread, interleaved, md_table, med, note,
    run_pipeline,
)
from .net import Netns, Pair, key_file, other_builds, section, sh, show, transfer

# Addresses that exist only inside the namespaces made here.
WAN_SENDER, WAN_RECEIVER = "10.213.9.1", "10.213.9.2"
WAN_RATE = "1gbit"
WAN_ONE_WAY_MS = 20  # each direction: 40 ms round trip


# --------------------------------------------------------------------------------------------
# The WAN's delay line


def delay_line_main(ns_a: str, ns_b: str, addr_a: str, addr_b: str, delay_ms: float,
                    rate: str) -> None:
    """A packet-level delay line (these kernels have no netem): a tun device in each
    namespace, point to point, `rate` by a tbf on each, and every packet handed from one to
    the other `delay_ms` after it left. Runs in the root namespace until killed; says
    `ready` on stdout once the link is up."""
    import fcntl
    import select
    import struct

    tunsetiff, iff_tun, iff_no_pi = 0x400454CA, 0x0001, 0x1000

    def tun(name: str) -> int:
        fd = os.open("/dev/net/tun", os.O_RDWR)
        fcntl.ioctl(fd, tunsetiff, struct.pack("16sH", name.encode(), iff_tun | iff_no_pi))
        return fd

    tag = str(os.getpid())
    ends = [(ns_a, f"ta{tag}", addr_a, addr_b), (ns_b, f"tb{tag}", addr_b, addr_a)]
    fds = [tun(dev) for _, dev, _, _ in ends]
    for ns, dev, me, peer in ends:
        sh(["ip", "link", "set", dev, "netns", ns])
        # A large MTU keeps the packet rate (and this loop's work) low at 1 Gbit/s.
        for args in (["addr", "add", me, "peer", peer, "dev", dev],
                     ["link", "set", dev, "mtu", "65000", "up"]):
            sh(["ip", "-n", ns, *args])
        sh(["tc", "-n", ns, "qdisc", "add", "dev", dev, "root", "tbf", "rate", rate,
            "burst", "1mb", "latency", "200ms"])
    print("ready", flush=True)
    delay = delay_ms / 1000
    due: dict[int, deque] = {fd: deque() for fd in fds}  # packets to write to that fd
    other = {fds[0]: fds[1], fds[1]: fds[0]}
    while True:
        now = time.monotonic()
        wait = None
        for fd, queue in due.items():
            while queue and queue[0][0] <= now:
                try:
                    os.write(fd, queue.popleft()[1])
                except OSError:
                    pass  # as a real link would drop it
            if queue:
                wait = min(wait if wait is not None else 1.0, queue[0][0] - now)
        readable, _, _ = select.select(fds, [], [], wait)
        now = time.monotonic()
        for fd in readable:
            due[other[fd]].append((now + delay, os.read(fd, 65536)))


def start_delay_line(a: Netns, b: Netns, rate: str = WAN_RATE) -> subprocess.Popen:
    code_ = (f"import sys; sys.path.insert(0, {str(BENCH)!r}); "
             f"from accelbench.measures.wan import delay_line_main; "
             f"delay_line_main({a.name!r}, {b.name!r}, {WAN_SENDER!r}, {WAN_RECEIVER!r}, "
             f"{WAN_ONE_WAY_MS}, {rate!r})")
    p = subprocess.Popen([sys.executable, "-c", code_], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    if p.stdout.readline().strip() != "ready":
        p.kill()
        raise RuntimeError(f"the delay line did not start: {p.stderr.read().strip()}")
    return p


# --------------------------------------------------------------------------------------------
# The measure


def run(ctx: Context) -> str:
    return section("## Between hosts: an emulated WAN", wan, ctx)


def wan(ctx: Context) -> str:
    tar_path, bz_path, meta = build_corpus(ctx.corpus_bytes)
    warm_cache(tar_path, bz_path)
    accel, key = ctx.accel, key_file(ctx.accel)
    here = f"{WAN_RECEIVER}:9201"
    pairs = [
        Pair("accel", [accel, "--from", here, "--key-file", key],
             [[accel, "--to", here, "--key-file", key]], 9201),
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
    with Netns("a") as a, Netns("b") as b:
        line = start_delay_line(a, b)
        try:
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
        finally:
            line.kill()
            line.wait()
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
            cmd = " … ".join(code(show(argv, accel)) for argv in p.sender + [p.receiver])
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
