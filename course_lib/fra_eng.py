"""The real English-French data D2L uses: download, cache, parse and split it.

D2L's machine-translation chapters read ``fra-eng/fra.txt`` from ``fra-eng.zip``
(``http://d2l-data.s3-accelerate.amazonaws.com/fra-eng.zip``, SHA-1
``94646ad1522d915e7b0f9296181140edcf86a4f5``), pairs from the Tatoeba project as
packaged by manythings.org. Each line is ``English<TAB>French``; newer Tatoeba /
ManyThings files add a third column with attribution, which is accepted and ignored.

The lessons themselves run offline on ``course_lib.corpus``; this module is for learners
who want the real thing:

>>> path = download_fra_eng()                       # doctest: +SKIP
>>> pairs = read_fra_eng(path, max_pairs=20000)     # doctest: +SKIP
>>> splits = split_pairs(pairs, n_valid=500, n_test=500, seed=0)  # doctest: +SKIP

Downloads are cached in ``$COURSE_DATA_DIR`` or ``~/.cache/course_lib``; the checksum is
checked before a cached copy is trusted and after every download.
"""

from __future__ import annotations

import hashlib
import os
import random
import tempfile
import urllib.error
import urllib.request
import zipfile
from collections.abc import Sequence
from pathlib import Path

from course_lib.corpus import TranslationSplits
from course_lib.data import tokenize

__all__ = [
    "FRA_ENG_URL",
    "FRA_ENG_SHA1",
    "DownloadError",
    "default_cache_dir",
    "sha1_of",
    "download_fra_eng",
    "read_fra_eng",
    "normalize_source",
    "split_pairs",
]

FRA_ENG_URL = "http://d2l-data.s3-accelerate.amazonaws.com/fra-eng.zip"
FRA_ENG_SHA1 = "94646ad1522d915e7b0f9296181140edcf86a4f5"
_MEMBER = "fra-eng/fra.txt"


class DownloadError(OSError):
    """The file could not be downloaded and no valid cached copy exists."""


def default_cache_dir() -> Path:
    """``$COURSE_DATA_DIR`` if set, else ``~/.cache/course_lib``."""
    env = os.environ.get("COURSE_DATA_DIR")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "course_lib"


def sha1_of(path: str | Path, chunk_size: int = 1 << 20) -> str:
    """Hex SHA-1 digest of a file, read in chunks."""
    digest = hashlib.sha1()
    with open(path, "rb") as f:
        while chunk := f.read(chunk_size):
            digest.update(chunk)
    return digest.hexdigest()


def _fetch(url: str, dest: Path, sha1: str | None, timeout: float) -> None:
    """Download ``url`` to a temporary file next to ``dest``, verify, then rename."""
    fd, tmp_name = tempfile.mkstemp(prefix=dest.name + ".", suffix=".part", dir=dest.parent)
    tmp = Path(tmp_name)
    digest = hashlib.sha1()
    try:
        with os.fdopen(fd, "wb") as out, urllib.request.urlopen(url, timeout=timeout) as resp:
            while chunk := resp.read(1 << 20):
                digest.update(chunk)
                out.write(chunk)
        actual = digest.hexdigest()
        if sha1 is not None and actual != sha1.lower():
            raise ValueError(
                f"checksum mismatch for {url}: expected SHA-1 {sha1.lower()}, got {actual}; "
                "the download was deleted (a corrupted or different file?)"
            )
        os.replace(tmp, dest)  # atomic: dest is either absent or complete
    finally:
        tmp.unlink(missing_ok=True)


def _extract(archive: Path) -> Path:
    """Return the text file: ``archive`` itself, or ``fra.txt`` extracted from the zip."""
    if not zipfile.is_zipfile(archive):
        return archive
    target = archive.parent / _MEMBER
    if target.exists() and target.stat().st_mtime >= archive.stat().st_mtime:
        return target
    with zipfile.ZipFile(archive) as zf:
        names = zf.namelist()
        member = _MEMBER if _MEMBER in names else next(
            (n for n in names if n.endswith("fra.txt")), None
        )
        if member is None:
            raise ValueError(f"{archive} does not contain {_MEMBER}; its members are {names[:10]}")
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp_name = tempfile.mkstemp(dir=target.parent, suffix=".part")
        try:
            with os.fdopen(fd, "wb") as out, zf.open(member) as src:
                while chunk := src.read(1 << 20):
                    out.write(chunk)
            os.replace(tmp_name, target)
        finally:
            Path(tmp_name).unlink(missing_ok=True)
    return target


def download_fra_eng(
    cache_dir: str | Path | None = None,
    *,
    url: str = FRA_ENG_URL,
    sha1: str | None = FRA_ENG_SHA1,
    timeout: float = 30,
) -> Path:
    """Download (or reuse a cached) ``fra-eng.zip`` and return the path of ``fra.txt``.

    A cached file whose SHA-1 matches is used without touching the network. Otherwise
    the file is downloaded to a temporary name, its SHA-1 is checked, and only then is
    it renamed into place (a bad download is deleted). If ``url`` does not serve a zip
    archive, the downloaded file itself is returned.

    Args:
        cache_dir: folder for the download; default ``$COURSE_DATA_DIR`` or
            ``~/.cache/course_lib``.
        url: where to download from (any URL ``urllib`` opens, ``file://`` included).
        sha1: expected hex SHA-1 of the downloaded file; ``None`` skips the check.
        timeout: network timeout in seconds.

    Returns:
        Path of the extracted ``fra-eng/fra.txt`` inside ``cache_dir``.

    Raises:
        ValueError: the downloaded file has the wrong checksum.
        DownloadError: the download failed and there is no valid cached copy.
    """
    cache = Path(cache_dir).expanduser() if cache_dir is not None else default_cache_dir()
    cache.mkdir(parents=True, exist_ok=True)
    name = url.rstrip("/").rsplit("/", 1)[-1] or "fra-eng.zip"
    dest = cache / name
    if dest.exists() and (sha1 is None or sha1_of(dest) == sha1.lower()):
        return _extract(dest)
    try:
        _fetch(url, dest, sha1, timeout)
    except (urllib.error.URLError, OSError) as err:
        state = (
            f"the cached copy at {dest} has the wrong checksum"
            if dest.exists()
            else f"no cached copy at {dest}"
        )
        raise DownloadError(
            f"could not download {url} ({err}); {state}; download it by hand to {dest} "
            f"or set COURSE_DATA_DIR to a folder that contains {name}"
        ) from err
    return _extract(dest)


_NBSP = {"\u202f": " ", "\xa0": " ", "\u2009": " "}


def read_fra_eng(path: str | Path, *, max_pairs: int | None = None) -> list[tuple[str, str]]:
    """Parse a Tatoeba / ManyThings file of ``English<TAB>French[<TAB>attribution]`` lines.

    A UTF-8 byte-order mark, Windows line endings and blank lines are tolerated;
    non-breaking spaces (U+00A0, U+202F, which Tatoeba puts before ``?`` and ``!``)
    become ordinary spaces. A third column is ignored.

    Args:
        path: the text file (e.g. the result of ``download_fra_eng``).
        max_pairs: stop after this many pairs (>= 1); ``None`` reads all.

    Returns:
        ``(english, french)`` pairs in file order.

    Raises:
        ValueError: empty file, undecodable bytes, or a line without 2 or 3 columns;
            the message names the file and the 1-based line number.
    """
    path = Path(path)
    if max_pairs is not None and max_pairs < 1:
        raise ValueError(f"max_pairs must be >= 1 or None, got {max_pairs}")
    data = path.read_bytes()
    if data.startswith(b"\xef\xbb\xbf"):  # UTF-8 byte-order mark
        data = data[3:]
    pairs: list[tuple[str, str]] = []
    for lineno, raw_bytes in enumerate(data.split(b"\n"), start=1):
        try:
            line = raw_bytes.decode("utf-8").rstrip("\r")
        except UnicodeDecodeError as err:
            raise ValueError(f"{path}, line {lineno}: not valid UTF-8 ({err.reason})") from None
        for old, new in _NBSP.items():
            line = line.replace(old, new)
        if not line.strip():
            continue
        cols = line.split("\t")
        if len(cols) not in (2, 3):
            raise ValueError(
                f"{path}, line {lineno}: expected 2 or 3 tab-separated columns "
                f"(English, French[, attribution]), got {len(cols)}: {line[:60]!r}"
            )
        en, fr = cols[0].strip(), cols[1].strip()
        if not en or not fr:
            raise ValueError(f"{path}, line {lineno}: empty English or French sentence")
        pairs.append((en, fr))
        if max_pairs is not None and len(pairs) >= max_pairs:
            break
    if not pairs:
        raise ValueError(f"{path}: the file is empty (no English<TAB>French lines)")
    return pairs


def normalize_source(sentence: str) -> str:
    """The key used to decide that two source sentences are the same.

    Lower-cased, tokenized and re-joined, so ``"Go."`` and ``"go ."`` are one sentence.
    """
    return " ".join(tokenize(sentence))


def split_pairs(
    pairs: Sequence[tuple[str, str]],
    n_valid: int,
    n_test: int,
    seed: int = 0,
    *,
    always_test: Sequence[str] = (),
) -> TranslationSplits:
    """Split pairs so that no source sentence is in two splits.

    Tatoeba lists several translations of one English sentence on separate lines
    ("Go." -> "Va !", "Marche.", "En route !"). Pairs are grouped by their normalized
    source (``normalize_source``) and whole groups are assigned to one split, so a test
    sentence is never a training sentence and its translations form a multi-reference set.

    Args:
        pairs: ``(source, target)`` pairs.
        n_valid: number of distinct source sentences for validation.
        n_test: number of distinct source sentences for testing.
        seed: shuffling seed.
        always_test: source sentences to put in the test split whatever the shuffle
            (e.g. the sentences a lesson translates as a demo); they count towards
            ``n_test``.

    Returns:
        ``TranslationSplits``; ``len(test)`` can exceed ``n_test`` when a source has
        several translations (likewise for valid).

    Raises:
        ValueError: when sizes are negative or there are not enough distinct sources
            to leave at least one for training.
    """
    if n_valid < 0 or n_test < 0:
        raise ValueError(f"n_valid and n_test must be >= 0, got {n_valid} and {n_test}")
    if not pairs:
        raise ValueError("no pairs to split")
    groups: dict[str, list[tuple[str, str]]] = {}
    for src, tgt in pairs:
        groups.setdefault(normalize_source(src), []).append((src, tgt))
    keys = list(groups)  # first-appearance order: deterministic
    forced = list(dict.fromkeys(normalize_source(s) for s in always_test))
    missing = [s for s in forced if s not in groups]
    if missing:
        raise ValueError(f"always_test sentences not found in pairs: {missing[:5]}")
    if len(forced) > n_test:
        raise ValueError(f"always_test has {len(forced)} sentences but n_test is {n_test}")
    if n_valid + n_test >= len(keys):
        raise ValueError(
            f"only {len(keys)} distinct source sentences: cannot hold out "
            f"{n_valid} + {n_test} and keep some for training"
        )
    rest = [k for k in keys if k not in set(forced)]
    random.Random(seed).shuffle(rest)
    n_rest_test = n_test - len(forced)
    test_keys = forced + rest[:n_rest_test]
    valid_keys = rest[n_rest_test : n_rest_test + n_valid]
    train_keys = rest[n_rest_test + n_valid :]

    def collect(ks: list[str]) -> list[tuple[str, str]]:
        return [pair for k in ks for pair in groups[k]]

    return TranslationSplits(
        train=collect(train_keys), valid=collect(valid_keys), test=collect(test_keys)
    )
