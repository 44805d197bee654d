"""The network lab the between-hosts measures run in (needs root): network namespaces of
the benchmark's own, veth pairs between them, shaping (tbf for a link's rate, htb for a
cap per flow, classified by port with a u32 filter), a packet-level delay line with
optional random loss (these kernels have no netem), and an sshd of the benchmark's own
(throwaway keys in bench/work, never the machine's): `ssh_setup` for a loopback one offering
aes128-gcm alone, `SshLab` and `Sshd` for one in a namespace, reached through a client config
of its own with a known_hosts of its own (StrictHostKeyChecking satisfied, not turned off).

Every address used lives only inside namespaces made here, and each namespace is deleted
on the way out whatever happened, taking its devices with it. What crosses the lab (the
pairs of sender and receiver, one timed transfer) is `transfers`.
"""

from __future__ import annotations

import itertools
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from collections import deque
from pathlib import Path
from typing import Callable

from .context import BENCH, WORK, Context, NotMeasured

# The emulated WAN: two addresses that exist only inside the namespaces made here, 20 ms
# each way (40 ms round trip), 1 Gbit/s unless a measure asks for another rate.
WAN_SENDER, WAN_RECEIVER = "10.213.9.1", "10.213.9.2"
WAN_RATE = "1gbit"
WAN_ONE_WAY_MS = 20

# The send buffer's ceiling in the lab's namespaces. The machine's default (tcp_wmem's max,
# 4 MiB, which a new namespace copies) holds one TCP flow near 510 Mbit/s at 40 ms (measured
# here with mbuffer alone, the delay line at 8 % of a CPU): the kernel, not the transport, would
# be the bottleneck, and "≥ 0.9 of the line rate" unreachable for any one flow. 32 MiB (what
# the machine's tcp_rmem already allows a receiver) let that flow reach ~860 Mbit/s. ssh's rows
# are held by its 2 MiB channel window either way.
LAB_TCP_WMEM = "4096 16384 33554432"

_devices = itertools.count()  # devices made by this process get distinct names


def sh(argv: list[str]) -> None:
    """Runs a setup command (ip, tc, ssh-keygen); raises with its stderr if it fails."""
    r = subprocess.run(argv, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)}: {r.stderr.strip()}")


def lab_section(heading: str, body: Callable[[Context], str], ctx: Context) -> str:
    """`heading`, then `body(ctx)`; raises NotMeasured where the lab cannot be built (its
    namespaces need root and iproute2). Meanwhile SIGTERM ends the run as an exception
    (SystemExit, status 143) rather than at once, so that the lab's context managers still
    take down its namespaces, daemons and delay line, as they do after Ctrl-C."""
    if os.geteuid() != 0 or not shutil.which("ip"):
        raise NotMeasured(f"{heading}\n\nSkipped: needs root and iproute2 (`ip netns`).\n")

    def terminated(signum: int, frame) -> None:
        raise SystemExit(128 + signum)

    before = signal.signal(signal.SIGTERM, terminated)
    try:
        return f"{heading}\n\n" + body(ctx)
    finally:
        signal.signal(signal.SIGTERM, before)


# --------------------------------------------------------------------------------------------
# Namespaces and links


class Netns:
    """A network namespace with loopback up, deleted on exit (whatever happened)."""

    def __init__(self, tag: str):
        self.name = f"accelbench-{os.getpid()}-{tag}"

    def __enter__(self) -> "Netns":
        sh(["ip", "netns", "add", self.name])
        self.ip("link", "set", "lo", "up")
        return self

    def __exit__(self, *exc) -> None:
        # A process still in the namespace would keep it (and whatever it listens on) alive
        # after `ip netns del`: every one here was started by the benchmark, so it goes too.
        self.kill_all()
        subprocess.run(["ip", "netns", "del", self.name], capture_output=True)

    def pids(self) -> list[int]:
        """The processes whose network namespace this is (`ip netns pids`)."""
        r = subprocess.run(["ip", "netns", "pids", self.name], capture_output=True, text=True)
        return [int(w) for w in r.stdout.split() if w.isdigit()]

    def kill_all(self, keep: tuple[int, ...] = ()) -> list[str]:
        """SIGKILLs every process in this namespace but those in `keep`; returns their command
        lines (to say what was left behind)."""
        killed = []
        for pid in self.pids():
            if pid in keep:
                continue
            try:
                cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")
                os.kill(pid, signal.SIGKILL)
            except OSError:
                continue  # gone meanwhile
            killed.append(f"{pid} {cmdline.decode(errors='replace').strip()}")
        return killed

    def ip(self, *args: str) -> None:
        sh(["ip", "-n", self.name, *args])

    def tc(self, *args: str) -> None:
        sh(["tc", "-n", self.name, *args])

    def argv(self, argv: list[str]) -> list[str]:
        """`argv` run inside this namespace."""
        return ["ip", "netns", "exec", self.name, *argv]

    def listening(self, port: int, timeout: float = 10.0) -> bool:
        """Whether something listens on TCP `port` here within `timeout` seconds."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            r = subprocess.run(self.argv(["ss", "-Hltn", f"sport = :{port}"]),
                               capture_output=True, text=True)
            if r.stdout.strip():
                return True
            time.sleep(0.02)
        return False


def device_name(prefix: str) -> str:
    """A network device name of this process's own (at most 15 bytes, the kernel's limit)."""
    return f"{prefix}{os.getpid()}x{next(_devices)}"[:15]


def veth(a: Netns, b: Netns, addr_a: str, addr_b: str, prefix_len: int = 24,
         mtu: int | None = None) -> tuple[str, str]:
    """A veth pair from `a` to `b`, addressed addr_a/prefix_len and addr_b/prefix_len, up;
    returns the two devices' names (a's, b's). A veth moves a packet to its peer at once:
    shape it with `tbf` or `htb_flows` on the sending side's device."""
    dev_a, dev_b = device_name("va"), device_name("vb")
    sh(["ip", "link", "add", dev_a, "netns", a.name, "type", "veth",
        "peer", "name", dev_b, "netns", b.name])
    for ns, dev, addr in ((a, dev_a, addr_a), (b, dev_b, addr_b)):
        ns.ip("addr", "add", f"{addr}/{prefix_len}", "dev", dev)
        if mtu:
            ns.ip("link", "set", dev, "mtu", str(mtu))
        ns.ip("link", "set", dev, "up")
    return dev_a, dev_b


# --------------------------------------------------------------------------------------------
# Shaping


def tbf(ns: str, dev: str, rate: str, burst: str = "1mb", latency: str = "200ms") -> None:
    """Caps what leaves `dev` in namespace `ns` at `rate` (tc's units: 1gbit, 200mbit) with a
    token bucket as the root qdisc. `burst` must hold at least a packet of the device's
    MTU; `latency` bounds the queue (packets beyond it are dropped, as a router would)."""
    sh(["tc", "-n", ns, "qdisc", "add", "dev", dev, "root", "tbf", "rate", rate,
        "burst", burst, "latency", latency])


def htb_flows(ns: str, dev: str, caps: dict[int, str], rest: str = "10gbit",
              match: str = "dport") -> None:
    """A cap per flow on what leaves `dev` in namespace `ns`: an htb root with a class for
    each port of `caps` (rate and ceiling its cap, e.g. {9401: "100mbit"}), chosen by a u32
    filter on the TCP/UDP `match` port ("dport": the flows this side connects to; "sport":
    those it accepted), and everything else in a default class capped at `rest`. Class ids
    are 1:10, 1:11, ... in the order of `caps`, 1:99 the rest (`tc -s class show` counts
    each one's bytes)."""
    if match not in ("dport", "sport"):
        raise ValueError(f"htb_flows: match {match!r}: want dport or sport")
    tc = ["tc", "-n", ns]
    sh(tc + ["qdisc", "add", "dev", dev, "root", "handle", "1:", "htb", "default", "99"])
    sh(tc + ["class", "add", "dev", dev, "parent", "1:", "classid", "1:99", "htb",
             "rate", rest, "ceil", rest])
    for k, (port, cap) in enumerate(caps.items()):
        classid = f"1:{10 + k}"
        sh(tc + ["class", "add", "dev", dev, "parent", "1:", "classid", classid, "htb",
                 "rate", cap, "ceil", cap])
        sh(tc + ["filter", "add", "dev", dev, "parent", "1:", "protocol", "ip", "prio", "1",
                 "u32", "match", "ip", match, str(port), "0xffff", "flowid", classid])


# --------------------------------------------------------------------------------------------
# The delay line


class DelayLine:
    """Two namespaces joined point to point through this machine: a tun device in each
    (addr_a in a, addr_b in b), every packet handed from one to the other `one_way_ms`
    after it left, and dropped on the way with probability `loss` (each direction, each
    packet alike). `rate`, if given, caps each side with `tbf`; without it the devices
    (`dev_a`, `dev_b`) are left for the caller to shape (`htb_flows`). A context manager:
    the line runs in a process of its own from entry until exit."""

    def __init__(self, a: Netns, b: Netns, addr_a: str = WAN_SENDER,
                 addr_b: str = WAN_RECEIVER, one_way_ms: float = WAN_ONE_WAY_MS,
                 rate: str | None = WAN_RATE, loss: float = 0.0):
        if not 0.0 <= loss < 1.0:
            raise ValueError(f"DelayLine: loss {loss}: want a probability in [0, 1)")
        self.dev_a, self.dev_b = device_name("ta"), device_name("tb")
        self.args = (a.name, b.name, self.dev_a, self.dev_b, addr_a, addr_b, one_way_ms,
                     rate, loss)
        self.proc: subprocess.Popen | None = None

    def __enter__(self) -> "DelayLine":
        code = (f"import sys; sys.path.insert(0, {str(BENCH)!r}); "
                f"from accelbench.netlab import delay_line_main; "
                f"delay_line_main(*{self.args!r})")
        p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        self.proc = p
        if p.stdout.readline().strip() != "ready":
            why = p.stderr.read().strip()
            self.__exit__()
            raise RuntimeError(f"the delay line did not start: {why}")
        return self

    def __exit__(self, *exc) -> None:
        self.proc.kill()
        self.proc.wait()
        self.proc.stdout.close()
        self.proc.stderr.close()


def delay_line_main(ns_a: str, ns_b: str, dev_a: str, dev_b: str, addr_a: str, addr_b: str,
                    delay_ms: float, rate: str | None, loss: float) -> None:
    """The delay line's process (see DelayLine): makes the two tun devices, moves them into
    their namespaces, says `ready` on stdout, then hands packets over until killed."""
    import fcntl
    import select
    import struct

    tunsetiff, iff_tun, iff_no_pi = 0x400454CA, 0x0001, 0x1000

    def tun(name: str) -> int:
        fd = os.open("/dev/net/tun", os.O_RDWR)
        fcntl.ioctl(fd, tunsetiff, struct.pack("16sH", name.encode(), iff_tun | iff_no_pi))
        return fd

    ends = [(ns_a, dev_a, addr_a, addr_b), (ns_b, dev_b, addr_b, addr_a)]
    fds = [tun(dev) for _, dev, _, _ in ends]
    for ns, dev, me, peer in ends:
        sh(["ip", "link", "set", dev, "netns", ns])
        # A large MTU keeps the packet rate (and this loop's work) low at 1 Gbit/s.
        for args in (["addr", "add", me, "peer", peer, "dev", dev],
                     ["link", "set", dev, "mtu", "65000", "up"]):
            sh(["ip", "-n", ns, *args])
        if rate:
            tbf(ns, dev, rate)
    print("ready", flush=True)
    delay = delay_ms / 1000
    lost = random.Random()
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
            packet = os.read(fd, 65536)
            if not (loss and lost.random() < loss):
                due[other[fd]].append((now + delay, packet))


# --------------------------------------------------------------------------------------------
# An sshd of the benchmark's own


def ssh_setup(listen: str = "127.0.0.1") -> tuple[Path, list[str]] | None:
    """Throwaway host and user keys and an sshd config listening on `listen` in
    bench/work/net-ssh; (config, client argv before the command), or None without openssh.
    Start the daemon with `sshd_argv` (in the namespace that has `listen`); it lets in root
    with the throwaway key only, and offers aes128-gcm alone, without compression."""
    if not have_openssh():
        return None
    d = throwaway_keys(WORK / "net-ssh")
    config = d / ("sshd_config" if listen == "127.0.0.1" else f"sshd_config-{listen}")
    config.write_text(
        f"HostKey {d / 'host_key'}\nAuthorizedKeysFile {d / 'authorized_keys'}\nPidFile none\n"
        f"UsePAM no\nStrictModes no\nListenAddress {listen}\nPermitRootLogin prohibit-password\n"
        "PasswordAuthentication no\nKbdInteractiveAuthentication no\n"
        "Ciphers aes128-gcm@openssh.com\nCompression no\n")
    client = ["ssh", "-F", "/dev/null", "-i", str(d / "id"), "-o", "IdentitiesOnly=yes",
              "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
              "-o", "LogLevel=ERROR", "-o", "Ciphers=aes128-gcm@openssh.com",
              "-o", "Compression=no", "-o", "BatchMode=yes"]
    return config, client


def have_openssh() -> bool:
    """Whether the ssh client, sshd and ssh-keygen are installed (openssh-server)."""
    return bool(shutil.which("ssh") and Path("/usr/sbin/sshd").exists()
                and shutil.which("ssh-keygen"))


def throwaway_keys(d: Path) -> Path:
    """Directory `d` (made, mode 700) with an ed25519 host key (`host_key`), a user key
    (`id`) and `authorized_keys` holding the user key alone; keys made once and kept for the
    next run. Also makes /run/sshd, sshd's privilege separation directory."""
    d.mkdir(parents=True, exist_ok=True)
    os.chmod(d, 0o700)
    for key in ("host_key", "id"):
        if not (d / key).exists():
            sh(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(d / key)])
    shutil.copy(d / "id.pub", d / "authorized_keys")
    os.chmod(d / "authorized_keys", 0o600)
    Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)
    return d


class SshLab:
    """An sshd of the benchmark's own for a namespace, and the client's side of it, in
    `d` (bench/work/ssh-lab unless given): throwaway keys (`throwaway_keys`), `sshd_config`
    (every address of the namespace it runs in, port 22, root with the throwaway key only,
    OpenSSH's default ciphers, no compression, root's ~/.bashrc not read), and
    `ssh_config`, a client config that trusts the host key for `hosts` alone through a
    known_hosts of its own, with StrictHostKeyChecking on: `ssh -F ssh_config HOST CMD`
    works as a user's ssh would, and so does any program given `ssh -F ssh_config` as its ssh
    command."""

    def __init__(self, hosts: list[str], d: Path | None = None):
        self.dir = throwaway_keys(d or WORK / "ssh-lab")
        self.sshd_config = self.dir / "sshd_config"
        self.ssh_config = self.dir / "ssh_config"
        self.known_hosts = self.dir / "known_hosts"
        host_key = (self.dir / "host_key.pub").read_text().split()
        self.known_hosts.write_text(known_hosts_line(hosts, host_key[0], host_key[1]))
        self.sshd_config.write_text(
            f"HostKey {self.dir / 'host_key'}\nAuthorizedKeysFile {self.dir / 'authorized_keys'}\n"
            "PidFile none\nUsePAM no\nStrictModes no\nListenAddress 0.0.0.0\nPort 22\n"
            "PermitRootLogin prohibit-password\nPasswordAuthentication no\n"
            "KbdInteractiveAuthentication no\nCompression no\nX11Forwarding no\nPrintMotd no\n"
            # bash reads ~/.bashrc when sshd runs it as a top-level shell (SSH_CLIENT set,
            # SHLVL below 1). Root's here runs `pyenv init`, whose rehash takes a lock file for
            # up to 60 s: sessions at once wait on each other, one killed mid-rehash leaves the
            # lock and stalls every later one a minute, and its time lands in the first-byte
            # figures. SHLVL=1 makes the session's shell a nested one, which reads no rc file.
            "SetEnv SHLVL=1\n")
        self.ssh_config.write_text(
            f"Host *\n  User root\n  Port 22\n  IdentityFile {self.dir / 'id'}\n"
            f"  IdentitiesOnly yes\n  UserKnownHostsFile {self.known_hosts}\n"
            "  GlobalKnownHostsFile /dev/null\n  StrictHostKeyChecking yes\n"
            "  UpdateHostKeys no\n  BatchMode yes\n  LogLevel ERROR\n  Compression no\n"
            "  ControlMaster no\n  ControlPath none\n  ForwardAgent no\n  ForwardX11 no\n")

    @property
    def ssh(self) -> list[str]:
        """The client: `ssh -F ssh_config`, followed by a host and a command."""
        return ["ssh", "-F", str(self.ssh_config)]


def known_hosts_line(hosts: list[str], key_type: str, key: str, port: int = 22) -> str:
    """A known_hosts line trusting `key` for each of `hosts` on `port` (a port other than 22
    is written `[host]:port`, as ssh looks it up)."""
    names = hosts if port == 22 else [f"[{h}]:{port}" for h in hosts]
    return f"{','.join(names)} {key_type} {key}\n"


class BytesBeside:
    """Counts the bytes (IP packets, headers included) that TCP sends out of namespace `ns` to
    any port but `port`, on any interface but loopback (where accel's relay through the ssh
    session takes the stream to ssh's stdin): with `port` ssh's, the traffic that did not go
    through ssh. An
    nftables counter in a table of the bench's own in that namespace (gone with it); `read()`
    is the count so far. `usable` is False where nft is not installed."""

    def __init__(self, ns: Netns, port: int):
        self.ns = ns
        self.usable = shutil.which("nft") is not None
        if self.usable:
            sh(ns.argv(["nft", f"add table inet accelbench; "
                               f"add chain inet accelbench out {{ type filter hook output "
                               f"priority 0; policy accept; }}; "
                               f"add rule inet accelbench out oifname != \"lo\" tcp dport != {port} counter"]))

    def read(self) -> int:
        out = subprocess.run(self.ns.argv(["nft", "list", "chain", "inet", "accelbench", "out"]),
                             capture_output=True, text=True).stdout
        words = out.split()
        return int(words[words.index("bytes") + 1]) if "bytes" in words else 0


class Sshd:
    """The sshd of `config` (an `SshLab`'s) running in namespace `ns` on `port`, from entry
    until exit (SIGTERM, then SIGKILL after 5 s); its stderr in bench/work/ssh-sshd.err. `pid`
    is the daemon's own (the one process of the namespace that belongs there between
    sessions)."""

    def __init__(self, ns: Netns, config: Path, port: int = 22):
        self.ns, self.argv, self.port = ns, sshd_argv(config, port), port
        self.log = WORK / "ssh-sshd.err"
        self.proc: subprocess.Popen | None = None

    def __enter__(self) -> "Sshd":
        # A fresh checkout has no bench/work until a measure has run.
        self.log.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log, "wb") as errf:
            self.proc = subprocess.Popen(self.ns.argv(self.argv), stdin=subprocess.DEVNULL,
                                         stdout=subprocess.DEVNULL, stderr=errf)
        if not self.ns.listening(self.port):
            self.__exit__()
            raise RuntimeError(f"sshd never listened on {self.port}: "
                               f"{self.log.read_text(errors='replace').strip()[-300:]}")
        return self

    def __exit__(self, *exc) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    @property
    def pid(self) -> int:
        return self.proc.pid


def sshd_argv(config: Path, port: int) -> list[str]:
    """The sshd of `ssh_setup` in the foreground on `port`, logging to its stderr."""
    return ["/usr/sbin/sshd", "-D", "-e", "-f", str(config), "-p", str(port)]
