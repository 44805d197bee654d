"""The pipeline accel exists for:
``bzip2 -dc corpus.tar.bz2 | X | gzip -6 > /dev/null`` on a tar of real files
from this machine (cached in bench/work/).  Both stages are also timed alone.
Two CPU-bound stages that take turns (bare pipe, 64 KiB) run slower than the
slower stage alone; a good buffer lets them overlap, so the wall time
approaches that of the slower stage.
ratio = median wall / max(median wall of the two stages alone).
1.00 is the optimum (the slower stage is never kept waiting); the bare-pipe row
shows how far from it the pipeline starts.  "X CPU s" is user+sys of X itself.
On a shared machine whose speed drifts, "same-run ratio" is steadier: each run's wall
over the CPU seconds of its slower stage in that same run (median [min–max]); "X cs" is
X's voluntary context switches (each a wakeup on a CPU the stages need).
"Steal %" is the share of the machine's CPU time during the run that a CPU wanted and its
host gave to someone else (/proc/stat): it lifts the wall clock and not the stages' CPU
time. Part of it is other guests (noise that drifts between rounds), part the pipeline's
own doing: a CPU left idle at each wait is handed back to the host and may have to wait to
be given it again.
The "side by side" row runs the two stages at once, unpiped (bzip2 -dc > /dev/null beside
gzip < corpus.tar): two CPU-bound processes that never wait for each other. Its same-run
ratio is what this machine gives away with nothing coupling them (the host, the kernel's
own threads, the bench): the floor a buffer can come down to, not below.
--gzip 6,9 runs one table per level: with -6 bzip2 is the slower stage (the buffer must
never keep it waiting), with -9 gzip is (it must never find its input empty).
"""

from __future__ import annotations

from ..context import Context
from ..pipelines import seed_tables


def run(ctx: Context) -> str:
    return seed_tables(ctx)
