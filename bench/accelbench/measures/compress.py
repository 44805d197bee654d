"""Compression on the wire (issue 35; needs root): accel --to … --compress X into
accel --from, across a veth between two network namespaces whose sending side is capped by
tbf (100 Mbit/s, 1 Gbit/s) or not (unlimited: the CPUs are the limit), for compressible data (the seed corpus, an uncompressed tar)
and incompressible data (random bytes), rows none, auto and fixed zstd levels.  Wall time
per cell, median of interleaved rounds; "× none" is the row's median over none's in the same
cell (below 1: faster than none), and the wire ratio is the stream bytes per byte on the wire
from the sender's --json summary.  Both ends run on this machine's two CPUs: a level's cost
is paid twice over, by the sender and by the receiver, on CPUs a real pair would not share.
No delay line (a round trip of microseconds): the links are rate-limited, not long.  This
is the measure that decides --compress's default: auto only if it never costs more than 3 %
against none in any row.
"""

from __future__ import annotations

import json
import os

from ..context import MIB, WORK, Context, note
from ..corpus import build_corpus
from ..markdown import code, md_table
from ..netlab import Netns, lab_section, tbf, veth
from ..stats import Samples, fmt_spread, interleaved, med
from ..transfers import Pair, key_file, transfer

SENDER, RECEIVER = "10.213.35.1", "10.213.35.2"
PORT = 9351

# (tc's rate, or None for a veth as it is; bytes of each data set, times it is sent over):
# each none run takes a few seconds. The data is sent over again rather than made larger
# (frames are compressed on their own: a repeat 256 MiB away changes nothing).
LINKS = (("100mbit", 48 * MIB, 1), ("1gbit", 256 * MIB, 1), (None, 256 * MIB, 4))
SETTINGS = ("none", "auto", "zstd:-3", "zstd:1", "zstd:3")


def run(ctx: Context) -> str:
    return lab_section("## Compression on the wire", measure, ctx)


def random_file(size: int):
    """`size` random bytes, made once in bench/work."""
    path = WORK / f"random-{size // MIB}M"
    if not path.exists() or path.stat().st_size != size:
        WORK.mkdir(parents=True, exist_ok=True)
        with open(path, "wb") as f:
            left = size
            while left:
                piece = min(left, 8 * MIB)
                f.write(os.urandom(piece))
                left -= piece
    return path


def producer(path, size: int, times: int) -> list[str]:
    """The first `size` bytes of `path`, `times` over."""
    return ["sh", "-c", f'for i in $(seq {times}); do head -c {size} "$1"; done', "sh", str(path)]


def measure(ctx: Context) -> str:
    largest = max(size for _, size, _ in LINKS)
    tar_path, _, meta = build_corpus(max(ctx.corpus_bytes, largest))
    if meta["tar_bytes"] < largest:
        largest = meta["tar_bytes"]
    data = {"corpus": tar_path, "random": random_file(largest)}
    accel, key = ctx.accel, key_file(ctx.accel)
    here = f"{RECEIVER}:{PORT}"
    rows = []
    for rate, size, times in LINKS:
        size = min(size, largest)
        cells = [(kind, how) for kind in data for how in SETTINGS]
        samples = {cell: Samples() for cell in cells}
        ratios: dict[tuple[str, str], list[float]] = {cell: [] for cell in cells}
        with Netns("za") as a, Netns("zb") as b:
            dev_a, _ = veth(a, b, SENDER, RECEIVER)
            if rate:
                tbf(a.name, dev_a, rate)
            for r, cell, s in interleaved(cells, ctx.rounds, samples, key=lambda c: c):
                kind, how = cell
                json_path = WORK / "compress-sender.json"
                sender = [accel, "--to", here, "--key-file", key, "--compress", how, "-q",
                          f"--json={json_path}"]
                pair = Pair(how, [accel, "--from", here, "--key-file", key, "-q"],
                            [producer(data[kind], size, times), sender], PORT)
                wall, x_cpu, error = transfer(pair, b, a, ctx.timeout)
                s.add_transfer(wall, x_cpu, error)
                if not error:
                    summary = json.loads(json_path.read_text().splitlines()[-1])
                    ratios[cell].append(summary["outputs"][0]["wire"]["ratio"])
                note(f"compress {rate or 'unlimited'} round {r + 1}/{ctx.rounds}: {kind:<7} {how:<8} "
                     + (f"{wall:6.2f} s" if not error else f"FAILED: {error}"))
        for kind in data:
            none = samples[(kind, "none")].wall
            for how in SETTINGS:
                s = samples[(kind, how)]
                versus = f"{med(s.wall) / med(none):.3f}" if s.wall and none else "—"
                wire = f"{med(ratios[(kind, how)]):.2f}" if ratios[(kind, how)] else "—"
                sent = f"{size // MIB} MiB" + (f" × {times}" if times > 1 else "")
                rows.append([rate or "unlimited", f"{kind}, {sent}", code(f"--compress {how}"),
                             fmt_spread(s.wall), versus, wire, s.status()])
    return (f"`head -c SIZE DATA` (× N: that many times over) `| accel --to … --compress X` in one namespace, `accel --from "
            f"… > /dev/null` in another, joined by a veth whose sending side tbf caps at the "
            f"link's rate, or not (unlimited); no added delay. Data: the seed corpus as an uncompressed tar "
            f"({meta['tar_bytes'] / MIB:.0f} MiB, its first SIZE bytes), and random bytes. "
            f"{ctx.rounds} interleaved rounds per link; × none = the row's median wall over "
            f"none's in the same cell; wire ratio = stream bytes per byte on the wire (the "
            f"sender's JSON). Both ends share this machine's two CPUs.\n\n"
            + md_table(["link", "data", "X", "wall s median [min–max]", "× none",
                        "wire ratio", "status"], rows)
            + "\n")
