"""The real sentences that ship with the library (lesson 12): loader, licence files, packaging,
and that the shipped file is exactly what scripts/build_fra_eng_sample.py builds from the real
archive (that one test needs ``$COURSE_FRA_ENG`` or ``../shared/data/fra-eng.zip`` and is
skipped, with the reason, only when the archive is absent)."""

from __future__ import annotations

import gzip
import os
import tomllib
from pathlib import Path

import pytest

from course_lib.fra_eng import SAMPLE_FILE, SAMPLE_PAIRS, load_sample, near_duplicate_key, read_fra_eng, split_pairs

TIER = "fast"  # course_tools/tiers.py

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("COURSE_FRA_ENG") or ROOT.parent / "shared" / "data" / "fra-eng.zip")


def _build_script():
    from course_tools import build_fra_eng_sample

    return build_fra_eng_sample


def test_the_sample_loads_offline_and_is_real_tatoeba_text():
    pairs = load_sample()
    assert len(pairs) == SAMPLE_PAIRS == 22_000
    assert pairs[0] == ("Go.", "Va !")                  # the narrow no-break space became a space
    assert pairs[-1] == ("Can I sit with you?", "Puis-je m'asseoir avec toi ?")
    assert all(en and fr and "\t" not in en + fr for en, fr in pairs)
    assert load_sample(max_pairs=5) == pairs[:5]
    with pytest.raises(ValueError, match="max_pairs"):
        load_sample(max_pairs=0)


def test_the_sample_parses_like_the_full_file_reader(tmp_path):
    text = gzip.decompress(SAMPLE_FILE.read_bytes())
    plain = tmp_path / "fra.txt"
    plain.write_bytes(text)
    assert read_fra_eng(plain) == load_sample()
    assert text.count(b"\n") == SAMPLE_PAIRS and b"\r" not in text


@pytest.mark.slow  # 0.22 s of CPU (a fast test stays under 0.1 s: course_tools/tiers.py)
def test_lesson_12_split_keeps_english_sentences_apart():
    pairs = load_sample()
    splits = split_pairs(pairs, n_valid=0, n_test=1000, seed=0, key=near_duplicate_key)
    train_keys = {near_duplicate_key(en) for en, _ in splits.train}
    assert len(splits.test) == 1000
    assert not train_keys & {near_duplicate_key(en) for en, _ in splits.test}


def test_licence_and_attribution_ship_with_the_data():
    readme = (SAMPLE_FILE.parent / "README.md").read_text(encoding="utf-8")
    licence = (SAMPLE_FILE.parent / "LICENSE-data").read_text(encoding="utf-8")
    for text in (readme, licence):
        assert "CC-BY 2.0 FR" in text and "www.manythings.org/anki and tatoeba.org" in text
    assert "scripts/build_fra_eng_sample.py" in readme


def test_the_data_is_package_data():
    # JupyterHub copies only notebooks: the lesson reads the sample from the installed package.
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    listed = config["tool"]["setuptools"]["package-data"]["course_lib"]
    for name in ("fra_eng_sample.tsv.gz", "README.md", "LICENSE-data"):
        assert f"data_files/{name}" in listed
        assert (SAMPLE_FILE.parent / name).is_file()


@pytest.mark.skipif(not DATA.exists(), reason=f"the real fra-eng archive is not at {DATA}: set COURSE_FRA_ENG "
                    "to fra-eng.zip (course_lib.fra_eng.download_fra_eng() fetches it) to check the shipped sample")
@pytest.mark.slow  # 0.40 s of CPU (a fast test stays under 0.1 s: course_tools/tiers.py)
def test_the_shipped_sample_is_what_the_script_builds_from_the_real_file():
    build = _build_script()
    text = build.sample_text(DATA)
    assert gzip.decompress(SAMPLE_FILE.read_bytes()) == text          # the content, byte for byte
    assert build.compress(text) == build.compress(gzip.decompress(SAMPLE_FILE.read_bytes()))
    assert build.main([str(DATA), "--check"]) == 0
    assert load_sample() == read_fra_eng(DATA, max_pairs=SAMPLE_PAIRS)  # a prefix of the real file
