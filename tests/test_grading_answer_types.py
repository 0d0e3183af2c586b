"""The one rule for numeric and shape answers (``course_grader.checks.as_number`` / ``as_shape``).

Public checks (in the learner's kernel) and hidden checks (in the grader, where NumPy scalars
arrive as Python numbers) must accept the same answers: a learner whose answer passes the
public check must never lose the point for its type alone.
"""

import json
import re
from pathlib import Path

import numpy as np
import pytest
import torch

from course_grader import checks
from course_grader.checks import CheckFailed, as_number, as_shape, assert_equal, assert_number

TIER = "fast"  # course_tools/tiers.py

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("answer", [64, 64.0, np.float64(64), np.int64(64), np.float32(64), torch.tensor(64.0),
                                    torch.tensor([64]), "64", " 64.0 "])
def test_as_number_accepts_every_kind_of_number(answer):
    assert as_number(answer, name="q") == 64.0
    assert_number(answer, 64, name="q")


@pytest.mark.parametrize("answer", [None, True, np.bool_(True), [64], (64,), torch.tensor([1.0, 2.0]), "sixty-four",
                                    torch.tensor(True), 64j])
def test_as_number_refuses_what_is_not_a_number(answer):
    with pytest.raises(CheckFailed, match="q: "):
        as_number(answer, name="q")


def test_assert_number_still_checks_the_value():
    with pytest.raises(CheckFailed, match="not the right value"):
        assert_number(np.float64(8), 64, name="q")


@pytest.mark.parametrize("answer", [(4, 9, 11), [4, 9, 11], torch.Size([4, 9, 11]), torch.zeros(4, 9, 11).shape,
                                    (np.int64(4), 9, np.int32(11)), np.zeros((4, 9, 11)).shape])
def test_as_shape_accepts_tuples_lists_and_torch_size(answer):
    shape = as_shape(answer, name="q")
    assert shape == (4, 9, 11) and type(shape) is tuple and all(type(n) is int for n in shape)
    assert_equal(shape, (4, 9, 11), name="q")


@pytest.mark.parametrize("answer", [None, "4, 9, 11", (4.0, 9, 11), (True, 9, 11), torch.tensor([4, 9, 11]),
                                    np.array([4, 9, 11]), {4: 9}])
def test_as_shape_refuses_other_answers(answer):
    with pytest.raises(CheckFailed, match="q: "):
        as_shape(answer, name="q")


def test_no_assignment_checks_answer_types_by_hand():
    # every numeric or shape answer goes through the one rule above, in solutions and exercises
    pattern = re.compile(r"type\(ANSWER_\w+\) in \(|type\(_n\) is int|tuple\(ANSWER_\w+\)")
    notebooks = sorted(ROOT.glob("solutions/*/*.ipynb")) + sorted(ROOT.glob("exercises/*/*.ipynb"))
    assert notebooks
    for path in notebooks:
        for cell in json.loads(path.read_text())["cells"]:
            source = "".join(cell["source"])
            assert not pattern.search(source), f"{path.relative_to(ROOT)}: {pattern.search(source).group(0)}"
    assert {"as_number", "as_shape"} <= set(checks.__all__)


@pytest.mark.parametrize("answer", [10 ** 400, -(10 ** 5000)], ids=["400-digits", "5000-digits"])
def test_a_huge_integer_is_a_clear_refusal_not_a_crash(answer):
    # a learner-returned int past float's range: float() raises OverflowError (and str() of a
    # 5,000-digit int raises ValueError); the check must refuse it with its own message
    with pytest.raises(CheckFailed, match="ANSWER_X: expected a number of ordinary size, got an integer of"):
        as_number(answer, name="ANSWER_X")
    with pytest.raises(CheckFailed):
        assert_number(answer, 64, name="ANSWER_X")
