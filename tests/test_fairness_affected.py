"""course_tools.grading_dev.fairness.affected_tests: which tests a typical mistake can reach.

The fairness check (tests/test_grading_fairness.py) runs, for each typical mistake, only the
tests the mistake's rewritten cells can reach; the others run the solution's code on the
solution's state and give its verdict. A test wrongly left out would hide a mistake from the
check, so every way a rewritten cell can reach a later test is tried here: by the names it
defines, through a later cell that uses them, by mutating an object a later cell reads, by
storing into a module, by names it reaches dynamically, and by adding or removing cells.
"""

from __future__ import annotations

from course_tools.grading_dev.fairness import affected_tests

TIER = "fast"  # course_tools/tiers.py


def _nb(*cells: tuple[str, str | None]) -> dict:
    """A notebook of code cells: (source, grade_id or None)."""
    out = []
    for source, gid in cells:
        meta = {"nbgrader": {"grade_id": gid, "grade": gid.startswith("test"), "solution": not gid.startswith("test"),
                             "schema_version": 3}} if gid else {}
        out.append({"cell_type": "code", "metadata": meta, "execution_count": None, "outputs": [], "source": source})
    return {"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": out}


BASE = [
    ("import torch\nimport math\nfrom helpers import scale", None),
    ("config = {'d': 4}\nregistry = []", None),
    ("def attend(q, k):\n    return torch.softmax(q @ k.T / math.sqrt(q.shape[-1]), -1)", "attend"),
    ("assert attend(torch.ones(2, 4), torch.ones(3, 4)).shape == (2, 3)", "test_attend"),
    ("def norm(x):\n    return x / x.sum()", "norm"),
    ("assert norm(torch.ones(4)).sum() == 1", "test_norm"),
    ("def layer(x):\n    return attend(x, x)", "layer"),
    ("assert layer(torch.ones(2, 4)).shape == (2, 2)", "test_layer"),
    ("assert config['d'] == 4 and registry == []", "test_config"),
    ("assert torch.ones(1).item() == 1 and scale(2) == 2", "test_library"),
]
TESTS = ["test_attend", "test_norm", "test_layer", "test_config", "test_library"]


def _changed(**replace: str) -> dict:
    cells = [(replace.get(gid or "", source), gid) for source, gid in BASE]
    return _nb(*cells)


def test_a_rewritten_function_reaches_its_tests_and_the_tests_of_what_uses_it() -> None:
    wrong = "def attend(q, k):\n    return torch.softmax(q @ k.T, -1)"
    assert affected_tests(_nb(*BASE), _changed(attend=wrong), TESTS) == {"test_attend", "test_layer"}


def test_tests_before_the_rewritten_cell_and_unrelated_ones_are_not_reached() -> None:
    wrong = "def layer(x):\n    return x"
    assert affected_tests(_nb(*BASE), _changed(layer=wrong), TESTS) == {"test_layer"}


def test_a_rewritten_cell_that_mutates_an_object_reaches_every_later_reader() -> None:
    # the mistake appends to a list defined in an earlier, unchanged cell
    wrong = "def norm(x):\n    registry.append(x)\n    return x / x.sum()"
    assert affected_tests(_nb(*BASE), _changed(norm=wrong), TESTS) == {"test_norm", "test_config"}
    # ... or through a later unchanged cell that passes the object to it
    base = [*BASE[:6], ("norm(config)", None), *BASE[6:]]
    changed = [*base]
    changed[4] = ("def norm(x):\n    x['d'] = 5\n    return x", "norm")
    assert "test_config" in affected_tests(_nb(*base), _nb(*changed), TESTS)


def test_storing_into_a_library_module_reaches_every_later_test_that_uses_it() -> None:
    wrong = "torch.softmax = lambda x, dim: x\ndef norm(x):\n    return x / x.sum()"
    assert affected_tests(_nb(*BASE), _changed(norm=wrong), TESTS) == {"test_norm", "test_layer", "test_library"}
    # rebinding an imported name in the rewritten cell: every later user of that name
    wrong = "from helpers import scale as norm\nscale = norm"
    assert affected_tests(_nb(*BASE), _changed(norm=wrong), TESTS) == {"test_norm", "test_library"}


def test_names_reached_dynamically_reach_every_later_test() -> None:
    for wrong in ("globals()['config'] = {}\ndef norm(x):\n    return x",
                  "import sys\nsys.modules['helpers'].scale = abs\ndef norm(x):\n    return x",
                  "setattr(torch, 'ones', torch.zeros)\ndef norm(x):\n    return x",
                  "exec('config = 1')\ndef norm(x):\n    return x",
                  "from helpers import *\ndef norm(x):\n    return x",
                  "def norm(x)\n    return x"):  # does not parse
        assert affected_tests(_nb(*BASE), _changed(norm=wrong), TESTS) == {
            "test_norm", "test_layer", "test_config", "test_library"}, wrong


def test_cells_added_or_removed_reach_every_test() -> None:
    fewer = _nb(*BASE[:4], *BASE[5:])
    assert affected_tests(_nb(*BASE), fewer, TESTS) == set(TESTS)
    assert affected_tests(_nb(*BASE), _nb(*BASE), TESTS) == set()  # nothing changed, nothing reached


def test_a_test_that_draws_nothing_seeded_runs_once_and_counts_for_every_seed(tmp_path) -> None:
    """outcomes_under_seeds runs a test cell under one seed only when it drew nothing the seed
    sets (the grader's stream, torch's global generator): then every seed runs the same code on
    the same values. A test that draws from either runs under every seed."""
    from course_grader.notebook import SourceNotebook
    from course_tools.grading_dev.fairness import outcomes_under_seeds
    from course_tools.grading_dev.testing import variant, write_notebook

    def code(src: str, gid: str | None = None) -> dict:
        meta = {"nbgrader": {"schema_version": 3, "grade": True, "solution": False, "locked": True, "points": 1,
                             "grade_id": gid}} if gid else {}
        return {"cell_type": "code", "execution_count": None, "outputs": [], "metadata": meta, "source": src}

    runs = "RUNS.setdefault({!r}, 0)\nRUNS[{!r}] += 1\n"
    cells = [code("import torch\nfrom course_grader.checks import fresh_rng\nimport builtins\n"
                  "RUNS = builtins.__dict__.setdefault('_fairness_runs', {})\nRUNS.clear()"),
             code(runs.format("plain", "plain") + "assert 1 + 1 == 2", "test_plain"),
             code(runs.format("fails", "fails") + "assert 1 + 1 == 3", "test_fails"),
             code(runs.format("global", "global") + "assert torch.rand(1).item() < 2", "test_global"),
             code(runs.format("stream", "stream") + "fresh_rng()\nassert True", "test_stream")]
    nb = {"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": cells}
    path = write_notebook(nb, tmp_path / "draws.ipynb")
    outcomes = outcomes_under_seeds(SourceNotebook.load(path), variant(path), range(7))
    import builtins
    assert builtins.__dict__.pop("_fairness_runs") == {"plain": 1, "fails": 1, "global": 7, "stream": 7}
    assert outcomes.passed["test_plain"] == list(range(7)) and outcomes.failed["test_fails"] == list(range(7))
    assert outcomes.passed["test_global"] == outcomes.passed["test_stream"] == list(range(7))
