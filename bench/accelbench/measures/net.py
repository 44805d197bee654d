"""Between hosts (needs root: it runs in network namespaces it makes and removes).
Loopback, in a namespace of its own so that nothing listens anywhere else:
``dd if=/dev/zero bs=1M | SENDER`` into ``RECEIVER > /dev/null``, for accel
encrypted (--to/--from with a key file), accel --insecure, mbuffer -O into
mbuffer -I, and ssh -c aes128-gcm@openssh.com into an sshd the benchmark starts
on a loopback port (throwaway keys in bench/work).  GiB/s, and the CPU seconds
per GiB of sender and receiver together; "× ssh" and "× mbuffer" are GiB/s
ratios.  Then an emulated WAN: two namespaces joined by a packet-level delay
line of the benchmark's own (tun devices; no netem here), 40 ms round trip,
1 Gbit/s by tbf each way, the seed pipeline split across it (bzip2 -dc | SENDER there,
RECEIVER | gzip -6 here): accel at both ends, mbuffer at both ends, bare nc;
ratio = wall / the slower stage alone.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path

from ..corpus import build_corpus, warm_cache
from ..runner import (
    BENCH, GIB, MIB, WORK, Context, Samples, code, fmt_spread, interleaved, md_table, med,
    note, run_pipeline,
)

# Addresses that exist only inside the namespaces made here.
WAN_SENDER, WAN_RECEIVER = "10.213.9.1", "10.213.9.2"
WAN_RATE = "1gbit"
WAN_ONE_WAY_MS = 20  # each direction: 40 ms round trip


# --------------------------------------------------------------------------------------------
# Namespaces


class Netns:
    """A network namespace with loopback up, deleted on exit (whatever happened)."""

    def __init__(self, tag: str):
        self.name = f"accelbench-{os.getpid()}-{tag}"

    def __enter__(self) -> "Netns":
        sh(["ip", "netns", "add", self.name])
        self.ip("link", "set", "lo", "up")
        return self

    def __exit__(self, *exc) -> None:
        subprocess.run(["ip", "netns", "del", self.name], capture_output=True)

    def ip(self, *args: str) -> None:
        sh(["ip", "-n", self.name, *args])

    def argv(self, argv: list[str]) -> list[str]:
        return ["ip", "netns", "exec", self.name, *argv]

    def listening(self, port: int, timeout: float = 10.0) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            r = subprocess.run(self.argv(["ss", "-Hltn", f"sport = :{port}"]),
                               capture_output=True, text=True)
            if r.stdout.strip():
                return True
            time.sleep(0.02)
        return False


def show(argv: list[str], accel: str) -> str:
    """A command for the tables: accel's path as `accel`, bench/work as `work`, ssh's many
    options as `…`."""
    if argv and argv[0] == "ssh":
        argv = ["ssh", "-c", "aes128-gcm@openssh.com", "…", *argv[-3:]]
    words = ("accel" if a == accel else a.replace(str(WORK), "work") for a in argv)
    return " ".join(words)


def sh(argv: list[str]) -> None:
    r = subprocess.run(argv, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)}: {r.stderr.strip()}")


# --------------------------------------------------------------------------------------------
# One transfer: a receiver, then a sender pipeline


@dataclass
class Pair:
    """One way across: the receiver's argv (run in recv_ns, listening on port) and the
    sender's stages (run in send_ns; the first is the producer, the last is X)."""
    name: str
    receiver: list[str]
    sender: list[list[str]]
    port: int
    daemon: bool = False  # the receiver stays (sshd): stopped once the sender is done


def transfer(pair: Pair, recv_ns: Netns, send_ns: Netns, timeout: float,
             recv_stdout=subprocess.DEVNULL, consumer: list[str] | None = None):
    """Runs one transfer; returns (wall s, CPU s of X at both ends, error or None).
    `consumer` is a stage after the receiver (its stdout piped into it)."""
    errf = open(WORK / "net-receiver.err", "w+b")
    procs: list[subprocess.Popen] = []
    recv = subprocess.Popen(recv_ns.argv(pair.receiver), stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE if consumer else recv_stdout, stderr=errf)
    procs.append(recv)
    if consumer:
        procs.append(subprocess.Popen(recv_ns.argv(consumer), stdin=recv.stdout,
                                      stdout=subprocess.DEVNULL))
        recv.stdout.close()
    if not recv_ns.listening(pair.port):
        for p in procs:
            p.kill()
            p.wait()
        return None, None, f"{pair.name}: the receiver never listened on {pair.port}"
    t0 = time.perf_counter()
    prev = subprocess.DEVNULL
    senders = []
    for i, argv in enumerate(pair.sender):
        last = i == len(pair.sender) - 1
        p = subprocess.Popen(send_ns.argv(argv), stdin=prev,
                             stdout=subprocess.DEVNULL if last else subprocess.PIPE,
                             stderr=subprocess.PIPE if last else subprocess.DEVNULL)
        if prev is not subprocess.DEVNULL:
            prev.close()
        prev = p.stdout
        senders.append(p)
    timer = threading.Timer(timeout, lambda: [p.kill() for p in procs + senders])
    timer.start()
    status = {}
    cpu = {}
    for p in senders:
        _, st, ru = os.wait4(p.pid, 0)
        status[p.pid], cpu[p.pid] = os.waitstatus_to_exitcode(st), ru.ru_utime + ru.ru_stime
        p.returncode = status[p.pid]
    if pair.daemon:
        time.sleep(0.2)  # the session ends; sshd reaps it, and counts its CPU
        recv.send_signal(signal.SIGTERM)
    for p in procs:
        _, st, ru = os.wait4(p.pid, 0)
        status[p.pid], cpu[p.pid] = os.waitstatus_to_exitcode(st), ru.ru_utime + ru.ru_stime
        p.returncode = status[p.pid]
    wall = time.perf_counter() - t0
    timer.cancel()
    x_cpu = cpu[senders[-1].pid] + cpu[recv.pid]
    error = None
    sender_err = senders[-1].stderr.read().decode(errors="replace").strip()
    senders[-1].stderr.close()
    errf.seek(0)
    recv_err = errf.read(2000).decode(errors="replace").strip()
    errf.close()
    recv_ok = status[recv.pid] == 0 or (pair.daemon and status[recv.pid] in (-signal.SIGTERM, 255))
    if any(status[p.pid] != 0 for p in senders) or not recv_ok:
        error = (f"sender {[status[p.pid] for p in senders]}: {sender_err[:200]}; receiver "
                 f"{status[recv.pid]}: {recv_err[:200]}")
    return wall, x_cpu, error


# --------------------------------------------------------------------------------------------
# The tools


def ssh_setup() -> tuple[Path, list[str]] | None:
    """Throwaway host and user keys and an sshd config in bench/work/net-ssh; (config,
    client argv before the command), or None without openssh."""
    if not (shutil.which("ssh") and Path("/usr/sbin/sshd").exists() and shutil.which("ssh-keygen")):
        return None
    d = WORK / "net-ssh"
    d.mkdir(parents=True, exist_ok=True)
    os.chmod(d, 0o700)
    for key in ("host_key", "id"):
        if not (d / key).exists():
            sh(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(d / key)])
    shutil.copy(d / "id.pub", d / "authorized_keys")
    os.chmod(d / "authorized_keys", 0o600)
    Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)  # privilege separation
    config = d / "sshd_config"
    config.write_text(
        f"HostKey {d / 'host_key'}\nAuthorizedKeysFile {d / 'authorized_keys'}\nPidFile none\n"
        "UsePAM no\nStrictModes no\nListenAddress 127.0.0.1\nPermitRootLogin prohibit-password\n"
        "PasswordAuthentication no\nKbdInteractiveAuthentication no\n"
        "Ciphers aes128-gcm@openssh.com\nCompression no\n")
    client = ["ssh", "-F", "/dev/null", "-i", str(d / "id"), "-o", "IdentitiesOnly=yes",
              "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
              "-o", "LogLevel=ERROR", "-o", "Ciphers=aes128-gcm@openssh.com",
              "-o", "Compression=no", "-o", "BatchMode=yes"]
    return config, client


def key_file(accel: str) -> str:
    path = WORK / "net-key"
    if not path.exists():
        with open(path, "wb") as f:
            subprocess.run([accel, "--generate", "key"], stdout=f, check=True)
    os.chmod(path, 0o600)
    return str(path)


def loopback_pairs(accel: str, out: str) -> list[Pair]:
    """The senders and receivers compared on loopback, writing to `out` at the far end."""
    key = key_file(accel)
    pairs = [
        Pair("accel", [accel, "--from", "127.0.0.1:9101", "--key-file", key, "-o", out],
             [[accel, "--to", "127.0.0.1:9101", "--key-file", key]], 9101),
        Pair("accel --insecure", [accel, "--from", "127.0.0.1:9102", "--insecure", "-o", out],
             [[accel, "--to", "127.0.0.1:9102", "--insecure"]], 9102),
    ]
    if shutil.which("mbuffer"):
        pairs.append(Pair("mbuffer", ["mbuffer", "-q", "-m", "32M", "-I", "9103", "-o", out],
                          [["mbuffer", "-q", "-m", "32M", "-O", "127.0.0.1:9103"]], 9103))
    ssh = ssh_setup()
    if ssh:
        config, client = ssh
        pairs.append(Pair("ssh aes128-gcm", ["/usr/sbin/sshd", "-D", "-e", "-f", str(config),
                                             "-p", "9104"],
                          [client + ["-p", "9104", "root@127.0.0.1", f"cat > {out}"]],
                          9104, daemon=True))
    return pairs


def sanity(pair: Pair, ns: Netns, accel: str) -> str | None:
    """8 MiB of random bytes must arrive unchanged."""
    data = os.urandom(8 * MIB)
    src, dst = WORK / "net-sanity.in", WORK / "net-sanity.out"
    src.write_bytes(data)
    dst.unlink(missing_ok=True)
    same = next(p for p in loopback_pairs(accel, str(dst)) if p.name == pair.name)
    p = Pair(same.name, same.receiver, [["cat", str(src)]] + same.sender, same.port, same.daemon)
    wall, _, error = transfer(p, ns, ns, 60)
    if error:
        return error
    got = dst.read_bytes() if dst.exists() else b""
    if got != data:
        return (f"{len(got)} bytes arrived of {len(data)}, sha256 "
                f"{hashlib.sha256(got).hexdigest()[:12]}")
    return None


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


def start_delay_line(a: Netns, b: Netns) -> subprocess.Popen:
    code_ = (f"import sys; sys.path.insert(0, {str(BENCH)!r}); "
             f"from accelbench.measures.net import delay_line_main; "
             f"delay_line_main({a.name!r}, {b.name!r}, {WAN_SENDER!r}, {WAN_RECEIVER!r}, "
             f"{WAN_ONE_WAY_MS}, {WAN_RATE!r})")
    p = subprocess.Popen([sys.executable, "-c", code_], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    if p.stdout.readline().strip() != "ready":
        p.kill()
        raise RuntimeError(f"the delay line did not start: {p.stderr.read().strip()}")
    return p


# --------------------------------------------------------------------------------------------
# The measure


def run(ctx: Context) -> str:
    head = "## Between hosts\n\n"
    if os.geteuid() != 0 or not shutil.which("ip"):
        return head + "Skipped: needs root and iproute2 (`ip netns`).\n"
    return head + loopback(ctx) + "\n" + wan(ctx)


def loopback(ctx: Context) -> str:
    count = ctx.stream_mib
    gib = count * MIB / GIB
    dd = ["dd", "if=/dev/zero", "bs=1M", f"count={count}", "status=none"]
    notes = []
    with Netns("lo") as ns:
        pairs = loopback_pairs(ctx.accel, "/dev/null")
        samples = {p.name: Samples() for p in pairs}
        for p in pairs:
            err = sanity(p, ns, ctx.accel)
            if err:
                samples[p.name] = Samples(dropped=True, excluded=err)
                notes.append(f"{p.name} excluded: 8 MiB sanity check failed: {err}")
            note(f"net sanity: {p.name}: {err or 'ok'}")
        for r, p, s in interleaved(pairs, ctx.rounds, samples):
            timed = Pair(p.name, p.receiver, [dd] + p.sender, p.port, p.daemon)
            wall, x_cpu, error = transfer(timed, ns, ns, ctx.timeout)
            s.runs += 1
            if error:
                s.failures.append(error)
            else:
                s.wall.append(wall)
                s.x_cpu.append(x_cpu)
            note(f"net loopback round {r + 1}/{ctx.rounds}: {p.name:<16} "
                 + (f"{gib / wall:6.2f} GiB/s" if not error else f"FAILED: {error}"))

    def rate(name: str) -> float | None:
        s = samples.get(name)
        return med([gib / w for w in s.wall]) if s and s.wall else None

    rows = []
    for p in pairs:
        s = samples[p.name]
        rates = [gib / w for w in s.wall]
        vs = [f"{med(rates) / rate(other):.2f}" if rates and rate(other) else "—"
              for other in ("ssh aes128-gcm", "mbuffer")]
        xcpu = f"{med([c / gib for c in s.x_cpu]):.3f}" if s.x_cpu else "—"
        shown = " → ".join(code(show(argv, ctx.accel)) for argv in p.sender + [p.receiver])
        rows.append([p.name, shown, fmt_spread(rates), *vs, xcpu, s.status()])
    text = (f"### Loopback: `dd if=/dev/zero bs=1M count={count} | SENDER`, "
            f"`RECEIVER > /dev/null`\n\n"
            f"{gib:g} GiB per run, {ctx.rounds} rounds, rotating order, in a network namespace "
            f"of its own. CPU: user+sys of sender and receiver together (ssh: the client, and "
            f"sshd with its session), per GiB.\n\n"
            + md_table(["X", "sender → receiver", "GiB/s median [min–max]", "× ssh",
                        "× mbuffer", "X CPU s/GiB", "status"], rows) + "\n")
    if notes:
        text += "\n" + "\n".join(f"- {n}" for n in notes) + "\n"
    return text


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
    return (f"### Emulated WAN: `bzip2 -dc | SENDER` → {WAN_RATE}/s, "
            f"{2 * WAN_ONE_WAY_MS} ms RTT → `RECEIVER | gzip -6`\n\n"
            f"Corpus {meta['tar_bytes'] / MIB:.0f} MiB tar ({meta['bz2_bytes'] / MIB:.1f} MiB "
            f"bzip2). Two namespaces joined by a delay line of the benchmark's own (a tun "
            f"device in each, every packet handed over {WAN_ONE_WAY_MS} ms after it left, "
            f"each way; tbf {WAN_RATE} on each). {ctx.rounds} rounds; ratio = median wall / "
            f"the slower stage alone (1.000 = optimum).\n\n"
            + md_table(["X", "command", "wall s median [min–max]", "ratio", "status"], rows)
            + "\n")
