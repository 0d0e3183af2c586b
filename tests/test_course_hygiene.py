"""Checks on the committed course material itself: notebooks, glossary, README.

nbval re-runs the notebooks and compares outputs, but a notebook saved with cleared
outputs compares nothing, and an SVG or a machine path in an output makes the comparison
fail elsewhere. These tests catch that before CI does.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from course_tools.lessons import GLOB, lesson_id, lesson_key, lesson_notebooks

TIER = "content"  # content lint (course_tools/tiers.py)

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = lesson_notebooks(ROOT / "notebooks")
LESSONS = [
    "01a_rnn_seq2seq", "01b_training_decoding_bleu", "02_attention_pooling", "03_scoring_functions",
    "04_bahdanau_attention", "05_multihead_attention", "06_self_attention_positional",
    "07a_transformer_architecture", "07b_training_the_transformer", "08_gpt_and_bert",
    "09_attention_at_scale", "10_vision_transformer", "11_translation_head_to_head",
    "12_real_sentences",
]


def _cells(path: Path) -> list[dict]:
    return json.loads(path.read_text(encoding="utf-8"))["cells"]


def test_lessons_are_numbered_in_teaching_order() -> None:
    names = [p.stem for p in NOTEBOOKS]
    # NOTEBOOKS is sorted by file name, so comparing orders would always pass; what can go
    # wrong is the numbering: every lesson of LESSONS present, numbered 01, 02, ... in that
    # order, and no lesson file that LESSONS does not know.
    assert sorted(names) == sorted(LESSONS), f"lesson files {names} differ from LESSONS {LESSONS}"
    stray = sorted(p.name for p in (ROOT / "notebooks").glob(GLOB) if p not in NOTEBOOKS)
    assert not stray, f"notebooks/ files that look like lessons but are not named NN_name or NNa_name: {stray}"
    # numbered 1, 2, ... in teaching order; a lesson taught in parts is NNa, NNb, ... with no gap
    ids = [lesson_key(lesson_id(f"{n}.ipynb")) for n in LESSONS]
    numbers = sorted({number for number, _ in ids})
    assert ids == sorted(ids) and numbers == list(range(1, len(numbers) + 1)), \
        f"LESSONS must be numbered 01, 02, ... in teaching order: {LESSONS}"
    for number in numbers:
        parts = [part for n, part in ids if n == number]
        assert parts == [""] or parts == list("abcdefgh"[:len(parts)]), \
            f"lesson {number} must be one notebook (NN_name) or parts a, b, ... (NNa_name, NNb_name): {parts}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_is_committed_executed_and_clean(path: Path) -> None:
    nb = json.loads(path.read_text(encoding="utf-8"))
    assert nb["metadata"]["kernelspec"]["name"] == "python3"
    code = [c for c in nb["cells"] if c["cell_type"] == "code" and "".join(c["source"]).strip()]
    assert code, "no code cells"
    with_output = [c for c in code if c["outputs"]]
    # nbval compares nothing in a cell saved without outputs: most cells must have some.
    assert len(with_output) >= 0.5 * len(code), (
        f"only {len(with_output)} of {len(code)} code cells have outputs: run "
        f"scripts/run_notebooks.py {path.relative_to(ROOT)} and commit the result")
    counts = [c["execution_count"] for c in code]
    assert counts == list(range(1, len(code) + 1)), "execute top to bottom in a fresh kernel (counts out of order)"
    for cell in code:
        src = "".join(cell["source"])
        kinds = [(out["output_type"], out.get("name")) for out in cell["outputs"]]
        assert not any(a == b and a[0] == "stream" for a, b in zip(kinds, kinds[1:])), (
            f"one stream split over two outputs (the kernel flushed mid-print) in the cell:\n{src[:200]}\n"
            f"join them: scripts/run_notebooks.py --normalize-only {path.relative_to(ROOT)}")
        for out in cell["outputs"]:
            assert out["output_type"] != "error", f"an error is saved in the cell:\n{src[:200]}"
            data = out.get("data", {})
            assert "image/svg+xml" not in data, "SVG output: nbval would compare it byte by byte; use PNG"
            # a widget (a tqdm.auto bar) whose state is not saved: JupyterLab shows an error, the text a
            # start-of-run bar; scripts/run_notebooks.py commits the bar's final text instead
            assert "application/vnd.jupyter.widget-view+json" not in data, (
                f"a widget view without its state in an output: re-run scripts/run_notebooks.py {path.relative_to(ROOT)}")
            text = "".join(out.get("text", "")) + "".join(data.get("text/plain", ""))
            assert "/work/" not in text and "/home/" not in text, f"a machine path in an output:\n{text[:200]}"
            if out["output_type"] == "stream" and out["name"] == "stderr":
                assert "NBVAL_IGNORE_OUTPUT" in src or "it/s" not in text, "a progress bar in a compared cell"
    first = "".join(code[0]["source"])
    assert "setup_lesson()" in first, ("the first code cell must call setup_lesson() (seeds, print options, "
                                      "COURSE_SEED, device): one set-up for every lesson")


def test_glossary_is_up_to_date() -> None:
    result = subprocess.run([sys.executable, str(ROOT / "scripts" / "build_glossary.py"), "--check"],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_readme_lists_every_lesson(path: Path) -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert path.name in readme, f"README.md does not list {path.name}"


def test_glossary_terms_come_from_lessons_that_exist() -> None:
    lessons = {lesson_id(p) for p in NOTEBOOKS}
    # one file per lesson (NN.tsv, NNa.tsv); usage.tsv is the translation's word list, with
    # other columns (English, zh-CN, zh-TW, rejected words, fixable, note), checked by test_glossary
    for tsv in sorted(p for p in (ROOT / "docs" / "glossary").glob("*.tsv") if p.name != "usage.tsv"):
        assert re.fullmatch(r"\d\d[a-z]?\.tsv", tsv.name), f"docs/glossary/{tsv.name}: not a lesson's file"
        for line in tsv.read_text(encoding="utf-8").splitlines():
            if line.strip():
                lesson = line.split("\t")[3].strip()
                assert lesson in lessons, f"{tsv.name}: term {line.split()[0]!r} points to missing lesson {lesson}"
                assert re.search(r"[\u4e00-\u9fff]", line.split("\t")[1]), f"{tsv.name}: no Chinese term in {line!r}"


def _is_ignored(src: str) -> bool:
    # exactly nbval's rule: a comment line whose text is the marker and nothing else
    return any(line.strip().startswith("#") and line.strip().lstrip("#").strip() == "NBVAL_IGNORE_OUTPUT"
               for line in src.splitlines())


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_nbval_markers_are_spelled_so_that_nbval_sees_them(path: Path) -> None:
    """nbval ignores a marker with anything else on its line ("# NBVAL_IGNORE_OUTPUT (why)"),
    and the cell is then compared after all: the reason goes on the next line."""
    for cell in _cells(path):
        for line in "".join(cell["source"]).splitlines():
            if "NBVAL_" in line and line.strip().startswith("#"):
                assert line.strip().lstrip("#").strip() in {"NBVAL_IGNORE_OUTPUT", "NBVAL_SKIP", "NBVAL_RAISES_EXCEPTION",
                                                           "NBVAL_CHECK_OUTPUT"}, f"nbval will not see this marker: {line!r}"


def _has_assert(src: str) -> bool:
    import ast

    # IPython magics and shell lines are not Python: drop them before parsing
    lines = [line for line in src.splitlines() if not line.lstrip().startswith(("%", "!"))]
    return any(isinstance(node, ast.Assert) for node in ast.walk(ast.parse("\n".join(lines))))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_every_ignored_output_is_followed_by_a_compared_assertion(path: Path) -> None:
    """An NBVAL_IGNORE_OUTPUT cell prints numbers nbval does not compare (training results,
    timings, random draws). The prose still draws conclusions from them, so the next code
    cell must check those conclusions with ``assert`` and must itself be compared: otherwise
    ignoring would silently turn the cell's claims into untested text."""
    code = [("".join(c["source"])) for c in _cells(path) if c["cell_type"] == "code"]
    for i, src in enumerate(code):
        if not _is_ignored(src):
            continue
        first_line = src.strip().splitlines()[0]
        assert i + 1 < len(code), f"the last code cell ignores its output and nothing checks it:\n{src[:300]}"
        nxt = code[i + 1]
        assert not _is_ignored(nxt) and _has_assert(nxt), (
            f"code cell {i + 1} ({first_line!r}) ignores its output, so the next code cell must assert "
            f"what the lesson claims from it and be compared by nbval; it is:\n{nxt[:300]}")


# A raw float tensor print changes layout with the last bit (tensor([1., 1.]) against
# tensor([1.0000, 1.0000])) and shows digits that differ between CPUs: print floats with
# course_lib.printing.fmt instead, or ignore the output.
_RAW_FLOAT_TENSOR = re.compile(r"tensor\(\[[\[\s]*-?\d+\.")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_no_raw_float_tensor_in_a_compared_output(path: Path) -> None:
    for cell in _cells(path):
        if cell["cell_type"] != "code" or _is_ignored("".join(cell["source"])):
            continue
        for out in cell["outputs"]:
            text = "".join(out.get("text", "")) + "".join(out.get("data", {}).get("text/plain", ""))
            match = _RAW_FLOAT_TENSOR.search(text)
            assert match is None, (f"a raw float tensor in a compared output ({text[match.start():][:80]!r}): "
                                   f"print it with course_lib.printing.fmt\n{''.join(cell['source'])[:300]}")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_no_rounding_boundary_warning_in_a_committed_output(path: Path) -> None:
    # cl.fmt warns, and still prints, when a value could round differently on another machine
    # (it never raises for a learner); the committed lessons must not contain such a value.
    # nbval compares stderr as well, so a fresh run that warns fails there too.
    for cell in _cells(path):
        for out in cell.get("outputs", []):
            text = "".join(out.get("text", "")) + "".join(out.get("data", {}).get("text/plain", ""))
            assert "RoundingBoundaryWarning" not in text, (
                f"{path.name}: a printed value lies on a rounding boundary; print it with other "
                f"decimals\n{''.join(cell['source'])[:300]}")


def _private_course_lib_names(source: str) -> list[str]:
    """The private names of course_lib (``_x``, not dunders) that a cell's code imports or reads.

    Lessons use course_lib's public API only (issue 33): a private helper can change or vanish
    without notice, and a learner copying the lesson's code should not depend on it. Finds
    ``from course_lib[.m] import _x`` and attribute reads ``alias._x`` where ``alias`` names
    course_lib or one of its modules (``import course_lib as cl``, ``from course_lib import
    corpus``, ``import course_lib.corpus as c``; ``cl.corpus._x`` too). IPython lines (``%``,
    ``!``) are skipped.
    """
    import ast

    code = "\n".join("" if line.lstrip().startswith(("%", "!")) else line for line in source.splitlines())
    tree = ast.parse(code)
    private = lambda name: name.startswith("_") and not (name.startswith("__") and name.endswith("__"))
    modules: set[str] = set()  # local names bound to course_lib or one of its modules
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == "course_lib" or alias.name.startswith("course_lib."):
                    found += [alias.name] if any(private(part) for part in alias.name.split(".")) else []
                    modules.add(alias.asname or alias.name.split(".")[0])
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "course_lib":
            found += [f"{node.module}.{a.name}" for a in node.names if private(a.name)]
            found += [node.module] if any(private(part) for part in node.module.split(".")) else []
            modules |= {a.asname or a.name for a in node.names if not private(a.name)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and private(node.attr):
            base = node.value
            while isinstance(base, ast.Attribute):
                base = base.value
            if isinstance(base, ast.Name) and base.id in modules:
                found.append(f"{ast.unparse(node.value)}.{node.attr}")
    return found


def test_the_private_name_check_finds_what_it_looks_for() -> None:
    # the negative controls: each of these reads a private name of course_lib
    assert _private_course_lib_names("from course_lib.corpus import NOUNS, _fr_vowel") == ["course_lib.corpus._fr_vowel"]
    assert _private_course_lib_names("import course_lib as cl\nx = cl.corpus._fr_vowel('a')") == ["cl.corpus._fr_vowel"]
    assert _private_course_lib_names("from course_lib import corpus\n%time corpus._fr_vowel('a')") == []
    assert _private_course_lib_names("from course_lib import corpus\ny = corpus._fr_vowel('a')") == ["corpus._fr_vowel"]
    assert _private_course_lib_names("import course_lib.corpus as c\nc._split('a')") == ["c._split"]
    # and public names, dunders, and private names of other objects are not flagged
    assert _private_course_lib_names("import course_lib as cl\nprint(cl.__version__, cl.corpus.NOUNS)") == []
    assert _private_course_lib_names("import course_lib as cl\nm = cl.Transformer\nm._modules") == []


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_no_lesson_uses_a_private_name_of_course_lib(path: Path) -> None:
    source = "\n".join("".join(c["source"]) for c in _cells(path) if c["cell_type"] == "code")
    found = _private_course_lib_names(source)
    assert not found, (f"{path.name} uses private names of course_lib: {found}. Use the public API, or make "
                       "the name public in course_lib (with a docstring and a test)")
