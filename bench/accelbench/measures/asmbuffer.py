"""accel run as ``mbuffer`` (a link of that name), against the real mbuffer, on the
command line syncoid writes: ``mbuffer -q -s 128k -m 16M``.  Two tables, as the seed
and throughput measures make them, with three rows each: the bare pipe, the real
mbuffer, and accel behind the link: the seed pipeline (bursty CPU-bound stages;
ratio 1.000 = optimum) and ``dd | X | cat`` (GiB/s).  Divide accel-as-mbuffer's
median by mbuffer's for the ratio.  Needs mbuffer installed; otherwise says so.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
from pathlib import Path

from ..runner import Context, Tool
from . import seed, throughput

SYNCOID = ["-q", "-s", "128k", "-m", "16M"]


def run(ctx: Context) -> str:
    head = "## accel as mbuffer: syncoid's `mbuffer -q -s 128k -m 16M`\n\n"
    if shutil.which("mbuffer") is None:
        return head + "mbuffer is not installed: nothing measured.\n"
    work = Path(__file__).resolve().parents[2] / "work" / "asmbuffer"
    work.mkdir(parents=True, exist_ok=True)
    link = work / "mbuffer"
    if link.is_symlink() or link.exists():
        link.unlink()
    os.symlink(os.path.realpath(ctx.accel), link)
    tools = [Tool("bare", None, "bare"),
             Tool("mbuffer", ["mbuffer", *SYNCOID], "peer"),
             Tool("accel-as-mbuffer", [str(link), *SYNCOID], "variant")]
    sub = dataclasses.replace(ctx, tools=tools)
    sections = [seed.run(sub), throughput.run(sub)]
    demoted = "".join(s.replace("## ", "### ", 1) + "\n" for s in sections)
    return (head + f"`accel-as-mbuffer` is `{link}`, a link to accel.\n\n" + demoted)
