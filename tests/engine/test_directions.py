"""shapetrace/engine/directions.py: which keys a mask on the scores hides, read from its values.

A causal triangle moved off its diagonal (``tril(ones, diagonal=1)``, each query keeping the next key; mistral-src's
sliding window made with that offset, tests/corpus/public11/mistral_sliding.py) was read as "another pattern" and the
trace (no dependency contracts) was ``✓`` on 14a2e35 (branch r11's first commit): :func:`looks_ahead` reads it, the
direction rule says so in a ``mask-looks-ahead`` note and the verdict does not count the mask as checked."""

from __future__ import annotations

import pytest
import torch

from shapetrace.engine.directions import (
    blind_rows,
    hidden_side,
    keeps_far_future,
    looks_ahead,
    opened_future,
    own_key_hidden,
    padding_seen,
    past_only,
    subtracted_facts,
    whole_past_hidden,
)


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
    correct = traced_build(mistral_sliding, "", "B=2 T=6 D=32 H=4 H_kv=2")   # (✓ up to b2f62da: its band of
    assert verdict_line(correct)[0] == "?"   # sliding_window + 1 keys, mistral-src's by design, is no window it holds)
    assert [d.kind for d in correct.diagnostics] == ["window-width-unchecked"]


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


# -- masks of one sequence read whole: a query kept from its own key, a blind query, a window that lost its
# causal half, a bias subtracted (tests/corpus/public13; each fails on fc24ddf, main before branch r13)


def _keep_to_hidden(keep: torch.Tensor) -> torch.Tensor:
    return ~keep.bool()


def test_a_window_hidden_instead_of_its_outside_hides_each_querys_own_key():
    """ModernBERT's ``masked_fill(window_mask, min)`` for ``masked_fill(~window_mask, min)``: every query
    hides its own key and sees the far ones; on fc24ddf read as "another pattern", and the file was ``✓``."""
    rows = torch.arange(6)
    window = (rows[None] - rows[:, None]).abs() <= 2
    assert own_key_hidden(window[None]) == {"hides_own_key": (6, 0, 0)}
    assert hidden_side(window, (6, 6)) == {"hides_side": "other", "hides_own_key": (6, 0, 0)}
    assert own_key_hidden(_keep_to_hidden(window)[None]) == {}      # the window itself: each query sees itself


def test_a_chunk_id_taken_modulo_hides_a_querys_own_key():
    """Llama 4's chunked mask with the key's chunk ``j % C`` for ``j // C`` (C = 4, T = 6): query 1 sees
    key 0 only, while query 4 sees key 1; the keys no query sees (2, 3) are padding-like and not counted."""
    q, k = torch.arange(6)[:, None], torch.arange(6)[None, :]
    keep = (q // 4 == k % 4) & (k <= q)
    assert own_key_hidden(_keep_to_hidden(keep)[None]) == {"hides_own_key": (1, 0, 1)}
    assert own_key_hidden(_keep_to_hidden((q // 4 == k // 4) & (k <= q))[None]) == {}


@pytest.mark.parametrize("hidden", [
    torch.ones(6, 6).triu(1).bool(),                                 # causal
    torch.zeros(6, 6, dtype=torch.bool).index_fill(1, torch.tensor([4, 5]), True),   # key padding
    torch.block_diag(torch.ones(3, 3), torch.ones(3, 3)) == 0,       # two packed sequences
])
def test_correct_masks_hide_no_querys_own_key_and_blind_no_query(hidden):
    assert own_key_hidden(hidden[None]) == {} and blind_rows(hidden, hidden[None]) == {}
    assert past_only(hidden[None]) == {}


def test_a_padding_mask_on_the_queries_of_a_bidirectional_mask_blinds_them():
    """``keep[:, None, :, None]`` for ``keep[:, None, None, :]`` (ModernBERT's 4-D padding mask): the padded
    queries hide every key though other queries see their tokens; on fc24ddf only a causal pattern was read
    so, and the file was ``✓``."""
    keep = torch.tensor([[1, 1, 1, 1, 1, 1], [1, 1, 1, 1, 0, 0]]).bool()
    hidden = ~keep[:, None, :, None].expand(2, 1, 6, 6)
    assert blind_rows(hidden, hidden.reshape(2, 6, 6)) == {"blind_queries": ((2, 1, 6), (10, 11))}
    assert hidden_side(hidden, (2, 4, 6, 6))["blind_queries"] == ((2, 1, 6), (10, 11))


def test_a_sliding_window_without_its_causal_half_keeps_the_future():
    """Gemma 3's local mask ``j > i - w`` without ``& (j <= i)``: it hides the far past and no later key."""
    q, k = torch.arange(6)[:, None], torch.arange(6)[None, :]
    assert past_only(_keep_to_hidden(k > q - 3)[None]) == {"past_only": (0, 3, 0)}
    assert hidden_side(_keep_to_hidden(k > q - 3), (6, 6)) == {"hides_side": "other", "past_only": (0, 3, 0)}
    assert past_only(_keep_to_hidden((k > q - 3) & (k <= q))[None]) == {}     # the causal window
    assert past_only(_keep_to_hidden((k - q).abs() <= 2)[None]) == {}         # a bidirectional window


def test_a_subtracted_bias_is_read_as_its_negation_added():
    """``score - slope * (i - j)`` (FlexAttention's eager ``score_mod`` with the distance reversed) favours far
    keys; the softmax's own shift ``scores - amax`` and ``bias - scores`` say nothing."""
    q, k = torch.arange(5)[:, None], torch.arange(5)[None, :]
    far = -(0.5 * (q - k)).float()[None]                                        # subtracted: +0.5 per token farther
    assert subtracted_facts(far, [(2, 5, 5), (1, 5, 5)], [True, False], (2, 5, 5))["bias_favours"] == "far"
    assert subtracted_facts(-far, [(2, 5, 5), (1, 5, 5)], [True, False], (2, 5, 5))["bias_favours"] == "near"
    shift = torch.randn(2, 5, 1)
    assert subtracted_facts(shift, [(2, 5, 5), (2, 5, 1)], [True, False], (2, 5, 5)) == {}
    assert subtracted_facts(far, [(1, 5, 5), (2, 5, 5)], [False, True], (2, 5, 5)) == {}
    hide = (1e9 * (k > q)).float()[None]                                        # scores - 1e9 * future
    assert subtracted_facts(hide, [(2, 5, 5), (1, 5, 5)], [True, False], (2, 5, 5))["hides_side"] == "future"


@pytest.mark.parametrize(("module", "bug", "message"), [
    ("modernbert_local", "window-inverted",
     "note mask-hides-own-key scaled_dot_product_attention #50 puts a mask [B=2, 1, T=6, T=6] onto the scores "
     "[..., T=6, T=6] that hides query 0's own key while that query sees other keys and other queries see its key, "
     "and 7 more queries alike: its queries and keys (T) are one sequence"),
    ("modernbert_local", "padding-on-queries",
     "error mask-wrong-axis scaled_dot_product_attention #27 puts a mask [B=2, 1, T=6, T=6] onto the scores "
     "[..., T=6, T=6] that leaves query 4 at [1, 0] of the mask's leading axes [B=2, 1] with no key at all"),
    ("llama4_chunked", "chunk-from-modulo",
     "note mask-hides-own-key scaled_dot_product_attention #27 puts a mask [T=6, T=6] onto the scores "
     "[..., T=6, T=6] that hides query 1's own key"),
    ("gemma3", "window-without-causal",
     "error mask-keeps-future add #48 puts a mask [1, 1, T=6, T=6] onto the scores [B=2, H=4, T=6, T=6] that hides "
     "keys before a query (key 0 from query 3) but no key after any query"),
    ("flex_score_mod", "alibi-reversed",
     "error distance-bias-reversed sub #16 subtracts a bias [1, H=4, T=6, T=6] from the scores [B=2, H=4, T=6, T=6] "
     "whose negation grows with the distance to each query along the keys (axis -1, T)"),
])
def test_the_round13_bugs_are_found_where_their_masks_go_in(module, bug, message):
    """Each was ``✓`` on fc24ddf (no finding); their correct files stay without one (test_public_round13.py).
    mask-hides-own-key is a note that leaves ``?`` (since 8357b89's successor): XLNet's query stream and Reformer
    hide a token's own key by design, so the values cannot call it a slip, and a warning left ``!`` on them."""
    import importlib

    from tests.corpus.helpers import traced_build

    m = importlib.import_module(f"tests.corpus.public13.{module}")
    t = traced_build(m, bug, m.DIMS[0])
    assert [f"{d.severity} {d.kind} {d.message}"[:len(message)] for d in t.diagnostics
            if d.severity in ("error", "warning") or d.kind == "mask-hides-own-key"] == [message]


class _CausalCross(torch.nn.Module):
    """A cross-attention (queries of ``x``, keys of ``memory``) given a causal pattern built from the two
    lengths: ``ones(T, S).tril()`` (top-left, onlybooks/llm issue #4) or a window ``(-1, 0)`` from positions
    aligned bottom-right (NVIDIA/TransformerEngine issue #629); ``None``: no mask."""

    def __init__(self, how, D=32, H=4):
        super().__init__()
        self.how, self.H = how, H
        self.q, self.kv = torch.nn.Linear(D, D), torch.nn.Linear(D, 2 * D)

    def forward(self, x, memory):
        B, T, D = x.shape
        S = memory.shape[1]
        q = self.q(x).view(B, T, self.H, D // self.H).transpose(1, 2)                      # (B, H, T, d)
        k, v = self.kv(memory).view(B, S, 2, self.H, D // self.H).permute(2, 0, 3, 1, 4)   # (B, H, S, d) each
        scores = q @ k.transpose(-2, -1)                                                   # (B, H, T, S)
        if self.how == "tril":
            scores = scores.masked_fill(torch.ones(T, S, dtype=torch.bool).tril() == 0, float("-inf"))
        elif self.how == "window":
            hidden = torch.arange(S)[None, :] > torch.arange(T)[:, None] + (S - T)
            scores = scores.masked_fill(hidden, -10000.0)
        return (scores.softmax(-1) @ v).transpose(1, 2).reshape(B, T, D)


def _cross_findings(how, dims):
    import shapetrace

    n = {kv.split("=")[0]: int(kv.split("=")[1]) for kv in dims.split()}
    torch.manual_seed(0)
    model, x, memory = _CausalCross(how), torch.randn(n["B"], n["T"], 32), torch.randn(n["B"], n["S"], 32)
    with torch.no_grad(), shapetrace.trace(dims=dims) as t:
        shapetrace.name(x, "B T D")
        shapetrace.name(memory, "B S D")
        model(x, memory)
    return [f"{d.severity} {d.kind} {d.message}" for d in t.diagnostics if d.severity in ("error", "warning")]


@pytest.mark.parametrize(("how", "op"), [("tril", "masked_fill #10 puts a mask [T=6, S=8]"),
                                         ("window", "masked_fill #11 puts a mask [T=6, S=8]")])
def test_a_causal_pattern_built_for_a_cross_attention_is_a_warning(how, op):
    """``ones(T, S).tril()`` or a bottom-right window on scores whose queries (T) and keys (S) are two
    sequences: a warning (an alignment may be meant so, wait-k), where 9d6f047 said nothing (``✓``:
    tests/corpus/reports6 onlybooks_decoder_causal, te_cross_window). Cut from a square table it stays the
    error of openai/whisper's mask (tests/corpus/test_public_round5.py); a square table's last rows (a cache
    mask over one sequence) stay silent whatever the keys are named (the same module)."""
    assert _cross_findings(how, "B=2 T=6 S=8 D=32 H=4") == [
        f"warning causal-mask-across-sequences {op} that hides the keys after each query onto the scores "
        "[B=2, H=4, T=6, S=8], whose keys (S) are another sequence than its queries (T): a causal pattern between "
        "places of two sequences, so later keys of S are hidden from earlier queries of T. A decoder's causal "
        "mask or flag handed to its cross-attention does this; an alignment meant so (wait-k decoding) would "
        "too, so this is a warning."]


def test_no_mask_on_a_cross_attention_and_names_that_rest_on_sizes_say_nothing():
    """Without a mask nothing is said; at T = S (the inputs named, yet which of the two is which is settled by
    sizes alone where the names were seeded by size) the same causal pattern is not judged either: equal
    sizes decide no sequence (tests/corpus/reports3/seq2seq_cross_mask stays ``?`` at S = T)."""
    assert _cross_findings(None, "B=2 T=6 S=8 D=32 H=4") == []
    from tests.corpus.helpers import round_outcome
    from tests.corpus.reports3 import seq2seq_cross_mask

    assert round_outcome(seq2seq_cross_mask, "trg-mask-in-cross", "B=2 T=6 S=6 D=32 H=4") == ("?", ())


def test_a_causal_sliding_window_reads_its_width_aligned_bottom_right():
    """:func:`causal_window`: a prefill's window of 3 keys, and a chunk of 3 queries after 6 cached tokens whose
    edges are both measured in positions (``tril(6).triu(4)``), each keep 3 keys; the chunk's window measured
    from its own rows (``tril(6).triu(-2)``, trymirai/lalamo PR #200) is the causal mask alone, no window."""
    from shapetrace.engine.directions import causal_window

    keep = torch.ones(6, 6, dtype=torch.bool).tril(0).triu(-2)
    assert hidden_side(~keep, (6, 6)) == {"hides_side": "other", "window": 3}
    assert hidden_side(~torch.ones(3, 9, dtype=torch.bool).tril(6).triu(4), (3, 9)) == {"hides_side": "other",
                                                                                       "window": 3}
    assert hidden_side(~torch.ones(3, 9, dtype=torch.bool).tril(6).triu(-2), (3, 9)) == {"hides_side": "future"}
    assert causal_window((~keep)[None], 0) == {"window": 3}
    assert causal_window(torch.ones(6, 6, dtype=torch.bool).triu(1)[None], 0) == {}          # causal alone
    assert causal_window((torch.ones(6, 6).triu(1).bool() | torch.eye(6).bool())[None], 0) == {}   # hides itself


def test_a_window_that_widens_at_a_later_call_of_its_line_is_an_error():
    """tests/corpus/reports6/lalamo_window_offset: a window of 3 at the prefill, the causal mask alone over 9 keys
    at the chunk after the cache (``?`` with no finding on 90ab918); its correct twin keeps 3 keys at both calls
    and says nothing. Read on the values: the chunk's scores are unnamed (its input has no declared size), the
    line and its op say they are the same scores."""
    from tests.corpus.helpers import traced_build
    from tests.corpus.reports6 import lalamo_window_offset

    t = traced_build(lalamo_window_offset, "window-local-rows", "B=2 T=6 D=32 H=4")
    assert [(d.severity, d.kind, d.event) for d in t.diagnostics if d.severity != "note"] == [
        ("error", "window-widens", 25)]
    message = t.diagnostics[[d.kind for d in t.diagnostics].index("window-widens")].message
    assert message == (
        "where #25 puts a mask [3, 9] onto the scores [2, 4, 3, 9] that lets a query see 9 keys, but the same line "
        "(tests/corpus/reports6/lalamo_window_offset.py:51) kept a sliding window of 3 keys per query at #9: the "
        "window's lower edge was not moved with the queries' positions (counted from the chunk's own rows, not "
        "from the cache's length).")
    t = traced_build(lalamo_window_offset, "", "B=2 T=6 D=32 H=4")
    assert [d.kind for d in t.diagnostics if d.severity != "note"] == []


def test_a_finding_on_equal_sizes_is_not_backed_by_a_bug_in_a_dropped_result():
    """At B = T = 4 the prompt [4, 4, 32] reads [B, T, D] or [T, B, D]. Read [T, B, D], the prefill's scores
    attend over the batch, but the prefill's output is dropped (``_, cache = self.attn(prompt)``): that bug
    reaches nothing the model returns, so it no longer vouches for the window finding, which rests on the order
    of equal sizes and becomes the order-of-equal-sizes note (kept with that caveat before 48917dd)."""
    from tests.corpus.helpers import traced_build
    from tests.corpus.reports6 import lalamo_window_offset

    t = traced_build(lalamo_window_offset, "window-local-rows", "B=4 T=4 D=32 H=4")
    assert [(d.severity, d.kind) for d in t.diagnostics] == [("note", "ambiguous-sizes"),
                                                             ("note", "order-of-equal-sizes")]
    assert "window-widens at #25" in t.diagnostics[1].message


def _linear_attention(x, H, kept, then_softmax=False):
    """Gated/linear attention's causal mask (fla's ``A.masked_fill(~tril, 0) @ v``): zeros where the filled
    scores go straight into the product with the values hide those keys; ``then_softmax``: the zeros go into a
    softmax instead, where they hide nothing."""
    B, T, D = x.shape                                                   # (B, T, D)
    q = x.view(B, T, H, D // H).transpose(1, 2)                         # (B, H, T, d_k)
    A = q @ q.transpose(-1, -2)                                         # (B, H, T, T)
    n = A.size(-1)
    keep = getattr(torch.ones(n, n, dtype=torch.bool), kept)()
    A = A.masked_fill(~keep, 0)
    return (A.softmax(-1) if then_softmax else A) @ q                   # (B, H, T, d_k)


@pytest.mark.parametrize(("B", "T", "D", "H"), [(2, 6, 32, 4), (4, 4, 32, 4)])
def test_a_zero_fill_that_weighs_the_values_is_a_mask_and_its_direction_is_read(B, T, D, H):
    """public20/gla_chunk's ``mask-keeps-upper`` (``masked_fill(~triu, 0) @ v``) was ``✓`` on f0e0295: only a
    fill with a large negative counted as hiding keys. Now the zeros that go straight into the product do."""
    import shapetrace

    x = torch.randn(B, T, D)
    with torch.no_grad(), shapetrace.trace(dims=f"B={B} T={T} D={D} H={H}") as t:
        _linear_attention(x, H, "triu")
    assert [(d.kind, d.event) for d in t.diagnostics if d.severity == "error"] == [("causal-mask-reversed", 5)]
    assert t.diagnostics[0].message.startswith(
        f"masked_fill #5 hides, along the keys (axis -1, T) of the scores [B={B}, H={H}, T={T}, T={T}], exactly the "
        "keys before each query (")
    for kept, then_softmax in (("tril", False), ("triu", True)):
        with torch.no_grad(), shapetrace.trace(dims=f"B={B} T={T} D={D} H={H}") as t:
            _linear_attention(x, H, kept, then_softmax)
        assert [d.kind for d in t.diagnostics if d.severity == "error"] == []


def test_a_window_cut_from_the_causal_mask_by_tril_keeps_the_far_future():
    """transformers PR #41228 (tests/corpus/reports10/cb_sliding_window_tril): ``tril(triu(min, 1), diagonal=w)``
    hides the w keys just after each query and keeps every later one. ``✓`` on 50fc4a8 (the pattern was "other",
    no finding); now ``mask-keeps-far-future``. A causal mask, a causal window, a look-ahead and a bidirectional
    window are not it, nor a mask with padding keys."""
    q, k = torch.arange(6)[:, None], torch.arange(6)[None, :]
    leaky = (k > q) & (k <= q + 2)                                               # hidden: the next 2 keys only
    assert keeps_far_future(leaky[None]) == {"keeps_far_future": 2}
    assert hidden_side(leaky, (6, 6)) == {"hides_side": "other", "keeps_far_future": 2}
    assert keeps_far_future(((k > q) & (k <= q + 1) | (k < q - 2))[None]) == {"keeps_far_future": 1}  # (past cut)
    assert keeps_far_future((k > q)[None]) == {}                                 # causal
    assert keeps_far_future(((k > q) | (k < q - 2))[None]) == {}                 # a causal window
    assert keeps_far_future((k > q + 1)[None]) == {}                             # a look-ahead
    assert keeps_far_future(((k - q).abs() > 2)[None]) == {}                     # a bidirectional window
    assert keeps_far_future((((k > q) & (k <= q + 2)) | (k == 5))[None]) == {}   # and a padding key


def test_the_tril_window_is_an_error_where_it_goes_in():
    """The bug of reports10/cb_sliding_window_tril at its DIMS: one error on the add of the mask; its correct
    twin (``masked + tril(min, -w)``) has none."""
    import importlib

    from tests.corpus.helpers import traced_build

    m = importlib.import_module("tests.corpus.reports10.cb_sliding_window_tril")
    t = traced_build(m, "window-by-tril-of-causal", m.DIMS[0])
    assert [f"{d.severity} {d.kind} {d.message}" for d in t.diagnostics if d.severity in ("error", "warning")] == [
        "error mask-keeps-far-future add #13 puts a mask [T=6, T=6] onto the scores [B=2, H=4, T=6, T=6] that hides "
        "the next 2 keys after each query and keeps every key beyond them, along the keys (T) of one sequence: each "
        "query sees the tokens more than 2 places after it, the far future. A sliding window's edge cut from the "
        "causal mask with tril (tril(causal, diagonal=w)) zeroes the causal mask's far part instead of hiding the far "
        "past."]
    assert not [d for d in traced_build(m, "", m.DIMS[0]).diagnostics if d.severity in ("error", "warning")]


def _causal_with_blocks(n: int, blocks) -> torch.Tensor:
    """True where hidden: a causal mask with each ``(start, stop)`` block opened both ways."""
    keep = torch.ones(n, n, dtype=torch.bool).tril()
    for start, stop in blocks:
        keep[start:stop, start:stop] = True
    return ~keep


def test_bidirectional_blocks_on_a_causal_mask_open_the_last_token_to_its_block_only():
    """A causal mask with contiguous bidirectional blocks (Gemma 3's image tokens, a prefix LM's prefix, a
    block-causal video mask): ``future_blocks`` names the queries before the last whose block holds the last
    token, the rows whose dependence on it is the design (engine/unattended). New in this commit (on eea3781
    the pattern was "other" with no fact, and the dependency check called Gemma 3's correct mask a leak)."""
    gemma3 = _causal_with_blocks(6, [(1, 3), (4, 6)])                            # [text, img, img, text, img, img]
    assert opened_future(gemma3[None]) == {"future_blocks": ((1, 6), (4,))}
    assert hidden_side(gemma3, (6, 6)) == {"hides_side": "other", "future_blocks": ((1, 6), (4,))}
    assert opened_future(_causal_with_blocks(6, [(0, 3)])[None]) == {"future_blocks": ((1, 6), ())}   # prefix LM
    padded = _causal_with_blocks(6, [(2, 4)]) | (torch.arange(6) == 5)          # a padding key: set aside
    assert opened_future(padded[None]) == {"future_blocks": ((1, 6), ())}
    assert opened_future(_causal_with_blocks(6, [(0, 6)])[None]) == {}            # every key open: no causal mask
    open_beside = torch.stack([_causal_with_blocks(6, [(0, 6)]), _causal_with_blocks(6, [(1, 3)])])
    assert opened_future(open_beside) == {"future_blocks": ((2, 6), ())}          # (an open slice's leak stays one)
    assert opened_future(_causal_with_blocks(6, [])[None]) == {}                  # causal: nothing opened
    assert opened_future(_window(6, 1)[None]) == {}                               # a look-ahead: no block closes


def test_a_causal_mask_that_opens_a_later_key_across_a_hidden_one_skips_ahead():
    """transformers issue #38053 (reports11/gemma3_images_future): every image token opened to every other
    image's, ``is_image[:, :, None] & is_image[:, None, :]`` or-ed onto the causal mask, lets query 1 (the first
    image) see keys 4 and 5 (the second) while key 3 (text) stays hidden: ``skips_ahead``. No fact on eea3781."""
    is_image = torch.tensor([0, 1, 1, 0, 1, 1], dtype=torch.bool)
    hidden = ~(torch.ones(6, 6, dtype=torch.bool).tril() | (is_image[:, None] & is_image[None, :]))
    assert opened_future(hidden[None]) == {"skips_ahead": (2, 0, 1, 3, 5)}
    assert "future_blocks" not in hidden_side(hidden, (6, 6))
    q, k = torch.arange(6)[:, None], torch.arange(6)[None, :]
    far = (k > q) & (k <= q + 2)
    assert "skips_ahead" not in hidden_side(far, (6, 6))                          # (mask-keeps-far-future's own)


def test_the_images_seeing_later_images_are_a_warning_where_the_mask_goes_in():
    """reports11/gemma3_images_future at its DIMS: ``✓`` on eea3781; now one warning on the add of the mask,
    and its correct twin (one block per image) has none."""
    import importlib

    from tests.corpus.helpers import traced_build

    m = importlib.import_module("tests.corpus.reports11.gemma3_images_future")
    t = traced_build(m, "all-images-bidirectional", m.DIMS[0])
    assert [f"{d.severity} {d.kind} {d.message}" for d in t.diagnostics if d.severity in ("error", "warning")] == [
        "warning mask-skips-ahead add #17 puts a causal mask [B=2, 1, T=6, T=6] onto the scores [B=2, H=4, T=6, T=6] "
        "that lets query 1 see the later key 5 while key 3 between them, a token other queries see, stays hidden "
        "from it (4 such queries in all), along the keys (T) of one sequence: the keys a query may see ahead of it "
        "are no contiguous block. Opening every image token to every other image's (transformers issue #38053) "
        "reads later images so."]
    assert not [d for d in traced_build(m, "", m.DIMS[0]).diagnostics if d.severity in ("error", "warning")]


class _PrefixQueries(torch.nn.Module):
    """Queries the slice ``x[:, a:b]`` of the tokens, keys all of them (Perceiver AR's latents, the last tokens;
    or the first ones), and a causal mask ``ones(L, S).triu(offset)`` onto their scores."""

    def __init__(self, start, stop, offset):
        super().__init__()
        self.start, self.stop, self.offset = start, stop, offset
        self.q, self.kv, self.out = torch.nn.Linear(32, 32), torch.nn.Linear(32, 64), torch.nn.Linear(32, 32)

    def forward(self, x):
        B, T, D = x.shape
        q = self.q(x[:, self.start:self.stop]).view(B, -1, 4, 8).transpose(1, 2)
        k, v = (t.view(B, T, 4, 8).transpose(1, 2) for t in self.kv(x).chunk(2, dim=-1))
        scores = q @ k.transpose(-2, -1) / 8 ** 0.5
        scores = scores.masked_fill(torch.ones(scores.shape[-2:], dtype=torch.bool).triu(self.offset), -1e9)
        return self.out((scores.softmax(-1) @ v).transpose(1, 2).reshape(B, -1, D))


def _prefix_findings(start, stop, offset, dims="B=2 T=7 D=32 H=4"):
    import shapetrace

    torch.manual_seed(0)
    model, x = _PrefixQueries(start, stop, offset), torch.randn(2, 7, 32)
    with torch.no_grad(), shapetrace.trace(dims=dims) as t:
        model(x)
    return [f"{d.severity} {d.kind} {d.message}" for d in t.diagnostics if d.severity in ("error", "warning")], \
        t.report().verdict.line[0]


def test_a_causal_mask_from_the_first_key_on_queries_that_are_the_last_tokens_is_misaligned():
    """Queries ``T[4:7]`` (proven by the slice that made them) of the keys ``T``, masked ``triu(1)`` (query i
    beside key i): each query's own position and the 4 keys before it are hidden (lucidrains/perceiver-ar-pytorch's
    prefix mask without its ``j - i`` offset, tests/corpus/public23/perceiver_ar.py). ``✓`` with no finding on
    2fe0908 (branch r23's base); the bottom-right mask ``triu(S - L + 1)`` is the correct one: nothing."""
    assert _prefix_findings(4, 7, 1) == ([
        "error causal-mask-misaligned masked_fill #13 puts a causal mask [T[4:7]=3, T=7] onto the scores "
        "[B=2, H=4, T[4:7]=3, T=7] whose queries (T[4:7]) are positions 4..6 of its keys (T), but the mask is "
        "aligned otherwise: query i sees keys 0..i, where query i is key 4+i and should see keys 0..4+i (it hides "
        "each query's own position)."], "✗")
    assert _prefix_findings(4, 7, 5) == ([], "✓")


def test_a_bottom_right_mask_on_queries_that_are_the_first_tokens_shows_later_keys():
    """The other way round: queries ``T[0:3]`` masked bottom-right (``triu(S - L + 1)``, a cache's alignment)
    see keys after their own positions; ``triu(1)`` is theirs. Nothing was said on 2fe0908 either."""
    found, mark = _prefix_findings(0, 3, 5)
    assert mark == "✗" and [f.split(" masked_fill")[0] for f in found] == ["error causal-mask-misaligned"]
    assert found[0].endswith("whose queries (T[0:3]) are positions 0..2 of its keys (T), but the mask is aligned "
                             "otherwise: query i sees keys 0..4+i, where query i is key 0+i and should see keys "
                             "0..0+i (it shows keys after each query).")
    assert _prefix_findings(0, 3, 1) == ([], "✓")


def _strided_keep(n: int, stride: int, swapped: bool = False) -> torch.Tensor:
    """openai/sparse_attention ``get_attn_mask(n, 'strided', stride)``: ``q = z + x``, ``k = z + y`` (``x`` the
    column of positions, ``y`` its row), keep ``(q >= k) & ((q - k) % stride == 0)``; ``swapped``: the grids the
    other way round (tests/corpus/public25/sparse_strided.py's bug)."""
    x = torch.arange(n)[:, None]
    q, k = (x.T.expand(n, n), x.expand(n, n)) if swapped else (x.expand(n, n), x.T.expand(n, n))
    return (q >= k) & ((q - k) % stride == 0)


def test_a_pattern_that_hides_the_whole_past_and_keeps_a_later_key_is_a_mirrored_causal_mask():
    """A strided causal mask built with its position grids swapped hides every earlier key and keeps some later
    ones; hidden_side read it as ``"other"`` with no fact on d58f65e (branch r25's base) and the trace was ``✓``
    (round_outcome; the CLI's dependency contracts caught it as a leak only where they are measured). The exact
    reversed triangle stays ``hides_side == "past"``; causal, strided, windowed and bidirectional masks: nothing."""
    assert whole_past_hidden(_keep_to_hidden(_strided_keep(6, 2, swapped=True))[None]) == \
        {"whole_past_hidden": (0, 0, 2)}
    assert hidden_side(_keep_to_hidden(_strided_keep(6, 2, swapped=True)), (6, 6)) == \
        {"hides_side": "other", "whole_past_hidden": (0, 0, 2)}
    i, j = torch.arange(6)[:, None], torch.arange(6)[None, :]
    assert whole_past_hidden(_keep_to_hidden((j >= i) & (j < i + 3))[None]) == {"whole_past_hidden": (0, 0, 1)}
    assert hidden_side(_keep_to_hidden(j >= i), (6, 6)) == {"hides_side": "past"}
    for keep in (_strided_keep(6, 2), j <= i, (j <= i) & (j > i - 3), (j - i).abs() <= 2, j > i - 3,
                 torch.ones(6, 6, dtype=torch.bool), torch.eye(6, dtype=torch.bool)):
        assert whole_past_hidden(_keep_to_hidden(keep)[None]) == {}
        assert "whole_past_hidden" not in hidden_side(_keep_to_hidden(keep), (6, 6))


def _mirrored(dims: str) -> list[str]:
    """The finding on sparse_strided's ``strided-rows-columns-swapped`` at ``dims``."""
    T = dims.split("T=")[1].split()[0]
    return [
        f"error causal-mask-reversed mul #34 puts a mask [1, 1, T={T}, T={T}] onto the scores [B={dims[2]}, H=4, "
        f"T={T}, T={T}] that hides every key before each query and lets query 0 see the later key 2, along the keys "
        "(T) of one sequence: a causal pattern mirrored (its query and key positions swapped), so each token "
        "attends to the future and never to the past."]


@pytest.mark.parametrize("dims", ["B=2 T=6 D=32 H=4", "B=4 T=4 D=32 H=4"])
def test_the_mirrored_strided_mask_is_a_reversed_causal_mask_where_it_goes_in(dims):
    """tests/corpus/public25/sparse_strided.py ``strided-rows-columns-swapped``: ``✓`` on d58f65e at distinct sizes
    (``?`` at equal ones), now ``✗`` at both, on the ``mul`` that puts the 0/1 mask onto the scores; the correct
    file's masks (a causal band, the strided pattern) say nothing. At B = T = H the message goes on (the names
    rest on reading the input as [B, T, D]): its opening is compared."""
    from tests.corpus.helpers import traced_build, verdict_line
    from tests.corpus.public25 import sparse_strided

    t = traced_build(sparse_strided, "strided-rows-columns-swapped", dims)
    expected = _mirrored(dims)
    found = [f"{d.severity} {d.kind} {d.message}" for d in t.diagnostics if d.severity == "error"]
    assert [f[:len(want)] for f, want in zip(found, expected, strict=True)] == expected
    assert verdict_line(t).startswith("✗ 1 error")
    assert not [d for d in traced_build(sparse_strided, "", dims).diagnostics if d.kind == "causal-mask-reversed"]


def _class_token_mask(valid: torch.Tensor, cls_row: bool) -> torch.Tensor:
    """CellFlow's ``TokenAttentionPooling`` mask, True where hidden: ones for ``{CLS, *set}``, the set's block
    from ``valid & valid``, and (the fix) the class token's row and column from ``valid``."""
    b, n = valid.shape
    keep = torch.ones(b, n + 1, n + 1, dtype=torch.bool)
    keep[:, 1:, 1:] = valid[:, :, None] & valid[:, None, :]
    if cls_row:
        keep[:, 0, 1:], keep[:, 1:, 0] = valid, valid
    return ~keep


def test_a_padded_key_shown_to_a_real_query_is_padding_seen():
    """theislab/CellFlow issue #226: the class token's row left all ones shows the second set's two pads (keys 5
    and 6) to the class token (query 0), which sees its own key; those keys hide from their own queries in slice 1
    and see themselves in slice 0, so they are padding. The fixed mask shows them to no query. On 578ee9f no
    fact was read (``hides_side: other`` and ``hides_own_key``), and the file was ``✓``."""
    valid = torch.tensor([[1, 1, 1, 1, 1, 1], [1, 1, 1, 1, 0, 0]]).bool()
    assert padding_seen(_class_token_mask(valid, cls_row=False)) == {"padding_seen": (1, 0, 5)}
    assert hidden_side(_class_token_mask(valid, cls_row=False)[:, None], (2, 4, 7, 7))["padding_seen"] == (1, 0, 5)
    assert padding_seen(_class_token_mask(valid, cls_row=True)) == {}


@pytest.mark.parametrize("hidden", [
    torch.stack([torch.zeros(6, 6), torch.zeros(6, 6).index_fill(1, torch.tensor([4, 5]), 1)]).bool(),   # key pads
    torch.stack([torch.zeros(6, 6), torch.zeros(6, 6).index_fill(1, torch.tensor([4, 5]), 1).index_fill(
        0, torch.tensor([4, 5]), 0)]).bool(),                        # pads' rows opened onto every key (SDPA's unmask)
    torch.ones(2, 6, 6).tril(-1).bool() | torch.eye(6, dtype=torch.bool),   # each token kept from itself (XLNet's)
    torch.stack([torch.zeros(6, 6), (torch.block_diag(torch.ones(3, 3), torch.ones(3, 3)) == 0).float()]).bool(),
])
def test_masks_that_show_no_padded_key_to_a_real_query(hidden):
    """Key padding alone (the pads' own rows see the real keys: they hide their own key, but no real query sees
    it); the pads' rows opened onto every key (each sees itself: no padded key); a mask that keeps every token
    from itself in every slice (not padding); one entry packed with two sequences (every token sees itself)."""
    assert padding_seen(hidden) == {}


class _Banded(torch.nn.Module):
    """One head of a causal sliding-window attention (the Mistral/Mixtral eager form): a key is hidden where it
    is in the future or ``q_idx - kv_idx >= sliding_window`` (``>`` for ``>=`` with ``wider``: one key more)."""

    def __init__(self, sliding_window: int | None = 3, wider: bool = False):
        super().__init__()
        if sliding_window is not None:
            self.sliding_window = sliding_window
        self.width, self.wider = sliding_window or 3, wider

    def forward(self, q, k):                                                  # (B, T, d)
        T = q.shape[1]
        q_idx, kv_idx = torch.arange(T)[:, None], torch.arange(T)[None, :]
        far = (q_idx - kv_idx) > self.width if self.wider else (q_idx - kv_idx) >= self.width
        hidden = (kv_idx > q_idx) | far
        scores = q @ k.transpose(1, 2) + torch.zeros(T, T).masked_fill(hidden, float("-inf"))   # (B, T, T)
        return scores.softmax(dim=-1)


def _window_notes(model):
    import shapetrace
    torch.manual_seed(0)
    q, k = torch.randn(2, 6, 8), torch.randn(2, 6, 8)
    with torch.no_grad(), shapetrace.trace(dims="B=2 T=6 d_k=8") as t:
        model(q, k)
    return t.report().verdict.line[0], [d.message for d in t.diagnostics if d.kind == "window-width-unchecked"]


@pytest.mark.parametrize(("model", "mark", "notes"), [
    (_Banded(3), "✓", []),
    (_Banded(3, wider=True), "?", [
        "masked_fill #4 applies a causal sliding window of 4 keys per query (read on the mask's values), and no "
        "window the model holds is 4 (sliding_window = 3): which width the model meant is a number of its "
        "configuration, so the width is not checked."]),
    (_Banded(None), "?", [
        "masked_fill #4 applies a causal sliding window of 3 keys per query (read on the mask's values), and no "
        "module of the model holds a window width (an attribute such as sliding_window): which width the model "
        "meant is a number of its configuration, so the width is not checked."]),
])
def test_a_sliding_windows_width_is_checked_against_the_window_the_model_holds(model, mark, notes):
    """tests/corpus/public26/mixtral.py ``window-off-by-one`` (``>`` for ``>=``: 4 keys per query under
    ``sliding_window = 3``) was ``✓`` on b2f62da: :func:`.rules.directions.window_widths` reads the band's width
    on the mask's values and the window the module holds; where none is that width, the note keeps the ``✓``."""
    assert _window_notes(model) == (mark, notes)


class _LookAhead(torch.nn.Module):
    """One head of Moonshine Streaming's encoder attention (huggingface/transformers PR #47010): keys seen where
    ``0 <= q_idx - kv_idx < left`` or ``0 < kv_idx - q_idx <= right`` (``< right`` with ``strict``: the
    reported slip, one key fewer after each query), and the padded keys of the second sequence hidden too."""

    def __init__(self, left: int = 4, right: int = 2, strict: bool = False, held: int | None = None):
        super().__init__()
        self.left, self.right, self.strict = left, right, strict
        if held is not None:
            self.window_size = held

    def forward(self, q, k):                                                  # (B, T, d)
        T = q.shape[1]
        dist = torch.arange(T)[:, None] - torch.arange(T)[None, :]           # (T, T): query minus key
        ahead = (-dist < self.right) if self.strict else (-dist <= self.right)
        band = ((dist >= 0) & (dist < self.left)) | ((dist < 0) & ahead)      # (T, T): seen
        real = torch.arange(T)[None, :] < torch.tensor([T, T - 2])[:, None]   # (B, T): the second padded
        seen = band[None] & real[:, None, :]                                  # (B, T, T)
        scores = (q @ k.transpose(1, 2)).masked_fill(~seen, float("-inf"))    # (B, T, T)
        return scores.softmax(dim=-1)


@pytest.mark.parametrize(("model", "mark", "notes"), [
    (_LookAhead(), "?", [
        "masked_fill #8 applies a sliding window of 4 keys up to each query and 2 after it (read on the mask's "
        "values), and no module of the model holds a window width (an attribute such as sliding_window): which "
        "width the model meant is a number of its configuration, so the width is not checked."]),
    (_LookAhead(strict=True), "?", [
        "masked_fill #8 applies a sliding window of 4 keys up to each query and 1 after it (read on the mask's "
        "values), and no module of the model holds a window width (an attribute such as sliding_window): which "
        "width the model meant is a number of its configuration, so the width is not checked."]),
    (_LookAhead(strict=True, held=2), "?", [
        "masked_fill #8 applies a sliding window of 4 keys up to each query and 1 after it (read on the mask's "
        "values), and no window the model holds is 1 or 4 (window_size = 2): which width the model meant is a "
        "number of its configuration, so the width is not checked."]),
])
def test_a_window_that_looks_ahead_has_both_widths_read_and_never_a_check_mark(model, mark, notes):
    """tests/corpus/reports35/moonshine_streaming_right_window.py ``right-window-strict`` (one future frame short)
    was ``✓`` on c9a177d, as its correct file: a band with keys after each query was read as no window at all
    (:func:`.directions.causal_window` reads causal ones only). :func:`.directions.band_window` reads both widths,
    padding set aside, and :func:`.rules.directions.window_widths` says neither is checked where no window the
    model holds is each of them."""
    assert _window_notes(model) == (mark, notes)


def _where_full_like(keep: torch.Tensor, fill_value: float):
    """An attention whose mask is ``torch.where(keep, scores, torch.full_like(scores, fill_value))`` (keras-hub's
    traceable ``dot_product_attention``, tests/corpus/reports27/kerashub_mask_batch_on_heads.py), traced."""
    import shapetrace

    B, H, T, d = 2, 4, 6, 8
    q = torch.randn(B, H, T, d)
    with shapetrace.trace(dims=f"B={B} T={T} D={H * d} H={H}") as t:
        shapetrace.name(q, "B H T d_k")
        scores = q @ q.transpose(-1, -2)
        scores = torch.where(keep, scores, torch.full_like(scores, fill_value))
        torch.softmax(scores, dim=-1) @ q
    return t


def test_a_where_whose_fill_is_a_tensor_of_one_large_negative_has_its_direction_read():
    """A fill made by ``full_like(scores, finfo.min)`` is read as its one value, as a number fill is: the keys it
    lands on are hidden and which side they lie on is read. On 5774b39 (main before round 27) the direction was
    not read (``direction-unchecked``), so a reversed causal mask written this way was ``?``, not ``✗``."""
    tril = torch.tril(torch.ones(6, 6, dtype=torch.bool))
    low = torch.finfo(torch.float32).min
    reversed_ = _where_full_like(~tril | torch.eye(6, dtype=torch.bool), low)
    assert [d.kind for d in reversed_.diagnostics if d.severity == "error"] == ["causal-mask-reversed"]
    correct = _where_full_like(tril, low)
    assert [d.kind for d in correct.diagnostics] == []
