"""Between hosts, on loopback (needs root: it runs in a network namespace of its own,
so that nothing listens anywhere else): ``dd if=/dev/zero bs=1M | SENDER`` into
``RECEIVER > /dev/null``, for accel encrypted (--to/--from with a key file),
accel --insecure, mbuffer -O into mbuffer -I, accel run as mbuffer (a link;
plain, keyed with ACCEL_KEY_FILE, and against the real mbuffer either way), and ssh -c aes128-gcm@openssh.com
into an sshd the benchmark starts on a loopback port (throwaway keys in
bench/work).  GiB/s, and the CPU seconds per GiB of sender and receiver
together and of each; "× ssh" and "× mbuffer" are GiB/s ratios.  A --variants item that is
another accel binary (``before=/path/to/accel``) adds an encrypted row for it.
"""

from __future__ import annotations

from ..context import GIB, MIB, Context, note
from ..markdown import code, md_table
from ..netlab import Netns, lab_section
from ..stats import fmt_spread, interleaved, med
from ..tools import other_builds
from ..transfers import Pair, loopback_pairs, sane_samples, show_across, transfer


def run(ctx: Context) -> str:
    return lab_section("## Between hosts: loopback", loopback, ctx)


def loopback(ctx: Context) -> str:
    count = ctx.stream_mib
    gib = count * MIB / GIB
    dd = ["dd", "if=/dev/zero", "bs=1M", f"count={count}", "status=none"]
    with Netns("lo") as ns:
        builds = other_builds(ctx)
        pairs = loopback_pairs(ctx.accel, "/dev/null", builds)
        samples, notes = sane_samples(pairs, ns, ctx.accel, builds, "net")
        # Each end's CPU s per successful run, by pair: where the cost falls.
        per_side: dict[str, dict[str, list[float]]] = {
            p.name: {"sender": [], "receiver": []} for p in pairs}
        for r, p, s in interleaved(pairs, ctx.rounds, samples):
            timed = Pair(p.name, p.receiver, [dd] + p.sender, p.port, p.daemon)
            sides: dict[str, float] = {}
            wall, x_cpu, error = transfer(timed, ns, ns, ctx.timeout, sides=sides)
            s.add_transfer(wall, x_cpu, error)
            if not error:
                for side, cpu in sides.items():
                    per_side[p.name][side].append(cpu)
            note(f"net loopback round {r + 1}/{ctx.rounds}: {p.name:<16} "
                 + (f"{gib / wall:6.2f} GiB/s" if not error else f"FAILED: {error}"))

    def rate(name: str) -> float | None:
        s = samples.get(name)
        return med([gib / w for w in s.wall]) if s and s.wall else None

    rows = []
    for p in pairs:
        s = samples[p.name]
        rates = [gib / w for w in s.wall]
        vs = [f"{med(rates) / rate(other):.2f}" if rates and rate(other) else "—"
              for other in ("ssh aes128-gcm", "mbuffer")]
        xcpu = f"{med([c / gib for c in s.x_cpu]):.3f}" if s.x_cpu else "—"
        ends = [f"{med([c / gib for c in cpus]):.3f}" if cpus else "—"
                for cpus in (per_side[p.name]["sender"], per_side[p.name]["receiver"])]
        shown = " → ".join(code(show_across(argv, ctx.accel)) for argv in p.sender + [p.receiver])
        rows.append([p.name, shown, fmt_spread(rates), *vs, xcpu, *ends, s.status()])
    text = (f"`dd if=/dev/zero bs=1M count={count} | SENDER`, `RECEIVER > /dev/null`. "
            f"{gib:g} GiB per run, {ctx.rounds} rounds, rotating order, in a network namespace "
            f"of its own. CPU: user+sys of sender and receiver together (ssh: the client, and "
            f"sshd with its session), per GiB, then of each end alone.\n\n"
            + md_table(["X", "sender → receiver", "GiB/s median [min–max]", "× ssh",
                        "× mbuffer", "X CPU s/GiB", "sender s/GiB", "receiver s/GiB",
                        "status"], rows) + "\n")
    if notes:
        text += "\n" + "\n".join(f"- {n}" for n in notes) + "\n"
    return text
