"""Each rule of SPEC §6 on its hand-computed case (tests/test_oracle.py), run through the
production SQL instead of the oracle: the same numbers must come out."""

from __future__ import annotations

import pytest

import tests.attribution.test_oracle as cases
from tests.support import sql_backend


@pytest.fixture(autouse=True)
def _sql(monkeypatch):
    monkeypatch.setattr(cases, "attribute", sql_backend.attribute)
    monkeypatch.setattr(cases, "reconcile", sql_backend.reconcile)


globals().update({name: getattr(cases, name) for name in dir(cases) if name.startswith("test_")})
