"""The registry of measures: one module each, named by its file, run and reported in ORDER.

A measure module has
  a docstring  what it runs and how to read its table; --help shows it under the name,
  run(ctx)     runs its rounds on ctx.tools (see context.Context) and returns its Markdown
               section, a `## ` heading, a paragraph and a table; or raises
               context.NotMeasured with its section when it cannot run here.

A measure imports the shared modules of accelbench, never another measure: what two
measures share moves into a module of its own (pipelines, netlab, transfers).
"""

from __future__ import annotations

import importlib

# The order in which the measures run and are reported; a new measure adds its name here.
ORDER = (
    "seed",
    "throughput",
    "cpu",
    "latency",
    "rss",
    "outputs",
    "hash",
    "files",
    "spill",
    "rate",
    "net",
    "wan",
    "compress",
    "resume",
    "ssh",
    "streams",
    "asmbuffer",
)

MEASURES = {name: importlib.import_module(f"{__name__}.{name}") for name in ORDER}
