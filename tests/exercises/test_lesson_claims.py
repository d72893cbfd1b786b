"""What a lesson says about its traced tables is what the tables show (issue 35: lesson text must match
its tables)."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="module")
def lessons():
    from shapetrace.app.lessons import lesson_blocks
    from shapetrace.exercises.content import load

    curriculum = load()
    return {n: lesson_blocks(curriculum.lesson(n)) for n in (4, 8)}


def _examples(blocks):
    return [b for b in blocks if b.kind == "example"]


def _text(blocks):
    return " ".join(" ".join(b.body.split()) for b in blocks if b.kind == "text")


def test_lesson_4_the_unusual_split_shows_in_the_names(lessons):
    """einops' `b t (d h) -> b h t d` (the interleaved split the einops docs warn about)."""
    from shapetrace.engine.sentences import annotate

    blocks = lessons[4]
    assert ("The trace shows the unusual split in its names: the pieces of D are `D/3` and `D%3`, never H and "
            "d_k.") in _text(blocks)
    events = _examples(blocks)[1].trace.events
    assert [e.output.dims for e in events] == [("B", "T", "D/3", "D%3"), ("B", "D%3", "T", "D/3")]
    # a rotation of three axes is no swap
    assert annotate(events[1], "full").startswith("reorders the axes: [B, T, D/3, D%3] -> [B, D%3, T, D/3]; a view")


def test_lesson_8_the_multihead_attention_call_is_opened(lessons):
    """torch's nn.MultiheadAttention: its one call shows torch's own ops, the fused in_proj first."""
    blocks = lessons[8]
    assert ("The tracer opens that one call and shows torch's own ops inside it: the fused projection to "
            "`3·D`, then its split into q, k and v.") in _text(blocks)
    ops = [(e.op, e.output.dims if e.output else None) for e in _examples(blocks)[1].trace.events]
    assert ("linear", ("T", "B", "3*D")) in ops and ("unflatten", ("T", "B", "qkv", "D")) in ops
    assert "opaque" not in _text(blocks)
