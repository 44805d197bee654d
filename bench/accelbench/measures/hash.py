"""Stream hashes: ``dd if=/dev/zero bs=1M count=4096 | X > /dev/null`` with X =
``accel -q --hash ALG`` for sha256, blake3 and md5 (stdout is /dev/null, as
``-o /dev/null`` would open it), against ``openssl dgst`` of the same algorithm
alone on the same data (SHA-NI), ``sha256sum`` as a reference row, ``b3sum``
when installed, and ``cat``, the pipe's ceiling. GiB/s median [min–max];
"× openssl" = GiB/s over openssl's for the same algorithm; "goal" checks issue
8's: accel sha256 ≥ 0.9 × openssl, blake3 ≥ 2 GiB/s. The digests accel prints
for sha256 and md5 are checked against Python's hashlib. Then the seed pipeline
(as in seed) with ``accel`` and ``accel --hash blake3``: a hash much faster than
gzip -6 should leave the ratio to the slower stage unchanged. --quick: 64 MiB.
The producer is dd with 1 MiB writes, as in throughput: ``head -c`` writes 4 KiB
at a time, and its pipe then caps every row near 2 GiB/s, cat's included.
"""

from __future__ import annotations

import hashlib
import shutil

from ..context import GIB, MIB, Context, note
from ..markdown import code, md_table
from ..pipelines import COLUMNS as SEED_COLUMNS, seed_rows
from ..processes import run_pipeline
from ..stats import Samples, fmt_spread, interleaved, med
from ..tools import Tool, show

GOALS = {"sha256": 0.9, "blake3": 2.0}  # × openssl dgst -sha256; GiB/s


def run(ctx: Context) -> str:
    accel, rounds, timeout = ctx.accel, ctx.rounds, ctx.timeout
    mib = 64 if ctx.quick else 4096
    gib = mib * MIB / GIB
    producer = ["dd", "if=/dev/zero", "bs=1M", f"count={mib}", "status=none"]
    # (name, argv, algorithm or None); a reference only when installed.
    jobs: list[tuple[str, list[str], str | None]] = [("pipe alone", ["cat"], None)]
    for alg, refs in (("sha256", ["openssl", "sha256sum"]), ("blake3", ["b3sum"]),
                      ("md5", ["openssl"])):
        for ref in refs:
            if shutil.which(ref):
                argv = ["openssl", "dgst", f"-{alg}"] if ref == "openssl" else [ref]
                jobs.append((f"{ref} {alg}" if ref == "openssl" else ref, argv, alg))
        jobs.append((f"accel {alg}", [accel, "-q", "--hash", alg], alg))
    expected = {alg: zeros_digest(alg, mib) for alg in ("sha256", "md5")}
    samples = {name: Samples() for name, _, _ in jobs}
    for r, (name, argv, alg), s in interleaved(jobs, rounds, samples, key=lambda j: j[0]):
        rr = run_pipeline([producer, argv], timeout=timeout)
        if rr.ok and argv[0] == accel and alg in expected:
            printed = rr.procs[1].stderr.split()
            if printed[:2] != [expected[alg], "-"]:
                rr.error = f"digest printed {' '.join(printed[:2])!r}, not {expected[alg]}"
        s.add(rr, 1)
        note(f"hash round {r + 1}/{rounds}: {name:<16} "
             + (f"{gib / rr.wall:6.2f} GiB/s" if rr.ok else f"FAILED: {rr.error}"))
    rate = {name: med([gib / w for w in samples[name].wall]) for name, _, _ in jobs
            if samples[name].wall}
    rows = []
    for name, argv, alg in jobs:
        s = samples[name]
        ref = rate.get(f"openssl {alg}")
        ratio = f"{rate[name] / ref:.2f}" if name in rate and ref else "—"
        goal = "—"
        if argv[0] == accel and alg == "sha256" and name in rate and ref:
            goal = f"≥ {GOALS[alg]} × openssl: " + met(rate[name] >= GOALS[alg] * ref)
        elif argv[0] == accel and alg == "blake3" and name in rate:
            goal = f"≥ {GOALS[alg]:g} GiB/s: " + met(rate[name] >= GOALS[alg])
        xcpu = f"{med([c / gib for c in s.x_cpu]):.3f}" if s.x_cpu else "—"
        rows.append([name, code(show(argv, accel)), fmt_spread([gib / w for w in s.wall]),
                     ratio, goal, xcpu, s.status()])
    out = (f"## Stream hashes: `dd if=/dev/zero bs=1M count={mib} | X > /dev/null`\n\n"
           f"{gib:g} GiB per run, {rounds} rounds, rotating order; GiB/s median [min–max]. "
           f"× openssl: GiB/s over `openssl dgst` of the same algorithm. X CPU: user+sys "
           f"seconds of X per GiB. accel's sha256 and md5 digests are checked.\n\n")
    out += md_table(["X", "command", "GiB/s median [min–max]", "× openssl", "goal (issue 8)",
                     "X CPU s/GiB", "status"], rows) + "\n"

    seed_tools = [Tool("accel", [accel], "variant"),
                  Tool("accel --hash blake3", [accel, "--hash", "blake3"], "variant")]
    rows, corpus = seed_rows(ctx, seed_tools, tag="hash seed", floor=False)
    out += ("\n### A hash much faster than the consumer: `bzip2 -dc corpus.tar.bz2 | X | "
            "gzip -6 > /dev/null`\n\n"
            f"{corpus} {rounds} rounds, rotating order. ratio = median wall / max(median of "
            f"the two stages alone), as in the seed pipeline; the two accel rows should have "
            f"the same ratio.\n\n")
    return out + md_table(SEED_COLUMNS, rows) + "\n"


def met(ok: bool) -> str:
    return "met" if ok else "NOT met"


def zeros_digest(alg: str, mib: int) -> str:
    """The hex digest of `mib` MiB of zero bytes."""
    h = hashlib.new(alg)
    zero = bytes(MIB)
    for _ in range(mib):
        h.update(zero)
    return h.hexdigest()
