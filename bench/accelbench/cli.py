"""The command line of bench/run.py: options, the accel binary under test (and a baseline
build beside it), the tools that pass the sanity check, then the machine header, each
measure chosen by --only in ORDER, and the notes, in Markdown on stdout (progress goes to
stderr); each measure's section also goes into the results file (bench/RESULTS.md)."""

from __future__ import annotations

import argparse
import inspect
import os
import shlex
import shutil
import sys
import time
from pathlib import Path

from . import results
from .builds import BuildFailed, build_revision, build_tree, source_revision
from .context import BENCH, MIB, WORK, Context, NotMeasured, note
from .markdown import load_average, machine_header, machine_lines
from .measures import MEASURES, ORDER
from .measures.streams import CELL_KEYS
from .measures.compress import LINK_NAMES as COMPRESS_LINKS
from .tools import Tool, parse_variants, peer_tools, sanity_check

DEFAULT_VARIANTS = "accel=accel,accel-copy=accel --engine copy"
RESULTS = BENCH / "RESULTS.md"

ABOUT = """\
Benchmark accel against a bare pipe and its peers (mbuffer, pv -B, buffer; tee, cp and
openssl dgst where a measure needs them).

What it measures (every X is run as a real process between real OS pipes):
"""

HOW_TO_READ = """\
How to read it: the machine is shared and noisy, so every timed figure is the median over
``--rounds`` rounds, and within a round the tools run in a rotating order (round r starts
at tool r), so slow drifts in background load hit all tools alike.  [min-max] is the spread
over rounds; compare ratios rather than absolute seconds, and distrust differences smaller
than the spread.  A tool that exits non-zero (checked for every process of a pipeline, like
``set -o pipefail``) is reported as FAILED with its exit status and the first stderr line;
its median then covers only the successful runs.  Before anything is timed, 8 MiB of random
data goes through each X and must come out unchanged; a tool that fails this is excluded.
"""

USAGE_NOTES = """\
In --variants, each comma-separated item is NAME=COMMAND; the word ``accel`` in COMMAND is
replaced by the accel binary.  Without --accel, ``cargo build --release`` runs in the repo
root and target/release/accel is used.  --quick shrinks the corpus (20 MiB), the stream
(512 MiB), the data of outputs, hash and files (tens of MiB), spill's burst (512 MiB) and
ssh's stream (64 MiB), so that each measure takes a minute or two; it is for testing this
script, its numbers are not meaningful.  Tables go to stdout (Markdown), progress to stderr.
Each measure's tables also replace its section of the results file (bench/RESULTS.md, or
--results FILE), under the machine header and this command line; the other sections stay.
--quick and --no-results write nothing there.  --baseline REV builds accel as of git
revision REV in bench/work/baseline/ and adds it as the variant `before`, so that the
build before a change runs beside this one in the same interleaved rounds.
"""


def describe() -> str:
    """ABOUT, each measure's docstring under its name, and HOW_TO_READ: the --help text."""
    lines = []
    for name, measure in MEASURES.items():
        first, *rest = inspect.cleandoc(measure.__doc__).splitlines()
        lines.append(f"  {name:<12}{first}")
        lines += [f"{'':14}{line}".rstrip() for line in rest]
    return ABOUT + "\n" + "\n".join(lines) + "\n\n" + HOW_TO_READ


def parser() -> argparse.ArgumentParser:
    """The options of bench/run.py."""
    ap = argparse.ArgumentParser(description=describe(), epilog=USAGE_NOTES,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=5, help="rounds per timed section (min 3)")
    ap.add_argument("--quick", action="store_true",
                    help="small sizes (under a minute per measure), for testing this script")
    ap.add_argument("--accel", metavar="PATH", help="accel binary (default: cargo build --release)")
    ap.add_argument("--only", metavar="LIST", default=",".join(ORDER),
                    help="comma-separated subset of: " + ",".join(ORDER))
    ap.add_argument("--variants", metavar="SPEC", default=DEFAULT_VARIANTS,
                    help=f"NAME=COMMAND,... ('accel' is replaced by the binary); "
                         f"default {DEFAULT_VARIANTS!r}")
    ap.add_argument("--peers", metavar="LIST",
                    help="comma-separated subset of the peers to run: mbuffer,pv -B,buffer "
                         "(default: every one installed; 'none' for none)")
    ap.add_argument("--gzip", metavar="LEVELS", default="6",
                    help="seed: the levels of its gzip stage, a table each (default 6; "
                         "e.g. 6,9: with -9 gzip is the slower stage, with -6 bzip2 is)")
    ap.add_argument("--corpus-mb", type=int, metavar="MIB",
                    help="corpus tar size in MiB (default 300, --quick 20)")
    ap.add_argument("--timeout", type=float, metavar="S",
                    help="kill a pipeline run after S seconds (default 600, --quick 60)")
    ap.add_argument("--baseline", metavar="REV",
                    help="also run accel as of git revision REV (built once in "
                         "bench/work/baseline/), as the variant 'before'")
    ap.add_argument("--results", metavar="FILE", default=str(RESULTS),
                    help="the results file each measure's section goes into "
                         "(default bench/RESULTS.md)")
    ap.add_argument("--no-results", action="store_true",
                    help="write no results file (--quick never writes one)")
    ap.add_argument("--ssh-mib", type=int, metavar="MIB",
                    help="ssh: MiB per run (default 2048, --quick 64); e.g. 256 for a shorter "
                         "run whose figures still mean something")
    ap.add_argument("--streams-cells", metavar="LIST",
                    help="streams: run only these cells, comma-separated, of "
                         f"{','.join(CELL_KEYS)} (e.g. c: the unlimited veth alone, a few "
                         "minutes); writes no results file (a section of some cells "
                         "would replace all of them)")
    ap.add_argument("--compress-links", metavar="LIST",
                    help="compress: only these of its links, comma-separated, from "
                         + ",".join(COMPRESS_LINKS) + " (default: all); e.g. 50mbit,veth "
                         "to measure the cells a change is about in minutes, not a quarter "
                         "of an hour")
    ap.add_argument("--drop-caches", action="store_true",
                    help="files and spill: drop the page cache before each run, so that files "
                         "come from the disk (needs root; it slows everyone on the machine)")
    return ap


def results_file(args: argparse.Namespace) -> Path | None:
    """Where each measure's section goes: --results (bench/RESULTS.md unless given), or
    nowhere with --no-results, and never with --quick (its sizes are for testing the script,
    its figures meaningless), nor with --streams-cells (the streams section would lose the
    cells not run)."""
    partial = getattr(args, "streams_cells", None) or getattr(args, "compress_links", None)
    return None if args.quick or args.no_results or partial else Path(args.results)


def chosen(ap: argparse.ArgumentParser, option: str, what: str, value: str | None,
           names) -> tuple[str, ...] | None:
    """A comma-separated choice among `names` (None where the option was not given); an
    unknown name, or none at all, is the parser's error naming the option."""
    if value is None:
        return None
    picked = tuple(s.strip() for s in value.split(",") if s.strip())
    bad = [s for s in picked if s not in names]
    if bad or not picked:
        ap.error(f"{option}: unknown {what}(s) {', '.join(bad) or '(none)'}; "
                 f"choose from {','.join(names)}")
    return picked


def main() -> int:
    ap = parser()
    args = ap.parse_args()
    if args.rounds < 3:
        ap.error("--rounds must be at least 3")
    if args.ssh_mib is not None and args.ssh_mib < 1:
        ap.error(f"--ssh-mib {args.ssh_mib}: want at least 1")
    streams_cells = chosen(ap, "--streams-cells", "cell", args.streams_cells, CELL_KEYS)
    if args.drop_caches and os.geteuid() != 0:
        ap.error("--drop-caches needs root (it writes /proc/sys/vm/drop_caches)")
    links = chosen(ap, "--compress-links", "link", args.compress_links, COMPRESS_LINKS)
    only = [s.strip() for s in args.only.split(",") if s.strip()]
    bad = [s for s in only if s not in ORDER]
    if bad or not only:
        ap.error(f"--only: unknown section(s) {', '.join(bad) or '(none)'}; "
                 f"choose from {','.join(ORDER)}")
    try:
        levels = tuple(int(x) for x in args.gzip.split(","))
    except ValueError:
        levels = ()
    if not levels or any(not 1 <= n <= 9 for n in levels):
        ap.error(f"--gzip {args.gzip}: want levels 1 to 9, comma-separated")
    peers = None if args.peers is None else [
        p.strip() for p in args.peers.split(",") if p.strip() and p.strip() != "none"]
    unknown = [p for p in peers or [] if p not in ("mbuffer", "pv -B", "buffer")]
    if unknown:
        ap.error(f"--peers: unknown peer(s) {', '.join(unknown)}; choose from mbuffer,pv -B,buffer")
    sizes = {
        "corpus": (args.corpus_mb or (20 if args.quick else 300)) * MIB,
        "count": 512 if args.quick else 8192,
    }
    timeout = args.timeout or (60.0 if args.quick else 600.0)

    missing = [c for c in ("bzip2", "gzip", "dd", "cat", "head") if not shutil.which(c)]
    if missing:
        print(f"run.py: required tools missing: {', '.join(missing)}", file=sys.stderr)
        return 2

    try:
        if args.accel:
            accel = os.path.abspath(args.accel)
            accel_origin = accel
            if not os.access(accel, os.X_OK):
                print(f"run.py: --accel {args.accel}: not an executable file", file=sys.stderr)
                return 2
        else:
            accel, accel_origin = build_tree()
        baseline = build_revision(args.baseline) if args.baseline else None
    except BuildFailed as e:
        print(f"run.py: {e}", file=sys.stderr)
        return 1
    WORK.mkdir(parents=True, exist_ok=True)

    notes: list[str] = []
    spec = args.variants + (f",before={shlex.quote(baseline[0])}" if baseline else "")
    variants = parse_variants(spec, accel)
    tools = [Tool("bare", None, "bare")] + variants + peer_tools(notes, peers)
    for t in tools:
        if t.argv is None:
            continue
        err = sanity_check(t)
        if err:
            t.excluded = err
            notes.append(f"{t.name} (`{t.display(accel)}`) excluded: 8 MiB sanity check "
                         f"failed: {err}")
            note(f"sanity: {t.name}: FAILED: {err}")
        else:
            note(f"sanity: {t.name}: ok")

    t_start = time.perf_counter()
    header = machine_lines(accel, accel_origin, args, sizes)
    if baseline:
        header.append(f"- baseline (the variant `before`): {baseline[1]}")
    print(machine_header(header))
    sys.stdout.flush()
    ctx = Context(tools, accel, args.rounds, sizes["corpus"], sizes["count"], timeout,
                  levels, args.quick, args.drop_caches, args.ssh_mib, streams_cells,
                  links)
    path = results_file(args)
    about = header + [f"- source: {source_revision()}",
                      f"- command: `{shlex.join(['bench/run.py', *sys.argv[1:]])}`"]
    for name, measure in MEASURES.items():
        if name not in only:
            continue
        note(f"--- {name}")
        t_measure = time.perf_counter()
        try:
            report = measure.run(ctx)
        except NotMeasured as e:  # printed, but an earlier run's figures stay in the file
            report, path_now = e.section, None
        else:
            path_now = path
        print(report)
        sys.stdout.flush()
        if path_now:
            took = (f"- this measure: ended {time.strftime('%Y-%m-%d %H:%M:%S %Z')}, took "
                    f"{time.perf_counter() - t_measure:.0f} s; load average at its end: "
                    f"{load_average()}")
            results.record(path_now, name, results.section(
                name, about + [took] + [f"- note: {n}" for n in notes], report), ORDER)
            note(f"{name}: its section of {path_now} written")
    notes.append(f"load average at end: {load_average()}; "
                 f"total {time.perf_counter() - t_start:.0f} s.")
    print("## Notes\n")
    for n in notes:
        print(f"- {n}")
    return 0
