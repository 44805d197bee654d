"""The shared runner: what every measure stands on.

It owns the tools under test (the accel variants from --variants, the peers that are
installed, their versions), running a pipeline of real processes over real OS pipes and
collecting each process's CPU time and exit status, the 8 MiB sanity check, the interleaved
rounds (`rotated`), medians and spreads (`Samples`, `med`, `fmt_spread`), Markdown tables
and the machine header that opens the report.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import platform
import select
import shlex
import shutil
import signal
import statistics
import struct
import subprocess
import sys
import tempfile
import termios
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

BENCH = Path(__file__).resolve().parent.parent
REPO = BENCH.parent
WORK = BENCH / "work"
MIB = 1 << 20
GIB = 1 << 30


class TtyArgv(list):
    """A command line whose stderr is to be a pseudo-terminal (a variant named NAME+tty), so
    that a progress line is really drawn; what it draws is read and discarded. A list like
    any other argv, marked by its type: a command line built from it is an ordinary one."""


def note(msg: str) -> None:
    print(f"[bench] {msg}", file=sys.stderr, flush=True)


# --------------------------------------------------------------------------------------------
# Tools


@dataclass
class Tool:
    name: str
    argv: list[str] | None  # None: bare pipe (no X)
    kind: str  # "bare", "variant", "peer"
    rss_argv: list[str] | None = None  # with a 1 GiB buffer
    giveback_argv: list[str] | None = None  # accel variants only: -m 512M
    excluded: str | None = None  # reason, if sanity check failed

    def display(self, accel_path: str) -> str:
        if self.argv is None:
            return "—"
        return show(self.argv, accel_path)


def show(argv: list[str], accel_path: str) -> str:
    """A command line for the tables, with the accel binary's path shortened to `accel`."""
    return " ".join("accel" if a == accel_path else shlex.quote(a) for a in argv)


def set_size(argv: list[str], size: str) -> list[str]:
    """Drop any -m/--size from an accel command line and append `-m size` (clap rejects repeats).
    Also right for mbuffer, whose buffer size is `-m SIZE` too."""
    out: list[str] = []
    skip = False
    for a in argv:
        if skip:
            skip = False
            continue
        if a in ("-m", "--size"):
            skip = True
            continue
        if a.startswith("--size=") or (a.startswith("-m") and not a.startswith("--")):
            continue
        out.append(a)
    return out + ["-m", size]


def parse_variants(spec: str, accel: str) -> list[Tool]:
    tools: list[Tool] = []
    for item in spec.split(","):
        item = item.strip()
        if not item:
            continue
        name, sep, cmd = item.partition("=")
        if not sep:
            name, cmd = item, item
        name, cmd = name.strip(), cmd.strip()
        argv = [accel if w == "accel" else w for w in shlex.split(cmd)]
        if not argv:
            raise SystemExit(f"run.py: empty command in variant {item!r}")
        if any(t.name == name for t in tools):
            raise SystemExit(f"run.py: duplicate variant name {name!r}")
        if name.endswith("+tty"):
            argv = TtyArgv(argv)
        tools.append(
            Tool(name, argv, "variant", set_size(argv, "1G"), set_size(argv, "512M"))
        )
    if not tools:
        raise SystemExit("run.py: --variants is empty")
    return tools


def peer_tools(notes: list[str], chosen: list[str] | None = None) -> list[Tool]:
    """The installed peers (of `chosen` by name, if given), and a note for each one missing."""
    peers = [
        Tool("mbuffer", ["mbuffer", "-q", "-m", "32M"], "peer", ["mbuffer", "-q", "-m", "1G"]),
        Tool("pv -B", ["pv", "-q", "-B", "32M"], "peer", ["pv", "-q", "-B", "1G"]),
        # buffer parses K and M suffixes only ("-m 1G" = 1 byte -> "max_shmem 1 too low"),
        # and refuses more than about 1 GiB of blocks; 1024M is its largest 1 GiB spelling.
        Tool("buffer", ["buffer", "-m", "32M", "-s", "512K"], "peer",
             ["buffer", "-m", "1024M", "-s", "512K"]),
    ]
    out = []
    for t in peers:
        if chosen is not None and t.name not in chosen:
            continue
        if shutil.which(t.argv[0]) is None:
            notes.append(f"{t.name}: `{t.argv[0]}` is not installed; skipped.")
            continue
        out.append(t)
    return out


def tool_versions(accel: str) -> list[tuple[str, str]]:
    def first_line(argv: list[str], both: bool = True) -> str:
        try:
            r = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, timeout=10)
        except (OSError, subprocess.TimeoutExpired) as e:
            return f"unavailable ({e.__class__.__name__})"
        text = r.stdout.decode(errors="replace")
        if both or not text.strip():
            text = text + r.stderr.decode(errors="replace")
        lines = [l for l in text.splitlines() if l.strip()]
        return lines[0].strip() if lines else "unknown"

    out = [("accel", first_line([accel, "--version"]))]
    if shutil.which("mbuffer"):
        out.append(("mbuffer", first_line(["mbuffer", "--version"])))
    if shutil.which("pv"):
        out.append(("pv", first_line(["pv", "--version"])))
    if shutil.which("buffer"):
        v = "unknown (no --version)"
        if shutil.which("dpkg-query"):
            r = subprocess.run(["dpkg-query", "-W", "-f", "${Version}", "buffer"],
                               capture_output=True, text=True)
            if r.returncode == 0 and r.stdout.strip():
                v = f"Debian package {r.stdout.strip()}"
        out.append(("buffer", v))
    if shutil.which("ssh"):
        out.append(("ssh", first_line(["ssh", "-V"])))
    out.append(("bzip2", first_line(["bzip2", "--version"])))
    out.append(("gzip", first_line(["gzip", "--version"])))
    return out


@dataclass(frozen=True)
class Context:
    """What every measure's run(ctx) is given."""
    tools: list[Tool]  # the bare pipe, the variants, then the installed peers
    accel: str  # the binary under test; `show` prints it as `accel`
    rounds: int
    corpus_bytes: int  # target size of the seed corpus
    stream_mib: int  # MiB of the dd stream in throughput (cpu streams a quarter of it)
    timeout: float  # seconds before a pipeline run is killed
    gzip_levels: tuple[int, ...] = (6,)  # the seed pipeline's `gzip -N`, one table each
    quick: bool = False  # --quick: measures choose their own small sizes (tens of MiB)
    drop_caches: bool = False  # --drop-caches: files and spill read from the disk, not cache


# --------------------------------------------------------------------------------------------
# Running pipelines


@dataclass
class ProcResult:
    argv: list[str]
    rc: int | None
    cpu: float  # user + sys seconds
    maxrss_kib: int
    stderr: str
    end: float = 0.0  # seconds after the run's start at which the process exited
    vcsw: int = 0  # voluntary context switches: times it slept and was woken


@dataclass
class RunResult:
    wall: float
    procs: list[ProcResult]
    error: str | None = None  # None = every process exited 0
    timed_out: bool = False
    t0: float = 0.0  # time.perf_counter() at the start (CLOCK_MONOTONIC, as in a child)
    steal: float = 0.0  # CPU seconds the host took from this machine's CPUs meanwhile

    @property
    def ok(self) -> bool:
        return self.error is None


def _first_line(text: str) -> str:
    for line in text.splitlines():
        if line.strip():
            return line.strip()[:160]
    return ""


def _describe_rc(rc: int) -> str:
    if rc < 0:
        try:
            return f"killed by {signal.Signals(-rc).name}"
        except ValueError:
            return f"killed by signal {-rc}"
    return f"exit {rc}"


def describe_exit(rc: int, stderr: str) -> str:
    """Why a process failed, in words: its status and the first line of its stderr."""
    line = _first_line(stderr)
    return _describe_rc(rc) + (f": {line}" if line else "")


def proc_status(pid: int) -> dict[str, int]:
    """VmRSS and VmHWM (KiB) of a running process, from /proc/PID/status; {} once it is gone."""
    out = {}
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            k, _, v = line.partition(":")
            if k in ("VmRSS", "VmHWM"):
                out[k] = int(v.split()[0])  # kB
    except (OSError, ValueError):
        pass
    return out


def stolen() -> float:
    """CPU seconds so far that this machine's CPUs wanted and the hypervisor gave to something
    else (the "steal" of /proc/stat, all CPUs; 0 where there is none). A stage's CPU time
    leaves it out and the wall clock does not, so it lifts a wall / CPU ratio."""
    try:
        with open("/proc/stat") as f:
            fields = f.readline().split()
        return int(fields[8]) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return 0.0


def pipe_queued(fd: int) -> int:
    """Bytes waiting in the pipe whose end fd is (FIONREAD)."""
    buf = fcntl.ioctl(fd, termios.FIONREAD, struct.pack("i", 0))
    return struct.unpack("i", buf)[0]


def cleanup_shm(pids: set[int]) -> None:
    """Remove SysV shm segments left behind by killed processes of ours (buffer uses them)."""
    try:
        lines = Path("/proc/sysvipc/shm").read_text().splitlines()[1:]
    except OSError:
        return
    for line in lines:
        f = line.split()
        if len(f) < 7:
            continue
        shmid, cpid, nattch = f[1], int(f[4]), int(f[6])
        if cpid in pids and nattch == 0:
            subprocess.run(["ipcrm", "-m", shmid], capture_output=True)
            note(f"removed shm segment {shmid} left by killed pid {cpid}")


@dataclass
class _Job:
    """A process of a pipeline: its command line, the file its stderr goes to, and once
    started, the process."""
    argv: list[str]
    stderr: object  # a TemporaryFile
    proc: subprocess.Popen | None = None
    # Once reaped: status, user+sys CPU seconds, ru_maxrss (KiB), seconds after the start,
    # voluntary context switches.
    end: tuple[int, float, int, float] | None = None


class _Killer:
    """Kills every started process of a pipeline that has not been reaped yet (a timeout, a
    failed start, readers that outlive the stages), and remembers that it did."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.fired = threading.Event()
        self.jobs: list[_Job] = []

    def __call__(self) -> None:
        self.fired.set()
        with self.lock:
            for job in self.jobs:
                if job.proc is not None and job.end is None:
                    try:
                        os.kill(job.proc.pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass


def run_pipeline(stages: list[list[str]], stdin_path: str | None = None,
                 timeout: float = 600.0, pipe_sizes: dict[int, int] | None = None,
                 readers: list[tuple[list[str], str]] | None = None) -> RunResult:
    """Run stages[0] | stages[1] | ... > /dev/null over real pipes.

    pipe_sizes maps a stage index to the size (F_SETPIPE_SZ) of the pipe it writes into. A
    stage whose argv is a TtyArgv gets a pseudo-terminal as stderr.

    readers are (argv, path) pairs: processes that read what a stage writes by name, each
    started before the stages with stdin opened on path and stdout /dev/null; their results
    follow the stages' in `procs`. A FIFO is opened here without waiting for a writer, so no
    stage waits for a reader to start up; until a writer has opened it, read() on it returns
    EOF, so a reader must first wait for input with poll or select. A reader still running
    15 s after the last stage ended (say, its writer failed before opening the FIFO) is
    killed, and the run fails.

    Wall time runs from just before the first process is started until every process has
    exited. Each process is reaped as it exits, in whatever order (os.wait4, which also
    gives its user+sys CPU time); `end` is when that was.
    """
    # The stages, then the readers; their stderr files are made before the clock starts.
    jobs = [_Job(argv, tempfile.TemporaryFile(dir=WORK)) for argv in stages]
    jobs += [_Job(argv, tempfile.TemporaryFile(dir=WORK)) for argv, _ in readers or []]
    kill = _Killer()
    kill.jobs = jobs
    steal0 = stolen()
    t0 = time.perf_counter()
    spawn_error = _start(jobs, len(stages), stdin_path, pipe_sizes or {},
                         [path for _, path in readers or []], kill)
    if spawn_error:
        kill()
    timer = threading.Timer(timeout, kill)
    timer.daemon = True
    timer.start()
    late = _reap(jobs, len(stages), t0, kill)
    t1 = time.perf_counter()
    timer.cancel()
    results, punctual = _results(jobs, late)
    error = spawn_error
    if kill.fired.is_set() and not spawn_error and not late:
        error = f"timeout after {timeout:.0f} s (killed)"
        cleanup_shm({job.proc.pid for job in jobs if job.proc is not None})
    if error is None:
        error = _failure(punctual, [jobs[k].argv for k in late])
    return RunResult(t1 - t0, results, error, kill.fired.is_set(), t0, stolen() - steal0)


def _start(jobs: list[_Job], n_stages: int, stdin_path: str | None,
           pipe_sizes: dict[int, int], reader_paths: list[str], kill: _Killer) -> str | None:
    """Starts the readers, then the stages piped one into the next; None, or why a process
    could not be started (those started so far are left for the caller to kill)."""
    reader_fds = []
    for path in reader_paths:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        os.set_blocking(fd, True)
        reader_fds.append(fd)
    stdin_f = open(stdin_path, "rb") if stdin_path else open(os.devnull, "rb")
    out_f = open(os.devnull, "wb")

    def spawn(job: _Job, **streams) -> str | None:
        try:
            proc = subprocess.Popen(job.argv, **streams)
        except OSError as e:
            return f"cannot start `{job.argv[0]}`: {e.strerror or e}"
        with kill.lock:
            job.proc = proc
        return None

    try:
        for job, fd in zip(jobs[n_stages:], reader_fds):
            error = spawn(job, stdin=fd, stdout=out_f, stderr=job.stderr)
            if error:
                return error
        prev = stdin_f
        for i, job in enumerate(jobs[:n_stages]):
            last = i == n_stages - 1
            stderr = tty_sink() if isinstance(job.argv, TtyArgv) else job.stderr
            try:
                error = spawn(job, stdin=prev, stdout=out_f if last else subprocess.PIPE,
                              stderr=stderr)
            finally:
                # The parent's copy of the pipe's read end must go, or EPIPE never reaches
                # the previous stage when this one dies.
                if prev is not stdin_f:
                    prev.close()
                if stderr is not job.stderr:
                    os.close(stderr)
            if error:
                return error
            prev = job.proc.stdout
            if i in pipe_sizes and prev is not None:
                fcntl.fcntl(prev.fileno(), 1031, pipe_sizes[i])  # F_SETPIPE_SZ
        return None
    finally:
        stdin_f.close()
        out_f.close()
        for fd in reader_fds:  # the readers' own copies keep the FIFOs open from here on
            os.close(fd)


def _reap(jobs: list[_Job], n_stages: int, t0: float, kill: _Killer) -> list[int]:
    """Reaps every started process as it exits (wait4: status, CPU, peak RSS, when). Readers
    still running 15 s after the last stage are killed; returns their indices."""
    by_pidfd = {os.pidfd_open(job.proc.pid): k for k, job in enumerate(jobs) if job.proc}
    poller = select.poll()
    for fd in by_pidfd:
        poller.register(fd, select.POLLIN)
    stages = {k for k, job in enumerate(jobs[:n_stages]) if job.proc}
    grace_end = None  # when the readers must have ended, once every stage has
    late: list[int] = []
    while by_pidfd:
        if grace_end is None and all(jobs[k].end for k in stages):
            grace_end = time.perf_counter() + 15
        ready = poller.poll(None if grace_end is None or late
                            else max(0.0, grace_end - time.perf_counter()) * 1000)
        if not ready and not late:
            late = list(by_pidfd.values())
            kill()
        for fd, _ in ready:
            k = by_pidfd.pop(fd)
            poller.unregister(fd)
            os.close(fd)
            proc = jobs[k].proc
            _, status, ru = os.wait4(proc.pid, 0)
            end = time.perf_counter() - t0
            with kill.lock:
                proc.returncode = os.waitstatus_to_exitcode(status)
                cpu = ru.ru_utime + ru.ru_stime
                jobs[k].end = (proc.returncode, cpu, ru.ru_maxrss, end, ru.ru_nvcsw)
    return late


def _results(jobs: list[_Job], late: list[int]) -> tuple[list[ProcResult], list[ProcResult]]:
    """Each reaped process's result, and those of all but the readers killed for being late;
    closes the stderr files."""
    results: list[ProcResult] = []
    punctual: list[ProcResult] = []
    for k, job in enumerate(jobs):
        if job.end is not None:
            job.stderr.seek(0)
            rc, cpu, maxrss, end, vcsw = job.end
            text = job.stderr.read(4096).decode(errors="replace")
            results.append(ProcResult(job.argv, rc, cpu, maxrss, text, end, vcsw))
            if k not in late:
                punctual.append(results[-1])
        job.stderr.close()
    return results, punctual


def _failure(punctual: list[ProcResult], late: list[list[str]]) -> str | None:
    """Why the run failed, like pipefail: any non-zero status, the root cause first (a
    producer killed by SIGPIPE is usually the consequence of a later stage dying); None if
    every process exited 0 in time."""
    bad = [r for r in punctual if r.rc != 0]
    bad.sort(key=lambda r: r.rc == -signal.SIGPIPE)
    error = None
    if bad:
        parts = []
        for r in bad:
            msg = f"`{os.path.basename(r.argv[0])}` {_describe_rc(r.rc)}"
            line = _first_line(r.stderr)
            parts.append(f"{msg}: {line}" if line and not parts else msg)
        error = parts[0] + (f" (also {', '.join(parts[1:])})" if parts[1:] else "")
    if late:
        msg = (f"`{os.path.basename(late[0][0])}` still running 15 s after the last stage "
               "ended (killed)")
        error = f"{error}; {msg}" if error else msg
    return error


def tty_sink() -> int:
    """The slave end of a new 120-column pseudo-terminal whose output is read and dropped."""
    import pty
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 30, 120, 0, 0))

    def drain() -> None:
        try:
            while os.read(master, 65536):
                pass
        except OSError:
            pass  # EIO once the last writer has closed the slave
        finally:
            os.close(master)

    threading.Thread(target=drain, daemon=True).start()
    return slave


def reap(proc: subprocess.Popen, errf, error: str | None) -> tuple[int, str | None]:
    """Waits up to 15 s for `proc` after its input ended (killing it after that), closes its
    stdout and stderr file, and returns its status and `error`, or, if none was given and it
    failed, its status and first stderr line."""
    try:
        rc = proc.wait(15)
    except subprocess.TimeoutExpired:
        proc.kill()
        rc = proc.wait()
        cleanup_shm({proc.pid})
        error = error or "no exit within 15 s of EOF"
    proc.stdout.close()
    errf.seek(0)
    err_text = errf.read(4096).decode(errors="replace")
    errf.close()
    if rc != 0 and not error:
        error = describe_exit(rc, err_text)
    return rc, error


def sanity_check(tool: Tool, timeout: float = 60.0) -> str | None:
    """8 MiB of random bytes through X must come out unchanged. Returns an error or None."""
    data = os.urandom(8 * MIB)
    try:
        p = subprocess.Popen(tool.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE)
    except OSError as e:
        return f"cannot start: {e.strerror or e}"
    try:
        out, err = p.communicate(data, timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        p.communicate()
        cleanup_shm({p.pid})
        return f"no EOF within {timeout:.0f} s"
    if p.returncode != 0:
        return describe_exit(p.returncode, err.decode(errors="replace"))
    if out != data:
        return (f"output differs from input ({len(out)} bytes out of {len(data)}, "
                f"sha256 {hashlib.sha256(out).hexdigest()[:12]} vs "
                f"{hashlib.sha256(data).hexdigest()[:12]})")
    return None


# --------------------------------------------------------------------------------------------
# Statistics and formatting


def rotated(jobs: list, r: int) -> list:
    k = r % len(jobs)
    return jobs[k:] + jobs[:k]


def interleaved(jobs: list, rounds: int, samples: dict, key=lambda job: job.name):
    """Yields (round, job, its Samples) for every job in every round, round r starting at
    job r; a job whose samples were dropped (excluded, or timed out in an earlier run) is
    skipped. samples maps key(job) to the job's Samples."""
    for r in range(rounds):
        for job in rotated(jobs, r):
            s = samples[key(job)]
            if not s.dropped:
                yield r, job, s


def med(xs: list[float]) -> float:
    return statistics.median(xs)


def fmt_spread(xs: list[float], nd: int = 2) -> str:
    if not xs:
        return "—"
    return f"{med(xs):.{nd}f} [{min(xs):.{nd}f}–{max(xs):.{nd}f}]"


@dataclass
class Samples:
    runs: int = 0
    failures: list[str] = field(default_factory=list)
    wall: list[float] = field(default_factory=list)
    x_cpu: list[float] = field(default_factory=list)
    all_cpu: list[float] = field(default_factory=list)
    rss_kib: list[int] = field(default_factory=list)
    dropped: bool = False
    excluded: str | None = None

    @classmethod
    def for_tool(cls, t: Tool | None) -> "Samples":
        if t is not None and t.excluded:
            return cls(dropped=True, excluded=t.excluded)
        return cls()

    def add(self, rr: RunResult, x_index: int | None) -> None:
        self.runs += 1
        if not rr.ok:
            self.failures.append(rr.error or "failed")
            if rr.timed_out:
                self.dropped = True
            return
        self.wall.append(rr.wall)
        self.all_cpu.append(sum(p.cpu for p in rr.procs))
        if x_index is not None:
            self.x_cpu.append(rr.procs[x_index].cpu)

    def add_transfer(self, wall: float, x_cpu: float, error: str | None) -> None:
        """Counts one timed transfer (the network measures' `transfer`): its wall time and
        X's CPU, or its error."""
        self.runs += 1
        if error:
            self.failures.append(error)
        else:
            self.wall.append(wall)
            self.x_cpu.append(x_cpu)

    def status(self) -> str:
        if self.excluded:
            return excluded_status(self.excluded)
        if not self.runs:
            return "not run"
        if not self.failures:
            return "ok"
        s = f"FAILED {len(self.failures)}/{self.runs}: {self.failures[0]}"
        if self.dropped:
            s += " (dropped for the remaining rounds)"
        return s.replace("|", "\\|")


def excluded_status(reason: str) -> str:
    return f"EXCLUDED: 8 MiB sanity check failed: {reason}".replace("|", "\\|")


def md_table(header: list[str], rows: list[list[str]]) -> str:
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    for r in rows:
        out.append("| " + " | ".join(r) + " |")
    return "\n".join(out)


def code(s: str) -> str:
    return "`" + s.replace("|", "\\|") + "`"


# --------------------------------------------------------------------------------------------
# Machine header

def machine_header(accel: str, accel_origin: str, args, sizes: dict) -> str:
    cpu = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        nproc = subprocess.run(["nproc"], capture_output=True, text=True).stdout.strip()
    except OSError:
        nproc = str(os.cpu_count())

    def read(p: str) -> str:
        try:
            return Path(p).read_text().strip()
        except OSError:
            return "?"

    lines = [
        "# accel benchmark",
        "",
        f"- date: {time.strftime('%Y-%m-%d %H:%M:%S %Z')}",
        f"- nproc: {nproc}; CPU: {cpu}",
        f"- kernel: {platform.release()}; THP: {read('/sys/kernel/mm/transparent_hugepage/enabled')}; "
        f"pipe-max-size: {read('/proc/sys/fs/pipe-max-size')}",
        f"- load average at start: {' '.join(read('/proc/loadavg').split()[:3])}",
        f"- accel binary: {accel_origin}",
        f"- rounds: {args.rounds}{' (--quick: sizes are for testing the script only)' if args.quick else ''}; "
        f"corpus target {sizes['corpus'] // MIB} MiB; stream {sizes['count']} MiB",
        "- versions: " + "; ".join(f"{k}: {v}" for k, v in tool_versions(accel)),
    ]
    return "\n".join(lines) + "\n"

