#!/usr/bin/env python3
"""Benchmark accel against a bare pipe and its peers (mbuffer, pv -B, buffer).

`bench/run.py --help` says what each measure runs and how to read the tables;
bench/README.md how the code in bench/accelbench/ is laid out and how to add a measure.
"""

import sys
from pathlib import Path

# The package sits next to this script; no installation needed.
sys.path.insert(0, str(Path(__file__).resolve().parent))

from accelbench.cli import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
