"""The seed corpus: a tar of real files from this machine and its bzip2 -9 form, built once
per size and cached in bench/work/."""

from __future__ import annotations

import glob
import json
import os
import subprocess
import tarfile
from pathlib import Path

from .context import MIB, WORK, note

CORPUS_VERSION = 2  # bump when the file selection changes, to invalidate cached corpora
CORPUS_ROOTS = [
    "/usr/include",
    "/usr/share/doc",
    "/usr/share/man",
    *sorted(glob.glob("/usr/lib/python3*")),
    "/usr/share/locale",
    *sorted(glob.glob("/usr/share/perl*")),
    "/usr/share/i18n",
    "/usr/share/vim",
    "/usr/share/zoneinfo",
    "/usr/lib/gcc",
]



def _walk_files(root: str, max_size: int):
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for fn in sorted(filenames):
            path = os.path.join(dirpath, fn)
            try:
                st = os.lstat(path)
            except OSError:
                continue
            if not (st.st_mode & 0o170000 == 0o100000):  # regular files only
                continue
            if st.st_size == 0 or st.st_size > max_size or not os.access(path, os.R_OK):
                continue
            yield path, st.st_size


def build_corpus(target_bytes: int) -> tuple[Path, Path, dict]:
    """A tar of real files (round-robin over CORPUS_ROOTS by bytes) capped at target_bytes,
    plus its `bzip2 -9` form; cached in bench/work/ per target size."""
    WORK.mkdir(parents=True, exist_ok=True)
    tag = f"{target_bytes // MIB}M"
    tar_path = WORK / f"corpus-{tag}.tar"
    bz_path = WORK / f"corpus-{tag}.tar.bz2"
    meta_path = WORK / f"corpus-{tag}.json"
    try:
        meta = json.loads(meta_path.read_text())
        if (meta.get("target_bytes") == target_bytes
                and meta.get("version") == CORPUS_VERSION
                and tar_path.stat().st_size == meta["tar_bytes"]
                and bz_path.stat().st_size == meta["bz2_bytes"]):
            note(f"corpus: cached {tar_path.name} ({meta['tar_bytes'] / MIB:.0f} MiB, "
                 f"{meta['files']} files)")
            return tar_path, bz_path, meta
    except (OSError, ValueError, KeyError):
        pass
    roots = []
    seen = set()
    for r in CORPUS_ROOTS:
        rp = os.path.realpath(r)
        if os.path.isdir(rp) and rp not in seen:
            seen.add(rp)
            roots.append(r)
    note(f"corpus: building a {target_bytes / MIB:.0f} MiB tar from {', '.join(roots)}")
    # Files of at most 1 % of the target (<= 4 MiB) so that no single binary dominates and
    # small and large corpora have the same mix.
    max_size = max(64 * 1024, min(4 * MIB, target_bytes // 100))
    walkers = {r: _walk_files(r, max_size) for r in roots}
    taken = {r: 0 for r in roots}
    added = set()
    total = 1024  # end-of-archive blocks
    files = 0
    tmp = tar_path.with_suffix(".tar.tmp")
    with tarfile.open(tmp, "w", format=tarfile.GNU_FORMAT) as tf:
        while walkers and total < target_bytes:
            root = min(walkers, key=lambda r: taken[r])
            try:
                path, size = next(walkers[root])
            except StopIteration:
                del walkers[root]
                continue
            real = os.path.realpath(path)
            if real in added:
                continue
            try:
                tf.add(path, recursive=False)
            except OSError:
                continue
            added.add(real)
            files += 1
            cost = 512 + (size + 511) // 512 * 512
            taken[root] += cost
            total += cost
    os.replace(tmp, tar_path)
    tar_bytes = tar_path.stat().st_size
    if tar_bytes < target_bytes * 0.9:
        note(f"corpus: only {tar_bytes / MIB:.0f} MiB of files found")
    note(f"corpus: {tar_bytes / MIB:.0f} MiB, {files} files; compressing with bzip2 -9 "
         "(once, cached)")
    bz_tmp = bz_path.with_suffix(".bz2.tmp")
    with open(tar_path, "rb") as fi, open(bz_tmp, "wb") as fo:
        subprocess.run(["bzip2", "-9", "-c"], stdin=fi, stdout=fo, check=True)
    os.replace(bz_tmp, bz_path)
    meta = {
        "version": CORPUS_VERSION,
        "target_bytes": target_bytes,
        "tar_bytes": tar_bytes,
        "bz2_bytes": bz_path.stat().st_size,
        "files": files,
        "per_root_bytes": {r: b for r, b in taken.items() if b},
    }
    meta_path.write_text(json.dumps(meta, indent=1) + "\n")
    return tar_path, bz_path, meta


def warm_cache(*paths: Path) -> None:
    for p in paths:
        with open(p, "rb") as f:
            while f.read(8 * MIB):
                pass

