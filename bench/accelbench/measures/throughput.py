"""``dd if=/dev/zero bs=1M count=8192 | X | cat > /dev/null``: GiB/s of the
pipeline and X's own CPU seconds per GiB moved (lower is better; the cost an
intermediary adds to every pipeline it sits in).  "× bare" = GiB/s / bare pipe's.
"""

from __future__ import annotations

from ..context import Context
from ..pipelines import stream_table


def run(ctx: Context) -> str:
    return stream_table(ctx)
