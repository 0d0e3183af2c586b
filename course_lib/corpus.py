"""An offline English -> French corpus generated from a small grammar.

D2L trains its translation models on Tatoeba sentence pairs that must be downloaded
(see ``course_lib.fra_eng``). The lessons run offline, so they train on sentences
generated here instead. The grammar is small but real French, chosen so that the
phenomena attention has to handle all occur:

* gender and number agreement: determiners (le/la/les, un/une/des, ce/cet/cette/ces,
  mon/ma/mes ...), adjectives (vert/verte/verts/vertes) and verbs (il dort / ils dorment);
* word order that differs from English: most adjectives follow the noun
  ("the red car" -> "la voiture rouge"), a few precede it (grand, petit, bon, jeune,
  vieux, beau, nouveau, with bel/vieil/nouvel before a vowel); object
  pronouns precede the verb ("I see her" -> "je la vois"); "often" follows the verb
  ("he often sleeps" -> "il dort souvent"). These make alignments cross;
* negation ne ... pas (with "pas de" replacing un/une/des/du), questions with
  "est-ce que" and "où", relative clauses with "qui", location phrases, time adverbs and
  coordination with "et" / "mais", so that sentences range from 3 to about 25 tokens;
* elision and contraction: l'homme, j'aime, n'a, qu'il, d'eau, au parc, du jardin,
  près de l'école, près de gares.

Every English sentence has exactly one French translation (the generator is a function
of the English structure): "you" is always "tu", "they" is always "ils", and adjectives
describing I / you / we / they take the masculine form (the French default).

The API: ``generate_pairs(n, seed)`` returns ``(english, french)`` strings,
``make_splits`` returns train / valid / test lists with no English sentence shared
between them, ``write_tsv`` writes the tab-separated format of Tatoeba's ``fra.txt``.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from course_lib.data import TranslationSplits

# The lexicon (Noun, Adjective, Verb, NOUNS, ADJECTIVES, VERBS) is not re-exported into
# ``course_lib.*``: import it from course_lib.corpus.
__all__ = [
    "CorpusConfig",
    "generate_pairs",
    "make_splits",
    "write_tsv",
]

# ---------------------------------------------------------------------------
# Lexicon
# ---------------------------------------------------------------------------

ANIM = frozenset({"person", "animal"})
PERSON = frozenset({"person"})


@dataclass(frozen=True)
class Noun:
    """A noun with its English and French singular / plural forms and semantic kinds.

    Kinds: person, animal, thing, food, place, mass (uncountable: water, milk ...),
    plus finer tags used to pick plausible verbs and prepositions (read, open, drink,
    cook, surface, container, landmark).
    """

    en: str
    en_pl: str
    fr: str
    fr_pl: str
    gender: str  # "m" or "f"
    kinds: frozenset[str]


def _n(en: str, fr: str, gender: str, kinds: str, en_pl: str = "", fr_pl: str = "") -> Noun:
    return Noun(en, en_pl or en + "s", fr, fr_pl or fr + "s", gender, frozenset(kinds.split()))


NOUNS: tuple[Noun, ...] = (
    # people
    _n("man", "homme", "m", "person", en_pl="men"),
    _n("woman", "femme", "f", "person", en_pl="women"),
    _n("boy", "garçon", "m", "person"),
    _n("girl", "fille", "f", "person"),
    _n("child", "enfant", "m", "person", en_pl="children"),
    _n("teacher", "professeur", "m", "person"),
    _n("doctor", "médecin", "m", "person"),
    _n("friend", "ami", "m", "person"),
    _n("brother", "frère", "m", "person"),
    _n("sister", "sœur", "f", "person"),
    _n("mother", "mère", "f", "person"),
    _n("father", "père", "m", "person"),
    # animals
    _n("cat", "chat", "m", "animal"),
    _n("dog", "chien", "m", "animal"),
    _n("bird", "oiseau", "m", "animal", fr_pl="oiseaux"),
    _n("horse", "cheval", "m", "animal", fr_pl="chevaux"),
    _n("mouse", "souris", "f", "animal", en_pl="mice", fr_pl="souris"),
    # things
    _n("car", "voiture", "f", "thing container landmark"),
    _n("book", "livre", "m", "thing read open"),
    _n("letter", "lettre", "f", "thing read open"),
    _n("newspaper", "journal", "m", "thing read", fr_pl="journaux"),
    _n("table", "table", "f", "thing surface"),
    _n("chair", "chaise", "f", "thing surface"),
    _n("bed", "lit", "m", "thing surface"),
    _n("key", "clé", "f", "thing"),
    _n("bag", "sac", "m", "thing container open"),
    _n("box", "boîte", "f", "thing container open", en_pl="boxes"),
    _n("door", "porte", "f", "thing open landmark"),
    _n("window", "fenêtre", "f", "thing open landmark"),
    _n("hat", "chapeau", "m", "thing", fr_pl="chapeaux"),
    _n("umbrella", "parapluie", "m", "thing open"),
    _n("computer", "ordinateur", "m", "thing"),
    _n("tree", "arbre", "m", "thing landmark"),
    # countable food
    _n("apple", "pomme", "f", "food"),
    _n("cake", "gâteau", "m", "food cook", fr_pl="gâteaux"),
    _n("egg", "œuf", "m", "food"),
    _n("orange", "orange", "f", "food"),
    # places
    _n("house", "maison", "f", "place landmark"),
    _n("school", "école", "f", "place landmark"),
    _n("garden", "jardin", "m", "place"),
    _n("park", "parc", "m", "place"),
    _n("city", "ville", "f", "place", en_pl="cities"),
    _n("shop", "magasin", "m", "place landmark"),
    _n("station", "gare", "f", "place landmark"),
    _n("hospital", "hôpital", "m", "place landmark", fr_pl="hôpitaux"),
    _n("hotel", "hôtel", "m", "place landmark"),
    _n("kitchen", "cuisine", "f", "place"),
    _n("library", "bibliothèque", "f", "place landmark", en_pl="libraries"),
    _n("beach", "plage", "f", "place", en_pl="beaches"),
    _n("church", "église", "f", "place landmark", en_pl="churches"),
    # uncountable (no plural is ever generated)
    _n("water", "eau", "f", "mass drink"),
    _n("milk", "lait", "m", "mass drink"),
    _n("coffee", "café", "m", "mass drink cook"),
    _n("tea", "thé", "m", "mass drink cook"),
    _n("juice", "jus", "m", "mass drink"),
    _n("bread", "pain", "m", "mass food"),
    _n("soup", "soupe", "f", "mass food cook"),
)


@dataclass(frozen=True)
class Adjective:
    """An adjective: English form, French forms (m sg, f sg, m pl, f pl), position.

    ``pre`` adjectives go before the French noun; ``ms_vowel`` is the masculine singular
    form used before a vowel (bel, vieil, nouvel). ``kinds`` are the noun kinds it may
    describe.
    """

    en: str
    forms: tuple[str, str, str, str]
    pre: bool
    kinds: frozenset[str]
    ms_vowel: str = ""

    def form(self, gender: str, plural: bool) -> str:
        return self.forms[(2 if plural else 0) + (1 if gender == "f" else 0)]


_THING = frozenset({"thing", "food", "place"})


def _a(en: str, fr: str, kinds: frozenset[str], *, forms: str = "", pre: bool = False,
       ms_vowel: str = "") -> Adjective:
    if forms:
        ms, fs, mp, fp = forms.split()
    else:
        ms = fr
        fs = fr if fr.endswith("e") else fr + "e"
        mp = fr if fr.endswith(("s", "x")) else fr + "s"
        fp = fs + "s"
    return Adjective(en, (ms, fs, mp, fp), pre, kinds, ms_vowel)


ADJECTIVES: tuple[Adjective, ...] = (
    # before the noun in French
    _a("big", "grand", ANIM | _THING, pre=True),
    _a("small", "petit", ANIM | _THING, pre=True),
    _a("good", "bon", ANIM | _THING, forms="bon bonne bons bonnes", pre=True),
    _a("young", "jeune", ANIM, pre=True),
    _a("old", "vieux", ANIM | _THING, forms="vieux vieille vieux vieilles", pre=True,
       ms_vowel="vieil"),
    _a("beautiful", "beau", ANIM | _THING, forms="beau belle beaux belles", pre=True,
       ms_vowel="bel"),
    _a("new", "nouveau", _THING, forms="nouveau nouvelle nouveaux nouvelles", pre=True,
       ms_vowel="nouvel"),
    # after the noun in French
    _a("red", "rouge", frozenset({"thing"})),
    _a("blue", "bleu", frozenset({"thing"})),
    _a("green", "vert", frozenset({"thing", "food"})),
    _a("black", "noir", frozenset({"thing", "animal"})),
    _a("white", "blanc", frozenset({"thing", "animal"}), forms="blanc blanche blancs blanches"),
    _a("yellow", "jaune", frozenset({"thing", "food"})),
    _a("happy", "heureux", ANIM, forms="heureux heureuse heureux heureuses"),
    _a("sad", "triste", ANIM),
    _a("tired", "fatigué", ANIM),
    _a("kind", "gentil", ANIM, forms="gentil gentille gentils gentilles"),
    _a("rich", "riche", PERSON),
    _a("famous", "célèbre", PERSON | {"place"}),
    _a("french", "français", PERSON | _THING, forms="français française français françaises"),
    _a("expensive", "cher", _THING, forms="cher chère chers chères"),
    _a("clean", "propre", frozenset({"thing", "place"})),
    _a("dirty", "sale", frozenset({"thing", "place", "animal"})),
    _a("empty", "vide", frozenset({"thing", "place"})),
    _a("hot", "chaud", frozenset({"food", "drink"})),
    _a("cold", "froid", frozenset({"food", "drink"})),
)


@dataclass(frozen=True)
class Verb:
    """A present-tense verb.

    ``en``: English base form words (``("look", "for")``), ``en3``: third person singular.
    ``fr``: French forms for je, tu, il/elle, nous, ils/elles. ``obj``: noun kinds of the
    direct object (empty for intransitive verbs). ``subj``: kinds allowed as subject.
    """

    en: tuple[str, ...]
    en3: tuple[str, ...]
    fr: tuple[str, str, str, str, str]
    obj: frozenset[str]
    subj: frozenset[str]


def _v(en: str, fr: str, obj: str = "", subj: frozenset[str] = ANIM, *, en3: str = "",
       forms: str = "") -> Verb:
    words = en.split()
    if en3:
        words3 = en3.split()
    else:
        head = words[0]
        if head.endswith(("ch", "sh", "s", "o")):
            head += "es"
        elif head.endswith("y") and head[-2] not in "aeiou":
            head = head[:-1] + "ies"
        else:
            head += "s"
        words3 = [head, *words[1:]]
    if forms:
        conj = tuple(forms.split())
    else:  # regular -er verb
        stem = fr[:-2]
        nous = stem + ("eons" if stem.endswith("g") else "ons")
        conj = (stem + "e", stem + "es", stem + "e", nous, stem + "ent")
    assert len(conj) == 5
    return Verb(tuple(words), tuple(words3), conj, frozenset(obj.split()), subj)  # type: ignore[arg-type]


_CONCRETE = "person animal thing food place"
VERBS: tuple[Verb, ...] = (
    # transitive
    _v("like", "aimer", "person animal thing food place"),
    _v("watch", "regarder", "person animal thing"),
    _v("see", "voir", _CONCRETE, forms="vois vois voit voyons voient"),
    _v("look for", "chercher", "person animal thing"),
    _v("find", "trouver", "person animal thing food"),
    _v("carry", "porter", "thing food animal"),
    _v("draw", "dessiner", "person animal thing place", PERSON),
    _v("help", "aider", "person animal", PERSON),
    _v("listen to", "écouter", "person animal", PERSON),
    _v("call", "appeler", "person animal", PERSON,
       forms="appelle appelles appelle appelons appellent"),
    _v("buy", "acheter", "thing food mass", PERSON, forms="achète achètes achète achetons achètent"),
    _v("eat", "manger", "food"),
    _v("open", "ouvrir", "open", PERSON, forms="ouvre ouvres ouvre ouvrons ouvrent"),
    _v("close", "fermer", "open", PERSON),
    _v("read", "lire", "read", PERSON, forms="lis lis lit lisons lisent"),
    _v("drink", "boire", "drink", forms="bois bois boit buvons boivent"),
    _v("have", "avoir", "person animal thing food", en3="has", forms="ai as a avons ont"),
    _v("want", "vouloir", "thing food mass animal", forms="veux veux veut voulons veulent"),
    _v("take", "prendre", "thing food", PERSON, forms="prends prends prend prenons prennent"),
    _v("wait for", "attendre", "person animal", forms="attends attends attend attendons attendent"),
    _v("know", "connaître", "person place", PERSON,
       forms="connais connais connaît connaissons connaissent"),
    _v("make", "faire", "cook", PERSON, forms="fais fais fait faisons font"),
    # intransitive
    _v("sleep", "dormir", forms="dors dors dort dormons dorment"),
    _v("walk", "marcher"),
    _v("run", "courir", forms="cours cours court courons courent"),
    _v("swim", "nager"),
    _v("play", "jouer"),
    _v("sing", "chanter", subj=PERSON),
    _v("work", "travailler", subj=PERSON),
    _v("wait", "attendre", forms="attends attends attend attendons attendent"),
)

_PARTITIVE_VERBS = frozenset({"eat", "drink", "buy", "want", "make"})
_BE = ("suis", "es", "est", "sommes", "sont")
_BE_EN = ("am", "are", "is", "are", "are")
_GO = _v("go", "aller", en3="goes", forms="vais vas va allons vont")
_COME = _v("come", "venir", forms="viens viens vient venons viennent")

# (English, French subject, person index 0..4, gender, inverted "où" form)
_SUBJ_PRONOUNS = (
    ("I", "je", 0, "m", "suis-je"),
    ("you", "tu", 1, "m", "es-tu"),
    ("he", "il", 2, "m", "est-il"),
    ("she", "elle", 2, "f", "est-elle"),
    ("we", "nous", 3, "m", "sommes-nous"),
    ("they", "ils", 4, "m", "sont-ils"),
)
# (English, French, person it refers to); placed before the French verb
_OBJ_PRONOUNS = (
    ("me", "me", 0), ("you", "te", 1), ("him", "le", 2), ("her", "la", 2),
    ("us", "nous", 3), ("them", "les", 4),
)
# (English words, French words, noun kinds it combines with); "de" contracts (du, des)
_PREPOSITIONS = (
    (("in",), ("dans",), frozenset({"place", "container"})),
    (("on",), ("sur",), frozenset({"surface"})),
    (("under",), ("sous",), frozenset({"surface", "landmark"})),
    (("near",), ("près", "de"), frozenset({"place", "surface", "landmark"})),
    (("behind",), ("derrière",), frozenset({"landmark", "surface"})),
    (("in", "front", "of"), ("devant",), frozenset({"landmark"})),
    (("next", "to"), ("à", "côté", "de"), frozenset({"place", "landmark", "surface"})),
)
_TIME_ADVERBS = (
    (("today",), ("aujourd'hui",)),
    (("now",), ("maintenant",)),
    (("every", "day"), ("tous", "les", "jours")),
    (("tonight",), ("ce", "soir")),
    (("in", "the", "morning"), ("le", "matin")),
)
# English possessive -> French (masc sg, fem sg, plural); ma/ta/sa become mon/ton/son
# before a vowel.
_POSSESSIVES = {
    "my": ("mon", "ma", "mes"), "your": ("ton", "ta", "tes"), "his": ("son", "sa", "ses"),
    "her": ("son", "sa", "ses"), "our": ("notre", "notre", "nos"),
    "their": ("leur", "leur", "leurs"),
}

# ---------------------------------------------------------------------------
# French surface realisation: elision and contraction
# ---------------------------------------------------------------------------

# A French item is (word, tag). Tags: "" plain; "el" a word that elides before a vowel
# (je, me, te, ne, que, de and object le/la); "def" the article le/la/les; "ce"; "poss"
# ma/ta/sa; "a" / "de" prepositions that contract with le/les.
Item = tuple[str, str]
_FR_VOWELS = set("aeiouyàâäéèêëîïôöûùüœh")  # every h-word in the lexicon has a mute h
_CONTRACTIONS = {("à", "le"): "au", ("à", "les"): "aux", ("de", "le"): "du", ("de", "les"): "des"}


def _fr_vowel(word: str) -> bool:
    return bool(word) and word[0].lower() in _FR_VOWELS


def _realize_fr(items: Sequence[Item]) -> list[str]:
    resolved: list[Item] = []
    for i, (word, tag) in enumerate(items):
        vowel = i + 1 < len(items) and _fr_vowel(items[i + 1][0])
        if vowel and (tag in ("el", "de") or (tag == "def" and word in ("le", "la"))):
            word = word[:-1] + "'"
        elif vowel and tag == "ce":
            word = "cet"
        elif vowel and tag == "poss":
            word = {"ma": "mon", "ta": "ton", "sa": "son"}[word]
        resolved.append((word, tag))
    words: list[str] = []
    i = 0
    while i < len(resolved):
        word, tag = resolved[i]
        if tag in ("a", "de") and i + 1 < len(resolved):
            nxt, nxt_tag = resolved[i + 1]
            if nxt_tag == "def" and (word, nxt) in _CONTRACTIONS:
                words.append(_CONTRACTIONS[(word, nxt)])
                i += 2
                continue
        words.append(word)
        i += 1
    return words


def _join_fr(words: Sequence[str], question: bool) -> str:
    text = ""
    for w in words:
        text += w if (not text or text.endswith("'")) else " " + w
    text = text[0].upper() + text[1:]
    return text + (" ?" if question else ".")


def _join_en(words: Sequence[str], question: bool) -> str:
    out: list[str] = []
    for i, w in enumerate(words):
        if w == "a" and i + 1 < len(words) and words[i + 1][0] in "aeiou":
            w = "an"
        out.append(w)
    text = " ".join(out).replace(" ,", ",")
    return text[0].upper() + text[1:] + ("?" if question else ".")


# ---------------------------------------------------------------------------
# The grammar
# ---------------------------------------------------------------------------


@dataclass
class CorpusConfig:
    """Probabilities of the optional constructions (defaults give ~3 to 25 tokens)."""

    p_pronoun_subject: float = 0.45
    p_plural: float = 0.3
    p_pre_adj: float = 0.18
    p_post_adj: float = 0.28
    p_relative: float = 0.12
    p_object_pronoun: float = 0.15
    p_location: float = 0.2
    p_time_adverb: float = 0.15
    p_often: float = 0.06
    p_negation: float = 0.25
    p_question: float = 0.15
    p_where: float = 0.04
    p_coordination: float = 0.15


@dataclass
class _NP:
    en: list[str]
    fr: list[Item]
    person: int
    gender: str
    plural: bool
    noun: Noun | None = None  # the head noun; None for a pronoun


@dataclass
class _Gen:
    rng: random.Random
    cfg: CorpusConfig

    # -- noun phrases ---------------------------------------------------------
    def noun(self, kinds: frozenset[str], *, allow_mass: bool = False) -> Noun:
        cands = [n for n in NOUNS if n.kinds & kinds and (allow_mass or "mass" not in n.kinds)]
        return self.rng.choice(cands)

    def adjective(self, noun: Noun, pre: bool) -> Adjective | None:
        cands = [a for a in ADJECTIVES if a.pre == pre and a.kinds & noun.kinds]
        return self.rng.choice(cands) if cands else None

    def noun_phrase(
        self,
        kinds: frozenset[str],
        *,
        neg_object: bool = False,
        allow_mass: bool = False,
        allow_relative: bool = False,
        dets: Sequence[str] | None = None,
        singular: bool = False,
    ) -> _NP:
        rng, cfg = self.rng, self.cfg
        noun = self.noun(kinds, allow_mass=allow_mass)
        mass = "mass" in noun.kinds
        plural = not mass and not singular and rng.random() < cfg.p_plural
        g = noun.gender
        if mass:
            det = dets[0] if dets else rng.choice(["part", "part", "part", "the"])
        elif dets:
            det = rng.choice(list(dets))
        else:
            det = rng.choices(
                ["the", "a", "this", "my", "your", "his", "her", "our", "their", "two", "three"],
                weights=[5, 3, 1.2, 0.6, 0.5, 0.4, 0.4, 0.3, 0.3, 0.4, 0.3],
            )[0]
            if det in ("two", "three") and not plural:
                det = "a"
            if det in ("two", "three"):
                plural = True
        pre = self.adjective(noun, True) if rng.random() < cfg.p_pre_adj else None
        post = self.adjective(noun, False) if rng.random() < cfg.p_post_adj else None
        if mass:
            pre = None  # only hot / cold water, coffee ...

        # English: det [pre] [post] noun
        en_det: list[str] = {
            "the": ["the"], "a": ["some" if not neg_object else "any"] if plural else ["a"],
            "this": ["these" if plural else "this"], "two": ["two"], "three": ["three"],
            "part": [],
        }.get(det, [det])
        en = en_det + ([pre.en] if pre else []) + ([post.en] if post else [])
        en.append(noun.en_pl if plural else noun.en)

        # French: det [pre] noun [post]
        fr: list[Item] = []
        indefinite = det in ("a", "part")
        if neg_object and indefinite:
            fr.append(("de", "el"))  # je n'ai pas de chat / pas d'eau
        elif det == "the":
            fr.append(("les", "def") if plural else ("le" if g == "m" else "la", "def"))
        elif det == "a":
            if plural:
                # des + adjective before the noun -> de (de grands chats)
                fr.append(("de", "el") if pre else ("des", ""))
            else:
                fr.append(("un" if g == "m" else "une", ""))
        elif det == "part":
            fr += [("de", "de"), ("le" if g == "m" else "la", "def")]
        elif det == "this":
            fr.append(("ces", "") if plural else (("ce", "ce") if g == "m" else ("cette", "")))
        elif det in ("two", "three"):
            fr.append(("deux" if det == "two" else "trois", ""))
        else:
            ms, fs, pl = _POSSESSIVES[det]
            fr.append((pl, "") if plural else ((ms, "") if g == "m" else (fs, "poss" if fs in ("ma", "ta", "sa") else "")))
        noun_fr = noun.fr_pl if plural else noun.fr
        if pre:
            form = pre.form(g, plural)
            if g == "m" and not plural and pre.ms_vowel and _fr_vowel(noun_fr):
                form = pre.ms_vowel  # un bel arbre, le vieil homme
            fr.append((form, ""))
        fr.append((noun_fr, ""))
        if post:
            fr.append((post.form(g, plural), ""))
        np = _NP(en, fr, 4 if plural else 2, g, plural, noun)
        if allow_relative and noun.kinds & ANIM and rng.random() < cfg.p_relative:
            self.relative_clause(np, noun)
        return np

    def relative_clause(self, np: _NP, head: Noun) -> None:
        verb = self.rng.choice([v for v in VERBS if v.subj & head.kinds])
        np.en.append("who" if "person" in head.kinds else "that")
        np.fr.append(("qui", ""))
        np.en += list(verb.en if np.plural else verb.en3)
        np.fr.append((verb.fr[np.person], ""))
        if verb.obj:
            obj = self.object_phrase(verb, neg=False)
            np.en += obj.en
            np.fr += obj.fr

    def object_phrase(self, verb: Verb, neg: bool) -> _NP:
        # Uncountable objects take the partitive (je bois du lait) only after verbs where
        # French uses it; "I like milk" would need the generic article (j'aime le lait).
        return self.noun_phrase(verb.obj, neg_object=neg, allow_mass=verb.en[0] in _PARTITIVE_VERBS)

    def subject(self, kinds: frozenset[str]) -> _NP:
        if kinds & ANIM and self.rng.random() < self.cfg.p_pronoun_subject:
            en, fr, person, g, _ = self.rng.choice(_SUBJ_PRONOUNS)
            return _NP([en], [(fr, "el" if fr == "je" else "")], person, g, person >= 3)
        return self.noun_phrase(kinds, allow_relative=True)

    def location(self, kinds: frozenset[str] | None = None) -> tuple[list[str], list[Item]]:
        en_p, fr_p, p_kinds = self.rng.choice(_PREPOSITIONS)
        np = self.noun_phrase(p_kinds, dets=["the", "the", "the", "a", "my", "this", "our"])
        fr: list[Item] = [(w, "") for w in fr_p[:-1]]
        last = fr_p[-1]
        np_fr = np.fr
        if last == "de" and np_fr[0] in (("des", ""), ("de", "el")):
            # de + des -> de: près de gares, près de grands arbres
            np_fr = [("de", "el"), *np_fr[1:]]
        else:
            np_fr = [(last, "a" if last == "à" else "de" if last == "de" else ""), *np_fr]
        return list(en_p) + np.en, fr + np_fr

    # -- clauses ---------------------------------------------------------------
    def clause(self, mood: str) -> tuple[list[str], list[Item]]:
        """mood: "statement", "negative", "question"."""
        rng, cfg = self.rng, self.cfg
        kind = rng.choices(["intrans", "trans", "motion", "adj", "loc"], weights=[2, 5, 1, 2, 1])[0]
        neg = mood == "negative"
        often = mood == "statement" and rng.random() < cfg.p_often

        if kind in ("adj", "loc"):
            subj = self.subject(frozenset({"person", "animal", "thing", "food"}) if kind == "loc"
                                else frozenset({"person", "animal", "thing", "food", "place"}))
            if kind == "adj":
                head_kinds = ANIM if subj.noun is None else subj.noun.kinds
                adj = rng.choice([a for a in ADJECTIVES if a.kinds & head_kinds])
                pred_en, pred_fr = [adj.en], [(adj.form(subj.gender, subj.plural), "")]
            else:
                pred_en, pred_fr = self.location()
            be_en = _BE_EN[subj.person]
            be_fr = _BE[subj.person]
            if mood == "question":
                en = [be_en, *subj.en]
            elif neg:
                en = subj.en + ({"am": ["am", "not"], "is": ["isn't"], "are": ["aren't"]}[be_en])
            else:
                en = subj.en + [be_en]
            fr = list(subj.fr)
            fr += [("ne", "el"), (be_fr, ""), ("pas", "")] if neg else [(be_fr, "")]
            if often:
                en.append("often")
                fr.append(("souvent", ""))
            en += pred_en
            fr += pred_fr
            return en, fr

        if kind == "motion":
            verb = rng.choice([_GO, _COME])
        else:
            verb = rng.choice([v for v in VERBS if bool(v.obj) == (kind == "trans")])
        subj = self.subject(verb.subj)
        third_sg = subj.person == 2
        obj_en: list[str] = []
        obj_fr: list[Item] = []
        clitic: list[Item] = []
        if verb is _GO or verb is _COME:
            place = self.noun_phrase(frozenset({"place"}), dets=["the", "the", "this"], singular=True)
            obj_en = ["to" if verb is _GO else "from", *place.en]
            obj_fr = [("à", "a") if verb is _GO else ("de", "de"), *place.fr]
        elif verb.obj:
            pronouns = [p for p in _OBJ_PRONOUNS if p[2] != subj.person or p[2] in (2, 4)]
            if verb.obj & ANIM and rng.random() < cfg.p_object_pronoun:
                o_en, o_fr, _ = rng.choice(pronouns)
                obj_en = [o_en]
                clitic = [(o_fr, "el" if o_fr in ("me", "te", "le", "la") else "")]
            else:
                obj = self.object_phrase(verb, neg)
                obj_en, obj_fr = obj.en, obj.fr
        verb_fr = verb.fr[subj.person]
        if mood == "question":
            en = ["does" if third_sg else "do", *subj.en, *verb.en]
        elif neg:
            en = [*subj.en, "doesn't" if third_sg else "don't", *verb.en]
        else:
            en = [*subj.en, *(["often"] if often else []), *(verb.en3 if third_sg else verb.en)]
        fr = list(subj.fr)
        if neg:
            fr.append(("ne", "el"))
        fr += clitic + [(verb_fr, "")]
        if neg:
            fr.append(("pas", ""))
        if often:
            fr.append(("souvent", ""))
        en += obj_en
        fr += obj_fr
        if verb is not _GO and verb is not _COME and rng.random() < cfg.p_location:
            loc_en, loc_fr = self.location()
            en += loc_en
            fr += loc_fr
        return en, fr

    def sentence(self) -> tuple[str, str]:
        rng, cfg = self.rng, self.cfg
        r = rng.random()
        if r < cfg.p_where:
            subj = self.subject(frozenset({"person", "animal", "thing"}))
            be_en = _BE_EN[subj.person]
            if subj.noun is None:
                inverted = next(p[4] for p in _SUBJ_PRONOUNS if p[0] == subj.en[0])
                fr_words = ["où", inverted]
            else:
                fr_words = ["où", _BE[subj.person], *_realize_fr(subj.fr)]
            return _join_en(["where", be_en, *subj.en], True), _join_fr(fr_words, True)
        if r < cfg.p_where + cfg.p_question:
            en, fr = self.clause("question")
            en, fr = self._time(en, fr)
            return _join_en(en, True), _join_fr(_realize_fr([("est-ce", ""), ("que", "el"), *fr]), True)
        mood = "negative" if rng.random() < cfg.p_negation else "statement"
        en, fr = self.clause(mood)
        if rng.random() < cfg.p_coordination:
            en2, fr2 = self.clause("negative" if rng.random() < cfg.p_negation else "statement")
            if rng.random() < 0.6:
                en, fr = en + ["and", *en2], fr + [("et", ""), *fr2]
            else:
                en, fr = en + [",", "but", *en2], fr + [(",", ""), ("mais", ""), *fr2]
        en, fr = self._time(en, fr)
        fr_words = _realize_fr(fr)
        text_fr = _join_fr(fr_words, False).replace(" ,", ",")
        return _join_en(en, False), text_fr

    def _time(self, en: list[str], fr: list[Item]) -> tuple[list[str], list[Item]]:
        if self.rng.random() < self.cfg.p_time_adverb:
            t_en, t_fr = self.rng.choice(_TIME_ADVERBS)
            return en + list(t_en), fr + [(w, "") for w in t_fr]
        return en, fr


# ---------------------------------------------------------------------------
# Public API
# ---------------------------------------------------------------------------


def generate_pairs(
    n: int, seed: int = 0, *, config: CorpusConfig | None = None
) -> list[tuple[str, str]]:
    """Generate ``n`` (English, French) sentence pairs (duplicates possible).

    Args:
        n: number of pairs (>= 1).
        seed: random seed; the same seed always gives the same pairs.
        config: construction probabilities (default ``CorpusConfig()``).

    Returns:
        A list of ``(english, french)`` strings, e.g.
        ``("The red car is near the station.", "La voiture rouge est près de la gare.")``.
    """
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    gen = _Gen(random.Random(seed), config or CorpusConfig())
    return [gen.sentence() for _ in range(n)]


def make_splits(
    n_train: int = 8000,
    n_valid: int = 500,
    n_test: int = 500,
    seed: int = 0,
    *,
    config: CorpusConfig | None = None,
    max_attempts_factor: int = 20,
) -> TranslationSplits:
    """Generate distinct sentence pairs and split them.

    Sentences are deduplicated by their English side *before* splitting, so a test
    sentence never appears in training (a mistake D2L makes with its demo sentences).

    Args:
        n_train, n_valid, n_test: split sizes (n_train >= 1, the others >= 0).
        seed: random seed.
        config: construction probabilities.
        max_attempts_factor: give up after this many times the requested number of
            generated sentences.

    Returns:
        ``TranslationSplits``.

    Raises:
        ValueError: on negative sizes, or when the grammar (with ``config``) cannot
            produce enough distinct sentences.
    """
    if n_train < 1 or n_valid < 0 or n_test < 0:
        raise ValueError(
            f"need n_train >= 1 and n_valid, n_test >= 0; got {n_train}, {n_valid}, {n_test}"
        )
    total = n_train + n_valid + n_test
    rng = random.Random(seed)
    gen = _Gen(rng, config or CorpusConfig())
    seen: dict[str, str] = {}
    attempts = 0
    while len(seen) < total:
        attempts += 1
        if attempts > max_attempts_factor * total:
            raise ValueError(
                f"the grammar produced only {len(seen)} distinct sentences in {attempts - 1} "
                f"tries, fewer than the {total} requested; ask for fewer or raise the "
                "probabilities in CorpusConfig"
            )
        en, fr = gen.sentence()
        seen.setdefault(en, fr)
    pairs = list(seen.items())
    rng.shuffle(pairs)
    return TranslationSplits(
        train=pairs[:n_train],
        valid=pairs[n_train : n_train + n_valid],
        test=pairs[n_train + n_valid :],
    )


def write_tsv(pairs: Sequence[tuple[str, str]], path: str | Path) -> Path:
    """Write pairs as ``english<TAB>french`` lines (UTF-8), the format of Tatoeba's fra.txt.

    Args:
        pairs: ``(english, french)`` strings without tabs or newlines.
        path: output file (parent folders are created).

    Returns:
        The path written.
    """
    path = Path(path)
    lines = []
    for i, (en, fr) in enumerate(pairs):
        for text in (en, fr):
            if "\t" in text or "\n" in text or "\r" in text:
                raise ValueError(f"pair {i} contains a tab or newline: {text!r}")
        lines.append(f"{en}\t{fr}\n")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(lines), encoding="utf-8")
    return path
