"""Statistics over rounds: the rotated order in which tools take turns (`rotated`,
`interleaved`), one `Samples` per tool (wall, CPU, failures, dropped after a timeout),
medians and spreads (`med`, `fmt_spread`), the status cell a table shows for them, and
figures paired by round (`per_round`) with a goal's verdict on them (`verdict`).

Every timed figure is a median over rounds in which the tools run in rotating order, so
that a slow drift in the machine's background load hits all tools alike.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .processes import RunResult
    from .tools import Tool


def rotated(jobs: list, r: int) -> list:
    """`jobs` in round r's order: starting at job r, wrapping around."""
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
    """The median."""
    return statistics.median(xs)


def fmt_spread(xs: list[float], nd: int = 2) -> str:
    """`median [min–max]` with nd decimals, or — for no samples."""
    if not xs:
        return "—"
    return f"{med(xs):.{nd}f} [{min(xs):.{nd}f}–{max(xs):.{nd}f}]"


@dataclass
class Samples:
    """One tool's (or row's) figures over the rounds: runs, failures, and per successful run
    the wall seconds and CPU seconds (of X, of every process); `dropped` once it timed out
    (or was excluded), so that later rounds skip it."""
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
    """The status cell of a tool the sanity check excluded."""
    return f"EXCLUDED: 8 MiB sanity check failed: {reason}".replace("|", "\\|")


def per_round(xs: dict[int, float], ys: dict[int, float], op) -> list[float]:
    """op(x, y) for each round in which both rows have a figure, in round order."""
    return [op(xs[r], ys[r]) for r in sorted(xs) if r in ys]


def verdict(xs: list[float], holds) -> str:
    """**met** or **NOT met** by the median of `xs` (holds(median) decides), saying so when
    some round fell on the other side; "not measured" without figures."""
    if not xs:
        return "not measured"
    met = holds(med(xs))
    said = "**met**" if met else "**NOT met**"
    if any(holds(x) != met for x in xs):
        said += " (some rounds fall on the other side)"
    return said
