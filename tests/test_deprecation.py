"""lakecleaner's deprecations: said once per process, naming the replacement and the version that
removes them, as lakecleaner's own warning class (which this suite turns into errors)."""

from __future__ import annotations

import sys
import warnings

import pytest

from lakecleaner.deprecation import LakeCleanerDeprecationWarning, deprecated


def old_way() -> None:
    """A function lakecleaner would deprecate."""
    deprecated("the test's old way", instead="use the new way", removed_in="9.9")


def test_a_deprecation_is_said_once_with_the_replacement_and_the_version() -> None:
    with pytest.warns(LakeCleanerDeprecationWarning) as caught:
        called_at = sys._getframe().f_lineno + 1
        old_way()
        old_way()
    assert [str(w.message) for w in caught] == [
        "the test's old way is deprecated and will be removed in lakecleaner 9.9: use the new way"
    ]
    assert (caught[0].filename, caught[0].lineno) == (__file__, called_at)  # the caller of the old way


def test_the_suite_turns_lakecleaners_deprecations_into_errors() -> None:
    """pyproject's filterwarnings: a lakecleaner deprecation left in the code fails the test that meets it."""
    with pytest.raises(LakeCleanerDeprecationWarning):
        deprecated("another old way", instead="the new way", removed_in="9.9", stacklevel=1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(DeprecationWarning):  # a subclass: filters on DeprecationWarning see it too
            deprecated("a third old way", instead="the new way", removed_in="9.9", stacklevel=1)
