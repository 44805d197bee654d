"""Compression on the wire (issue 35; needs root and openssh-server): a stream from one
network namespace to another, through (a) the delay line at 40 ms round trip capped by tbf
at 50 Mbit/s, 200 Mbit/s and 1 Gbit/s, and (b) a plain veth pair (unlimited: the CPUs are
the limit); data: the seed corpus as an uncompressed tar, random bytes, and the two in turn
(16 MiB each). Rows: accel with `--compress none` and `--compress auto`; zstd at a fixed level
at both ends of accel (`zstd -T0 -L | accel --to … ` into `accel --from … | zstd -d`);
syncoid's default chain (`lzop | mbuffer | ssh HOST 'mbuffer | lzop -dfc'`); `ssh -C` (zlib
level 6). The ssh rows go to an sshd of the benchmark's own in the far namespace (the ssh
measure's lab, with compression allowed). Wall time per cell, median of interleaved rounds;
"× none" is the row's wall over none's in the same round. Both ends run on this machine's
two CPUs: a level's cost is paid twice over, by the sender and by the receiver, on CPUs a
real pair would not share. The goals of issue 35 follow each table; they decide
--compress's default (auto only if it never costs more than 3 % against none).
"""

from __future__ import annotations

import json
import os
import shlex
import shutil

from ..context import MIB, WORK, Context, NotMeasured, note
from ..corpus import build_corpus
from ..markdown import code, md_table
from ..netlab import (
    WAN_ONE_WAY_MS, WAN_RECEIVER, DelayLine, Netns, SshLab, Sshd, have_openssh, lab_section, sh,
    veth,
)
from ..stats import Samples, fmt_spread, interleaved, med
from ..transfers import key_file
from .ssh import LAB_TCP_WMEM, TCP_PORT, Row, per_round, run_row, verdict

HEADING = "## Compression on the wire"
VETH_HERE, VETH_FAR = "10.213.35.1", "10.213.35.2"

# (name, tc rate on the delay line or None for the veth, MiB per run, times sent over):
# none's run takes a few seconds on each. The data is sent over again rather than made
# larger (frames are compressed on their own: a repeat 256 MiB away changes nothing).
# Every run holds two of the mix's pieces at least (PIECE each), so that the mix is one:
# 16 MiB at 50 Mbit/s was the corpus alone, its row a copy of the corpus's.
LINKS = (
    ("50 Mbit/s, 40 ms", "50mbit", 32, 1),
    ("200 Mbit/s, 40 ms", "200mbit", 64, 1),
    ("1 Gbit/s, 40 ms", "1gbit", 256, 1),
    ("unlimited veth", None, 256, 2),
)
# The links by the short names --compress-links takes: the tc rate, or `veth`.
LINK_NAMES = tuple(rate or "veth" for _, rate, _, _ in LINKS)
QUICK_MIB = 16
# On the veth a run takes half a second and its rounds swing by a quarter (the CPUs are the
# limit, and both ends share them): 3 rounds cannot tell 3 % (auto over none on the mix read
# 1.083 [0.751-1.283] in one run, 0.978 over 12 interleaved rounds). There none and auto, the
# pair the 3 % goal is about, run this many times the rounds, the extra ones after the rest.
PAIR_TIMES_VETH = 4
DATA = ("corpus", "random", "mix")
PIECE = 16 * MIB  # the mix: corpus and random in turn, this much each

NONE, AUTO, LZOP, SSH_C = "accel none", "accel auto", "lzop | mbuffer | ssh", "ssh -C"
ZSTD_LEVELS = (1, 3, 9)
FIXED = (NONE,) + tuple(f"zstd -{level} | accel" for level in ZSTD_LEVELS)

# Issue 35's goals.
OF_BEST = 1.10  # auto's wall over the best fixed choice's
OVER_NONE = 1.03  # auto's wall over none's


def run(ctx: Context) -> str:
    if not have_openssh():
        raise NotMeasured(f"{HEADING}\n\nSkipped: needs openssh-server (ssh, sshd, ssh-keygen).\n")
    for tool in ("zstd", "lzop", "mbuffer"):
        if not shutil.which(tool):
            raise NotMeasured(f"{HEADING}\n\nSkipped: needs {tool}.\n")
    return lab_section(HEADING, body, ctx)


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


def mix_file(corpus, noise, size: int):
    """The corpus and random bytes in turn, PIECE each, `size` in all, made once."""
    path = WORK / f"mix-{size // MIB}M"
    if not path.exists() or path.stat().st_size != size:
        with open(corpus, "rb") as c, open(noise, "rb") as r, open(path, "wb") as out:
            for i, at in enumerate(range(0, size, PIECE)):
                src = c if i % 2 == 0 else r
                src.seek(at)
                out.write(src.read(min(PIECE, size - at)))
    return path


def producer(path, size: int, times: int) -> list[str]:
    """The first `size` bytes of `path`, `times` over."""
    return ["sh", "-c", f'for i in $(seq {times}); do head -c {size} "$1"; done', "sh", str(path)]


def rows(ssh: list[str], host: str, accel: str, key: str, json_path) -> list[Row]:
    """The rows for a far end at `host`; accel listens there on TCP_PORT."""
    to = [accel, "--to", f"{host}:{TCP_PORT}", "--key-file", key, "-q"]
    listen = f"{shlex.quote(accel)} --from :{TCP_PORT} --key-file {shlex.quote(key)} -q"
    out = [
        Row(NONE, [to + ["--compress", "none"]], f"{listen} > /dev/null"),
        Row(AUTO, [to + ["--compress", "auto", f"--json={json_path}"]], f"{listen} > /dev/null"),
    ]
    for level in ZSTD_LEVELS:
        # accel's own compression off: the level is zstd's, at both ends of accel.
        out.append(Row(f"zstd -{level} | accel",
                       [["zstd", "-q", "-T0", f"-{level}", "-c"], to + ["--compress", "none"]],
                       f"{listen} | zstd -q -d -c > /dev/null"))
    mbuffer = "mbuffer -q -s 128k -m 16M"
    out.append(Row(LZOP, [["lzop", "-c"], shlex.split(mbuffer),
                          ssh + [host, f"{mbuffer} | lzop -dfc > /dev/null"]]))
    out.append(Row(SSH_C, [ssh + ["-C", host, "cat > /dev/null"]]))
    return out


def body(ctx: Context) -> str:
    links = [(n, rate, QUICK_MIB if ctx.quick else mib, times) for n, rate, mib, times in LINKS
             if ctx.compress_links is None or (rate or "veth") in ctx.compress_links]
    largest = max(mib for _, _, mib, _ in links) * MIB
    tar_path, _, meta = build_corpus(max(ctx.corpus_bytes, largest))
    largest = min(largest, meta["tar_bytes"])
    noise = random_file(largest)
    data = {"corpus": tar_path, "random": noise, "mix": mix_file(tar_path, noise, largest)}
    accel, key = ctx.accel, key_file(ctx.accel)
    lab = SshLab([WAN_RECEIVER, VETH_FAR], WORK / "compress-ssh-lab")
    # The lab's sshd refuses compression (Compression no): ssh -C would ask in vain.
    config = lab.dir / "sshd_config-compression"
    config.write_text(lab.sshd_config.read_text().replace("Compression no", "Compression yes"))
    json_path = WORK / "compress-sender.json"
    text = ""
    with Netns("za") as a, Netns("zb") as b:
        veth(a, b, VETH_HERE, VETH_FAR)
        for ns in (a, b):  # namespaced: the machine's own setting is left alone
            sh(ns.argv(["sysctl", "-q", "-w", f"net.ipv4.tcp_wmem={LAB_TCP_WMEM}"]))
        with Sshd(b, config) as sshd:
            for name, rate, mib, times in links:
                size = min(mib * MIB, largest)
                host = WAN_RECEIVER if rate else VETH_FAR
                table = rows(lab.ssh, host, accel, key, json_path)
                if rate:
                    with DelayLine(a, b, rate=rate):
                        text += link_section(ctx, name, table, data, size, times, a, b, sshd,
                                             json_path, ctx.rounds)
                else:
                    text += link_section(ctx, name, table, data, size, times, a, b, sshd,
                                         json_path, PAIR_TIMES_VETH * ctx.rounds)
    return (f"`head -c SIZE DATA | X` in one namespace, delivering to the other: (a) through "
            f"the delay line ({2 * WAN_ONE_WAY_MS} ms round trip, tbf at the link's rate each "
            f"way), (b) through a veth pair (no delay, no cap; SIZE × 2). Data: the seed "
            f"corpus as an uncompressed tar ({meta['tar_bytes'] / MIB:.0f} MiB, its first "
            f"SIZE bytes), random bytes, and the two in turn, 16 MiB each. X: accel `--to` "
            f"into `accel --from … > /dev/null` with `--compress none` and `auto`; `zstd -T0 "
            f"-L | accel --to …` into `accel --from … | zstd -d`; syncoid's default chain "
            f"`lzop | mbuffer -q -s 128k -m 16M | ssh HOST 'mbuffer … | lzop -dfc'`; `ssh -C "
            f"HOST 'cat > /dev/null'` (zlib level 6), to an sshd of the benchmark's own "
            f"there. {ctx.rounds} interleaved rounds (on the veth, none and auto "
            f"{PAIR_TIMES_VETH * ctx.rounds}: its runs are short and swing); × none: the "
            f"row's wall over none's in the same round, median [min–max]; wire ratio: stream bytes per byte on the wire "
            f"(auto's, from its --json). Both namespaces' net.ipv4.tcp_wmem is "
            f"`{LAB_TCP_WMEM}`. **Both ends share this machine's two CPUs** (and the delay "
            f"line takes some of them): a level's cost is paid by the sender and the receiver "
            f"on the same CPUs, which a real pair of hosts would not share.\n\n" + text)


def schedule(cells: list, rounds: int, pair_rounds: int, samples: dict):
    """Yields (round, (data, row), its Samples): every cell over `rounds` interleaved rounds,
    then none and auto alone on to `pair_rounds` (a cell dropped on the way is skipped)."""
    def key(cell):
        return cell[0], cell[1].name
    yield from interleaved(cells, rounds, samples, key=key)
    pair = [cell for cell in cells if cell[1].name in (NONE, AUTO)]
    for r, cell, s in interleaved(pair, max(pair_rounds - rounds, 0), samples, key=key):
        yield rounds + r, cell, s


def link_section(ctx: Context, name: str, table: list[Row], data: dict, size: int, times: int,
                 a: Netns, b: Netns, sshd: Sshd, json_path, pair_rounds: int) -> str:
    """One link's table and goals: every row over ctx.rounds interleaved rounds, then none
    and auto alone over the rounds up to `pair_rounds`."""
    cells = [(kind, row) for kind in DATA for row in table]
    samples = {(kind, row.name): Samples() for kind, row in cells}
    walls: dict[tuple[str, str], dict[int, float]] = {key: {} for key in samples}
    ratios: dict[str, list[float]] = {kind: [] for kind in DATA}
    for r, (kind, row), s in schedule(cells, ctx.rounds, pair_rounds, samples):
        rounds = max(pair_rounds, ctx.rounds) if row.name in (NONE, AUTO) else ctx.rounds
        json_path.unlink(missing_ok=True)
        rr, left = run_row(row, producer(data[kind], size, times), a, b, sshd, ctx.timeout)
        error = rr.error or (f"left running, killed: {left[0]}" if left else None)
        s.add_transfer(rr.wall, 0.0, error)
        if not error:
            walls[(kind, row.name)][r] = rr.wall
            if row.name == AUTO and json_path.exists():
                summary = json.loads(json_path.read_text().splitlines()[-1])
                ratios[kind].append(summary["outputs"][0]["wire"]["ratio"])
        note(f"compress {name} round {r + 1}/{rounds}: {kind:<6} {row.name:<20} "
             + (f"{rr.wall:6.2f} s" if not error else f"FAILED: {error}"))
    out = []
    for kind in DATA:
        none = walls[(kind, NONE)]
        for row in table:
            w = walls[(kind, row.name)]
            versus = per_round(w, none, lambda x, n: x / n)
            wire = fmt_spread(ratios[kind]) if row.name == AUTO else ""
            out.append([kind, code(row.name), fmt_spread(list(w.values())), fmt_spread(versus, 3),
                        wire, samples[(kind, row.name)].status()])
    sent = f"{size // MIB} MiB" + (f" × {times}" if times > 1 else "")
    return (f"### {name}: {sent} per run\n\n"
            + md_table(["data", "X", "wall s median [min–max]", "× none", "wire ratio (auto)",
                        "status"], out)
            + "\n" + "\n".join(goals(walls)) + "\n\n")


def goals(walls: dict[tuple[str, str], dict[int, float]]) -> list[str]:
    """Issue 35's goals on one link, per data set: auto against the best fixed choice (the
    fixed row with the lowest median wall), ssh -C, the lzop chain and none; each the
    median [min–max] over the rounds of auto's wall over the other's in the same round."""
    lines = []
    for kind in DATA:
        auto = walls[(kind, AUTO)]

        def against(row: str, bound: float, text: str) -> None:
            xs = per_round(auto, walls[(kind, row)], lambda x, y: x / y)
            figures = f"{fmt_spread(xs, 3)} — " if xs else ""
            lines.append(f"- {kind}: auto {text}: {figures}"
                         + verdict(xs, lambda x: x <= bound))

        fixed = [row for row in FIXED if walls[(kind, row)]]
        if fixed:
            best = min(fixed, key=lambda row: med(list(walls[(kind, row)].values())))
            against(best, OF_BEST, f"within {OF_BEST - 1:.0%} of the best fixed choice "
                                   f"(`{best}`)")
        against(SSH_C, 1.0, "ahead of `ssh -C`")
        against(LZOP, 1.0, "ahead of the lzop chain")
        against(NONE, OVER_NONE, f"no more than {OVER_NONE - 1:.0%} slower than none")
    return lines
