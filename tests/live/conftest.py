"""Shared classes for the live classroom's tests: traced once per worker, each test gets a fresh class."""

from __future__ import annotations

import pytest

from shapetrace.app.classroom import ViewOptions


def _moments(**options):
    from shapetrace.app.request import RunRequest
    from shapetrace.app.session import trace_request
    from shapetrace.live.moments import build_moments

    report = trace_request(RunRequest(**options).checked(), "cpu", None).report()
    return build_moments(report, ViewOptions())


@pytest.fixture(scope="session")
def reference_moments():
    return _moments()


@pytest.fixture(scope="session")
def skip_transpose_moments():
    return _moments(broken="skip-transpose")


@pytest.fixture(scope="session")
def equal_size_moments():
    """B = T = H = 4 (d_k = 8): equal sizes, where only the names tell two axes apart."""
    return _moments(batch=4, seq_len=4, heads=4, d_model=32)


@pytest.fixture
def live_class(reference_moments):
    from shapetrace.live.classstate import LiveClass

    return LiveClass(reference_moments)
