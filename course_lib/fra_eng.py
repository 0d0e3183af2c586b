"""The real English-French data D2L uses: download, cache, parse and split it.

D2L's machine-translation chapters read ``fra-eng/fra.txt`` from ``fra-eng.zip``
(``http://d2l-data.s3-accelerate.amazonaws.com/fra-eng.zip``, SHA-1
``94646ad1522d915e7b0f9296181140edcf86a4f5``), pairs from the Tatoeba project as
packaged by manythings.org. Each line is ``English<TAB>French``; newer Tatoeba /
ManyThings files add a third column with attribution, which is accepted and ignored.

Lessons 1-11 run offline on ``course_lib.corpus``. Lesson 12 runs offline on real sentences
too: the first 22,000 lines of D2L's ``fra.txt`` ship with the library
(``course_lib/data_files/fra_eng_sample.tsv.gz``, Tatoeba / manythings.org, CC-BY 2.0 FR; see
``course_lib/data_files/README.md``), read by :func:`load_sample`. The whole file stays a
download:

>>> path = download_fra_eng()                       # doctest: +SKIP
>>> pairs = read_fra_eng(path, max_pairs=20000)     # doctest: +SKIP
>>> splits = split_pairs(pairs, n_valid=500, n_test=500, seed=0)  # doctest: +SKIP
>>> sample = load_sample()                           # no download: the shipped 22,000 pairs
>>> sample[0]
('Go.', 'Va !')

Downloads are cached in ``$COURSE_DATA_DIR`` or ``~/.cache/course_lib``. The check is on
content: D2L's archive (SHA-1 ``94646ad1...``) is accepted, and so is any archive whose
``fra.txt`` has D2L's content (SHA-1 ``c43f99dc...``), e.g. a re-packed copy. It is made
before a cached copy is trusted and after every download.
"""

from __future__ import annotations

import gzip
import hashlib
import os
import random
import tempfile
import unicodedata
import urllib.error
import urllib.request
import zipfile
import zlib
from collections.abc import Callable, Sequence
from pathlib import Path

from course_lib.data import TranslationSplits, tokenize

__all__ = [
    "FRA_ENG_URL",
    "FRA_ENG_SHA1",
    "FRA_TXT_SHA1",
    "ACCEPTED_SHA1",
    "DownloadError",
    "ChecksumError",
    "default_cache_dir",
    "sha1_of",
    "find_fra_member",
    "verify_fra_eng",
    "download_fra_eng",
    "read_fra_eng",
    "SAMPLE_FILE",
    "SAMPLE_PAIRS",
    "load_sample",
    "normalize_source",
    "near_duplicate_key",
    "split_pairs",
]

FRA_ENG_URL = "http://d2l-data.s3-accelerate.amazonaws.com/fra-eng.zip"
#: SHA-1 of the zip archive D2L publishes.
FRA_ENG_SHA1 = "94646ad1522d915e7b0f9296181140edcf86a4f5"
#: SHA-1 of ``fra-eng/fra.txt`` inside it: a re-packed archive of the same text has
#: another zip SHA-1 but this content SHA-1.
FRA_TXT_SHA1 = "c43f99dce27311d3afd4d3e0716848194cfcc103"
#: What :func:`download_fra_eng` accepts by default: D2L's archive, or any file (zip or
#: plain text) whose ``fra.txt`` content is D2L's.
ACCEPTED_SHA1: tuple[str, ...] = (FRA_ENG_SHA1, FRA_TXT_SHA1)
_MEMBER = "fra-eng/fra.txt"
#: The shipped sample: the first :data:`SAMPLE_PAIRS` lines of D2L's ``fra.txt``, byte for
#: byte, gzip-compressed (rebuilt by ``scripts/build_fra_eng_sample.py``).
SAMPLE_FILE = Path(__file__).resolve().parent / "data_files" / "fra_eng_sample.tsv.gz"
SAMPLE_PAIRS = 22_000


class DownloadError(OSError):
    """The file could not be downloaded and no valid cached copy exists."""


class ChecksumError(ValueError):
    """A file is not the expected data: neither its own SHA-1 nor its content's matches."""


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


def _accepted(sha1: str | Sequence[str]) -> tuple[str, ...]:
    return (sha1.lower(),) if isinstance(sha1, str) else tuple(s.lower() for s in sha1)


def find_fra_member(names: Sequence[str]) -> str | None:
    """The member of a zip archive that holds the sentence pairs, or None.

    ``fra-eng/fra.txt`` if present, else the first ``fra.txt`` in any folder. macOS
    metadata is never taken: ``__MACOSX/...`` entries and ``._fra.txt`` resource forks
    (which a Finder-made archive may list first) hold no sentences.

    Args:
        names: the archive's member names (``ZipFile.namelist()``).

    Returns:
        The member name, or None when the archive has no ``fra.txt``.
    """
    if _MEMBER in names:
        return _MEMBER
    for name in names:
        base = name.rsplit("/", 1)[-1]
        if base == "fra.txt" and not name.startswith("__MACOSX/"):
            return name
    return None


def _member_or_raise(archive: Path, zf: zipfile.ZipFile) -> str:
    names = zf.namelist()
    member = find_fra_member(names)
    if member is None:
        raise ValueError(
            f"{archive} does not contain {_MEMBER} (nor any other fra.txt outside __MACOSX/); "
            f"its members are {names[:10]}. Is it the English-French archive from {FRA_ENG_URL}?"
        )
    return member


def _content_sha1(path: Path) -> str | None:
    """SHA-1 of ``fra.txt``: the member of a zip archive, or the file itself."""
    if not zipfile.is_zipfile(path):
        return sha1_of(path)
    with zipfile.ZipFile(path) as zf:
        names = zf.namelist()
        member = find_fra_member(names)
        if member is None:
            return None
        digest = hashlib.sha1()
        with zf.open(member) as src:
            while chunk := src.read(1 << 20):
                digest.update(chunk)
        return digest.hexdigest()


def _matches(path: Path, accepted: tuple[str, ...]) -> tuple[bool, str, str | None]:
    """(accepted?, SHA-1 of the file, SHA-1 of its fra.txt content or None if not needed)."""
    own = sha1_of(path)
    if own in accepted:
        return True, own, None
    try:
        content = _content_sha1(path)
    except (zipfile.BadZipFile, OSError):
        content = None
    return content in accepted, own, content


def verify_fra_eng(path: str | Path, sha1: str | Sequence[str] = ACCEPTED_SHA1) -> None:
    """Check that ``path`` holds the expected data: by its own SHA-1 or its content's.

    A zip archive is accepted when its SHA-1 is one of ``sha1`` (D2L's published archive)
    or when the SHA-1 of its ``fra.txt`` is (the same text re-packed: re-zipping changes
    the archive's bytes, not the sentences). A plain text file is accepted when its own
    SHA-1 is. A different file is rejected whatever its container.

    Args:
        path: a zip archive or a plain ``fra.txt``.
        sha1: accepted hex SHA-1 digest(s); default :data:`ACCEPTED_SHA1`.

    Raises:
        ChecksumError: neither digest matches; the message names what was found, what
            was expected and how to proceed.
    """
    path = Path(path)
    accepted = _accepted(sha1)
    ok, own, content = _matches(path, accepted)
    if not ok:
        raise ChecksumError(_mismatch_message(str(path), accepted, own, content))


def _mismatch_message(what: str, accepted: tuple[str, ...], own: str, content: str | None) -> str:
    found = f"file SHA-1 {own}" + (f", fra.txt SHA-1 {content}" if content and content != own else "")
    return (
        f"checksum mismatch for {what}: expected SHA-1 {' or '.join(accepted)} (the archive "
        f"or the fra.txt inside it), got {found}. It is not the English-French data this "
        "course expects (an interrupted download, or another version of the file). To "
        "proceed: delete it and call download_fra_eng() again to fetch D2L's copy; or, to use "
        "this file on purpose, pass its SHA-1 (download_fra_eng(..., sha1=...)) or read it "
        "directly with read_fra_eng(path)."
    )


def _fetch(url: str, dest: Path, accepted: tuple[str, ...] | None, timeout: float) -> None:
    """Download ``url`` to a temporary file next to ``dest``, verify, then rename."""
    fd, tmp_name = tempfile.mkstemp(prefix=dest.name + ".", suffix=".part", dir=dest.parent)
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "wb") as out, urllib.request.urlopen(url, timeout=timeout) as resp:
            while chunk := resp.read(1 << 20):
                out.write(chunk)
        if accepted is not None:
            ok, own, content = _matches(tmp, accepted)
            if not ok:
                raise ChecksumError(
                    _mismatch_message(url, accepted, own, content)
                    + " The download was deleted."
                )
        os.replace(tmp, dest)  # atomic: dest is either absent or complete
    finally:
        tmp.unlink(missing_ok=True)


def _crc32_of(path: Path) -> int:
    crc = 0
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            crc = zlib.crc32(chunk, crc)
    return crc


def _extract(archive: Path) -> Path:
    """Return the text file: ``archive`` itself, or ``fra.txt`` extracted from the zip.

    An earlier extraction is reused only if its size and CRC-32 are those the archive
    records for the member, so it always matches the (verified) archive.
    """
    if not zipfile.is_zipfile(archive):
        return archive
    target = archive.parent / _MEMBER
    with zipfile.ZipFile(archive) as zf:
        member = _member_or_raise(archive, zf)
        info = zf.getinfo(member)
        if target.exists() and target.stat().st_size == info.file_size and _crc32_of(target) == info.CRC:
            return target
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
    sha1: str | Sequence[str] | None = ACCEPTED_SHA1,
    timeout: float = 30,
) -> Path:
    """Download (or reuse a cached) ``fra-eng.zip`` and return the path of ``fra.txt``.

    The check is on content, not container: a file is accepted when its SHA-1, or the
    SHA-1 of the ``fra.txt`` inside it, is one of ``sha1`` (by default D2L's archive or
    its ``fra.txt``, so a re-packed archive of the same sentences is accepted and a
    different file is not). A cached file is used without touching the network only
    after it passes this check. Otherwise the file is downloaded to a temporary name,
    checked, and only then renamed into place (a bad download is deleted). If ``url``
    does not serve a zip archive, the downloaded file itself is returned.

    ``sha1=None`` skips the check for a file you trust. Nothing can then vouch for a
    cached copy, so it is not reused: every call downloads again (a cached copy is
    reused only if it is D2L's data).

    Args:
        cache_dir: folder for the download; default ``$COURSE_DATA_DIR`` or
            ``~/.cache/course_lib``.
        url: where to download from (any URL ``urllib`` opens, ``file://`` included).
        sha1: accepted hex SHA-1 digest(s) of the file or of its ``fra.txt``; ``None``
            skips the check (see above).
        timeout: network timeout in seconds.

    Returns:
        Path of the extracted ``fra-eng/fra.txt`` inside ``cache_dir``.

    Raises:
        ChecksumError: (a ``ValueError``) the downloaded file is not the expected data.
        DownloadError: the download failed and there is no valid cached copy.
    """
    cache = Path(cache_dir).expanduser() if cache_dir is not None else default_cache_dir()
    cache.mkdir(parents=True, exist_ok=True)
    name = url.rstrip("/").rsplit("/", 1)[-1] or "fra-eng.zip"
    dest = cache / name
    accepted = _accepted(sha1) if sha1 is not None else None
    if dest.exists() and _matches(dest, accepted if accepted is not None else ACCEPTED_SHA1)[0]:
        return _extract(dest)
    try:
        _fetch(url, dest, accepted, timeout)
    except ChecksumError:
        raise
    except (urllib.error.URLError, OSError) as err:
        state = (
            f"the cached copy at {dest} is not the expected data (checksum mismatch)"
            if dest.exists()
            else f"no cached copy at {dest}"
        )
        raise DownloadError(
            f"could not download {url} ({err}); {state}; download it by hand to {dest} "
            f"or set COURSE_DATA_DIR to a folder that contains {name}"
        ) from err
    return _extract(dest)


_NBSP = {"\u202f": " ", "\xa0": " ", "\u2009": " "}


def _parse(data: bytes, where: str, max_pairs: int | None) -> list[tuple[str, str]]:
    """The pairs of ``English<TAB>French[<TAB>attribution]`` lines; errors name ``where``."""
    if data.startswith(b"\xef\xbb\xbf"):  # UTF-8 byte-order mark
        data = data[3:]
    pairs: list[tuple[str, str]] = []
    for lineno, raw_bytes in enumerate(data.split(b"\n"), start=1):
        try:
            line = raw_bytes.decode("utf-8").rstrip("\r")
        except UnicodeDecodeError as err:
            raise ValueError(f"{where}, line {lineno}: not valid UTF-8 ({err.reason})") from None
        for old, new in _NBSP.items():
            line = line.replace(old, new)
        if not line.strip():
            continue
        cols = line.split("\t")
        if len(cols) not in (2, 3):
            raise ValueError(
                f"{where}, line {lineno}: expected 2 or 3 tab-separated columns "
                f"(English, French[, attribution]), got {len(cols)}: {line[:60]!r}"
            )
        en, fr = cols[0].strip(), cols[1].strip()
        if not en or not fr:
            raise ValueError(f"{where}, line {lineno}: empty English or French sentence")
        pairs.append((en, fr))
        if max_pairs is not None and len(pairs) >= max_pairs:
            break
    if not pairs:
        raise ValueError(f"{where}: the file is empty (no English<TAB>French lines)")
    return pairs


def read_fra_eng(path: str | Path, *, max_pairs: int | None = None) -> list[tuple[str, str]]:
    """Parse a Tatoeba / ManyThings file of ``English<TAB>French[<TAB>attribution]`` lines.

    A UTF-8 byte-order mark, Windows line endings and blank lines are tolerated;
    non-breaking spaces (U+00A0, U+202F, which Tatoeba puts before ``?`` and ``!``)
    become ordinary spaces. A third column is ignored.

    Args:
        path: the text file (e.g. the result of ``download_fra_eng``), or a zip archive
            holding it (its ``fra.txt`` is read without extracting; not checksummed: see
            :func:`verify_fra_eng`).
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
    if zipfile.is_zipfile(path):
        with zipfile.ZipFile(path) as zf:
            data = zf.read(_member_or_raise(path, zf))
    else:
        data = path.read_bytes()
    return _parse(data, str(path), max_pairs)


def load_sample(max_pairs: int | None = None) -> list[tuple[str, str]]:
    """The real English-French pairs that ship with the library, no download needed.

    The first 22,000 lines of D2L's ``fra.txt`` (Tatoeba sentences as packaged by
    manythings.org, licence CC-BY 2.0 FR, attribution "www.manythings.org/anki and
    tatoeba.org"; ``course_lib/data_files/README.md``). The file is sorted by length, so these
    are short sentences (1 to 8 English words). Parsed exactly as :func:`read_fra_eng`
    parses the full file (non-breaking spaces become spaces).

    Args:
        max_pairs: stop after this many pairs (>= 1); ``None`` reads all 22,000.

    Returns:
        ``(english, french)`` pairs in file order; the first is ``("Go.", "Va !")``.

    Raises:
        FileNotFoundError: the package was installed without its data file.
    """
    if max_pairs is not None and max_pairs < 1:
        raise ValueError(f"max_pairs must be >= 1 or None, got {max_pairs}")
    if not SAMPLE_FILE.exists():
        raise FileNotFoundError(
            f"{SAMPLE_FILE} is missing: the course package was installed without its data "
            "(pyproject.toml's package-data lists it); reinstall it, or run "
            "scripts/build_fra_eng_sample.py with fra-eng.zip"
        )
    return _parse(gzip.decompress(SAMPLE_FILE.read_bytes()), str(SAMPLE_FILE.name), max_pairs)


def normalize_source(sentence: str) -> str:
    """The key used to decide that two source sentences are the same.

    Lower-cased, tokenized and re-joined, so ``"Go."`` and ``"go ."`` are one sentence.
    """
    return " ".join(tokenize(sentence))


def near_duplicate_key(sentence: str) -> str:
    """A coarser key than :func:`normalize_source`: case *and punctuation* ignored.

    ``"Go."``, ``"Go!"`` and ``"go ?"`` get the same key (``"go"``), so sentences that
    differ only in punctuation or case are one sentence. Every Unicode punctuation
    character (categories ``P*``: the apostrophe too, so ``"Tom's"`` -> ``"tom s"``)
    becomes a space, then runs of whitespace become one space. Pass it as
    ``split_pairs(..., key=near_duplicate_key)`` so that such near-duplicates never
    straddle two splits.
    """
    text = "".join(" " if unicodedata.category(ch).startswith("P") else ch
                   for ch in unicodedata.normalize("NFKC", sentence).lower())
    return " ".join(text.split())


def split_pairs(
    pairs: Sequence[tuple[str, str]],
    n_valid: int,
    n_test: int,
    seed: int = 0,
    *,
    always_test: Sequence[str] = (),
    key: Callable[[str], str] = normalize_source,
) -> TranslationSplits:
    """Split pairs into exactly ``n_valid`` and ``n_test`` pairs, no source in two splits.

    Sizes are counted in *pairs*, like the rest of the course: ``len(splits.test) ==
    n_test`` and ``len(splits.valid) == n_valid``; training gets all the other pairs.

    Tatoeba lists several translations of one English sentence on separate lines
    ("Go." -> "Va !", "Marche.", "En route !"). Pairs are grouped by their normalized
    source (``key``, by default ``normalize_source``) and a group is never divided, so a
    test sentence is never a training sentence and its translations form a
    multi-reference set. With ``key=near_duplicate_key`` sentences that differ only in
    punctuation or case ("Go." / "Go!") are one group too, so such near-duplicates stay
    on one side (the default key keeps them apart, as earlier versions did). Groups are
    taken in a shuffled order; one that would overshoot the requested size is skipped
    (left for the next split), so the sizes come out exact.

    Args:
        pairs: ``(source, target)`` pairs.
        n_valid: number of validation pairs.
        n_test: number of test pairs.
        seed: shuffling seed.
        always_test: source sentences to put in the test split whatever the shuffle
            (e.g. the sentences a lesson translates as a demo); all their pairs go to
            test and count towards ``n_test``.
        key: maps a source sentence to its group key (default :func:`normalize_source`;
            :func:`near_duplicate_key` also ignores punctuation).

    Returns:
        ``TranslationSplits`` with ``len(test) == n_test``, ``len(valid) == n_valid``.

    Raises:
        ValueError: when sizes are negative, when ``always_test`` sentences are unknown
            or have more pairs than ``n_test``, or when the groups cannot fill the sizes
            exactly and leave at least one pair for training.
    """
    if n_valid < 0 or n_test < 0:
        raise ValueError(f"n_valid and n_test must be >= 0, got {n_valid} and {n_test}")
    if not pairs:
        raise ValueError("no pairs to split")
    groups: dict[str, list[tuple[str, str]]] = {}
    for src, tgt in pairs:
        groups.setdefault(key(src), []).append((src, tgt))
    keys = list(groups)  # first-appearance order: deterministic
    forced = list(dict.fromkeys(key(s) for s in always_test))
    missing = [s for s in forced if s not in groups]
    if missing:
        raise ValueError(f"always_test sentences not found in pairs: {missing[:5]}")
    n_forced = sum(len(groups[k]) for k in forced)
    if n_forced > n_test:
        raise ValueError(
            f"always_test has {len(forced)} sentences with {n_forced} pairs but n_test is "
            f"{n_test} pairs; raise n_test or drop some always_test sentences"
        )
    if n_valid + n_test >= len(pairs):
        raise ValueError(
            f"only {len(pairs)} pairs ({len(keys)} distinct source sentences): cannot hold "
            f"out {n_valid} + {n_test} pairs and keep some for training"
        )
    forced_set = set(forced)
    rest = [k for k in keys if k not in forced_set]
    random.Random(seed).shuffle(rest)

    def fill(wanted: int, start: list[str], pool: list[str]) -> tuple[list[str], list[str]]:
        """Take groups from ``pool`` (in order) until ``wanted`` pairs; return (taken, left)."""
        taken, left = list(start), []
        size = sum(len(groups[k]) for k in taken)
        for k in pool:
            if size < wanted and size + len(groups[k]) <= wanted:
                taken.append(k)
                size += len(groups[k])
            else:
                left.append(k)
        return taken, left

    test_keys, rest = fill(n_test, forced, rest)
    valid_keys, train_keys = fill(n_valid, [], rest)

    def collect(ks: list[str]) -> list[tuple[str, str]]:
        return [pair for k in ks for pair in groups[k]]

    splits = TranslationSplits(
        train=collect(train_keys), valid=collect(valid_keys), test=collect(test_keys)
    )
    for name, part, wanted in (("test", splits.test, n_test), ("valid", splits.valid, n_valid)):
        if len(part) != wanted:
            raise ValueError(
                f"could not fill the {name} split with exactly {wanted} pairs without dividing "
                f"a source sentence's translations (got {len(part)}); choose another size"
            )
    if not splits.train:
        raise ValueError("no pairs are left for training; lower n_valid or n_test")
    return splits
