"""accel run as ``mbuffer`` (a link of that name), against the real mbuffer, on the
command line syncoid writes: ``mbuffer -q -s 128k -m 16M``.  Two tables, as the seed
and throughput measures make them, with three rows each: the bare pipe, the real
mbuffer, and accel behind the link: the seed pipeline (bursty CPU-bound stages;
ratio 1.000 = optimum) and ``dd | X | cat`` (GiB/s).  Divide accel-as-mbuffer's
median by mbuffer's for the ratio.  Needs mbuffer installed; otherwise says so.
"""

from __future__ import annotations

import dataclasses
import shutil

from ..context import Context, NotMeasured
from ..pipelines import seed_tables, stream_table
from ..tools import Tool, mbuffer_link

SYNCOID = ["-q", "-s", "128k", "-m", "16M"]


def run(ctx: Context) -> str:
    head = "## accel as mbuffer: syncoid's `mbuffer -q -s 128k -m 16M`\n\n"
    if shutil.which("mbuffer") is None:
        raise NotMeasured(head + "mbuffer is not installed: nothing measured.\n")
    link = mbuffer_link(ctx.accel)
    tools = [Tool("bare", None, "bare"),
             Tool("mbuffer", ["mbuffer", *SYNCOID], "peer"),
             Tool("accel-as-mbuffer", [str(link), *SYNCOID], "variant")]
    sub = dataclasses.replace(ctx, tools=tools)
    sections = [seed_tables(sub), stream_table(sub)]
    demoted = "".join(s.replace("## ", "### ", 1) + "\n" for s in sections)
    return (head + f"`accel-as-mbuffer` is `{link}`, a link to accel.\n\n" + demoted)
