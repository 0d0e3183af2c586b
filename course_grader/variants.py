"""Per-learner variants of an assignment (issue 30, item 1).

Each learner gets their own numbers: the sizes and configurations the public checks use and
the numbers in the numeric questions are drawn from a per-assignment table of allowed values
(:data:`TABLES`), chosen by a seed that only the assignment name and the learner id decide, so
one learner's answers do not serve another (nbgrader issue #1153's proposal; PrairieLearn's
per-student ``generate()``).

The seed (documented, stable: changing it changes every learner's numbers)::

    seed   = SHA-256( "attention-course variant v1" NUL assignment NUL learner_id )
    index  = first 8 bytes of SHA-256( seed || parameter name ), little endian, mod len(values)
    digest = the first 12 hex digits of seed (recorded in grades.json: the id itself is not needed)

Every value of a table is one the reference solution passes and that is as hard as the others
(the same computation on other numbers); ``tests/test_variants.py`` grades the solution under
many learner ids.

Which learner id (:func:`learner_id`), first that applies:

1. grading: the id the grader set (:func:`begin_grading`) — in the trusted grading process
   the submission's student id from the folder layout, and the same id sent into the sandbox
   before the learner's first cell; nothing the learner writes changes the trusted side's id;
2. on the hub: the JupyterHub user (``JUPYTERHUB_USER``), which is nbgrader's student id;
3. offline: the id the learner set once with ``course-grade --set-id NAME``, stored in
   ``$XDG_CONFIG_HOME/attention-course/learner-id`` (``~/.config/...`` by default);
4. else ``"default"``, with a visible notice saying how to set an id.

A notebook shows its variant in a locked cell near the top (:func:`show_variant`); hidden and
public tests call :func:`variant` themselves, never read a variable of the learner's.
"""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Mapping

__all__ = ["TABLES", "Variant", "variant", "show_variant", "learner_id", "begin_grading", "set_learner_id",
           "config_path", "validate_learner_id", "variant_digest", "VARIANT_MARK", "marks_in_outputs",
           "DEFAULT_ID", "LearnerIdError"]

SEED_PREFIX = b"attention-course variant v1"
DEFAULT_ID = "default"
#: How a variant cell's output names its variant, in any language: ``[variant lesson05_multihead a1b2c3d4e5f6]``.
VARIANT_MARK = re.compile(r"\[variant ([A-Za-z0-9_.-]{1,100}) ([0-9a-f]{12})\]")
MAX_ID_CHARS = 100


class LearnerIdError(ValueError):
    """A learner id that cannot be used (empty, too long, or with characters outside the allowed set)."""


#: Per assignment: parameter -> the allowed values. A value that is a dict sets several names at
#: once (a configuration whose parts go together, e.g. a model size E and its number of heads H).
TABLES: dict[str, dict[str, list[Any]]] = {
    "lesson01_seq2seq": {
        # Question 1: the encoder's state (N, B, h) for a batch of q_B sentences padded to q_S tokens
        "state_q": [{"q_N": n, "q_B": b, "q_S": s, "q_h": h} for n, b, s, h in
                    [(2, 8, 12, 64), (3, 4, 10, 32), (2, 16, 9, 128), (4, 6, 15, 48), (1, 10, 7, 96), (3, 12, 11, 256),
                     (2, 5, 20, 80), (4, 7, 13, 64)]],
        # Question 4: D2L's brevity penalty exp(1 - len_label / len_pred) for a prediction shorter than its label
        "brevity": [{"len_pred": p, "len_label": q} for p, q in
                    [(4, 6), (5, 8), (3, 7), (6, 9), (7, 10), (2, 5), (8, 11), (5, 6)]],
        # the public checks' sizes: embedding E and hidden h (vocabularies stay 10 and 12: the examples'
        # token ids)
        "check": [{"check_E": e, "check_h": h} for e, h in
                  [(8, 16), (6, 12), (5, 10), (7, 14), (4, 8), (6, 18), (8, 12), (5, 16)]],
        # the experiment: the seed of the untrained encoder and its sentence, the sentence's length and the
        # number of pads of the second measurement
        "experiment": [{"exp_seed": seed, "exp_len": n, "exp_pads": p} for seed, n, p in
                       [(5, 6, 8), (17, 7, 12), (29, 5, 10), (31, 8, 16), (43, 6, 20), (59, 9, 6), (61, 4, 14),
                        (73, 7, 24)]],
    },
    "lesson02_pooling": {
        # Question 1: boxcar weights of query q_x over the keys 0, 1, ..., 9 at width q_width (no key on the
        # window's edge): each key inside the window gets 1 / (number of keys inside)
        "boxcar_q": [{"q_x": x, "q_width": w} for x, w in
                     [(4.3, 1.5), (2.6, 2.2), (6.5, 0.8), (5.1, 3.4), (3.7, 1.2), (7.2, 2.5), (1.4, 1.9), (4.9, 4.3)]],
        # the public checks' sizes: queries Q, keys K, and the dimension d of the vector points
        "check": [{"check_Q": q, "check_K": k, "check_d": d} for q, k, d in
                  [(3, 6, 2), (4, 5, 3), (5, 7, 2), (2, 8, 4), (4, 6, 3), (3, 9, 2), (5, 5, 4), (6, 7, 3)]],
        # the experiment: the data set's seed, number of training points and noise
        "experiment": [{"exp_seed": s, "exp_n": n, "exp_noise": z} for s, n, z in
                       [(3, 40, 0.5), (8, 50, 0.3), (13, 30, 0.7), (21, 60, 0.5), (34, 45, 0.4), (55, 35, 0.6),
                        (89, 55, 0.8), (144, 40, 0.2)]],
    },
    "lesson03_scoring": {
        # Question 1: Var(q . k) for unit-variance entries is d; checks: the sizes of the examples
        "d_question": [16, 32, 48, 64, 80, 96, 128, 192, 256, 384, 512, 768],
        # the public check of DotProductAttention: L queries, S keys of size d (>= 3: the scale
        # shows), values of size dv; valid lengths 2 and S - 3
        "check": [{"check_L": l, "check_S": s, "check_d": d, "check_dv": v} for l, s, d, v in
                  [(1, 10, 8, 6), (2, 8, 5, 4), (3, 9, 6, 3), (1, 7, 4, 5), (2, 10, 7, 6), (3, 6, 9, 4),
                   (2, 9, 3, 5), (1, 8, 6, 3)]],
    },
    "lesson04_bahdanau": {
        # Question 1: the shape (B, L, S) of the attention weights of a teacher-forced batch
        "weights": [{"q_B": b, "q_L": l, "q_S": s} for b, l, s in
                    [(4, 9, 11), (3, 7, 12), (5, 8, 10), (6, 10, 13), (2, 12, 9), (8, 6, 14), (4, 11, 8), (5, 13, 7)]],
        # Question 3: the parameters the attention adds for num_hiddens = extra_h (2 h^2 + h)
        "extra_h": [32, 48, 64, 96, 128, 160, 192, 256],
        # the public checks' sizes: vocabulary V, embedding E, an even h (the bidirectional encoder gives
        # each direction h / 2 >= 4) and a source length S >= 5 (a padded row of length 2 and one of S - 1)
        "check": [{"check_V": v, "check_E": e, "check_h": h, "check_S": s} for v, e, h, s in
                  [(12, 8, 16, 5), (10, 6, 12, 6), (14, 5, 10, 7), (9, 7, 14, 5), (11, 4, 8, 6), (13, 6, 18, 5),
                   (15, 8, 12, 7), (8, 5, 16, 6)]],
        # the experiment: the seed of the untrained decoder and its inputs, the valid lengths of its 4 source
        # rows (S = 8, each row a different length, one full), and the factor the scores are scaled by
        "experiment": [{"exp_seed": seed, "exp_lens": list(lens), "exp_scale": scale} for seed, lens, scale in
                       [(11, (8, 5, 3, 6), 4), (23, (8, 2, 7, 4), 5), (37, (6, 8, 3, 5), 8), (41, (4, 7, 8, 2), 10),
                        (53, (8, 6, 4, 3), 6), (67, (5, 3, 8, 7), 3), (71, (7, 8, 2, 4), 12), (89, (3, 5, 4, 8), 16)]],
    },
    "lesson05_multihead": {
        # Questions 1-2: a model size E and heads H with D = E / H an integer >= 16
        "model": [{"E": e, "H": h} for e, h in
                  [(256, 4), (256, 8), (384, 6), (384, 12), (512, 8), (512, 16), (640, 10), (768, 8),
                   (768, 12), (1024, 16), (1280, 20), (1536, 24)]],
        # the public check of the module: E = H * D with H >= 2 and D >= 2 (head mix-ups and the
        # scale both show), and the sizes of the split/merge example
        "check": [{"check_H": h, "check_D": d, "check_T": t} for h, d, t in
                  [(2, 2, 5), (2, 3, 4), (2, 4, 5), (3, 2, 4), (3, 3, 5), (4, 2, 4), (2, 5, 3), (4, 3, 5)]],
    },
    "lesson06_positional": {
        # the public check of the relative position bias: H heads, maximum distance M, L queries and
        # S > M keys (clipping shows), L >= 2 (a negative offset shows)
        "check": [{"check_H": h, "check_M": m, "check_L": l, "check_S": s} for h, m, l, s in
                  [(2, 2, 4, 5), (3, 1, 3, 4), (2, 3, 5, 6), (4, 2, 2, 4), (1, 2, 3, 5), (3, 3, 4, 5), (2, 1, 2, 3),
                   (4, 4, 3, 6)]],
        # the experiment: the table of 512 positions for model size exp_E, offset exp_k
        "exp": [{"exp_E": e, "exp_k": k} for e, k in
                [(16, 5), (32, 9), (64, 13), (24, 7), (48, 3), (128, 21), (96, 11), (20, 17)]],
        # Question 3: the entries of PE(0) equal to 1 for a model size q_E (odd and even)
        "q_E": [7, 9, 10, 12, 13, 15, 16, 21],
    },
    "lesson07_transformer": {
        # the public checks of the FFN, the blocks and the cached cross-attention step: E = H * D with
        # H, D >= 2 (head mix-ups and the scale show), S >= 4 source positions (two of them padded),
        # L >= 2 target positions (with one, a cross-attention whose queries come from the encoder ignores
        # the padded memory and passes the padding check)
        "check": [{"check_H": h, "check_D": d, "check_S": s, "check_L": l} for h, d, s, l in
                  [(2, 2, 5, 3), (2, 3, 4, 2), (3, 2, 6, 2), (2, 4, 5, 2), (4, 2, 4, 3), (3, 3, 5, 2), (2, 5, 6, 3),
                   (4, 3, 4, 2)]],
        # the experiment: g_1 / g_N in post-norm and pre-norm encoder stacks of exp_layers blocks
        "exp": [{"exp_layers": n, "exp_E": e, "exp_H": h, "exp_seed": s} for n, e, h, s in
                [(6, 32, 4, 11), (8, 32, 2, 12), (6, 48, 4, 13), (10, 32, 4, 14), (8, 64, 4, 15), (12, 32, 2, 16),
                 (6, 64, 8, 17), (10, 48, 3, 18)]],
        # Question 1: the parameters of one decoder block with d_model q_E and d_ff q_F
        "q": [{"q_E": e, "q_F": f} for e, f in
              [(512, 2048), (256, 1024), (384, 1536), (768, 3072), (512, 1024), (1024, 4096), (640, 2560),
               (320, 1280)]],
    },
    "lesson08_gpt": {
        # the public checks: E = H * D with H, D >= 2 (head mix-ups and the scale show), T >= 3 positions,
        # a vocabulary of check_V tokens and a top-p threshold
        "check": [{"check_H": h, "check_D": d, "check_T": t, "check_V": v, "check_p": p} for h, d, t, v, p in
                  [(2, 2, 4, 7, 0.6), (2, 3, 5, 9, 0.7), (3, 2, 3, 11, 0.8), (4, 2, 4, 6, 0.5), (2, 4, 6, 8, 0.75),
                   (3, 3, 4, 10, 0.65), (4, 3, 3, 12, 0.85), (2, 5, 5, 7, 0.9)]],
        # the experiment: 256 rows of exp_scale * N(0, 1) logits over exp_V tokens
        "exp": [{"exp_seed": s, "exp_V": v, "exp_scale": c, "exp_tau": t, "exp_p": p} for s, v, c, t, p in
                [(21, 50, 2.0, 0.5, 0.9), (22, 100, 3.0, 0.7, 0.8), (23, 64, 1.5, 2.0, 0.9), (24, 200, 2.5, 0.5, 0.95),
                 (25, 80, 3.0, 1.5, 0.7), (26, 128, 2.0, 0.8, 0.85), (27, 40, 1.0, 0.6, 0.9), (28, 150, 4.0, 2.5, 0.75)]],
        # Question 3: q_tokens tokens, each selected with probability q_select percent
        "q": [{"q_tokens": n, "q_select": s} for n, s in
              [(1000, 15), (2000, 15), (1200, 20), (800, 25), (1500, 10), (3000, 15), (2400, 20), (600, 25)]],
    },
    "lesson09_scale": {
        # Question 1: KV-cache bytes = 2 (K and V) * layers * heads * head size * bytes per number
        "kv": [{"kv_layers": n, "kv_heads": h, "kv_head_dim": d, "kv_bytes": b} for n, h, d, b in
               [(24, 4, 64, 2), (12, 8, 64, 2), (32, 8, 128, 2), (16, 4, 96, 4), (24, 6, 64, 4), (12, 12, 64, 2),
                (48, 8, 128, 2), (6, 4, 32, 4)]],
        # Question 2: causal attention over causal_T positions in 128 x 128 tiles: n = causal_T / 128 tiles
        # per side, n (n + 1) / 2 of them on or below the diagonal
        "causal_T": [128 * n for n in (6, 7, 8, 9, 10, 11, 12, 14, 16)],
        # the experiment: the mean cosine between x and x rotated by n positions, for head size rope_D, at a
        # near and a far distance (their figures differ by more than the 0.02 tolerance between variants)
        "rope": [{"rope_D": d, "rope_near": a, "rope_far": b} for d, a, b in
                 [(64, 2, 500), (32, 3, 1000), (128, 4, 200), (64, 3, 200), (128, 2, 1000), (32, 4, 500),
                  (96, 3, 500), (48, 2, 1000)]],
    },
    "lesson10_vit": {
        # the public checks: a grid of check_rows x check_cols patches (at least 2 x 2, not square) and a
        # model size check_E (a multiple of 4, for the 2D embedding's two halves of sine-cosine pairs)
        "check": [{"check_rows": r, "check_cols": c, "check_E": e} for r, c, e in
                  [(2, 3, 8), (3, 2, 12), (2, 4, 16), (4, 3, 8), (3, 4, 12), (2, 5, 16), (4, 2, 20), (3, 5, 8)]],
        # the experiment: exp_size x exp_size images in patches of exp_patch, model and data seeded with exp_seed
        "exp": [{"exp_seed": s, "exp_size": n, "exp_patch": p} for s, n, p in
                [(31, 8, 2), (32, 12, 3), (33, 8, 4), (34, 12, 4), (35, 16, 4), (36, 9, 3), (37, 10, 2), (38, 16, 8)]],
        # Question 1: tokens per image, class token included
        "q": [{"q_size": n, "q_patch": p} for n, p in
              [(32, 4), (28, 4), (32, 8), (48, 8), (224, 16), (36, 4), (60, 6), (96, 8)]],
    },
    "lesson11_beam": {
        # Question 2: rows the decoder runs per step for a batch of `beam_batch` sources and beam width `beam_k`
        "beam": [{"beam_batch": b, "beam_k": k} for b, k in
                 [(3, 4), (2, 6), (4, 3), (5, 2), (2, 5), (3, 5), (4, 4), (6, 2)]],
    },
}


def validate_learner_id(value: object) -> str:
    """The learner id, checked: 1 to 100 printable characters, no space at either end (the grader's
    student ids, from folder names it has already validated, always pass). Raises
    :class:`LearnerIdError` saying what is wrong and how to fix it."""
    if not isinstance(value, str):
        raise LearnerIdError(f"a learner id is a string, not {type(value).__name__}")
    text = value.strip()
    if not text:
        raise LearnerIdError("the learner id is empty: give the id your course uses for you (on the hub, your "
                             "user name)")
    if len(text) > MAX_ID_CHARS:
        raise LearnerIdError(f"the learner id is {len(text)} characters long; at most {MAX_ID_CHARS} are allowed: "
                             "give the short id your course uses for you")
    if not text.isprintable():
        raise LearnerIdError(f"the learner id {text[:40]!r} holds control or invisible characters: type it again "
                             "with visible characters only")
    return text


def variant_digest(assignment: str, learner: str) -> bytes:
    """The variant seed: SHA-256 of the fixed prefix, the assignment name and the learner id."""
    return hashlib.sha256(SEED_PREFIX + b"\0" + assignment.encode() + b"\0" + learner.encode()).digest()


@dataclass(frozen=True)
class Variant(Mapping[str, Any]):
    """One learner's variant of one assignment: read values as ``variant["E"]``."""

    assignment: str
    learner: str
    digest: str
    #: the variant's table, name to value (this replaces Mapping's ``values()`` view: read the table)
    values: dict[str, Any] = field(default_factory=dict)  # type: ignore[assignment]
    #: where the learner id came from: "grader", "hub", "config", "default" or "given"
    source: str = "given"

    def __getitem__(self, key: str) -> Any:
        try:
            return self.values[key]
        except KeyError:
            raise KeyError(f"the variant of {self.assignment} has no value {key!r} (it has: "
                           f"{', '.join(self.values)})") from None

    def __iter__(self) -> Iterator[str]:
        return iter(self.values)

    def __len__(self) -> int:
        return len(self.values)

    def record(self) -> dict:
        """What grades.json and the nbgrader export keep: the digest and the values (not the id)."""
        return {"assignment": self.assignment, "digest": self.digest, "values": dict(self.values)}

    def describe(self) -> str:
        """The text of the notebook's variant cell (:func:`show_variant`)."""
        lines = [f"Your variant of {self.assignment}: made for learner id {self.learner!r} "
                 f"[variant {self.assignment} {self.digest}]"]
        lines += [f"  {k} = {v}" for k, v in self.values.items()]
        if self.source == "default":
            lines += ["", "Notice: no learner id is set, so this is the variant of the id 'default', which your "
                      "teacher will not grade you with.", "Set your course id once with `course-grade --set-id "
                      "YOUR_ID` (on the hub it is your user name, set for you), then restart the kernel and run "
                      "the notebook again from the top."]
        lines += ["The checks and the grader use these numbers for you; another learner's answers are for "
                  "other numbers."]
        return "\n".join(lines)


def make_variant(assignment: str, learner: str, source: str = "given") -> Variant:
    """The variant of ``assignment`` for ``learner`` (no id lookup). Unknown assignment: ValueError."""
    table = TABLES.get(assignment)
    if table is None:
        raise ValueError(f"no variant table for assignment {assignment!r} (known: {', '.join(sorted(TABLES))})")
    learner = validate_learner_id(learner)
    seed = variant_digest(assignment, learner)
    values: dict[str, Any] = {}
    for name, allowed in table.items():
        pick = hashlib.sha256(seed + name.encode()).digest()
        choice = allowed[int.from_bytes(pick[:8], "little") % len(allowed)]
        if isinstance(choice, dict):
            values.update(choice)
        else:
            values[name] = choice
    return Variant(assignment, learner, seed.hex()[:12], values, source)


# --- which learner -----------------------------------------------------------------------------------

#: Set by the grader (begin_grading) for the submission it grades; None outside grading.
_grader_learner: str | None = None


#: The variants the tests used while grading (assignment -> record), for grades.json.
_used: dict[str, dict] = {}


def begin_grading(learner: str | None) -> None:
    """The grader's hook: grade as ``learner`` (None: stop). In the trusted process the runner
    calls it with the submission's student id; in the sandbox it runs before the learner's cells."""
    global _grader_learner
    _grader_learner = None if learner is None else validate_learner_id(learner)
    _used.clear()


def used_variants() -> list[dict]:
    """The records of the variants the tests asked for since :func:`begin_grading`."""
    return list(_used.values())


def config_path() -> Path:
    """Where ``course-grade --set-id`` stores the learner id."""
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "attention-course" / "learner-id"


def set_learner_id(value: str) -> Path:
    """Store the offline learner id (``course-grade --set-id``); returns the file written."""
    learner = validate_learner_id(value)
    path = config_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(learner + "\n", encoding="utf-8")
    return path


def _stored_id() -> str | None:
    try:
        with open(config_path(), encoding="utf-8") as f:  # read at most 200 characters, whatever the file's size
            text = f.read(200)
    except (OSError, UnicodeDecodeError):
        return None
    try:
        return validate_learner_id(text)
    except LearnerIdError:
        return None


def learner_id() -> tuple[str, str]:
    """(learner id, where it came from): the grader's, the hub user, the stored id, or "default"."""
    if _grader_learner is not None:
        return _grader_learner, "grader"
    hub = os.environ.get("JUPYTERHUB_USER")
    if hub:
        try:
            return validate_learner_id(hub), "hub"
        except LearnerIdError:
            pass
    stored = _stored_id()
    if stored is not None:
        return stored, "config"
    return DEFAULT_ID, "default"


def variant(assignment: str) -> Variant:
    """This learner's variant of ``assignment`` (tests call this; see :func:`learner_id`)."""
    learner, source = learner_id()
    made = make_variant(assignment, learner, source)
    if source == "grader":
        _used[assignment] = made.record()
    return made


def show_variant(assignment: str) -> Variant:
    """Print this learner's variant (the notebook's locked variant cell) and return it."""
    v = variant(assignment)
    print(v.describe())
    return v


def marks_in_outputs(notebook: dict) -> list[tuple[str, str]]:
    """The (assignment, digest) pairs named in the stored outputs of a notebook's cells (what the
    variant cell printed when the learner last ran it)."""
    found: list[tuple[str, str]] = []
    cells = notebook.get("cells") if isinstance(notebook, dict) else None
    for cell in cells if isinstance(cells, list) else []:
        if not isinstance(cell, dict) or cell.get("cell_type") != "code":
            continue
        outputs = cell.get("outputs")
        for out in outputs[:50] if isinstance(outputs, list) else []:
            if not isinstance(out, dict):
                continue
            texts = [out.get("text")]
            data = out.get("data")
            if isinstance(data, dict):
                texts.append(data.get("text/plain"))
            for text in texts:
                if isinstance(text, list):
                    text = "".join(t for t in text if isinstance(t, str))
                if isinstance(text, str):
                    found += [(m.group(1), m.group(2)) for m in VARIANT_MARK.finditer(text[:20000])]
    return found
