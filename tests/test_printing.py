"""course_lib.printing.fmt: fixed layout, no negative zero, warns on ambiguous roundings (never raises)."""

from __future__ import annotations

import warnings

import pytest
import torch

from course_lib.printing import RoundingBoundaryWarning, fmt


TIER = "fast"  # course_tools/tiers.py


def test_tensor_layout_does_not_depend_on_exact_ones():
    # torch prints these two differently ("1." vs "1.0000"); fmt prints them the same.
    exact = torch.ones(3)
    almost = torch.tensor([1.0, 1.0, 1.0 - 6e-8])
    assert str(exact) != str(almost)
    assert fmt(exact) == fmt(almost) == "[1.0000, 1.0000, 1.0000]"


def test_nested_and_scalar():
    x = torch.tensor([[0.43243, 0.56757], [1.0, 0.0]])
    assert fmt(x, 3) == "[[0.432, 0.568], [1.000, 0.000]]"
    assert fmt(2.5, 1) == "2.5"
    assert fmt([0.1, (0.25001, 3)], 2) == "[0.10, [0.25, 3.00]]"


def test_negative_zero_is_printed_as_zero():
    assert fmt(-1e-9, 4) == "0.0000"
    assert fmt(torch.tensor([-0.0, 1e-12]), 2) == "[0.00, 0.00]"
    assert fmt(-0.2, 1) == "-0.2"


@pytest.mark.parametrize("value, decimals", [(0.12345, 4), (2.5, 0), (0.0000499999999, 4), (-1.05, 1)])
def test_value_on_a_rounding_boundary_warns_and_is_printed(value, decimals):
    # a learner who changes a seed gets the number and a warning, never an exception
    with pytest.warns(RoundingBoundaryWarning, match="rounding boundary"):
        text = fmt(value, decimals)
    assert text == f"{value:.{decimals}f}"


def test_value_clear_of_a_boundary_does_not_warn():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert fmt([0.12346, 0.5, 1.0], 4) == "[0.1235, 0.5000, 1.0000]"


def test_value_near_but_clear_of_a_boundary_is_printed():
    assert fmt(0.12346, 4) == "0.1235"
    assert fmt(0.12344, 4) == "0.1234"


def test_float32_noise_never_changes_the_text():
    # A value fmt accepts never prints differently after a perturbation of float32 size
    # (at worst, a value at the very edge of the tolerance band is refused).
    gen = torch.Generator().manual_seed(0)
    values = torch.rand(2000, generator=gen, dtype=torch.float64) * 3
    printed = 0
    with warnings.catch_warnings():
        warnings.simplefilter("error", RoundingBoundaryWarning)  # a warned value counts as refused
        for v in values.tolist():
            try:
                text = fmt(v, 4)
            except RoundingBoundaryWarning:
                continue
            printed += 1
            for noisy in (v * (1 + 1.2e-7), v * (1 - 1.2e-7)):
                try:
                    assert fmt(noisy, 4) == text
                except RoundingBoundaryWarning:
                    pass
    assert printed > 1900


def test_bad_arguments():
    with pytest.raises(ValueError, match="decimals"):
        fmt(1.0, -1)
    with pytest.raises(TypeError, match="got str"):
        fmt("0.5")  # type: ignore[arg-type]
    assert fmt(float("nan")) == "nan" and fmt(float("-inf")) == "-inf"
