"""moldau.testing.waiting.wait_for: the one poll-until-true helper of the cluster tests."""

from __future__ import annotations

import itertools

import pytest

from moldau.testing.waiting import wait_for


def test_returns_the_first_truthy_value() -> None:
    calls = itertools.count()
    assert wait_for(lambda: next(calls) >= 3 and "done", 10, "three calls", interval=0) == "done"


def test_names_what_never_happened() -> None:
    with pytest.raises(AssertionError, match=r"timed out after 0.1s waiting for the moon"):
        wait_for(lambda: None, 0.1, "the moon", interval=0.01)
