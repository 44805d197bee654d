"""Between hosts through ssh (needs root and openssh-server; issue 34): two namespaces, an
sshd of the benchmark's own in the far one (throwaway host and user keys, a known_hosts
of its own), joined by (a) a plain veth pair and (b) the delay line at 40 ms round trip
and 1 Gbit/s; ``dd if=/dev/zero bs=1M | X`` here, X delivering to FAR there, where FAR
is bench/accelbench/reader.py (it counts the bytes, as ``cat > /dev/null`` would drop
them, and notes when the first one came). X: ``ssh HOST FAR`` with ssh's default cipher
(chacha20-poly1305) and with aes128-gcm, ``mbuffer | ssh HOST 'mbuffer | FAR'``, and
accel starting its far end through ssh (``accel --to ssh://HOST -- FAR``), with the
data direct (``--via direct``) and through the ssh session (``--via ssh``); and, for
reference, TCP alone (``mbuffer -O`` into ``mbuffer -I | FAR``: no ssh, no cipher, what the
link carries for one flow). The accel rows run only when the accel under test
offers ``ssh://`` (its --help says so), and say why not otherwise. MiB/s over the
whole run (ssh's start included) and steady (the second half of the stream at FAR);
"× ssh" columns: the steady rate over the plain ssh row's in the same round, median
[min–max] over the rounds; "× line": over 1 Gbit/s on (b); first byte: from the
start of X to the first byte at FAR. The goals of issue 34 follow each table. 2 GiB
per run (--ssh-mib; --quick 64 MiB).
"""

from __future__ import annotations

import hashlib
import os
import shlex
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from ..context import BENCH, GIB, MIB, WORK, Context, NotMeasured, note
from ..markdown import code, md_table
from ..netlab import (
    LAB_TCP_WMEM, WAN_ONE_WAY_MS, WAN_RATE, WAN_RECEIVER, BytesBeside, DelayLine, Netns, SshLab, Sshd,
    have_openssh, lab_section, sh, veth,
)
from ..processes import RunResult, describe_exit, run_pipeline
from ..stats import Samples, fmt_spread, interleaved, med, per_round, verdict
from ..transfers import PLAIN_WIRE

HEADING = "## Between hosts through ssh"
READER = str(BENCH / "accelbench" / "reader.py")
VETH_HERE, VETH_FAR = "10.213.10.1", "10.213.10.2"
LINE_BITS = 1e9  # WAN_RATE, in bits per second
DEFAULT_MIB, QUICK_MIB = 2048, 64

# The rows, by name. SSH is the plain ssh every ratio is taken to, AES its fastest cipher here.
SSH, AES, MBUFFER = "ssh", "ssh aes128-gcm", "mbuffer | ssh | mbuffer"
DIRECT, THROUGH = "accel direct", "accel --via ssh"
TCP = "TCP alone"  # no ssh, no cipher: what the link carries for one flow (a reference)
TCP_PORT = 9501
ACCEL_ROWS = (DIRECT, THROUGH)

# What the accel under test must offer for its rows (issue 34's command line): `ssh://` peers,
# the remote accel named (the far namespace's PATH does not hold the build under test), the
# path forced either way, and the ssh command replaced (the lab's client config).
SSH_WORDS = ("ssh://", "--remote-accel", "--via", "--ssh-command")

# Issue 34's goals.
DIRECT_OVER_SSH = 2.5  # on (a), × the faster plain ssh row
OF_LINE = 0.9  # on (b)
FIRST_BYTE_SLACK_S = 0.150  # over ssh's own first byte
# "No slower": the median of the same-round ratios at least this. Rows held by the same limit
# differ by a percent or two here from round to round (ssh and ssh aes128-gcm on (b), both
# held by ssh's window: 0.97–1.04), so a stricter rule would judge the noise, not the row.
NO_SLOWER = 0.98

# The stages whose CPU is counted, each in a cgroup of its own (see `Roles`), and their
# columns: here, the local accel (or mbuffer), and the ssh client; there, sshd's session
# processes, the far accel (or mbuffer), FAR.
ROLES = ("here", "ssh", "sshd", "there", "FAR")
ROLE_HEADS = {"here": "accel/mbuffer here", "ssh": "ssh", "sshd": "sshd",
              "there": "accel/mbuffer there", "FAR": "FAR"}


@dataclass
class Link:
    """One way between the namespaces: the far end's address, and its line rate (bit/s) when
    it has one."""
    name: str
    host: str
    line_bits: float | None
    about: str


LINKS = (
    Link("(a) veth", VETH_FAR, None, "a plain veth pair (no delay, no cap)"),
    Link("(b) 40 ms, 1 Gbit/s", WAN_RECEIVER, LINE_BITS,
         f"the delay line ({2 * WAN_ONE_WAY_MS} ms round trip, tbf {WAN_RATE} each way)"),
)


@dataclass
class Row:
    """One X: the stages run here after the producer; `listener`, a shell command started
    in the far namespace before them, listening on TCP_PORT (for the row without ssh)."""
    name: str
    stages: list[list[str]]
    listener: str | None = None

    @property
    def is_accel(self) -> bool:
        return self.name in ACCEL_ROWS


@dataclass
class Runs:
    """One row's figures on one link, by round (so that ratios pair runs of the same round),
    in seconds: `wall`, the whole run of X; `steady`, the second half of the stream at FAR
    (the transport alone, past its start and whatever was buffered before FAR read);
    `first`, from X's start to FAR's first byte; `cpu`, each stage's CPU seconds (user +
    sys, by role: `ROLES`), when counted. `skipped` says why the row
    did not run at all; `left`, what its runs left running (killed)."""
    samples: Samples = field(default_factory=Samples)
    wall: dict[int, float] = field(default_factory=dict)
    steady: dict[int, float] = field(default_factory=dict)
    first: dict[int, float] = field(default_factory=dict)
    cpu: dict[int, dict[str, float]] = field(default_factory=dict)
    skipped: str | None = None
    left: list[str] = field(default_factory=list)
    wrong_path: list[str] = field(default_factory=list)

    def status(self) -> str:
        text = f"skipped: {self.skipped}" if self.skipped else self.samples.status()
        if self.wrong_path:
            text += f"; NOT THE PATH NAMED in {len(self.wrong_path)} run(s): {self.wrong_path[0]}"
        if self.left:
            text += f"; left running after {len(self.left)} run(s), killed: {self.left[0]}"
        return text.replace("|", "\\|")


# --------------------------------------------------------------------------------------------
# The pure parts (bench/tests/test_ssh.py)


def ssh_support(help_text: str) -> str | None:
    """None if an accel whose --help says `help_text` offers the ssh:// form this measure
    drives; else why not, in words for the table."""
    missing = [w for w in SSH_WORDS if w not in help_text]
    if not missing:
        return None
    return f"this accel's --help has no {', '.join(f'`{w}`' for w in missing)}"


STAMPS = ("first", "half", "all")


def read_stamps(text: str) -> tuple[float | None, ...]:
    """(first, half, all) from a reader's --stamps file; None for a line it did not write."""
    got: dict[str, float] = {}
    for line in text.splitlines():
        words = line.split()
        if len(words) == 2 and words[0] in STAMPS:
            try:
                got[words[0]] = float(words[1])
            except ValueError:
                pass
    return tuple(got.get(name) for name in STAMPS)


def speedups(seconds: dict[int, float], base_seconds: dict[int, float]) -> list[float]:
    """A row's throughput over the base row's, round by round: the same bytes each, so the
    base's seconds over the row's."""
    return per_round(seconds, base_seconds, lambda x, base: base / x)


def lags(seconds: dict[int, float], base_seconds: dict[int, float]) -> list[float]:
    """Seconds by which a row's figure exceeds the base row's, round by round."""
    return per_round(seconds, base_seconds, lambda x, base: x - base)


def busiest(cpu: dict[int, dict[str, float]]) -> dict[int, float]:
    """By round, the CPU seconds of the busiest stage: what a run takes when each stage has
    a core of its own (on hosts of their own, at full speed), as the house times a pipeline
    on these shared CPUs (wall / max(stage CPU))."""
    return {rnd: max(roles.values()) for rnd, roles in cpu.items() if roles}


def no_slower(xs: list[float]) -> str:
    """The verdict of a "no slower" goal on same-round ratios: by their median, ≥ NO_SLOWER."""
    return verdict(xs, lambda x: x >= NO_SLOWER)


def goals(link: Link, runs: dict[str, Runs], nbytes: int) -> list[str]:
    """Issue 34's goals that apply to `link`, each with its figures (median [min–max] over
    the rounds) and its verdict; "not measured" for a row that was skipped."""
    ssh, direct, through = runs[SSH], runs[DIRECT], runs[THROUGH]
    # The faster plain ssh row by its median: the stricter reference.
    fastest = min((n for n in (SSH, AES) if runs[n].steady),
                  key=lambda n: med(list(runs[n].steady.values())), default=SSH)
    slack_ms = FIRST_BYTE_SLACK_S * 1000
    out = []

    def goal(text: str, row: Runs, figures) -> None:
        if row.skipped:
            out.append(f"{text}: not measured (the row was skipped: see its status)")
            return
        out.append(f"{text}{figures()}" + (
            " — **not valid**: its data did not take the path its name says (see its status)"
            if row.wrong_path else ""))

    if link.line_bits is None:
        def vs_ssh() -> str:
            r = speedups(direct.steady, runs[fastest].steady)
            said = (f" (the faster plain row, {fastest}): {fmt_spread(r)} × — "
                    + verdict(r, lambda x: x >= DIRECT_OVER_SSH))
            # What one flow carries here with no cipher at all bounds any transport: a goal
            # above it is the link's to miss, not accel's.
            tcp = runs.get(TCP)
            ceiling = speedups(tcp.steady, runs[fastest].steady) if tcp and tcp.steady else []
            if ceiling and med(ceiling) < DIRECT_OVER_SSH:
                said += (f"; not reachable here: {TCP} (no cipher, one flow, both ends on the "
                         f"same CPUs) is {fmt_spread(ceiling)} × ssh")
            return said
        goal(f"accel direct ≥ {DIRECT_OVER_SSH} × plain ssh", direct, vs_ssh)
    else:
        def vs_line() -> str:
            r = [nbytes / 2 * 8 / s / link.line_bits for s in direct.steady.values()]
            return f": {fmt_spread(r)} — " + verdict(r, lambda x: x >= OF_LINE)
        goal(f"accel direct ≥ {OF_LINE} of the line rate ({link.line_bits / 1e9:g} Gbit/s)",
             direct, vs_line)

    def fallback() -> str:
        wall = speedups(through.steady, ssh.steady)
        said = " (with ssh's default cipher, which carries it)"
        own = speedups(busiest(through.cpu), busiest(ssh.cpu))
        if link.line_bits is None and own:
            # Both ends on this machine's 2 vCPUs: ssh and sshd alone take most of them, so
            # whatever accel spends beside them shows in the wall time; on two hosts it has
            # cores of its own. The CPU, not the link, is the limit here.
            return (f"{said}, on hosts of their own (the stream over the busiest stage's CPU, "
                    f"same round): {fmt_spread(own)} × — {no_slower(own)}; the steady rate "
                    f"on these shared CPUs: {fmt_spread(wall)} ×")
        if link.line_bits is None:
            said += ", the steady rate (the stages' CPU not counted)"
        return f"{said}: {fmt_spread(wall)} × — {no_slower(wall)}"
    goal("accel --via ssh no slower than plain ssh", through, fallback)
    for name in ACCEL_ROWS:
        def first_byte(name=name) -> str:
            late = [1000 * x for x in lags(runs[name].first, ssh.first)]
            return (f": {fmt_spread(late, 0)} ms after ssh's — "
                    + verdict(late, lambda x: x <= slack_ms))
        goal(f"{name}: first byte within ssh's own + {slack_ms:.0f} ms", runs[name], first_byte)
    return out


def path_check(name: str, beside_ssh: int, nbytes: int) -> str | None:
    """Whether an accel row's data took the path its name says, from the bytes TCP sent
    beside ssh's port during its run: through ssh, (nearly) none; direct, at least the
    stream. None if so, else what happened."""
    if name == THROUGH and beside_ssh > nbytes // 100:
        return f"{beside_ssh / MIB:.0f} MiB went beside ssh, not through it"
    if name == DIRECT and beside_ssh < nbytes:
        return f"only {beside_ssh / MIB:.0f} MiB went beside ssh: the rest went through it"
    return None


def shown(argv: list[str], accel: str, far: str) -> str:
    """A command line for the table: accel as `accel`, the far command as `FAR`, the lab's
    client config as `lab`, bench/work as `work`; the cgroup wrappers (`Roles`) left out."""
    script = str(WORK / "ssh-in-role")
    if argv[:1] == [script]:
        argv = argv[2:]
    words = []
    for word in argv:
        for role in ROLES:
            word = word.replace(f"{shlex.quote(script)} {role} ", "")
        words.append(word.replace(str(WORK / "ssh-far-accel"), accel))
    text = shlex.join(words).replace(shlex.quote(far), "FAR").replace(far, "FAR")
    return text.replace(accel, "accel").replace(str(WORK / "ssh-lab" / "ssh_config"), "lab") \
        .replace(str(WORK), "work")


# --------------------------------------------------------------------------------------------
# The rows


def rows(lab: SshLab, host: str, accel: str, far: str, roles: "Roles | None" = None
         ) -> list[Row]:
    """The rows for a far end at `host` running the shell command `far` there; with `roles`,
    each stage started in its role's cgroup (the far accel through `roles.far_accel`)."""
    def role(name: str, argv: list[str]) -> list[str]:
        return [str(roles.script), name, *argv] if roles else argv

    far = shlex.join(role("FAR", [])) + " " + far if roles else far
    ssh = role("ssh", lab.ssh)
    mbuffer = ["mbuffer", "-q", "-m", "32M"]
    out = [
        Row(SSH, [ssh + [host, far]]),
        Row(AES, [ssh + ["-c", "aes128-gcm@openssh.com", host, far]]),
        Row(MBUFFER, [role("here", mbuffer),
                      ssh + [host, f"{shlex.join(role('there', mbuffer))} | {far}"]]),
    ]
    remote = str(roles.far_accel) if roles else accel
    for name, via in ((DIRECT, "direct"), (THROUGH, "ssh")):
        argv = [accel, "--to", f"ssh://{host}", "--ssh-command", shlex.join(ssh),
                "--remote-accel", remote, "--via", via, *PLAIN_WIRE, "--", far]
        out.append(Row(name, [role("here", argv)]))
    out.append(Row(TCP, [role("here", mbuffer + ["-O", f"{host}:{TCP_PORT}"])],
                   f"{shlex.join(role('there', mbuffer + ['-I', str(TCP_PORT)]))} | {far}"))
    return out


class Roles:
    """A cgroup (v2) for each of `ROLES`, so that each stage's CPU is counted whole, its
    children's and its exited processes' included: `script ROLE CMD…` runs CMD in ROLE's
    (the rows start each stage so; sshd's daemon is moved into `sshd`'s, and its sessions
    follow), `far_accel` is the accel under test in `there`'s, for `--remote-accel`.
    The hierarchy is mounted under bench/work for the measure (`ip netns exec` hides
    /sys/fs/cgroup), and taken down after. `why` says why not, where it cannot be (no
    cgroup2): then the CPU is not counted."""

    def __init__(self, accel: str, work: Path = WORK):
        self.mount = work / "ssh-cgroup"
        self.root = self.mount / "accelbench-ssh"
        self.script, self.far_accel = work / "ssh-in-role", work / "ssh-far-accel"
        self.accel, self.mounted, self.why = accel, False, None

    def __enter__(self) -> "Roles | None":
        try:
            self.mount.mkdir(parents=True, exist_ok=True)
            sh(["mount", "-t", "cgroup2", "cgroup2", str(self.mount)])
            self.mounted = True
            for role in ROLES:
                (self.root / role).mkdir(parents=True, exist_ok=True)
            self.script.write_text(f'#!/bin/sh\nrole=$1; shift\n'
                                   f'echo $$ > "{self.root}/$role/cgroup.procs" || exit 125\n'
                                   f'exec "$@"\n')
            self.far_accel.write_text(f'#!/bin/sh\nexec {shlex.quote(str(self.script))} there '
                                      f'{shlex.quote(self.accel)} "$@"\n')
            for f in (self.script, self.far_accel):
                f.chmod(0o755)
        except (OSError, RuntimeError) as e:
            self.why = f"no cgroup2 to count each stage's CPU in ({e})"
            self.__exit__()
            return None
        return self

    def __exit__(self, *exc) -> None:
        # The processes are gone by now (each run's sweep, the sshd's exit); a zombie may
        # linger a moment.
        deadline = time.monotonic() + 5
        for d in [self.root / role for role in ROLES] + [self.root]:
            while d.exists():
                try:
                    d.rmdir()
                except OSError:
                    if time.monotonic() > deadline:
                        break
                    time.sleep(0.05)
        if self.mounted:
            subprocess.run(["umount", str(self.mount)], capture_output=True)
            self.mounted = False
        try:
            self.mount.rmdir()
        except OSError:
            pass

    def join(self, pid: int, role: str) -> None:
        (self.root / role / "cgroup.procs").write_text(f"{pid}\n")

    def usage(self) -> dict[str, float]:
        """Each role's CPU seconds so far (user + sys: cpu.stat's usage_usec)."""
        out = {}
        for role in ROLES:
            for line in (self.root / role / "cpu.stat").read_text().splitlines():
                if line.startswith("usage_usec "):
                    out[role] = int(line.split()[1]) / 1e6
        return out


def accel_help(accel: str) -> str:
    r = subprocess.run([accel, "--help"], capture_output=True, text=True, timeout=30)
    return r.stdout + r.stderr


def default_cipher(lab: SshLab, host: str) -> str:
    """The first cipher ssh offers `host` with the lab's config (`ssh -G`): the one a plain
    `ssh HOST` gets from an sshd that takes them all."""
    r = subprocess.run(lab.ssh + ["-G", host], capture_output=True, text=True)
    for line in r.stdout.splitlines():
        if line.startswith("ciphers "):
            return line.split()[1].split(",")[0]
    return "unknown"


# --------------------------------------------------------------------------------------------
# The measure


def run(ctx: Context) -> str:
    if not have_openssh():
        raise NotMeasured(f"{HEADING}\n\nSkipped: needs openssh-server (ssh, sshd, ssh-keygen).\n")
    return lab_section(HEADING, body, ctx)


def body(ctx: Context) -> str:
    mib = ctx.ssh_mib or (QUICK_MIB if ctx.quick else DEFAULT_MIB)
    unsupported = ssh_support(accel_help(ctx.accel))
    lab = SshLab([link.host for link in LINKS])
    text = ""
    with Netns("ssh-a") as a, Netns("ssh-b") as b:
        veth(a, b, VETH_HERE, VETH_FAR)
        for ns in (a, b):  # namespaced: the machine's own setting is left alone
            sh(ns.argv(["sysctl", "-q", "-w", f"net.ipv4.tcp_wmem={LAB_TCP_WMEM}"]))
        cgroups = Roles(ctx.accel)
        with DelayLine(a, b), cgroups as roles, Sshd(b, lab.sshd_config) as sshd:
            if roles:
                roles.join(sshd.pid, "sshd")  # its sessions follow it there
            cipher = default_cipher(lab, VETH_FAR)
            excluded = sanity(ctx, lab, a, b, sshd, unsupported, roles)
            beside = BytesBeside(a, 22)
            for link in LINKS:
                text += link_section(ctx, link, lab, a, b, sshd, mib, unsupported, excluded,
                                     beside, roles)
    skipped = (f"The accel rows were skipped: {unsupported} (issue 34 is not in this build). "
               if unsupported else "")
    return (f"`dd if=/dev/zero bs=1M count={mib} | X` in one namespace; X delivers to FAR in "
            f"the other, through an sshd of the benchmark's own there (`lab`: a client config "
            f"with a known_hosts of its own; keys in work/ssh-lab). FAR = `python3 "
            f"bench/accelbench/reader.py {mib * MIB} --stamps F`: it reads to EOF as `cat > "
            f"/dev/null` would, checks the byte count, and notes when its first and last bytes "
            f"came. {mib} MiB per run, {ctx.rounds} rounds, rotating order. ssh's default "
            f"cipher here: `{cipher}`. MiB/s whole run: from the start of X to its exit, "
            f"ssh's start and end included (or to FAR's last byte, if later); steady: the second "
            f"half of the stream at FAR, the transport alone (past ssh's start, TCP's ramp, and "
            f"what a far accel had buffered before FAR's first read). × columns: the steady "
            f"rate over that ssh row's in the same "
            f"round, median [min–max] over the rounds; × line: over the line rate. First "
            f"byte: ms from the start of X to FAR's first byte. The goals take the same "
            f"figures. Before the timed rounds, 8 MiB of random bytes go through each X on (a) "
            f"and must arrive unchanged (FAR: `cat > FILE`). {TCP}: no ssh and no cipher, "
            f"mbuffer's own TCP into `mbuffer -I {TCP_PORT} | FAR` started beforehand (so "
            f"its first byte is not comparable): what the link carries for one flow; a goal "
            f"above it (direct ≥ {DIRECT_OVER_SSH} × ssh on (a)) is said not reachable here, "
            f"beside its verdict. Both "
            f"namespaces' net.ipv4.tcp_wmem is `{LAB_TCP_WMEM}` (the machine's max, 4 MiB, "
            f"holds one flow near 510 Mbit/s at 40 ms, whatever the transport). "
            f"{skipped}The bytes TCP sends out of the near namespace beside ssh's port are "
            f"counted (nftables) for each accel run: `--via ssh` must send (nearly) none, "
            f"direct at least the stream; a run that did not is said in its status. "
            f"A run that leaves a "
            f"process in either namespace (beyond the sshd) 10 s after it ended has it killed, "
            f"and its status says so. "
            f"CPU: each stage runs in a cgroup of its own (a wrapper puts it there before it "
            f"starts; sshd's daemon is in its own, and its sessions follow it), whose "
            f"user+sys seconds, exited processes' included, are read before and after each "
            f"run: here, the local accel or mbuffer, and ssh (for the accel rows, the `ssh "
            f"-G` it asks first included); there, sshd's session processes, the far accel or "
            f"mbuffer, FAR; s/GiB, median [min–max]. "
            + (f"**Not counted here**: {cgroups.why}. " if cgroups.why else "")
            + f"MiB/s on hosts of their own: the stream over the busiest stage's CPU seconds "
            f"in the same run (wall / max(stage CPU), the house's rule on these shared "
            f"CPUs): the rate if each stage had a core of its own, as on two hosts, where "
            f"ssh and sshd alone do not take most of both ends' CPUs as they do here. "
            f"On (a), where the CPUs are the limit, the fallback's \"no slower\" goal takes "
            f"that rate; on (b), where the link and ssh's window are, the steady rate. "
            f"\"No slower\" means: the median of the same-round ratios at least {NO_SLOWER} "
            f"(rows held by the same limit differ by a percent or two from round to round "
            f"here), the range shown beside it.\n\n" + text)


def sanity(ctx: Context, lab: SshLab, a: Netns, b: Netns, sshd: Sshd,
           unsupported: str | None, roles: Roles | None) -> dict[str, str]:
    """8 MiB of random bytes through each row on (a); {row: why} for those that changed them."""
    src, dst = WORK / "ssh-sanity.in", WORK / "ssh-sanity.out"
    data = os.urandom(8 * MIB)
    src.write_bytes(data)
    excluded = {}
    for row in rows(lab, VETH_FAR, ctx.accel, f"cat > {dst}", roles):
        if why_not(row, unsupported):
            continue
        dst.unlink(missing_ok=True)
        rr, _ = run_row(row, ["cat", str(src)], a, b, sshd, 60)
        got = dst.read_bytes() if dst.exists() else b""
        why = rr.error or (None if got == data else
                           f"{len(got)} bytes arrived of {len(data)}, sha256 "
                           f"{hashlib.sha256(got).hexdigest()[:12]}")
        if why:
            excluded[row.name] = why
        note(f"ssh sanity: {row.name}: {why or 'ok'}")
    return excluded


def why_not(row: Row, unsupported: str | None) -> str | None:
    """Why `row` cannot run here, or None."""
    if row.is_accel and unsupported:
        return unsupported
    if row.name in (MBUFFER, TCP) and not shutil.which("mbuffer"):
        return "mbuffer is not installed"
    return None


def run_row(row: Row, producer: list[str], a: Netns, b: Netns, sshd: Sshd, timeout: float
            ) -> tuple[RunResult, list[str]]:
    """One run of `row` fed by `producer`: its listener (if any) started in `b` first, then
    `producer | X` with X in `a`; then both namespaces swept (`sweep`). The run and what the
    sweep killed."""
    listener = None
    if row.listener:
        listener = subprocess.Popen(b.argv(["sh", "-c", row.listener]),
                                    stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                    stderr=subprocess.PIPE)
        if not b.listening(TCP_PORT):
            listener.kill()
            listener.wait()
            return (RunResult(0.0, [], f"the listener never listened on {TCP_PORT}"),
                    sweep(a, b, sshd))
    try:
        rr = run_pipeline([producer] + [a.argv(st) for st in row.stages], timeout=timeout)
    finally:
        if listener:  # it ends with its input; a failed run leaves it to the sweep
            try:
                rc = listener.wait(30)
            except subprocess.TimeoutExpired:
                listener.kill()
                rc = listener.wait()
            err = listener.stderr.read().decode(errors="replace")
            listener.stderr.close()
    if listener and rc != 0 and rr.ok:
        rr.error = f"the listener: {describe_exit(rc, err)}"
    return rr, sweep(a, b, sshd)


def sweep(a: Netns, b: Netns, sshd: Sshd, wait_s: float = 10.0) -> list[str]:
    """After a run: waits up to `wait_s` for both namespaces to hold nothing but the sshd,
    then kills what is left; returns what that was (a session or a far accel that outlived
    its run)."""
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        if not a.pids() and b.pids() == [sshd.pid]:
            return []
        time.sleep(0.05)
    return a.kill_all() + b.kill_all(keep=(sshd.pid,))


def link_section(ctx: Context, link: Link, lab: SshLab, a: Netns, b: Netns, sshd: Sshd,
                 mib: int, unsupported: str | None, excluded: dict[str, str],
                 beside: BytesBeside, roles: Roles | None) -> str:
    nbytes = mib * MIB
    dd = ["dd", "if=/dev/zero", "bs=1M", f"count={mib}", "status=none"]
    stamps = WORK / "ssh-far.stamps"
    far = f"{sys.executable} {READER} {nbytes} --stamps {stamps}"
    table_rows = rows(lab, link.host, ctx.accel, far, roles)
    runs = {row.name: Runs(skipped=why_not(row, unsupported)) for row in table_rows}
    for name, r in runs.items():
        if name in excluded:
            r.samples = Samples(dropped=True, excluded=excluded[name])
        r.samples.dropped = r.samples.dropped or r.skipped is not None
    samples = {name: r.samples for name, r in runs.items()}
    for rnd, row, s in interleaved(table_rows, ctx.rounds, samples):
        stamps.unlink(missing_ok=True)
        beside_before = beside.read() if beside.usable else 0
        cpu_before = roles.usage() if roles else {}
        rr, left = run_row(row, dd, a, b, sshd, ctx.timeout)
        cpu = ({k: v - cpu_before[k] for k, v in roles.usage().items()} if roles else {})
        wrong = (path_check(row.name, beside.read() - beside_before, nbytes)
                 if beside.usable and rr.ok else None)
        first, half, last = read_stamps(stamps.read_text() if stamps.exists() else "")
        if rr.ok and None in (first, half, last):
            rr.error = "FAR wrote no stamps"
        s.add(rr, None)
        r = runs[row.name]
        r.left += left
        r.wrong_path += [wrong] if wrong else []
        if rr.ok:
            # The whole run ends when X has exited and FAR has every byte: a sender that
            # exits once its socket took the last byte (mbuffer -O) is not done before that.
            r.wall[rnd] = max(rr.wall, last - rr.t0)
            r.steady[rnd], r.first[rnd] = last - half, first - rr.t0
            if cpu:
                r.cpu[rnd] = cpu
        note(f"ssh {link.name} round {rnd + 1}/{ctx.rounds}: {row.name:<24} "
             + (f"{mib / r.wall[rnd]:7.1f} MiB/s whole, {mib / 2 / r.steady[rnd]:7.1f} steady, "
                f"first byte {1000 * r.first[rnd]:5.0f} ms"
                + (f", CPU s {' '.join(f'{k} {v:.2f}' for k, v in cpu.items())}" if cpu else "")
                if rr.ok
                else f"FAILED: {rr.error}")
             + (f"; {wrong}" if wrong else "")
             + (f"; left running (killed): {left}" if left else ""))
    return render(link, table_rows, runs, ctx.accel, far, mib) + "\n"


def render(link: Link, table_rows: list[Row], runs: dict[str, Runs], accel: str, far: str,
           mib: int) -> str:
    """The link's table, then its goals."""
    head = ["X", "command", "MiB/s whole run", "MiB/s steady", "× ssh", "× ssh aes128-gcm"]
    if link.line_bits:
        head.append("× line")
    head += ["first byte ms", "status"]
    table = []
    for row in table_rows:
        r = runs[row.name]
        steady = [mib / 2 / x for x in r.steady.values()]
        cells = [row.name.replace("|", "\\|"),
                 " \\| ".join(code(shown(st, accel, far)) for st in row.stages)
                 + (f" → {code(shown(['sh', '-c', row.listener], accel, far))}"
                    if row.listener else ""),
                 fmt_spread([mib / x for x in r.wall.values()], 1), fmt_spread(steady, 1)]
        for base in (SSH, AES):
            cells.append("—" if base == row.name else
                         fmt_spread(speedups(r.steady, runs[base].steady)))
        if link.line_bits:
            cells.append(fmt_spread([x * MIB * 8 / link.line_bits for x in steady]))
        cells += [fmt_spread([1000 * x for x in r.first.values()], 0), r.status()]
        table.append(cells)
    return (f"### {link.name}: {link.about}, far end {link.host}\n\n" + md_table(head, table)
            + cpu_table(table_rows, runs, mib)
            + "\n\nGoals (issue 34):\n\n"
            + "".join(f"- {g}\n" for g in goals(link, runs, mib * MIB)))


def cpu_table(table_rows: list[Row], runs: dict[str, Runs], mib: int) -> str:
    """Each row's CPU by stage (s/GiB), and its rate on hosts of their own (the stream over
    the busiest stage's CPU) with its same-round ratio to the ssh row's; nothing when the
    CPU was not counted."""
    if not any(runs[row.name].cpu for row in table_rows):
        return ""
    head = (["X"] + [f"{ROLE_HEADS[role]} s/GiB" for role in ROLES]
            + ["MiB/s on hosts of their own", "× ssh"])
    per_gib = GIB / (mib * MIB)
    table = []
    base = busiest(runs[SSH].cpu)
    for row in table_rows:
        cpu = runs[row.name].cpu
        cells = [row.name.replace("|", "\\|")]
        for role in ROLES:
            cells.append(fmt_spread([c[role] * per_gib for c in cpu.values()]))
        top = busiest(cpu)
        cells.append(fmt_spread([mib / x for x in top.values() if x > 0], 1))
        cells.append("—" if row.name == SSH else fmt_spread(speedups(top, base)))
        table.append(cells)
    return ("\n\nCPU by stage, user+sys per GiB streamed (both ends share this machine's "
            "CPUs):\n\n" + md_table(head, table))
