"""shapetrace/engine/directions.py: which keys a mask on the scores hides, read from its values.

A causal triangle moved off its diagonal (``tril(ones, diagonal=1)``, each query keeping the next key; mistral-src's
sliding window made with that offset, tests/corpus/public11/mistral_sliding.py) was read as "another pattern" and the
trace (no dependency contracts) was ``✓`` on 14a2e35 (branch r11's first commit): :func:`looks_ahead` reads it, the
direction rule says so in a ``mask-looks-ahead`` note and the verdict does not count the mask as checked."""

from __future__ import annotations

import pytest
import torch

from shapetrace.engine.directions import hidden_side, looks_ahead


def _window(n: int, ahead: int, behind: int | None = None) -> torch.Tensor:
    """True where hidden: keys more than ``ahead`` after each query (and more than ``behind`` before it)."""
    keep = torch.ones(n, n).tril(ahead)
    if behind is not None:
        keep = keep.triu(-behind)
    return keep == 0


@pytest.mark.parametrize(("ahead", "behind"), [(1, None), (2, None), (1, 3)])
def test_a_triangle_off_its_diagonal_looks_ahead(ahead, behind):
    assert looks_ahead(_window(6, ahead, behind)[None]) == {"looks_ahead": ahead}
    assert hidden_side(_window(6, ahead, behind), (6, 6)) == {"hides_side": "other", "looks_ahead": ahead}


def test_an_additive_mask_off_its_diagonal_looks_ahead():
    mask = torch.log(torch.ones(6, 6).tril(1).triu(-3))          # mistral-src's window, 0 seen, -inf hidden
    assert hidden_side(mask[None, None], (2, 4, 6, 6)) == {"hides_side": "other", "looks_ahead": 1}


@pytest.mark.parametrize("mask", [
    _window(6, 0), _window(6, 0, 3),                               # causal, causal sliding window
    torch.zeros(6, 6, dtype=torch.bool),                           # nothing hidden
    _window(6, 5),                                                 # nothing after any query hidden
    ~torch.ones(6, 6, dtype=torch.bool).triu(),                    # the past hidden (reversed)
    torch.ones(6, 6, dtype=torch.bool).triu(),                     # each query's own key hidden too
    torch.block_diag(torch.ones(3, 3), torch.ones(3, 3)) == 0,     # two packed sequences, bidirectional
])
def test_other_patterns_do_not_look_ahead(mask):
    assert looks_ahead(mask[None]) == {}
    assert "looks_ahead" not in hidden_side(mask, (6, 6))


def test_a_look_ahead_leaves_the_verdict_unproven():
    from shapetrace import NOT_ASKED
    from tests.corpus.helpers import findings, traced_build, verdict_line
    from tests.corpus.public11 import mistral_sliding

    t = traced_build(mistral_sliding, "tril-offset", "B=2 T=6 D=32 H=4 H_kv=2")
    assert findings(t) == ()
    assert [d.kind for d in t.diagnostics] == ["mask-looks-ahead"]
    assert t.diagnostics[0].message.startswith(
        "add #16 hides, along the keys (axis -1, T) of the scores [B=2, H=4, T=6, T=6], the keys more than 1 after "
        "each query and keeps the next key ([1, 1, T=6, T=6]): a causal mask off its diagonal")
    assert verdict_line(t) == (
        "? checked 22 of 22 ops that could carry a layout bug; not proven: a mask keeps the keys just after each "
        "query and hides later ones (a causal mask off its diagonal, or a look-ahead window by design); no errors "
        "or warnings in what was checked; not measured: " + NOT_ASKED)
    assert verdict_line(traced_build(mistral_sliding, "", "B=2 T=6 D=32 H=4 H_kv=2"))[0] == "✓"


def test_sdpas_attn_mask_hiding_the_past_and_itself_is_a_reversed_causal_mask():
    """rules/directions read SDPA's ``attn_mask`` for a mask hiding exactly the past (``"past"``) but not the past
    and each query's own key (``"past-and-self"``), which masked_fill and an added mask already called
    ``causal-mask-reversed``. ``nn.Transformer(src, tgt, tgt_mask=tril(ones(T, T, dtype=bool)))``
    (tests/corpus/public12/torch_transformer.py ``keep-mask``: the keep-mask convention handed to torch, whose
    boolean mask is True where a key is hidden) reached SDPA with that mask and was ``?`` on 1123aec (main
    before round 12); now ``✗`` at the SDPA call inside nn.MultiheadAttention."""
    import shapetrace
    from tests.corpus.helpers import findings, traced_build
    from tests.corpus.public12 import torch_transformer

    t = traced_build(torch_transformer, "keep-mask", "B=2 T=6 S=10 D=64 H=4")
    assert findings(t) == ("causal-mask-reversed",)
    assert [d.event for d in t.diagnostics] == [57]
    assert "exactly the keys before each query and its own key ([1, 1, T=6, T=6]) and keeps those after it" \
        in t.diagnostics[0].message

    B, H, T, d = 2, 4, 6, 16
    q = torch.randn(B, H, T, d)
    keep = torch.tril(torch.ones(T, T, dtype=torch.bool))
    with shapetrace.trace(dims=f"B={B} T={T} D={H * d} H={H}") as t:
        shapetrace.name(q, "B H T d_k")
        torch.nn.functional.scaled_dot_product_attention(q, q, q, attn_mask=~keep)
    # (SDPA's boolean mask attends where True: ``~tril`` keeps each query's future only, the polarity finding too)
    assert [d.kind for d in t.diagnostics if d.severity == "error"] == ["mask-polarity", "causal-mask-reversed"]
