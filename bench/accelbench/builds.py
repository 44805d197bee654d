"""The accel binaries under test: this tree's, built with `cargo build --release` and
snapshotted into bench/work (so that a rebuild by someone else during a run cannot mix two
versions of accel into one set of medians), and an older revision's (--baseline REV),
exported from git into bench/work/baseline/ and built there, to run beside this tree's in
the same interleaved rounds.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

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


def build_revision(rev: str) -> tuple[str, str]:
    """accel as of git revision `rev`: its tree exported (`git archive`, so the repository's
    worktrees and branches are left alone) into bench/work/baseline/SHA and built there
    with `cargo build --release`, once; later runs reuse the binary. The first build starts
    from a copy of this tree's target/release, so that only what changed is compiled.
    Returns (the binary's path, `rev (sha)`)."""
    r = subprocess.run(["git", "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}"],
                       cwd=REPO, capture_output=True, text=True)
    if r.returncode != 0:
        raise BuildFailed(f"--baseline {rev}: not a commit of this repository")
    sha = r.stdout.strip()
    tree = WORK / "baseline" / sha[:12]
    binary = tree / "target" / "release" / "accel"
    origin = f"{rev} ({sha[:12]}), built in {tree}"
    if binary.exists() and (tree / "built").exists():
        return str(binary), origin
    if not (tree / "Cargo.toml").exists():
        note(f"--baseline {rev}: exporting {sha[:12]} into {tree}")
        tree.mkdir(parents=True, exist_ok=True)
        export(sha, tree)
    release = REPO / "target" / "release"
    if not (tree / "target").exists() and release.is_dir():
        note(f"--baseline {rev}: copying {release} to make the build incremental")
        (tree / "target").mkdir()
        subprocess.run(["cp", "-a", str(release), str(tree / "target" / "release")], check=True)
    note(f"--baseline {rev}: cargo build --release in {tree}")
    r = subprocess.run(["cargo", "build", "--release"], cwd=tree, stdout=sys.stderr)
    if r.returncode != 0 or not binary.exists():
        raise BuildFailed(f"--baseline {rev}: cargo build --release failed in {tree}")
    (tree / "built").write_text(sha + "\n")
    return str(binary), origin


def export(sha: str, into: Path) -> None:
    """The files of commit `sha` written into the directory `into` (git archive | tar -x),
    each dated now: git archive dates them at the commit, older than the artifacts copied
    from target/release, and cargo, which compares the two, would take this tree's build
    for the revision's."""
    archive = subprocess.Popen(["git", "archive", "--format=tar", sha], cwd=REPO,
                               stdout=subprocess.PIPE)
    untar = subprocess.run(["tar", "-x", "-m", "-C", str(into)], stdin=archive.stdout)
    archive.stdout.close()
    if archive.wait() != 0 or untar.returncode != 0:
        raise BuildFailed(f"cannot export {sha[:12]} into {into}")


def source_revision() -> str:
    """This tree's revision, as `git describe --always --dirty` says it ("unknown" outside
    git): which source the figures of a run came from."""
    r = subprocess.run(["git", "describe", "--always", "--dirty"], cwd=REPO,
                       capture_output=True, text=True)
    return r.stdout.strip() if r.returncode == 0 and r.stdout.strip() else "unknown"
