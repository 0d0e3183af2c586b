"""Tests for course_lib.corpus: the generated English -> French corpus.

The grammar checks below use only the lexicon tables (NOUNS, ADJECTIVES, VERBS) and
French rules written out independently here; they read the generated text, not the
generator's internals.
"""

from __future__ import annotations

import re

import pytest

from course_lib.corpus import (
    ADJECTIVES,
    NOUNS,
    VERBS,
    generate_pairs,
    make_splits,
    write_tsv,
)
from course_lib.data import tokenize
from course_lib.fra_eng import read_fra_eng


TIER = "fast"  # course_tools/tiers.py


@pytest.fixture(scope="module")
def pairs() -> list[tuple[str, str]]:
    return generate_pairs(3000, seed=0)


@pytest.fixture(scope="module")
def fr_tokens(pairs) -> list[list[str]]:
    return [tokenize(fr) for _, fr in pairs]


# French words used to check agreement, written out independently of the generator.
PLURAL_DETS = {"les", "des", "mes", "tes", "ses", "nos", "leurs", "ces", "deux", "trois", "aux"}
NEUTRAL_DETS = {"de", "d'", "l'"}  # de grands chats / pas de chat; l' hides the gender
MASC_SG_DETS = {"le", "un", "ce", "cet", "mon", "ton", "son", "notre", "leur", "du", "au"}
FEM_SG_DETS = {"la", "une", "cette", "ma", "ta", "sa", "notre", "leur",
               "mon", "ton", "son"}  # mon école: mon/ton/son before a vowel

# aller and venir (only used for motion) and être, conjugated by hand: je, tu, il, nous, ils
HAND_CONJUGATED = [
    ("vais", "vas", "va", "allons", "vont"),
    ("viens", "viens", "vient", "venons", "viennent"),
    ("suis", "es", "est", "sommes", "sont"),
]
VERB_FORMS = {f for v in VERBS for f in v.fr} | {f for c in HAND_CONJUGATED for f in c}
PRE_FORMS = {f: a for a in ADJECTIVES if a.pre for f in (*a.forms, a.ms_vowel) if f}
POST_FORMS = {f: a for a in ADJECTIVES if not a.pre for f in a.forms}


def _noun_forms() -> dict[str, tuple[object, bool]]:
    """French noun form -> (noun, plural), for forms that are unambiguous."""
    forms: dict[str, list[tuple[object, bool]]] = {}
    for n in NOUNS:
        forms.setdefault(n.fr, []).append((n, False))
        forms.setdefault(n.fr_pl, []).append((n, True))
    return {
        f: v[0]
        for f, v in forms.items()
        if len(v) == 1 and f not in VERB_FORMS and f not in PRE_FORMS and f not in POST_FORMS
    }


NOUN_FORMS = _noun_forms()


def agreed(adj, gender: str, plural: bool) -> str:
    """The adjective's form for a noun of this gender and number (forms: ms, fs, mp, fp)."""
    ms, fs, mp, fp = adj.forms
    return {("m", False): ms, ("f", False): fs, ("m", True): mp, ("f", True): fp}[gender, plural]


@pytest.mark.slow  # 0.31 s of CPU (a fast test stays under 0.1 s: course_tools/tiers.py)
def test_generation_is_deterministic(pairs):
    assert generate_pairs(3000, seed=0) == pairs
    assert generate_pairs(50, seed=1) != pairs[:50]
    with pytest.raises(ValueError):
        generate_pairs(0)


@pytest.mark.slow  # 0.31 s of CPU (a fast test stays under 0.1 s: course_tools/tiers.py)
def test_each_english_sentence_has_one_translation():
    translations: dict[str, set[str]] = {}
    for en, fr in generate_pairs(6000, seed=5):
        translations.setdefault(en, set()).add(fr)
    assert sum(len(v) > 1 for v in translations.values()) == 0
    assert len(translations) < 6000  # short sentences do repeat, so the check has bite


def test_sentences_look_like_sentences(pairs):
    for en, fr in pairs:
        assert en[0].isupper() and fr[0].isupper()
        assert en[-1] in ".?" and fr[-1] in ".?"
        assert (en[-1] == "?") == fr.endswith(" ?")
        assert "\t" not in en + fr and "  " not in en + fr


def test_noun_phrases_agree_in_gender_and_number(fr_tokens):
    checked_plural = checked_singular = 0
    for toks in fr_tokens:
        for i, tok in enumerate(toks):
            if tok not in NOUN_FORMS:
                continue
            noun, plural = NOUN_FORMS[tok]
            g = noun.gender
            # walk back over adjectives placed before the noun: each must agree
            j = i - 1
            while j >= 0 and toks[j] in PRE_FORMS:
                adj = PRE_FORMS[toks[j]]
                allowed = {agreed(adj, g, plural)}
                if g == "m" and not plural and adj.ms_vowel and tok[0] in "aeiouéèêœh":
                    allowed = {adj.ms_vowel}  # le vieil homme, un bel arbre
                assert toks[j] in allowed, f"{toks[j]!r} does not agree with {tok!r}: {toks}"
                j -= 1
            det = toks[j]
            if plural:
                assert det in PLURAL_DETS | NEUTRAL_DETS, f"{det!r} before plural {tok!r}: {toks}"
                checked_plural += 1
            else:
                sg = MASC_SG_DETS if g == "m" else FEM_SG_DETS
                assert det in sg | NEUTRAL_DETS, f"{det!r} before singular {tok!r}: {toks}"
                checked_singular += 1
            # an adjective right after the noun must agree with it too
            if i + 1 < len(toks) and toks[i + 1] in POST_FORMS:
                adj = POST_FORMS[toks[i + 1]]
                assert toks[i + 1] == agreed(adj, g, plural), f"{toks[i + 1]!r} vs {tok!r}: {toks}"
    assert checked_plural > 500 and checked_singular > 1500


def test_post_nominal_adjectives_follow_the_noun_and_pre_nominal_precede(pairs):
    """"the red car" -> "la voiture rouge" but "the big car" -> "la grande voiture"."""
    en_nouns = {}
    for n in NOUNS:
        en_nouns[n.en] = (n, False)
        en_nouns[n.en_pl] = (n, True)
    crossing = 0
    for en, fr in pairs:
        en_toks, fr_toks = tokenize(en), tokenize(fr)
        fr_bigrams = set(zip(fr_toks, fr_toks[1:]))
        for a_en, n_en in zip(en_toks, en_toks[1:]):
            if n_en not in en_nouns:
                continue
            adj = next((a for a in ADJECTIVES if a.en == a_en), None)
            if adj is None:
                continue
            noun, plural = en_nouns[n_en]
            noun_fr = noun.fr_pl if plural else noun.fr
            forms = set(adj.forms) | ({adj.ms_vowel} if adj.ms_vowel else set())
            if adj.pre:
                assert any((f, noun_fr) in fr_bigrams for f in forms), (en, fr)
            else:
                assert any((noun_fr, f) in fr_bigrams for f in forms), (en, fr)
                assert not any((f, noun_fr) in fr_bigrams for f in forms), (en, fr)
                crossing += 1
    assert crossing > 300


def test_subject_verb_agreement(fr_tokens):
    person = {"je": 0, "j'": 0, "tu": 1, "il": 2, "elle": 2, "nous": 3, "ils": 4}
    checked = 0
    for toks in fr_tokens:
        if toks[0] not in person:
            continue
        p = person[toks[0]]
        rest = toks[1:]
        # skip ne / object pronouns to reach the conjugated verb
        k = 0
        while rest[k] in {"ne", "n'", "me", "m'", "te", "t'", "le", "la", "l'", "les", "nous"}:
            k += 1
        verb = rest[k]
        allowed = {v.fr[p] for v in VERBS} | {c[p] for c in HAND_CONJUGATED}
        assert verb in allowed, f"{verb!r} after {toks[0]!r}: {toks}"
        checked += 1
    assert checked > 300


def test_elision_and_contraction(fr_tokens):
    vowel = re.compile(r"^[aeiouyàâéèêîôûœh]")
    must_elide = {"le", "la", "je", "me", "te", "ne", "que", "de", "ce"}
    for toks in fr_tokens:
        for a, b in zip(toks, toks[1:]):
            if a in must_elide and vowel.match(b):
                raise AssertionError(f"missing elision {a!r} {b!r}: {toks}")
            assert (a, b) not in {("à", "le"), ("à", "les"), ("de", "le"), ("de", "les"),
                                  ("de", "des")}, toks
    text = " ".join(" ".join(t) for t in fr_tokens)
    for needle in ["l' ", "j' ", "n' ", "qu' ", " du ", " au ", " cet ", "de la", "pas de"]:
        assert needle in text, needle


def test_negation_and_questions(pairs):
    neg = [(en, fr) for en, fr in pairs if re.search(r"\b(don't|doesn't|isn't|aren't|not)\b", en)]
    assert len(neg) > 300
    for en, fr in neg:
        toks = tokenize(fr)
        assert "pas" in toks and ("ne" in toks or "n'" in toks), (en, fr)
    questions = [fr for en, fr in pairs if en.endswith("?")]
    assert any(q.startswith("Est-ce qu") for q in questions)
    assert any(q.startswith("Où") for q in questions)


def test_lengths_vary(pairs):
    lengths = [len(tokenize(en)) for en, _ in pairs]
    assert min(lengths) <= 3 and max(lengths) >= 20
    assert len(set(lengths)) >= 15
    assert sum(n >= 12 for n in lengths) > 200


@pytest.mark.slow  # 0.45 s of CPU (a fast test stays under 0.1 s: course_tools/tiers.py)
def test_splits_are_disjoint_deterministic_and_sized():
    s = make_splits(2000, 200, 200, seed=3)
    assert (len(s.train), len(s.valid), len(s.test)) == (2000, 200, 200)
    tr, va, te = ({en for en, _ in part} for part in (s.train, s.valid, s.test))
    assert len(tr) == 2000 and not (tr & va) and not (tr & te) and not (va & te)
    assert make_splits(2000, 200, 200, seed=3) == s
    assert make_splits(2000, 200, 200, seed=4).test != s.test
    with pytest.raises(ValueError):
        make_splits(0, 1, 1)
    with pytest.raises(ValueError, match="distinct sentences"):
        make_splits(3000, 0, 0, max_attempts_factor=1)


@pytest.mark.slow  # 0.22 s of CPU (a fast test stays under 0.1 s: course_tools/tiers.py)
def test_vocabulary_size_is_moderate():
    s = make_splits(4000, 0, 0, seed=0)
    en_vocab = {t for en, _ in s.train for t in tokenize(en)}
    fr_vocab = {t for _, fr in s.train for t in tokenize(fr)}
    assert 150 <= len(en_vocab) <= 400
    assert 150 <= len(fr_vocab) <= 400


def test_write_tsv_is_readable_by_the_fra_eng_parser(tmp_path, pairs):
    path = write_tsv(pairs[:100], tmp_path / "sub" / "gen.txt")
    assert read_fra_eng(path) == pairs[:100]
    assert path.read_text(encoding="utf-8").count("\n") == 100
    with pytest.raises(ValueError, match="tab"):
        write_tsv([("a\tb", "c")], tmp_path / "bad.txt")
