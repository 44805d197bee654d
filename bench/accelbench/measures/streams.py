"""Several connections for one stream (issue 36; needs root and openssh-server): a stream
from one network namespace to another over (a) a per-flow cap — a veth whose sending side has
an htb root of 200 Mbit/s with 256 classes of 50 Mbit/s, each TCP flow put into one by a u32
hash on bits 1 to 8 of its source port (cls_flow and sch_fq are not in this kernel; Linux
picks even ports for connect(), so bit 0 says nothing); (b) the delay line at 80 ms round
trip, 1 Gbit/s, 0.5 % of the packets dropped at random in the line (each way, MTU 1500: the
Mathis bound holds one CUBIC flow to a few Mbit/s), once with CUBIC for every connection
(the route's `congctl` in both namespaces, and accel `--congestion cubic`) and once with BBR
(skipped, saying why, where the kernel does not offer it); (c) a plain veth pair, unlimited:
the CPUs are the limit, CPU s per GiB of both ends.
Rows: accel `--streams` 1, 2, 4, 8 (encrypted); mbuffer's plain TCP; ssh (aes128-gcm, its
fastest cipher here) into an sshd of the benchmark's own, started for each run (so that its
session's CPU is counted). MiB/s over the whole run (connections' set-up included), median
[min–max] over interleaved rounds; "× N=1": the row's rate over accel N=1's in the same round.
The goals of issue 36 follow each table. Sizes: a few seconds per run (--quick: less).
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass, field

from ..context import GIB, MIB, Context, NotMeasured, note
from ..markdown import code, md_table
from ..netlab import (
    LAB_TCP_WMEM, WAN_RECEIVER, WAN_SENDER, DelayLine, Netns, SshLab, have_openssh, lab_section, sh,
    sshd_argv, veth,
)
from ..stats import Samples, fmt_spread, interleaved, med, per_round, verdict
from ..transfers import Pair, key_file, show_across, transfer

HEADING = "## Several streams"
CAPPED_HERE, CAPPED_FAR = "10.213.36.1", "10.213.36.2"
PLAIN_HERE, PLAIN_FAR = "10.213.37.1", "10.213.37.2"
STREAMS = (1, 2, 4, 8)
MBUFFER, SSH = "mbuffer", "ssh aes128-gcm"
PORT = 9360  # accel N listens on PORT + N, mbuffer on PORT; sshd on 22

# The per-flow cap: 2 ** HASH_BITS classes of FLOW_CAP under a parent of PARENT_CAP. 256
# classes leave few collisions among 8 flows (two flows in one class share its cap).
FLOW_CAP, PARENT_CAP, HASH_BITS = "50mbit", "200mbit", 8

# The lossy line.
LOSS, ONE_WAY_MS, LOSSY_MTU = 0.005, 40, 1500

# Issue 36's goals.
CAP_N4_OVER_N1 = 3.5
LOSSY_N8_OVER_N1 = 3.0
LOSSY_BEST_OVER_OTHERS = 3.0
PLAIN_N2_OF_N1 = 0.95


@dataclass
class Cell:
    """One link: its name, the far end's address, what it is, MiB per run (and --quick's), the
    congestion control asked of both namespaces and of accel (None: each keeps its default),
    and, when it cannot run, why not."""
    name: str
    host: str
    about: str
    mib: int
    quick_mib: int
    congestion: str | None = None
    skipped: str | None = None
    walls: dict[str, dict[int, float]] = field(default_factory=dict)
    cpus: dict[str, dict[int, float]] = field(default_factory=dict)


def cells(available: str) -> list[Cell]:
    """The four cells; `available` is the kernel's tcp_available_congestion_control."""
    no_bbr = None if "bbr" in available.split() else (
        f"the kernel offers no BBR (tcp_available_congestion_control: {available.strip()})")
    lossy = f"the delay line, {2 * ONE_WAY_MS} ms round trip, 1 Gbit/s, {LOSS:.1%} loss, MTU " \
            f"{LOSSY_MTU}"
    # (b) with CUBIC: 4 MiB was mostly slow start and handshakes (N=1 between 0.4 and 2.4
    # MiB/s, N=8's streams 0.5 MiB each); 8 MiB puts more of each run in the loss-bound
    # regime the goal is about, at ~30 s for one flow (Mathis: ~0.3 MiB/s).
    return [
        Cell("(a) per-flow cap", CAPPED_FAR,
             f"htb {PARENT_CAP} parent, a class of {FLOW_CAP} per flow", 32, 8),
        Cell("(b) lossy, CUBIC", WAN_RECEIVER, lossy, 8, 1, "cubic"),
        Cell("(b) lossy, BBR", WAN_RECEIVER, lossy, 16, 2, "bbr", no_bbr),
        Cell("(c) unlimited veth", PLAIN_FAR, "a plain veth pair, no cap", 512, 32),
    ]


# --------------------------------------------------------------------------------------------
# The pure parts (bench/tests/test_streams.py)


def accel_name(n: int) -> str:
    return f"accel --streams {n}"


ROW_NAMES = tuple(accel_name(n) for n in STREAMS) + (MBUFFER, SSH)


def ratios(walls: dict[str, dict[int, float]], row: str, base: str) -> list[float]:
    """Row's throughput over base's, round by round (the same bytes each: base's seconds
    over row's)."""
    return per_round(walls.get(row, {}), walls.get(base, {}), lambda x, b: b / x)


def best_accel(walls: dict[str, dict[int, float]]) -> str | None:
    """The accel row with the lowest median wall, or None if none has figures."""
    have = [accel_name(n) for n in STREAMS if walls.get(accel_name(n))]
    return min(have, key=lambda r: med(list(walls[r].values())), default=None)


def goal_line(text: str, xs: list[float], holds) -> str:
    return f"- {text}: " + (f"{fmt_spread(xs)} × — " if xs else "") + verdict(xs, holds)


def goals(cell: Cell) -> list[str]:
    """Issue 36's goals for `cell`, each with its same-round ratios and verdict."""
    w = cell.walls
    one = accel_name(1)
    if cell.name.startswith("(a)"):
        return [goal_line(f"N=4 ≥ {CAP_N4_OVER_N1} × N=1", ratios(w, accel_name(4), one),
                          lambda x: x >= CAP_N4_OVER_N1)]
    if cell.name.startswith("(b)") and cell.congestion == "cubic":
        out = [goal_line(f"N=8 ≥ {LOSSY_N8_OVER_N1} × N=1", ratios(w, accel_name(8), one),
                         lambda x: x >= LOSSY_N8_OVER_N1)]
        best = best_accel(w)
        for other in (MBUFFER, SSH):
            xs = ratios(w, best, other) if best else []
            out.append(goal_line(f"accel's best ({best or 'none'}) ≥ {LOSSY_BEST_OVER_OTHERS} "
                                 f"× {other}", xs, lambda x: x >= LOSSY_BEST_OVER_OTHERS))
        return out
    if cell.name.startswith("(c)"):
        return [goal_line(f"N=2 not slower than N=1 by more than "
                          f"{1 - PLAIN_N2_OF_N1:.0%}", ratios(w, accel_name(2), one),
                          lambda x: x >= PLAIN_N2_OF_N1)]
    return ["- no goal of its own (BBR against CUBIC: compare the tables)"]


def htb_batch(dev: str, parent: str = PARENT_CAP, cap: str = FLOW_CAP,
              bits: int = HASH_BITS) -> str:
    """`tc -batch` lines for the per-flow cap on `dev`: htb root 1:, parent class 1:1 at
    `parent`, 2**bits leaf classes (1:100 up) capped at `cap`, a u32 hash table 2: of as
    many buckets, and a filter hashing TCP by bits 1..bits of the source port into it."""
    buckets = 1 << bits
    lines = [f"qdisc add dev {dev} root handle 1: htb default 99",
             f"class add dev {dev} parent 1: classid 1:1 htb rate {parent} ceil {parent}",
             f"class add dev {dev} parent 1:1 classid 1:99 htb rate 1mbit ceil {parent}",
             f"filter add dev {dev} parent 1: prio 1 handle 2: protocol ip u32 divisor "
             f"{buckets}"]
    for k in range(buckets):
        cls = f"1:{0x100 + k:x}"
        # rate: each class's guaranteed share (the sum stays under the parent); ceil: the cap.
        # quantum: a GSO packet of the veth (64 KiB) per turn.
        lines.append(f"class add dev {dev} parent 1:1 classid {cls} htb rate 500kbit "
                     f"ceil {cap} quantum 65536")
        lines.append(f"filter add dev {dev} parent 1: prio 1 protocol ip u32 ht 2:{k:x}: "
                     f"match u8 0 0 flowid {cls}")
    mask = ((buckets - 1) << 1) << 16  # the source port is the high half of the word at 20
    lines.append(f"filter add dev {dev} parent 1: prio 1 protocol ip u32 ht 800:: "
                 f"match ip protocol 6 0xff hashkey mask 0x{mask:08x} at 20 link 2:")
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------------------------
# The rows


def pairs(cell: Cell, accel: str, key: str, lab: SshLab) -> list[Pair]:
    host = cell.host
    cc = ["--congestion", cell.congestion] if cell.congestion else []
    out = []
    for n in STREAMS:
        port = PORT + n
        out.append(Pair(accel_name(n),
                        [accel, "--from", f"{host}:{port}", "--key-file", key, "-q",
                         "-o", "/dev/null"] + cc,
                        [[accel, "--to", f"{host}:{port}", "--key-file", key, "-q",
                          "--streams", str(n)] + cc], port))
    out.append(Pair(MBUFFER, ["mbuffer", "-q", "-m", "32M", "-I", str(PORT), "-o", "/dev/null"],
                    [["mbuffer", "-q", "-m", "32M", "-O", f"{host}:{PORT}"]], PORT))
    out.append(Pair(SSH, sshd_argv(lab.sshd_config, 22),
                    [lab.ssh + ["-c", "aes128-gcm@openssh.com", host, "cat > /dev/null"]],
                    22, daemon=True))
    return out


# --------------------------------------------------------------------------------------------
# The measure


def run(ctx: Context) -> str:
    if not have_openssh():
        raise NotMeasured(f"{HEADING}\n\nSkipped: needs openssh-server (ssh, sshd, ssh-keygen).\n")
    if not shutil.which("mbuffer"):
        raise NotMeasured(f"{HEADING}\n\nSkipped: needs mbuffer.\n")
    return lab_section(HEADING, body, ctx)


def body(ctx: Context) -> str:
    accel, key = ctx.accel, key_file(ctx.accel)
    with open("/proc/sys/net/ipv4/tcp_available_congestion_control") as f:
        available = f.read()
    with open("/proc/sys/net/ipv4/tcp_congestion_control") as f:
        default = f.read().strip()
    table = cells(available)
    lab = SshLab([c.host for c in table])
    text = ""
    with Netns("sa") as a, Netns("sb") as b:
        capped, _ = veth(a, b, CAPPED_HERE, CAPPED_FAR)
        veth(a, b, PLAIN_HERE, PLAIN_FAR)
        for ns in (a, b):  # namespaced: the machine's own settings are left alone
            sh(ns.argv(["sysctl", "-q", "-w", f"net.ipv4.tcp_wmem={LAB_TCP_WMEM}"]))
        r = subprocess.run(["tc", "-n", a.name, "-batch", "-"], input=htb_batch(capped),
                           capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError(f"the per-flow cap: tc -batch: {r.stderr.strip()[-300:]}")
        for cell in table:
            if cell.skipped:
                text += f"### {cell.name}\n\nSkipped: {cell.skipped}.\n\n"
                continue
            if cell.host == WAN_RECEIVER:
                with DelayLine(a, b, one_way_ms=ONE_WAY_MS, loss=LOSS) as line:
                    # The line's own MTU (65000) would make 0.5 % loss per 64 KiB packet:
                    # per 1500-byte packet is what a real path loses.
                    a.ip("link", "set", line.dev_a, "mtu", str(LOSSY_MTU))
                    b.ip("link", "set", line.dev_b, "mtu", str(LOSSY_MTU))
                    for ns, dev, me, peer in ((a, line.dev_a, WAN_SENDER, WAN_RECEIVER),
                                              (b, line.dev_b, WAN_RECEIVER, WAN_SENDER)):
                        congestion_route(ns, dev, me, peer, cell.congestion)
                    text += measure_cell(ctx, cell, pairs(cell, accel, key, lab), a, b)
            else:
                text += measure_cell(ctx, cell, pairs(cell, accel, key, lab), a, b)
    return (f"`head -c SIZE /dev/zero | X` in one namespace into the other (to /dev/null). "
            f"X: accel `--to … --streams N` into `accel --from … -o /dev/null` (encrypted); "
            f"`mbuffer -O` into `mbuffer -I` (plain TCP); `ssh -c aes128-gcm HOST 'cat > "
            f"/dev/null'` into an sshd of the benchmark's own started in the far namespace "
            f"for each run. Cells: (a) a per-flow cap: htb on the sender's veth, a "
            f"{PARENT_CAP} parent and {1 << HASH_BITS} classes of {FLOW_CAP}, each TCP flow "
            f"hashed into one by bits 1–{HASH_BITS} of its source port (two flows may share "
            f"a class); (b) the delay line, {2 * ONE_WAY_MS} ms round trip, tbf 1 Gbit/s each "
            f"way, {LOSS:.1%} of the packets dropped at random (each way), MTU {LOSSY_MTU}, "
            f"the cell's congestion control for every connection, set on the route to the "
            f"far end in both namespaces (`ip route … congctl`: a namespace may not make "
            f"CUBIC its default here) and given to accel as `--congestion` (the line is a "
            f"Python process: with BBR it, not the line rate, may be the limit); (c) a plain "
            f"veth pair, unlimited. "
            f"Outside (b), each keeps its own congestion control: accel's default (BBR where "
            f"offered), the others the machine's default, `{default}`. "
            f"{ctx.rounds} interleaved rounds. MiB/s: SIZE over the whole run (set-up "
            f"included), median [min–max]; × N=1: the row's rate over accel N=1's in the same "
            f"round (the machine is shared: same-round ratios are what count); CPU s/GiB: "
            f"user+sys of both ends (the sshd's session included). Both namespaces' "
            f"net.ipv4.tcp_wmem is `{LAB_TCP_WMEM}`. Both ends share this machine's CPUs.\n\n"
            + text)


def congestion_route(ns: Netns, dev: str, me: str, peer: str, algorithm: str) -> None:
    """Every TCP connection from `ns` to `peer` gets `algorithm`, whoever opens it (mbuffer
    and ssh cannot ask): the route's `congctl`. The namespace's default
    (net.ipv4.tcp_congestion_control) will not do: a namespace other than the first may only
    make an algorithm of tcp_allowed_congestion_control its default (EPERM otherwise), and
    widening that list is the machine's setting, not the lab's."""
    ns.ip("route", "replace", peer, "dev", dev, "src", me, "congctl", algorithm)


def measure_cell(ctx: Context, cell: Cell, cell_pairs: list[Pair], a: Netns, b: Netns) -> str:
    mib = cell.quick_mib if ctx.quick else cell.mib
    producer = ["head", "-c", str(mib * MIB), "/dev/zero"]
    samples = {p.name: Samples() for p in cell_pairs}
    cell.walls = {p.name: {} for p in cell_pairs}
    cell.cpus = {p.name: {} for p in cell_pairs}
    for r, p, s in interleaved(cell_pairs, ctx.rounds, samples):
        timed = Pair(p.name, p.receiver, [producer] + p.sender, p.port, p.daemon)
        wall, cpu, error = transfer(timed, b, a, ctx.timeout)
        s.add_transfer(wall or 0.0, cpu or 0.0, error)
        if not error:
            cell.walls[p.name][r], cell.cpus[p.name][r] = wall, cpu
        left = a.kill_all() + b.kill_all()
        if left:
            note(f"streams: left running after {p.name}, killed: {left[0]}")
        note(f"streams {cell.name} round {r + 1}/{ctx.rounds}: {p.name:<20} "
             + (f"{mib / wall:8.1f} MiB/s" if not error else f"FAILED: {error}"))
    one = accel_name(1)
    rows = []
    for p in cell_pairs:
        w = cell.walls[p.name]
        sender = (f"ssh -F lab -c aes128-gcm@openssh.com {cell.host} 'cat > /dev/null'"
                  if p.name == SSH else show_across(p.sender[-1], ctx.accel))
        rows.append([p.name, code(sender),
                     fmt_spread([mib / x for x in w.values()], 1),
                     fmt_spread(ratios(cell.walls, p.name, one)),
                     fmt_spread([c / (mib * MIB / GIB) for c in cell.cpus[p.name].values()]),
                     samples[p.name].status()])
    return (f"### {cell.name}: {cell.about}; {mib} MiB per run\n\n"
            + md_table(["X", "sender", "MiB/s median [min–max]", "× N=1", "CPU s/GiB",
                        "status"], rows)
            + "\n\nGoals (issue 36):\n\n" + "\n".join(goals(cell)) + "\n\n")
