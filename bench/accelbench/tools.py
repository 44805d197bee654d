"""The tools under test: the accel variants of --variants (NAME=COMMAND, `accel` replaced by
the binary), the peers that are installed (mbuffer, pv -B, buffer), their versions for the
machine header, and the 8 MiB sanity check every tool passes before anything is timed.
`show` prints a command line as the tables do, the binary's long path as `accel`.
"""

from __future__ import annotations

import hashlib
import os
import shlex
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from .context import MIB, WORK, Context
from .processes import TtyArgv, cleanup_shm, describe_exit


@dataclass
class Tool:
    """One X of the tables: the bare pipe (no argv), an accel variant or a peer, with the
    command lines the measures that size its buffer use."""
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


def other_builds(ctx: Context) -> dict[str, str]:
    """The --variants that are another accel binary (`before=/path/to/accel`), by name: the
    measures that build their own command lines (net, wan, resume) give each a row, to
    compare builds in the same interleaved rounds."""
    return {t.name: t.argv[0] for t in ctx.tools
            if t.kind == "variant" and t.argv and t.argv[0] != ctx.accel}


def mbuffer_link(accel: str) -> Path:
    """bench/work/asmbuffer/mbuffer, made afresh as a link to `accel`: accel run by that
    name is its mbuffer personality."""
    link = WORK / "asmbuffer" / "mbuffer"
    link.parent.mkdir(parents=True, exist_ok=True)
    if link.is_symlink() or link.exists():
        link.unlink()
    os.symlink(os.path.realpath(accel), link)
    return link
