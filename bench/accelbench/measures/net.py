"""Between hosts, on loopback (needs root: it runs in a network namespace of its own,
so that nothing listens anywhere else): ``dd if=/dev/zero bs=1M | SENDER`` into
``RECEIVER > /dev/null``, for accel encrypted (--to/--from with a key file),
accel --insecure, mbuffer -O into mbuffer -I, accel run as mbuffer (a link;
plain, keyed with ACCEL_KEY_FILE, and against the real mbuffer either way), and ssh -c aes128-gcm@openssh.com
into an sshd the benchmark starts on a loopback port (throwaway keys in
bench/work).  GiB/s, and the CPU seconds per GiB of sender and receiver
together; "× ssh" and "× mbuffer" are GiB/s ratios.  A --variants item that is
another accel binary (``before=/path/to/accel``) adds an encrypted row for it.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from ..runner import (
    GIB, MIB, WORK, Context, Samples, code, fmt_spread, interleaved, md_table, med, note,
)


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


RECEIVER_ERR, SENDER_ERR = WORK / "net-receiver.err", WORK / "net-sender.err"
"""Where the last transfer's receiver and sender (X) wrote their stderr, whole."""


def transfer(pair: Pair, recv_ns: Netns, send_ns: Netns, timeout: float,
             recv_stdout=subprocess.DEVNULL, consumer: list[str] | None = None):
    """Runs one transfer; returns (wall s, CPU s of X at both ends, error or None).
    `consumer` is a stage after the receiver (its stdout piped into it, its stderr beside the
    receiver's); its failure is the transfer's. Both ends' stderr stay in RECEIVER_ERR and
    SENDER_ERR (files, not pipes: a chatty end cannot block on a pipe nobody reads until it
    exits)."""
    errf = open(RECEIVER_ERR, "w+b")
    sender_errf = open(SENDER_ERR, "w+b")
    procs: list[subprocess.Popen] = []
    recv = subprocess.Popen(recv_ns.argv(pair.receiver), stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE if consumer else recv_stdout, stderr=errf)
    procs.append(recv)
    if consumer:
        procs.append(subprocess.Popen(recv_ns.argv(consumer), stdin=recv.stdout,
                                      stdout=subprocess.DEVNULL, stderr=errf))
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
                             stderr=sender_errf if last else subprocess.DEVNULL)
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
    sender_errf.seek(0)
    sender_err = sender_errf.read(2000).decode(errors="replace").strip()
    sender_errf.close()
    errf.seek(0)
    recv_err = errf.read(2000).decode(errors="replace").strip()
    errf.close()
    recv_ok = status[recv.pid] == 0 or (pair.daemon and status[recv.pid] in (-signal.SIGTERM, 255))
    consumer_ok = all(status[p.pid] == 0 for p in procs[1:])
    if any(status[p.pid] != 0 for p in senders) or not recv_ok or not consumer_ok:
        error = (f"sender {[status[p.pid] for p in senders]}: {sender_err[:200]}; receiver "
                 f"{status[recv.pid]}: {recv_err[:200]}")
        if not consumer_ok:
            error += f"; consumer {[status[p.pid] for p in procs[1:]]}"
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
        # accel creates it, readable by its owner only (a key to a file the shell made
        # readable by others is refused).
        subprocess.run([accel, "--generate", "key", str(path)], check=True)
    return str(path)


def loopback_pairs(accel: str, out: str, builds: dict[str, str] | None = None) -> list[Pair]:
    """The senders and receivers compared on loopback, writing to `out` at the far end;
    `builds` (name: binary) are other accel builds, each an encrypted row of its own."""
    key = key_file(accel)

    def encrypted(name: str, binary: str, port: int) -> Pair:
        return Pair(name, [binary, "--from", f"127.0.0.1:{port}", "--key-file", key, "-o", out],
                    [[binary, "--to", f"127.0.0.1:{port}", "--key-file", key]], port)

    pairs = [
        encrypted("accel", accel, 9101),
        Pair("accel --insecure", [accel, "--from", "127.0.0.1:9102", "--insecure", "-o", out],
             [[accel, "--to", "127.0.0.1:9102", "--insecure"]], 9102),
    ]
    for port, (name, binary) in enumerate((builds or {}).items(), start=9111):
        pairs.append(encrypted(name, binary, port))
    if shutil.which("mbuffer"):
        pairs.append(Pair("mbuffer", ["mbuffer", "-q", "-m", "32M", "-I", "9103", "-o", out],
                          [["mbuffer", "-q", "-m", "32M", "-O", "127.0.0.1:9103"]], 9103))
        pairs += as_mbuffer_pairs(accel, key, out)
    ssh = ssh_setup()
    if ssh:
        config, client = ssh
        pairs.append(Pair("ssh aes128-gcm", ["/usr/sbin/sshd", "-D", "-e", "-f", str(config),
                                             "-p", "9104"],
                          [client + ["-p", "9104", "root@127.0.0.1", f"cat > {out}"]],
                          9104, daemon=True))
    return pairs


def as_mbuffer_pairs(accel: str, key: str, out: str) -> list[Pair]:
    """accel run as mbuffer (a link in bench/work) with mbuffer's -O/-I: both ends accel,
    plain and with ACCEL_KEY_FILE (encrypted), and each end against the real mbuffer."""
    link = WORK / "asmbuffer" / "mbuffer"
    link.parent.mkdir(parents=True, exist_ok=True)
    if link.is_symlink() or link.exists():
        link.unlink()
    os.symlink(os.path.realpath(accel), link)
    keyed = ["env", f"ACCEL_KEY_FILE={key}", str(link)]
    pairs = []
    for port, (name, recv, send) in enumerate([
        ("as-mbuffer plain", [str(link)], [str(link)]),
        ("as-mbuffer keyed", keyed, keyed),
        ("mbuffer → as-mbuffer", [str(link)], ["mbuffer"]),
        ("as-mbuffer → mbuffer", ["mbuffer"], [str(link)]),
    ], start=9121):
        listen = str(port) if recv == ["mbuffer"] else f"127.0.0.1:{port}"
        pairs.append(Pair(name, recv + ["-q", "-m", "32M", "-I", listen, "-o", out],
                          [send + ["-q", "-m", "32M", "-O", f"127.0.0.1:{port}"]], port))
    return pairs


def sanity(pair: Pair, ns: Netns, accel: str, builds: dict[str, str]) -> str | None:
    """8 MiB of random bytes must arrive unchanged."""
    data = os.urandom(8 * MIB)
    src, dst = WORK / "net-sanity.in", WORK / "net-sanity.out"
    src.write_bytes(data)
    dst.unlink(missing_ok=True)
    same = next(p for p in loopback_pairs(accel, str(dst), builds) if p.name == pair.name)
    p = Pair(same.name, same.receiver, [["cat", str(src)]] + same.sender, same.port, same.daemon)
    wall, _, error = transfer(p, ns, ns, 60)
    if error:
        return error
    got = dst.read_bytes() if dst.exists() else b""
    if got != data:
        return (f"{len(got)} bytes arrived of {len(data)}, sha256 "
                f"{hashlib.sha256(got).hexdigest()[:12]}")
    return None


def sane_samples(pairs: list[Pair], ns: Netns, accel: str, builds: dict[str, str],
                 label: str) -> tuple[dict[str, Samples], list[str]]:
    """Samples for each pair, those that fail the 8 MiB sanity check excluded; and notes
    saying which, and why."""
    samples = {p.name: Samples() for p in pairs}
    notes = []
    for p in pairs:
        err = sanity(p, ns, accel, builds)
        if err:
            samples[p.name] = Samples(dropped=True, excluded=err)
            notes.append(f"{p.name} excluded: 8 MiB sanity check failed: {err}")
        note(f"{label} sanity: {p.name}: {err or 'ok'}")
    return samples, notes


# --------------------------------------------------------------------------------------------
# The measure


def run(ctx: Context) -> str:
    return section("## Between hosts: loopback", loopback, ctx)


def section(heading: str, body, ctx: Context) -> str:
    """`heading`, then `body(ctx)`: or the reason it cannot run here (namespaces need root)."""
    if os.geteuid() != 0 or not shutil.which("ip"):
        return f"{heading}\n\nSkipped: needs root and iproute2 (`ip netns`).\n"
    return f"{heading}\n\n" + body(ctx)


def other_builds(ctx: Context) -> dict[str, str]:
    """The --variants that are another accel binary (`before=/path/to/accel`): each gets an
    encrypted row, to compare builds in the same interleaved rounds."""
    return {t.name: t.argv[0] for t in ctx.tools
            if t.kind == "variant" and t.argv and t.argv[0] != ctx.accel}


def loopback(ctx: Context) -> str:
    count = ctx.stream_mib
    gib = count * MIB / GIB
    dd = ["dd", "if=/dev/zero", "bs=1M", f"count={count}", "status=none"]
    with Netns("lo") as ns:
        builds = other_builds(ctx)
        pairs = loopback_pairs(ctx.accel, "/dev/null", builds)
        samples, notes = sane_samples(pairs, ns, ctx.accel, builds, "net")
        for r, p, s in interleaved(pairs, ctx.rounds, samples):
            timed = Pair(p.name, p.receiver, [dd] + p.sender, p.port, p.daemon)
            wall, x_cpu, error = transfer(timed, ns, ns, ctx.timeout)
            s.add_transfer(wall, x_cpu, error)
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
    text = (f"`dd if=/dev/zero bs=1M count={count} | SENDER`, `RECEIVER > /dev/null`. "
            f"{gib:g} GiB per run, {ctx.rounds} rounds, rotating order, in a network namespace "
            f"of its own. CPU: user+sys of sender and receiver together (ssh: the client, and "
            f"sshd with its session), per GiB.\n\n"
            + md_table(["X", "sender → receiver", "GiB/s median [min–max]", "× ssh",
                        "× mbuffer", "X CPU s/GiB", "status"], rows) + "\n")
    if notes:
        text += "\n" + "\n".join(f"- {n}" for n in notes) + "\n"
    return text
