"""What crosses the network lab: a `Pair` (a receiver listening in one namespace, a sender
pipeline in another), one timed `transfer` of it with the CPU of both ends, the pairs the
loopback measures compare (accel encrypted and --insecure, other accel builds, mbuffer,
accel run as mbuffer, ssh into the benchmark's own sshd), and the 8 MiB sanity check a
pair passes before it is timed. The namespaces and links themselves are `netlab`.
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

from .context import MIB, WORK, note
from .netlab import Netns, ssh_setup, sshd_argv
from .stats import Samples
from .tools import mbuffer_link

# accel's transport measured as such: its sender pinned to an uncompressed wire. --compress's
# default is auto, and these measures send zeros (or a tar), which zstd shrinks up to a
# thousandfold: a row would measure the compressor, against peers that send every byte. The
# compress measure is the one about compression.
PLAIN_WIRE = ["--compress", "none"]


def show_across(argv: list[str], accel: str) -> str:
    """A command for the tables: accel's path as `accel`, bench/work as `work`, ssh's many
    options as `…`."""
    if argv and argv[0] == "ssh":
        argv = ["ssh", "-c", "aes128-gcm@openssh.com", "…", *argv[-3:]]
    words = ("accel" if a == accel else a.replace(str(WORK), "work") for a in argv)
    return " ".join(words)


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
             recv_stdout=subprocess.DEVNULL, consumer: list[str] | None = None,
             sides: dict[str, float] | None = None):
    """Runs one transfer; returns (wall s, CPU s of X at both ends, error or None), and
    fills `sides`, when given, with each end's own CPU s ("sender", "receiver"): which end
    a cost falls on (encryption's copies and cipher, say) the sum hides.
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
    if sides is not None:
        sides.update(sender=cpu[senders[-1].pid], receiver=cpu[recv.pid])
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

    def encrypted(name: str, binary: str, port: int, plain: list[str]) -> Pair:
        return Pair(name, [binary, "--from", f"127.0.0.1:{port}", "--key-file", key, "-o", out],
                    [[binary, "--to", f"127.0.0.1:{port}", "--key-file", key] + plain], port)

    pairs = [
        encrypted("accel", accel, 9101, PLAIN_WIRE),
        Pair("accel --insecure", [accel, "--from", "127.0.0.1:9102", "--insecure", "-o", out],
             [[accel, "--to", "127.0.0.1:9102", "--insecure"]], 9102),
    ]
    for port, (name, binary) in enumerate((builds or {}).items(), start=9111):
        pairs.append(encrypted(name, binary, port, []))  # older: uncompressed by default
    if shutil.which("mbuffer"):
        pairs.append(Pair("mbuffer", ["mbuffer", "-q", "-m", "32M", "-I", "9103", "-o", out],
                          [["mbuffer", "-q", "-m", "32M", "-O", "127.0.0.1:9103"]], 9103))
        pairs += as_mbuffer_pairs(accel, key, out)
    ssh = ssh_setup()
    if ssh:
        config, client = ssh
        pairs.append(Pair("ssh aes128-gcm", sshd_argv(config, 9104),
                          [client + ["-p", "9104", "root@127.0.0.1", f"cat > {out}"]],
                          9104, daemon=True))
    return pairs


def as_mbuffer_pairs(accel: str, key: str, out: str) -> list[Pair]:
    """accel run as mbuffer (a link in bench/work) with mbuffer's -O/-I: both ends accel,
    plain and with ACCEL_KEY_FILE (encrypted), and each end against the real mbuffer."""
    link = mbuffer_link(accel)
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
