"""Tests for course_lib.fra_eng on small files in tmp_path (never the network)."""

from __future__ import annotations

import functools
import hashlib
import http.server
import socket
import threading
import urllib.request
import zipfile
from pathlib import Path

import pytest

from course_lib import fra_eng
from course_lib.fra_eng import (
    ACCEPTED_SHA1,
    FRA_ENG_SHA1,
    FRA_ENG_URL,
    FRA_TXT_SHA1,
    ChecksumError,
    DownloadError,
    download_fra_eng,
    find_fra_member,
    near_duplicate_key,
    normalize_source,
    read_fra_eng,
    split_pairs,
    verify_fra_eng,
)

TIER = "fast"  # course_tools/tiers.py

LINES = [
    "Go.\tVa\u202f!",
    "Go.\tMarche.\tCC-BY 2.0 (France) Attribution: tatoeba.org #2877272 (CM) & #1158250 (Wittydev)",
    "I lost.\tJ'ai perdu.",
    "He's calm.\tIl est calme.",
    "Who?\tQui\xa0?",
]


def _write(path: Path, text: str, encoding: str = "utf-8") -> Path:
    path.write_bytes(text.encode(encoding))
    return path


def _make_zip(tmp_path: Path, lines=LINES) -> tuple[Path, str]:
    archive = tmp_path / "server" / "fra-eng.zip"
    archive.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("fra-eng/_about.txt", "about")
        zf.writestr("fra-eng/fra.txt", "\n".join(lines) + "\n")
    return archive, hashlib.sha1(archive.read_bytes()).hexdigest()


def _closed_port_url() -> str:
    with socket.socket() as s:  # bind to a free port, then close it: nobody listens there
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/fra-eng.zip"


# --------------------------------------------------------------------------- constants


def test_d2l_constants():
    assert FRA_ENG_URL == "http://d2l-data.s3-accelerate.amazonaws.com/fra-eng.zip"
    assert FRA_ENG_SHA1 == "94646ad1522d915e7b0f9296181140edcf86a4f5"


# --------------------------------------------------------------------------- parsing


def test_reads_two_and_three_columns_bom_crlf_and_nbsp(tmp_path):
    path = _write(tmp_path / "fra.txt", "\ufeff" + "\r\n".join(LINES) + "\r\n\r\n")
    pairs = read_fra_eng(path)
    assert pairs == [
        ("Go.", "Va !"),
        ("Go.", "Marche."),
        ("I lost.", "J'ai perdu."),
        ("He's calm.", "Il est calme."),
        ("Who?", "Qui ?"),
    ]
    assert read_fra_eng(path, max_pairs=2) == pairs[:2]
    with pytest.raises(ValueError, match="max_pairs"):
        read_fra_eng(path, max_pairs=0)


@pytest.mark.parametrize(
    "content, line, what",
    [
        ("Go.\tVa !\nOnly one column\nHi.\tSalut.\n", 2, "2 or 3 tab-separated columns"),
        ("Go.\tVa !\nHi.\tSalut.\nA\tB\tC\tD\n", 3, "got 4"),
        ("Go.\tVa !\n\tVide.\n", 2, "empty English or French"),
    ],
)
def test_bad_lines_name_file_and_line(tmp_path, content, line, what):
    path = _write(tmp_path / "bad.txt", content)
    with pytest.raises(ValueError, match=what) as info:
        read_fra_eng(path)
    assert str(path) in str(info.value) and f"line {line}:" in str(info.value)


def test_undecodable_bytes_name_file_and_line(tmp_path):
    path = tmp_path / "latin1.txt"
    path.write_bytes("Go.\tVa !\r\nHi.\tSalut.\r\nSee you.\tÀ plus.\r\n".encode("latin-1"))
    with pytest.raises(ValueError, match="UTF-8") as info:
        read_fra_eng(path)
    assert f"{path}, line 3:" in str(info.value)


def test_empty_file(tmp_path):
    for content in ["", "\ufeff\n\n  \n"]:
        path = _write(tmp_path / "empty.txt", content)
        with pytest.raises(ValueError, match="empty") as info:
            read_fra_eng(path)
        assert str(path) in str(info.value)


# --------------------------------------------------------------------------- download


def test_download_from_file_url_verifies_and_extracts(tmp_path):
    archive, digest = _make_zip(tmp_path)
    cache = tmp_path / "cache"
    path = download_fra_eng(cache, url=archive.as_uri(), sha1=digest)
    assert path == cache / "fra-eng" / "fra.txt"
    assert (cache / "fra-eng.zip").read_bytes() == archive.read_bytes()
    assert read_fra_eng(path)[2] == ("I lost.", "J'ai perdu.")
    assert not list(cache.glob("*.part"))


def test_bad_checksum_is_rejected_and_deleted(tmp_path):
    archive, digest = _make_zip(tmp_path)
    cache = tmp_path / "cache"
    wrong = "0" * 40
    with pytest.raises(ValueError, match="checksum") as info:
        download_fra_eng(cache, url=archive.as_uri(), sha1=wrong)
    assert wrong in str(info.value) and digest in str(info.value)
    assert list(cache.iterdir()) == []  # neither the bad file nor a temporary is left


def test_repacked_archive_of_the_same_text_is_accepted_by_its_content(tmp_path):
    archive, zip_digest = _make_zip(tmp_path)
    text = ("\n".join(LINES) + "\n").encode()
    content_digest = hashlib.sha1(text).hexdigest()
    repacked = tmp_path / "other" / "fra-eng.zip"
    repacked.parent.mkdir()
    with zipfile.ZipFile(repacked, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("fra-eng/fra.txt", text)  # no _about.txt, compressed: other bytes
    assert hashlib.sha1(repacked.read_bytes()).hexdigest() != zip_digest
    # accepted by the content digest, not by the archive's
    verify_fra_eng(repacked, sha1=content_digest)
    with pytest.raises(ChecksumError):
        verify_fra_eng(repacked, sha1=zip_digest)
    path = download_fra_eng(tmp_path / "cache", url=repacked.as_uri(), sha1=(zip_digest, content_digest))
    assert read_fra_eng(path) == read_fra_eng(repacked)  # read_fra_eng also reads the zip itself
    # a plain-text fra.txt is accepted by the same content digest
    plain = tmp_path / "plain" / "fra.txt"
    plain.parent.mkdir()
    plain.write_bytes(text)
    verify_fra_eng(plain, sha1=content_digest)


def test_a_different_file_is_rejected_with_what_to_do(tmp_path):
    archive, digest = _make_zip(tmp_path, lines=LINES[:3])
    with pytest.raises(ChecksumError) as info:
        verify_fra_eng(archive)  # the default: D2L's archive or D2L's fra.txt
    msg = str(info.value)
    assert FRA_ENG_SHA1 in msg and FRA_TXT_SHA1 in msg and digest in msg
    assert "To proceed" in msg and "download_fra_eng()" in msg and "sha1=" in msg
    assert isinstance(info.value, ValueError)
    assert ACCEPTED_SHA1 == (FRA_ENG_SHA1, FRA_TXT_SHA1)


def test_unchecked_download_is_not_trusted_later(tmp_path):
    archive, digest = _make_zip(tmp_path)
    cache = tmp_path / "cache"
    path = download_fra_eng(cache, url=archive.as_uri(), sha1=None)
    assert len(read_fra_eng(path)) == len(LINES)
    # the server's file changes: an unchecked cached copy must not be reused
    _make_zip(tmp_path, lines=LINES[:2])
    path = download_fra_eng(cache, url=archive.as_uri(), sha1=None)
    assert len(read_fra_eng(path)) == 2
    # nor is it trusted by a later call that does check (it is not D2L's data)
    with pytest.raises(ChecksumError, match="To proceed"):
        download_fra_eng(cache, url=archive.as_uri())


def test_macos_resource_fork_listed_first_is_not_taken_for_fra_txt(tmp_path):
    archive = tmp_path / "server" / "fra-eng.zip"
    archive.parent.mkdir()
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("__MACOSX/._fra.txt", b"\x00\x05\x16\x07 Mac OS X resource fork")
        zf.writestr("__MACOSX/data/._fra.txt", b"\x00\x05\x16\x07")
        zf.writestr("data/._fra.txt", b"\x00\x05\x16\x07")
        zf.writestr("data/fra.txt", "\n".join(LINES) + "\n")
    digest = hashlib.sha1(archive.read_bytes()).hexdigest()
    path = download_fra_eng(tmp_path / "cache", url=archive.as_uri(), sha1=digest)
    assert read_fra_eng(path) == read_fra_eng(archive)
    assert read_fra_eng(path)[0] == ("Go.", "Va !")
    assert find_fra_member(["__MACOSX/._fra.txt", "fra.txt"]) == "fra.txt"
    assert find_fra_member(["__MACOSX/._fra.txt", "._fra.txt"]) is None


def test_stale_extraction_is_replaced(tmp_path):
    archive, digest = _make_zip(tmp_path)
    cache = tmp_path / "cache"
    path = download_fra_eng(cache, url=archive.as_uri(), sha1=digest)
    path.write_text("Go.\tTampered.\n", encoding="utf-8")  # newer than the archive
    again = download_fra_eng(cache, url=archive.as_uri(), sha1=digest)
    assert read_fra_eng(again) == read_fra_eng(archive)


def test_cache_hit_does_not_touch_the_network(tmp_path, monkeypatch):
    archive, digest = _make_zip(tmp_path)
    cache = tmp_path / "cache"
    first = download_fra_eng(cache, url=archive.as_uri(), sha1=digest)

    def no_network(*args, **kwargs):
        raise AssertionError("urlopen called although the cache is valid")

    monkeypatch.setattr(urllib.request, "urlopen", no_network)
    archive.unlink()  # the source is gone too
    assert download_fra_eng(cache, url=archive.as_uri(), sha1=digest) == first
    assert read_fra_eng(first)[0] == ("Go.", "Va !")


def test_corrupt_cache_is_downloaded_again(tmp_path):
    archive, digest = _make_zip(tmp_path)
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / "fra-eng.zip").write_bytes(b"truncated")
    path = download_fra_eng(cache, url=archive.as_uri(), sha1=digest)
    assert hashlib.sha1((cache / "fra-eng.zip").read_bytes()).hexdigest() == digest
    assert len(read_fra_eng(path)) == len(LINES)


def test_no_network_and_no_cache_gives_a_helpful_error(tmp_path):
    cache = tmp_path / "cache"
    with pytest.raises(DownloadError) as info:
        download_fra_eng(cache, url=_closed_port_url(), timeout=5)
    msg = str(info.value)
    assert "could not download http://127.0.0.1:" in msg
    assert f"no cached copy at {cache / 'fra-eng.zip'}" in msg
    assert "download it by hand" in msg and "COURSE_DATA_DIR" in msg
    assert list(cache.iterdir()) == []


def test_download_from_local_http_server_and_env_cache_dir(tmp_path, monkeypatch):
    archive, digest = _make_zip(tmp_path)
    handler = functools.partial(
        http.server.SimpleHTTPRequestHandler, directory=str(archive.parent)
    )
    handler.log_message = lambda *a, **k: None  # type: ignore[attr-defined]
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        monkeypatch.setenv("COURSE_DATA_DIR", str(tmp_path / "envcache"))
        assert fra_eng.default_cache_dir() == tmp_path / "envcache"
        url = f"http://127.0.0.1:{server.server_address[1]}/fra-eng.zip"
        path = download_fra_eng(url=url, sha1=digest, timeout=5)
        assert path == tmp_path / "envcache" / "fra-eng" / "fra.txt"
        assert read_fra_eng(path)[-1] == ("Who?", "Qui ?")
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def test_plain_text_url_is_returned_as_is(tmp_path):
    src = _write(tmp_path / "fra.txt", "\n".join(LINES))
    digest = hashlib.sha1(src.read_bytes()).hexdigest()
    path = download_fra_eng(tmp_path / "cache", url=src.as_uri(), sha1=digest)
    assert path == tmp_path / "cache" / "fra.txt" and len(read_fra_eng(path)) == 5


# --------------------------------------------------------------------------- splits


def _pairs() -> list[tuple[str, str]]:
    pairs = [(f"Sentence number {i}.", f"Phrase numéro {i}.") for i in range(60)]
    # several translations of one source, with case/spacing variants of the source
    pairs += [("Go.", "Va !"), ("go .", "Marche."), ("GO.", "Bouge !"), ("I lost.", "J'ai perdu.")]
    return pairs


def test_split_pairs_keeps_sources_disjoint_and_groups_together():
    pairs = _pairs()
    s = split_pairs(pairs, n_valid=10, n_test=10, seed=0)
    assert len(s.valid) == 10 and len(s.test) == 10  # sizes in pairs, as asked
    keys = [{normalize_source(src) for src, _ in part} for part in (s.train, s.valid, s.test)]
    assert not (keys[0] & keys[1]) and not (keys[0] & keys[2]) and not (keys[1] & keys[2])
    assert sorted(s.train + s.valid + s.test) == sorted(pairs)  # nothing lost or repeated
    assert split_pairs(pairs, 10, 10, seed=0) == s
    assert split_pairs(pairs, 10, 10, seed=1).test != s.test


@pytest.mark.slow  # 0.28 s of CPU (a fast test stays under 0.1 s: course_tools/tiers.py)
def test_split_pairs_sizes_are_pairs_even_with_many_translations_per_source():
    # Like the start of fra.txt: short sources with many translations each. Counting
    # distinct sources (the old behaviour) took all 5 translations of each test source.
    pairs = [(f"Source {i}.", f"Traduction {i}-{j}.") for i in range(100) for j in range(5)]
    pairs += [(f"Lone {i}.", f"Seule {i}.") for i in range(50)]
    for seed in range(5):
        s = split_pairs(pairs, n_valid=23, n_test=101, seed=seed)
        assert (len(s.test), len(s.valid), len(s.train)) == (101, 23, len(pairs) - 124)
        test_src = {normalize_source(src) for src, _ in s.test}
        assert not test_src & {normalize_source(src) for src, _ in s.train + s.valid}
        # a group is never divided: every test source has all its translations in test
        for src in test_src:
            n_in_pairs = sum(normalize_source(p[0]) == src for p in pairs)
            assert sum(normalize_source(p[0]) == src for p in s.test) == n_in_pairs


def test_split_pairs_says_when_sizes_cannot_be_met_exactly():
    pairs = [(f"Source {i}.", f"Traduction {i}-{j}.") for i in range(20) for j in range(3)]
    with pytest.raises(ValueError, match="exactly 10 pairs"):
        split_pairs(pairs, n_valid=0, n_test=10)  # groups of 3 cannot make 10
    assert len(split_pairs(pairs, n_valid=0, n_test=9).test) == 9


def test_split_pairs_always_test_moves_demo_sentences_out_of_training():
    pairs = _pairs()
    s = split_pairs(pairs, n_valid=5, n_test=6, seed=0, always_test=["go .", "I lost."])
    test_sources = {normalize_source(src) for src, _ in s.test}
    assert {"go .", "i lost ."} <= test_sources and len(s.test) == 6  # 3 + 1 forced + 2 drawn
    assert sorted(fr for src, fr in s.test if normalize_source(src) == "go .") == [
        "Bouge !", "Marche.", "Va !"]
    assert all(normalize_source(src) not in {"go .", "i lost ."} for src, _ in s.train)


def test_split_pairs_errors():
    pairs = _pairs()
    with pytest.raises(ValueError, match="distinct source"):
        split_pairs(pairs, n_valid=32, n_test=32)
    with pytest.raises(ValueError, match=">= 0"):
        split_pairs(pairs, n_valid=-1, n_test=1)
    with pytest.raises(ValueError, match="not found"):
        split_pairs(pairs, 1, 1, always_test=["Never seen."])
    with pytest.raises(ValueError, match="4 pairs but n_test is 3"):
        split_pairs(pairs, 1, 3, always_test=["Go.", "I lost."])
    with pytest.raises(ValueError, match="no pairs"):
        split_pairs([], 1, 1)


def test_near_duplicate_key_ignores_case_and_punctuation_only():
    assert near_duplicate_key("Go.") == near_duplicate_key("go !") == near_duplicate_key("GO?") == "go"
    assert near_duplicate_key("Tom's here, isn't he?") == "tom s here isn t he"
    assert near_duplicate_key("Go.") != near_duplicate_key("Go away.")
    assert normalize_source("Go.") != normalize_source("Go!")  # the default key keeps them apart


def _near_duplicate_pairs() -> list[tuple[str, str]]:
    pairs = [(f"Sentence number {i}.", f"Phrase numéro {i}.") for i in range(40)]
    for i in range(20):  # near-duplicates: the same words, another punctuation or case
        pairs += [(f"Come here {i}.", f"Viens ici {i}."), (f"Come here {i}!", f"Viens ici {i} !"),
                  (f"come here {i}?", f"Viens ici {i} ?")]
    return pairs


def test_split_pairs_keeps_near_duplicates_on_one_side_with_near_duplicate_key():
    pairs = _near_duplicate_pairs()

    def straddles(s) -> bool:
        keys = [{near_duplicate_key(src) for src, _ in part} for part in (s.train, s.valid, s.test)]
        return bool(keys[0] & keys[1] or keys[0] & keys[2] or keys[1] & keys[2])

    for seed in range(10):
        s = split_pairs(pairs, n_valid=12, n_test=12, seed=seed, key=near_duplicate_key)
        assert (len(s.valid), len(s.test)) == (12, 12)
        assert not straddles(s)
        assert sorted(s.train + s.valid + s.test) == sorted(pairs)
    # The default key (case only) does split them: the test above has teeth.
    assert any(straddles(split_pairs(pairs, 12, 12, seed=seed)) for seed in range(10))
