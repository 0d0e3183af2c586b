"""Build course_lib/data_files/fra_eng_sample.tsv.gz, the real sentences lesson 12 trains on.

    .venv/bin/python scripts/build_fra_eng_sample.py [fra-eng.zip] [--check]

The sample is the first ``N_LINES`` lines of ``fra.txt`` from D2L's ``fra-eng.zip`` (Tatoeba
sentence pairs as packaged by manythings.org; the file is sorted by length, so these are
the shortest sentences), copied byte for byte, line endings included. D2L's 2019 file has
two columns, English<TAB>French; it has no per-line attribution column (newer manythings.org
files add one), so each line is kept exactly as it is and the file-level attribution and
licence are in ``course_lib/data_files/README.md``.

The text is gzip-compressed with a fixed header (no file name, modification time 0,
compression level 9), so the same zlib gives the same bytes. ``--check`` rebuilds the
sample in memory and exits 1 if its *content* differs from the shipped file (the test of
the same name does the same).

The archive is taken from the first argument, else ``$COURSE_FRA_ENG``, else
``../shared/data/fra-eng.zip`` next to the checkout; it must hold D2L's ``fra.txt``
(checked by its SHA-1, ``course_lib.fra_eng.FRA_TXT_SHA1``).
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import io
import os
import sys
import zipfile
from pathlib import Path

from course_lib.fra_eng import FRA_TXT_SHA1, find_fra_member

ROOT = Path(__file__).resolve().parents[1]

N_LINES = 22_000
OUT = ROOT / "course_lib" / "data_files" / "fra_eng_sample.tsv.gz"
DEFAULT_ZIP = ROOT.parent / "shared" / "data" / "fra-eng.zip"


def sample_text(archive: str | Path, n_lines: int = N_LINES) -> bytes:
    """The first ``n_lines`` lines of the archive's ``fra.txt``, byte for byte.

    Raises:
        ValueError: the archive's ``fra.txt`` is not D2L's (SHA-1 mismatch).
    """
    with zipfile.ZipFile(archive) as zf:
        member = find_fra_member(zf.namelist())
        if member is None:
            raise ValueError(f"{archive} holds no fra.txt")
        data = zf.read(member)
    if hashlib.sha1(data).hexdigest() != FRA_TXT_SHA1:
        raise ValueError(f"{archive}: its fra.txt is not D2L's (SHA-1 {FRA_TXT_SHA1} expected)")
    lines = data.splitlines(keepends=True)
    return b"".join(lines[:n_lines])


def compress(text: bytes) -> bytes:
    """gzip with a fixed header: no file name, mtime 0, level 9."""
    buf = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=buf, compresslevel=9, mtime=0) as gz:
        gz.write(text)
    return buf.getvalue()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("archive", nargs="?", default=os.environ.get("COURSE_FRA_ENG") or str(DEFAULT_ZIP))
    p.add_argument("--check", action="store_true", help="compare with the shipped file instead of writing it")
    args = p.parse_args(argv)
    text = sample_text(args.archive)
    if args.check:
        shipped = gzip.decompress(OUT.read_bytes())
        if shipped != text:
            print(f"{OUT} differs from the first {N_LINES} lines of {args.archive}", file=sys.stderr)
            return 1
        print(f"{OUT.name}: the first {N_LINES} lines of fra.txt, byte for byte")
        return 0
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_bytes(compress(text))
    print(f"wrote {OUT} ({OUT.stat().st_size:,} bytes; text SHA-1 {hashlib.sha1(text).hexdigest()})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
