"""accelbench: the benchmark behind bench/run.py, as a package.

`runner` is what every measure stands on (tools, pipelines, rounds, statistics, tables),
`corpus` builds the seed corpus; see bench/README.md for the layout and how to add a measure.
"""
