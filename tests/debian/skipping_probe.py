"""Run only by tests/debian/test_no_skips.py (its name is not collected): one test that
skips, as a test of a missing tool does."""

import pytest


def test_a_tool_that_is_missing():
    pytest.skip("frobnicate is not installed (a made-up tool)")
