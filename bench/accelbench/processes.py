"""The process runner: a pipeline of real processes over real OS pipes (stages[0] |
stages[1] | ... > /dev/null), each process reaped as it exits with its CPU time, peak RSS,
voluntary context switches, exit status and exit time; readers of FIFOs beside the
stages; a pseudo-terminal as a stage's stderr; the host's steal time over a run. Also the
small helpers of measures that drive processes by hand (`reap`, `proc_status`,
`pipe_queued`, `describe_exit`).

Measures time things with `run_pipeline` rather than the shell, so that every process's
status is checked (like `set -o pipefail`) and its CPU time is its own.
"""

from __future__ import annotations

import fcntl
import os
import select
import signal
import struct
import subprocess
import tempfile
import termios
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from .context import WORK, note


class TtyArgv(list):
    """A command line whose stderr is to be a pseudo-terminal (a variant named NAME+tty), so
    that a progress line is really drawn; what it draws is read and discarded. A list like
    any other argv, marked by its type: a command line built from it is an ordinary one."""


@dataclass
class ProcResult:
    """One process of a run, once reaped."""
    argv: list[str]
    rc: int | None
    cpu: float  # user + sys seconds
    maxrss_kib: int
    stderr: str
    end: float = 0.0  # seconds after the run's start at which the process exited
    vcsw: int = 0  # voluntary context switches: times it slept and was woken


@dataclass
class RunResult:
    """A run of a pipeline: its wall time, each process, and why it failed, if it did."""
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

