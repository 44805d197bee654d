"""The report's Markdown: tables, a command in a table cell, and the machine header that
opens the report (and each section of the results file): date, CPU, kernel, load, the
binary under test, the rounds and sizes, the tools' versions.
"""

from __future__ import annotations

import os
import platform
import subprocess
import time
from pathlib import Path

from .context import MIB
from .tools import tool_versions


def md_table(header: list[str], rows: list[list[str]]) -> str:
    """A Markdown table: the header, then a row per list of cells."""
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    for r in rows:
        out.append("| " + " | ".join(r) + " |")
    return "\n".join(out)


def code(s: str) -> str:
    """`s` as code in a table cell (a `|` escaped, as a cell cannot hold one)."""
    return "`" + s.replace("|", "\\|") + "`"


def machine_header(lines: list[str]) -> str:
    """The report's opening: a title, then `machine_lines` (and any line a run adds)."""
    return "\n".join(["# accel benchmark", "", *lines]) + "\n"


def machine_lines(accel: str, accel_origin: str, args, sizes: dict) -> list[str]:
    """The machine and the run, a Markdown list item each: date, CPU, kernel, load average,
    the binary under test, rounds and sizes, versions."""
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

    return [
        f"- date: {time.strftime('%Y-%m-%d %H:%M:%S %Z')}",
        f"- nproc: {nproc}; CPU: {cpu}",
        f"- kernel: {platform.release()}; "
        f"THP: {read('/sys/kernel/mm/transparent_hugepage/enabled')}; "
        f"pipe-max-size: {read('/proc/sys/fs/pipe-max-size')}",
        f"- load average at start: {load_average()}",
        f"- accel binary: {accel_origin}",
        f"- rounds: {args.rounds}"
        f"{' (--quick: sizes are for testing the script only)' if args.quick else ''}; "
        f"corpus target {sizes['corpus'] // MIB} MiB; stream {sizes['count']} MiB",
        "- versions: " + "; ".join(f"{k}: {v}" for k, v in tool_versions(accel)),
    ]


def load_average() -> str:
    """The 1, 5 and 15 minute load averages, as /proc/loadavg has them."""
    return " ".join(read("/proc/loadavg").split()[:3])


def read(path: str) -> str:
    """A /proc or /sys file's content, stripped; "?" if it cannot be read."""
    try:
        return Path(path).read_text().strip()
    except OSError:
        return "?"
