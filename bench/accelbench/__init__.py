"""accelbench: the benchmark behind bench/run.py, as a package.

`cli` is the command line; `context`, `tools`, `processes`, `stats` and `markdown` what
every measure stands on (the Context it is given, the tools under test, pipelines of real
processes, rounds and medians, tables); `pipelines` the seed pipeline and the stream that
several measures time, `netlab` and `transfers` the network lab and what crosses it;
`corpus` the seed corpus, and `measures` one module per measure. See bench/README.md for
the layout and how to add a measure.
"""
