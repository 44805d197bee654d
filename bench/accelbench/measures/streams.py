"""Several connections for one stream (issue 36; needs root and openssh-server): a stream
from one network namespace to another over (a) a per-flow cap — a veth whose sending side has
an htb root of 200 Mbit/s with 256 classes of 50 Mbit/s, each TCP flow put into one by a u32
hash on bits 1 to 8 of its source port (cls_flow and sch_fq are not in this kernel; Linux
picks even ports for connect(), so bit 0 says nothing); (b) the delay line at 80 ms round
trip, 1 Gbit/s, 0.5 % of the packets dropped at random in the line (each way, MTU 1500: the
Mathis bound holds one CUBIC flow to a few Mbit/s), once with CUBIC for every connection
(the route's `congctl` in both namespaces, and accel `--congestion cubic`), plus one row of
accel as it comes (`--streams 1`, no `--congestion`: it asks for BBR itself, and its route
lets it), and once with BBR (skipped, saying why, where the kernel does not offer it); (c) a
plain veth pair, unlimited: the CPUs are the limit, CPU s per GiB of both ends.
Rows: accel `--streams` 1, 2, 4, 8 (encrypted); mbuffer's plain TCP; ssh (aes128-gcm, its
fastest cipher here) into an sshd of the benchmark's own, started for each run (so that its
session's CPU is counted). MiB/s over the whole run (connections' set-up included), median
[min–max] over interleaved rounds; "× N=1": the row's rate over accel N=1's in the same round.
In (b), the sender's TCP congestion control, as the kernel reads it back on each connection
(accel --debug, one short run per row before the timed ones). The goals of issue 36 follow
each table, and in (b) with CUBIC what accel's default gives against the same peers. Sizes:
a few seconds per run, but about a minute for one CUBIC flow on the lossy line (--quick: less).
--streams-cells chooses the cells to run (a, b-cubic, b-bbr, c; `c` alone takes a few minutes
and writes no results file).
"""

from __future__ import annotations

import re
import shutil
import subprocess
from contextlib import contextmanager
from dataclasses import dataclass, field

from ..context import GIB, MIB, Context, NotMeasured, note
from ..markdown import code, md_table
from ..netlab import (
    LAB_TCP_WMEM, WAN_RECEIVER, WAN_SENDER, DelayLine, Netns, SshLab, have_openssh, lab_section, sh,
    sshd_argv, veth,
)
from ..stats import Samples, fmt_spread, interleaved, med, per_round, verdict
from ..transfers import PLAIN_WIRE, SENDER_ERR, Pair, key_file, show_across, transfer

HEADING = "## Several streams"
CAPPED_HERE, CAPPED_FAR = "10.213.36.1", "10.213.36.2"
PLAIN_HERE, PLAIN_FAR = "10.213.37.1", "10.213.37.2"
STREAMS = (1, 2, 4, 8)
MBUFFER, SSH = "mbuffer", "ssh aes128-gcm"
DEFAULT_ROW = "accel --streams 1, its default congestion control"
ASKS_NOTHING = "accel --congestion system"  # a probe, not a row (probe_congestion)
PORT = 9360  # accel N listens on PORT + N, mbuffer on PORT; sshd on 22
# The default row's port: its connections, and only they, take a route without `congctl`.
OWN_CHOICE_PORT = PORT + 10
OWN_CHOICE_TABLE = 36
# A probe's port: accel `--congestion system`, which asks for nothing, as mbuffer and ssh.
ASKS_NOTHING_PORT = PORT + 20

# The per-flow cap: 2 ** HASH_BITS classes of FLOW_CAP under a parent of PARENT_CAP. 256
# classes leave few collisions among 8 flows (two flows in one class share its cap).
FLOW_CAP, PARENT_CAP, HASH_BITS = "50mbit", "200mbit", 8

# The lossy line.
LOSS, ONE_WAY_MS, LOSSY_MTU = 0.005, 40, 1500
# While the CUBIC cell runs, both namespaces' default congestion control: what a socket gets
# that neither asked for an algorithm nor has a route choosing one. Not the machine's (BBR
# here): then the default row would show BBR even if accel had not asked for it. Reno: a
# namespace other than the first may make its default only an algorithm that
# tcp_allowed_congestion_control lists, and reno is always allowed (CUBIC is not, here).
UNASKED = "reno"
# The probe before each lossy cell's timed runs.
PROBE_MIB = 1

# Issue 36's goals.
CAP_N4_OVER_N1 = 3.5
LOSSY_N8_OVER_N1 = 3.0
LOSSY_BEST_OVER_OTHERS = 3.0
PLAIN_N2_OF_N1 = 0.95


@dataclass
class Cell:
    """One link: its name, the far end's address, what it is, MiB per run (and --quick's), the
    congestion control asked of both namespaces and of accel (None: each keeps its default),
    whether it has the row of accel as it comes (DEFAULT_ROW), and, when it cannot run, why
    not. Filled by the run: each row's walls and CPU by round, and (where `congestion` is set)
    the congestion control its sender's connections got, as the kernel read it back."""
    name: str
    host: str
    about: str
    mib: int
    quick_mib: int
    congestion: str | None = None
    skipped: str | None = None
    accel_default: bool = False
    walls: dict[str, dict[int, float]] = field(default_factory=dict)
    cpus: dict[str, dict[int, float]] = field(default_factory=dict)
    got: dict[str, str] = field(default_factory=dict)


def cells(available: str) -> list[Cell]:
    """The four cells; `available` is the kernel's tcp_available_congestion_control."""
    no_bbr = None if "bbr" in available.split() else (
        f"the kernel offers no BBR (tcp_available_congestion_control: {available.strip()})")
    lossy = f"the delay line, {2 * ONE_WAY_MS} ms round trip, 1 Gbit/s, {LOSS:.1%} loss, MTU " \
            f"{LOSSY_MTU}"
    # (b) with CUBIC: 4 MiB was mostly slow start and handshakes (N=1 between 0.4 and 2.4
    # MiB/s, N=8's streams 0.5 MiB each); at 8 MiB one early loss still decided a run (N=2
    # 0.8 to 3.9 MiB/s over three rounds, accel's best against mbuffer 0.74 to 7.93 ×). 16
    # MiB is ~11,600 packets, ~58 lost ones per run, ~55 s for one flow at the Mathis rate
    # (~0.3 MiB/s: 1448 B / 80 ms × 1.22 / √0.005), so that one flow's three rows (accel
    # N=1, mbuffer, ssh) take ~3 min a round, the cell ~3.5 min, and five rounds of the
    # whole measure ~20 min.
    return [
        Cell("(a) per-flow cap", CAPPED_FAR,
             f"htb {PARENT_CAP} parent, a class of {FLOW_CAP} per flow", 32, 8),
        Cell("(b) lossy, CUBIC", WAN_RECEIVER, lossy, 16, 1, "cubic", accel_default=True),
        Cell("(b) lossy, BBR", WAN_RECEIVER, lossy, 16, 2, "bbr", no_bbr),
        Cell("(c) unlimited veth", PLAIN_FAR, "a plain veth pair, no cap", 512, 32),
    ]


# --------------------------------------------------------------------------------------------
# The pure parts (bench/tests/test_streams.py)


def cell_key(name: str) -> str:
    """A cell's key for --streams-cells: its letter, and for (b) its congestion control
    ("(b) lossy, CUBIC" -> "b-cubic")."""
    letter = name[1]
    if letter == "b":
        return f"b-{name.rsplit(' ', 1)[-1].lower()}"
    return letter


CELL_KEYS = ("a", "b-cubic", "b-bbr", "c")


def choose(table: list[Cell], keys: tuple[str, ...] | None) -> list[Cell]:
    """`table` with the cells not among `keys` (None: every one) skipped, saying so."""
    if keys is not None:
        for c in table:
            if cell_key(c.name) not in keys and not c.skipped:
                c.skipped = f"not chosen (--streams-cells {','.join(keys)})"
    return table


def accel_name(n: int) -> str:
    return f"accel --streams {n}"


ROW_NAMES = tuple(accel_name(n) for n in STREAMS) + (MBUFFER, SSH)


def ratios(walls: dict[str, dict[int, float]], row: str, base: str) -> list[float]:
    """Row's throughput over base's, round by round (the same bytes each: base's seconds
    over row's)."""
    return per_round(walls.get(row, {}), walls.get(base, {}), lambda x, b: b / x)


def best_accel(walls: dict[str, dict[int, float]]) -> str | None:
    """The accel `--streams N` row with the lowest median wall, or None if none has figures.
    Never DEFAULT_ROW: in the CUBIC cell it runs BBR, and the goal is CUBIC everywhere."""
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
        if cell.accel_default:
            got = cell.got.get(DEFAULT_ROW, "its congestion control not read back")
            out.append("\nNot issue 36's goal (that is CUBIC everywhere, above), but what a user "
                       f"gets without tuning: {DEFAULT_ROW} ({got}) against the peers under "
                       f"{cell.congestion}:\n")
            for other in (MBUFFER, SSH):
                out.append(goal_line(f"{DEFAULT_ROW} ≥ {LOSSY_BEST_OVER_OTHERS} × {other}",
                                     ratios(w, DEFAULT_ROW, other),
                                     lambda x: x >= LOSSY_BEST_OVER_OTHERS))
        return out
    if cell.name.startswith("(c)"):
        return [goal_line(f"N=2 not slower than N=1 by more than "
                          f"{1 - PLAIN_N2_OF_N1:.0%}", ratios(w, accel_name(2), one),
                          lambda x: x >= PLAIN_N2_OF_N1)]
    return ["- no goal of its own (BBR against CUBIC: compare the tables)"]


def connections_got(sender_stderr: str) -> str:
    """The congestion control(s) a sender's connections got, from its --debug lines (`...;
    the connection's TCP congestion control: NAME`, as the kernel reads it back), sorted and
    each once; "not said" where no line says."""
    got = sorted(set(re.findall(r"the connection's TCP congestion control: (\S+)",
                                sender_stderr)))
    return ", ".join(got) if got else "not said"


def own_choice_commands(dev: str, me: str, peer: str, sending: bool,
                        port: int = OWN_CHOICE_PORT,
                        table: int = OWN_CHOICE_TABLE) -> list[list[str]]:
    """`ip` arguments that give the connections of `port` (and only them) a route to `peer`
    without `congctl`, so that the algorithm accel asks for stands: a route's congctl
    replaces a socket's own choice made before connect() (tcp_connect_init ->
    tcp_ca_dst_init) and an accepted connection's (tcp_ca_openreq_child). A route in
    `table`, and a rule sending to it the sender's packets to `port` (`sending`) or the
    receiver's from it."""
    rule = (["to", peer, "ipproto", "tcp", "dport", str(port)] if sending
            else ["from", me, "ipproto", "tcp", "sport", str(port)])
    return [["route", "replace", peer, "dev", dev, "src", me, "table", str(table)],
            ["rule", "add", *rule, "lookup", str(table), "priority", "100"]]


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
        out.append(accel_pair(accel_name(n), accel, key, host, PORT + n, n, cc))
    if cell.accel_default:  # as it comes: no --congestion at either end
        out.append(accel_pair(DEFAULT_ROW, accel, key, host, OWN_CHOICE_PORT, 1, []))
    out.append(Pair(MBUFFER, ["mbuffer", "-q", "-m", "32M", "-I", str(PORT), "-o", "/dev/null"],
                    [["mbuffer", "-q", "-m", "32M", "-O", f"{host}:{PORT}"]], PORT))
    out.append(Pair(SSH, sshd_argv(lab.sshd_config, 22),
                    [lab.ssh + ["-c", "aes128-gcm@openssh.com", host, "cat > /dev/null"]],
                    22, daemon=True))
    return out


def accel_pair(name: str, accel: str, key: str, host: str, port: int, n: int,
               cc: list[str]) -> Pair:
    """accel --to host:port --streams n into accel --from, both with the options `cc`."""
    return Pair(name,
                [accel, "--from", f"{host}:{port}", "--key-file", key, "-q", "-o", "/dev/null"]
                + cc,
                [[accel, "--to", f"{host}:{port}", "--key-file", key, "-q", *PLAIN_WIRE,
                  "--streams", str(n)] + cc], port)


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
    table = choose(cells(available), ctx.streams_cells)
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
                    sides = ((a, line.dev_a, WAN_SENDER, WAN_RECEIVER, True),
                             (b, line.dev_b, WAN_RECEIVER, WAN_SENDER, False))
                    for ns, dev, me, peer, _ in sides:
                        congestion_route(ns, dev, me, peer, cell.congestion)
                    with own_choice(sides, cell.accel_default):
                        cell_pairs = pairs(cell, accel, key, lab)
                        probe_congestion(ctx, cell, cell_pairs, a, b)
                        text += measure_cell(ctx, cell, cell_pairs, a, b)
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
            f"CUBIC its default here; a route's congctl also replaces what a program asked "
            f"for before it connected, so mbuffer, ssh and accel alike get it) and given to "
            f"accel as `--congestion` (the line is a Python process: with BBR it, not the "
            f"line rate, may be the limit); with CUBIC, one row more, `{DEFAULT_ROW}`: accel "
            f"as it comes, no `--congestion` at either end, asking for BBR itself as it does "
            f"wherever the kernel lets a program choose it (root, or BBR in "
            f"net.ipv4.tcp_allowed_congestion_control; a user on a stock CUBIC system, whose "
            f"list is `reno cubic`, keeps CUBIC); its connections alone (port "
            f"{OWN_CHOICE_PORT}, by an `ip rule` on the port) take a route without congctl, "
            f"and while the cell runs both namespaces' default is {UNASKED}, so that only "
            f"accel's own asking can give it BBR. \"sender's congestion control\": what the "
            f"kernel read back on each connection of the sender (accel `--debug`, one "
            f"{PROBE_MIB} MiB run per row before the timed rounds); mbuffer and ssh ask for "
            f"none and get what accel `--congestion system`, asking for none either, got. "
            f"\"accel's best\" in the goals is the `--streams N` row under the cell's "
            f"algorithm with the best median, never the default row, which follows on its "
            f"own; (c) a plain veth pair, unlimited. "
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


@contextmanager
def own_choice(sides, wanted: bool):
    """While inside, where `wanted`: the default row's connections take a route without
    `congctl` (own_choice_commands), and every namespace's default congestion control is
    UNASKED; afterwards the rules go and each namespace's default is its own again (the
    routes go with the line). `sides`: (namespace, device, own address, peer, sending)."""
    if not wanted:
        yield
        return
    key = "net.ipv4.tcp_congestion_control"
    before = {}
    added: list[tuple[Netns, list[str]]] = []
    try:
        for ns, dev, me, peer, sending in sides:
            before[ns.name] = subprocess.run(ns.argv(["sysctl", "-n", key]), check=True,
                                             capture_output=True, text=True).stdout.strip()
            sh(ns.argv(["sysctl", "-q", "-w", f"{key}={UNASKED}"]))
            for args in own_choice_commands(dev, me, peer, sending):
                ns.ip(*args)
                added.append((ns, args))
        yield
    finally:
        for ns, args in reversed(added):
            if args[0] == "rule":
                ns.ip("rule", "del", *args[2:])
        for ns, _, _, _, _ in sides:
            if ns.name in before:
                sh(ns.argv(["sysctl", "-q", "-w", f"{key}={before[ns.name]}"]))


def probe_congestion(ctx: Context, cell: Cell, cell_pairs: list[Pair], a: Netns,
                     b: Netns) -> None:
    """Where the cell sets a congestion control: PROBE_MIB through each accel row with the
    sender's --debug instead of -q, and through accel `--congestion system` (a socket that
    asks for nothing, as mbuffer's and ssh's); `cell.got` takes what each sender's
    connections got, as the kernel read it back (mbuffer and ssh: the latter's)."""
    if not cell.congestion:
        return
    nothing = accel_pair(ASKS_NOTHING, ctx.accel, key_file(ctx.accel), cell.host,
                         ASKS_NOTHING_PORT, 1, ["--congestion", "system"])
    producer = ["head", "-c", str(PROBE_MIB * MIB), "/dev/zero"]
    for p in [q for q in cell_pairs if q.name.startswith("accel")] + [nothing]:
        sender = ["--debug" if w == "-q" else w for w in p.sender[-1]]
        _, _, error = transfer(Pair(p.name, p.receiver, [producer, sender], p.port), b, a,
                               ctx.timeout)
        cell.got[p.name] = (f"not read back: {error[:120]}" if error
                            else connections_got(SENDER_ERR.read_text(errors="replace")))
        a.kill_all()
        b.kill_all()
        note(f"streams {cell.name}: {p.name}: the sender's connections got "
             f"{cell.got[p.name]}")
    for peer in (MBUFFER, SSH):
        cell.got[peer] = f"{cell.got[ASKS_NOTHING]} (asks for none)"


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
        got = [cell.got.get(p.name, "—")] if cell.congestion else []
        rows.append([p.name, code(sender), *got,
                     fmt_spread([mib / x for x in w.values()], 1),
                     fmt_spread(ratios(cell.walls, p.name, one)),
                     fmt_spread([c / (mib * MIB / GIB) for c in cell.cpus[p.name].values()]),
                     samples[p.name].status()])
    got_head = ["sender's congestion control (read back)"] if cell.congestion else []
    return (f"### {cell.name}: {cell.about}; {mib} MiB per run\n\n"
            + md_table(["X", "sender", *got_head, "MiB/s median [min–max]", "× N=1",
                        "CPU s/GiB", "status"], rows)
            + "\n\nGoals (issue 36):\n\n" + "\n".join(goals(cell)) + "\n\n")
