"""The results file (bench/RESULTS.md): what the last run of each measure printed, one
section per measure under the machine it ran on and the command line that ran it, so that
a figure quoted elsewhere is never pasted by hand but cited from here.

A run replaces the sections of the measures it ran and keeps the others, in ORDER. A
section starts at its marker line, `<!-- measure: NAME -->`, and runs to the next one;
whatever stands before the first marker is this module's preamble, written afresh each
time.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

MARKER = re.compile(r"^<!-- measure: (\S+) -->$", re.MULTILINE)

PREAMBLE = """\
# accel benchmark results

Written by `bench/run.py`, never by hand: each section is what one measure printed the
last time it ran here (runs with `--quick` or `--no-results` write nothing), under the
machine it ran on and the command line that ran it. A run replaces the sections of the
measures it ran and keeps the others; `bench/run.py --help` says what each measure runs
and how to read its tables, bench/README.md how to run them.
"""


def read_sections(text: str) -> dict[str, str]:
    """The sections of a results file's text by measure name, each from its marker line to
    the next marker (or the end), in the order they appear."""
    marks = list(MARKER.finditer(text))
    ends = [m.start() for m in marks[1:]] + [len(text)]
    return {m.group(1): text[m.start():end].rstrip("\n") + "\n" for m, end in zip(marks, ends)}


def render(sections: dict[str, str], order: tuple[str, ...]) -> str:
    """The whole file: the preamble, a line saying which measures have a section and which
    do not yet, then the sections in `order` (any section of a measure not in `order`, one
    since renamed or removed, after them, so that nothing measured is dropped silently)."""
    names = [n for n in order if n in sections] + [n for n in sections if n not in order]
    missing = [n for n in order if n not in sections]
    lines = [PREAMBLE]
    lines.append("Measured: " + (", ".join(f"[{n}](#{n})" for n in names) or "none yet") + "."
                 + (f" Not yet measured here: {', '.join(missing)}." if missing else "") + "\n")
    return "\n".join(lines + [sections[n] for n in names])


def section(name: str, about: list[str], report: str) -> str:
    """One measure's section: its marker, a heading that is its name (a stable link target:
    RESULTS.md#seed), the list items of `about` (the machine, the command line, ...), then
    the measure's `report` with every heading one level deeper, under the name's."""
    deeper = re.sub(r"^#", "##", report.strip("\n"), flags=re.MULTILINE)
    return f"<!-- measure: {name} -->\n## {name}\n\n" + "\n".join(about) + "\n\n" + deeper + "\n"


def record(path: Path, name: str, text: str, order: tuple[str, ...]) -> None:
    """Puts `text` (a `section`) in the results file at `path` as measure `name`'s section,
    keeping the other sections as they are; the file is replaced whole (written beside it,
    then renamed), so that a run killed halfway leaves the old file or the new one."""
    try:
        sections = read_sections(path.read_text())
    except FileNotFoundError:
        sections = {}
    sections[name] = text
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(render(sections, order))
    os.replace(tmp, path)
