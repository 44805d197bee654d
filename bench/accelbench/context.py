"""What every part of the benchmark shares: where it lives (BENCH, REPO, WORK), the units,
progress lines on stderr (`note`), the `Context` a measure's run(ctx) is given, and
`NotMeasured`, which a measure raises when it cannot run on this machine.

It imports nothing of the benchmark's own, so that any module may import it.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .tools import Tool

BENCH = Path(__file__).resolve().parent.parent
REPO = BENCH.parent
WORK = BENCH / "work"
MIB = 1 << 20
GIB = 1 << 30


def note(msg: str) -> None:
    """A progress line on stderr (stdout carries the report)."""
    print(f"[bench] {msg}", file=sys.stderr, flush=True)


@dataclass(frozen=True)
class Context:
    """What every measure's run(ctx) is given."""
    tools: list[Tool]  # the bare pipe, the variants, then the installed peers
    accel: str  # the binary under test; `tools.show` prints it as `accel`
    rounds: int
    corpus_bytes: int  # target size of the seed corpus
    stream_mib: int  # MiB of the dd stream in throughput (cpu streams a quarter of it)
    timeout: float  # seconds before a pipeline run is killed
    gzip_levels: tuple[int, ...] = (6,)  # the seed pipeline's `gzip -N`, one table each
    quick: bool = False  # --quick: measures choose their own small sizes (tens of MiB)
    drop_caches: bool = False  # --drop-caches: files and spill read from the disk, not cache
    ssh_mib: int | None = None  # --ssh-mib: the ssh measure's stream (its default otherwise)
    streams_cells: tuple[str, ...] | None = None  # --streams-cells: those cells only (None: all)
    compress_links: tuple[str, ...] | None = None  # --compress-links: those links only


class NotMeasured(Exception):
    """Raised by a measure that cannot run here (not root, a tool missing), with its section
    as text: a heading and why. The report prints it as the measure's section; the results
    file keeps what an earlier run of that measure measured."""

    def __init__(self, section: str):
        super().__init__(section)
        self.section = section
