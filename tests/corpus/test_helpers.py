"""The corpus checks themselves can fail: token labels, size contradictions, tags, and which
diagnostic counts as reporting a bug (no tracing here)."""

from __future__ import annotations

import importlib
from types import SimpleNamespace

import pytest

from tests.corpus import helpers
from tests.corpus.helpers import SEQ_LABEL, label_contradiction, name_matches, reported_on

SIZES = {"B": 2, "T": 5, "H": 3, "D": 24, "d_k": 8, "N": 16}
NO_NAMER = SimpleNamespace()     # a trace without a vocabulary: spelling decides


@pytest.mark.parametrize("label", ["T", "S", "N", "T[-1:]", "T[4:5]", "T+1", "1+N", "2+N", "S+T", "T+T[-1:]"])
def test_token_labels(label):
    assert SEQ_LABEL.fullmatch(label)
    assert name_matches(NO_NAMER, "seq", label)


@pytest.mark.parametrize("label", [None, "H", "d_k", "B", "D", "B*T", "T*d_k", "!T*H", "1", "H_kv"])
def test_not_token_labels(label):
    assert not name_matches(NO_NAMER, "seq", label)
    assert name_matches(NO_NAMER, "!seq", label)


@pytest.mark.parametrize("label,size,bad", [
    ("T", 5, False), ("T", 4, True), ("T+1", 6, False), ("T+1", 5, True), ("1+N", 17, False),
    ("T[-1:]", 1, False), ("T[-1:]", 5, True), ("T[1:3]", 2, False), ("B*H", 6, False), ("B*H", 5, True),
    ("D/3", 8, False), ("mystery", 7, False), ("!T*H", 7, False),
])
def test_label_contradiction(label, size, bad):
    assert (label_contradiction(label, size, SIZES) is not None) is bad


def test_product_patterns():
    assert name_matches(NO_NAMER, "B*?", "B*nW")
    assert not name_matches(NO_NAMER, "B*?", "B")
    assert name_matches(NO_NAMER, "_", None) and not name_matches(NO_NAMER, "_", "T")
    assert name_matches(NO_NAMER, "?", None) and name_matches(NO_NAMER, "?", "H")


def test_reported_on_needs_the_event_and_its_op():
    e = SimpleNamespace(index=7, op="view")
    assert reported_on(SimpleNamespace(event=7, message="view #7 turns ..."), e)
    assert not reported_on(SimpleNamespace(event=7, message="reshape #7 turns ..."), e)
    assert not reported_on(SimpleNamespace(event=8, message="linear #8 projects ..."), e)
    assert reported_on(SimpleNamespace(event=8, message="linear #8 disagrees with view #7 about axis 2"), e)
    assert not reported_on(SimpleNamespace(event=8, message="view #70 ..."), e)


def test_tags_of_this_corpus():
    lines = helpers.tag_lines(importlib.import_module("tests.corpus.test_windows"))
    assert set(lines) >= {"strided-windows", "bug-strided-storage", "unfold-k", "bug-window-softmax"}
    assert lines["strided-windows"] == lines["bug-strided-storage"]   # two tags on one line
