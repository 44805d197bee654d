"""The accel binary under test: this tree's, built with `cargo build --release` and
snapshotted into bench/work (so that a rebuild by someone else during a run cannot mix two
versions of accel into one set of medians).
"""

from __future__ import annotations

import shutil
import subprocess
import sys

from .context import REPO, WORK, note


class BuildFailed(Exception):
    """A build of accel that did not succeed; the message says which and why."""


def build_tree() -> tuple[str, str]:
    """Builds this tree's accel and snapshots it; (the snapshot's path, where it came from)."""
    note("cargo build --release")
    r = subprocess.run(["cargo", "build", "--release"], cwd=REPO, stdout=sys.stderr)
    if r.returncode != 0:
        raise BuildFailed("cargo build --release failed")
    built = REPO / "target" / "release" / "accel"
    WORK.mkdir(parents=True, exist_ok=True)
    snap = WORK / "accel-under-test"
    tmp = WORK / "accel-under-test.tmp"
    shutil.copy2(built, tmp)
    tmp.replace(snap)
    return str(snap), f"{built} (snapshot: {snap})"
