"""accelbench: the benchmark behind bench/run.py, as a package.

`cli` is the command line, `runner` what every measure stands on (tools, pipelines, rounds,
statistics, tables), `corpus` the seed corpus, and `measures` one module per measure; see
bench/README.md for the layout and how to add a measure.
"""
