"""tests/conftest.py's Hypothesis set-up: nothing written into the checkout, derandomized without a database unless HYPOTHESIS_PROFILE=explore."""

from __future__ import annotations

import os
from pathlib import Path

from hypothesis import settings
from hypothesis.configuration import storage_directory

ROOT = Path(__file__).resolve().parents[2]


def test_hypothesis_keeps_its_files_outside_the_checkout():
    where = storage_directory("examples")
    where = Path(getattr(where, "path", where)).resolve()          # a StorageDirectory since Hypothesis 6.13x
    assert not where.is_relative_to(ROOT), where
    db = settings().database
    assert db is None or not Path(getattr(db, "path", where)).resolve().is_relative_to(ROOT)


def test_ci_profile_is_derandomized_without_a_database():
    ci = settings.get_profile("ci")
    assert ci.derandomize and ci.database is None
    if os.environ.get("CI", "").lower() not in ("", "0", "false", "no") or "HYPOTHESIS_PROFILE" not in os.environ:
        assert settings().derandomize and settings().database is None
