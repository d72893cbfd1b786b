"""A table cut and added to a named tensor takes the names broadcasting lines up (shapetrace/engine/infer/lined_up.py).

The Annotated Transformer's ``PositionalEncoding`` (harvardnlp/annotated-transformer: ``x + self.pe[:, :x.size(1)]``,
``pe`` of ``(1, max_len, d_model)``) and the PyTorch tutorial's sequence-first one (pytorch/tutorials,
``transformer_tutorial``: ``x + self.pe[:x.size(0)]``, ``pe`` of ``(max_len, 1, d_model)``): on bebe57e the cut's
feature axis had no name, so every model with either was ``? ... not checked (unnamed axes): __getitem__``. The
axis meets the input's ``D`` (torch lines trailing axes up, and one of more than one entry must equal the one it
meets): it holds one value per feature. An axis of one entry is broadcast and stays unnamed; the buffer itself
keeps no name (rules/batch_tables reads that a table with no name was cut to the batch)."""

from __future__ import annotations

import torch

import shapetrace


def _cut(x_names: str, x: torch.Tensor, pe: torch.Tensor, cut):
    with torch.no_grad(), shapetrace.trace(dims="B=2 T=6 D=32 H=4") as t:
        shapetrace.name(x, x_names)
        x + cut(x, pe)
    (event,) = [e for e in t.events if e.op == "__getitem__"]
    return t, event


def test_the_annotated_transformers_positional_encoding_cut_is_named_and_checked():
    t, cut = _cut("B T D", torch.randn(2, 6, 32), torch.randn(1, 50, 32), lambda x, pe: pe[:, :x.size(1)])
    assert cut.inputs[0].dims == (None, None, None)          # the buffer: no name of its own
    assert cut.outputs[0].dims == (None, "T", "D")           # (1: broadcast over the batch, no name)
    assert t.report().verdict.mark == "✓"


def test_the_tutorials_sequence_first_cut_is_named_and_checked():
    t, cut = _cut("T B D", torch.randn(6, 2, 32), torch.randn(50, 1, 32), lambda x, pe: pe[:x.size(0)])
    assert cut.outputs[0].dims == ("T", None, "D")
    assert t.report().verdict.mark == "✓"


def test_an_axis_no_named_axis_meets_stays_unnamed():
    """The table's feature axis meets an axis of one entry (a per-sequence scalar): nothing lines it up with a
    name, so it keeps none (and the op stays not checked)."""
    t, cut = _cut("B T _", torch.randn(2, 6, 1), torch.randn(1, 50, 32), lambda x, pe: pe[:, :x.size(1)])
    assert cut.outputs[0].dims == (None, "T", None)
    assert t.report().verdict.mark == "?"


def test_a_mix_a_wrong_view_made_is_never_lined_up_onto_a_table():
    """OneFormer's memory (transformers, ``OneFormerPixelDecoderEncoderOnly``: a level's features ``[B, D, Hp, Wp]``
    flattened to tokens, plus ``level_embed.weight[None, 0]``) viewed ``[B, Hp*Wp, D]`` without the permute (round
    30's ``memory-view-without-permute``): the view's axes are a mix of d_k, Hp and Wp pieces, and the table cut
    added to it holds one value per feature, no such mix. Only the view is reported; the cut keeps no name (on
    54edde7 it was named ``!d_k·Hp·Wp`` and reported as a second mixed-axis)."""
    level_embed = torch.randn(3, 32)
    x = torch.randn(2, 32, 3, 5)
    with torch.no_grad(), shapetrace.trace(dims="B=2 D=32 H=4 Hp=3 Wp=5") as t:
        shapetrace.name(x, "B D Hp Wp")
        x.view(2, 15, 32) + level_embed[None, 0]                                  # (B, Hp*Wp, D) wrongly
    assert [(d.kind, t.events[d.event].op) for d in t.diagnostics if d.severity == "error"] == [("mixed-axis", "view")]
    (cut,) = [e for e in t.events if e.op == "__getitem__"]
    assert cut.outputs[0].dims == (None, None)


class _Sinusoidal(torch.nn.Module):
    """Marian's and XGLM's sinusoidal positions (transformers, ``MarianSinusoidalPositionalEmbedding``): the table
    joined from its sine and cosine halves, ``cat([sin, cos], -1)``, in the constructor."""

    def __init__(self, dim, n_pos=50):
        super().__init__()
        position = torch.arange(n_pos, dtype=torch.float)[:, None]
        div = torch.exp(torch.arange(0, dim, 2, dtype=torch.float) * -(9.2 / dim))
        self.register_buffer("pos", torch.cat([torch.sin(position * div), torch.cos(position * div)], -1))

    def forward(self, x):
        return x + self.pos[:x.size(1)]


def test_a_table_the_constructor_joined_inside_the_trace_is_cut_and_named_as_a_buffer():
    """tests/corpus/public32/marian_cross under the CLI (``shapetrace trace FILE``: the model is built inside the
    trace): the table's ``cat`` ran as setup, so on 649cee7 the table counted as made by the traced code, its cut
    ``pos[:T]`` stayed ``[T, 32]`` and the file was ``? checked 43 of 44 ... not checked (unnamed axes): #5
    __getitem__``, where the same model built before the trace was ✓. A tensor the constructor made is the model's
    buffer to its forward: the cut's features meet the input's ``D``, as above."""
    x = torch.randn(2, 6, 32)
    with torch.no_grad(), shapetrace.trace(dims="B=2 T=6 D=32 H=4") as t:
        model = _Sinusoidal(32)
        shapetrace.name(x, "B T D")
        model(x)
    (cut,) = [e for e in t.events if e.op == "__getitem__" and e.index not in t.setup_indices()]
    assert cut.outputs[0].dims == ("T", "D")
    assert t.report().verdict.mark == "✓"


def test_a_table_the_forward_joined_stays_unnamed():
    """The same table joined in the forward (not the constructor) is the traced code's own tensor, not a buffer:
    what it holds, no use says, so its cut keeps no name on its features (only the table's cut is lined up)."""
    x = torch.randn(2, 6, 32)
    with torch.no_grad(), shapetrace.trace(dims="B=2 T=6 D=32 H=4") as t:
        shapetrace.name(x, "B T D")
        position = torch.arange(50, dtype=torch.float)[:, None]
        div = torch.exp(torch.arange(0, 32, 2, dtype=torch.float) * -(9.2 / 32))
        pos = torch.cat([torch.sin(position * div), torch.cos(position * div)], -1)
        x + pos[:6]
    (cut,) = [e for e in t.events if e.op == "__getitem__" and e.inputs[0].shape == (50, 32)]
    assert cut.outputs[0].dims[1] is None


class _Looked(torch.nn.Module):
    """CLIP's and SigLIP's vision embeddings (transformers, ``CLIPVisionEmbeddings``): a conv stem's patches plus
    ``self.position_embedding(self.position_ids)``, a parameter's rows looked up by a ``[1, N]`` buffer of
    positions read whole (no cut: the lookup's only operands are the model's own tensors)."""

    def __init__(self, wrong: bool = False):
        super().__init__()
        self.stem, self.table, self.wrong = torch.nn.Conv2d(3, 32, 4, 4), torch.nn.Embedding(16, 32), wrong
        self.register_buffer("position_ids", torch.arange(16)[None])

    def forward(self, pixels):                                                      # (B, 3, 16, 16)
        patches = self.stem(pixels)                                                 # (B, D, Hp, Wp)
        patches = patches.view(2, 16, 32) if self.wrong else patches.flatten(2).transpose(1, 2)   # (B, N, D)
        return patches + self.table(self.position_ids)                              # + (1, N, D)


def _looked(wrong: bool):
    torch.manual_seed(0)
    with torch.no_grad(), shapetrace.trace(dims="B=2 D=32 H=4") as t:
        _Looked(wrong)(torch.randn(2, 3, 16, 16))
    (lookup,) = [e for e in t.events if e.op == "embedding"]
    return t, lookup


def test_a_position_table_looked_up_by_a_whole_buffer_takes_the_patches_it_meets():
    """Fails on d04b913 (the lookup ``(None, None, 'D')`` and ``? ... not checked (unnamed axes): embedding``, as
    CLIP's and SigLIP's vision towers and Whisper were on first sight): the lookup's position axis meets the
    patches ``N`` (the conv's whole grid ``Hp·Wp``, in order), so it holds one vector per patch."""
    t, lookup = _looked(wrong=False)
    assert lookup.inputs[0].dims == (None, None)                                    # the buffer keeps no name
    assert lookup.outputs[0].dims == (None, "N", "D")
    assert t.report().verdict.mark == "✓"


def test_a_lookup_added_to_a_wrong_view_of_the_grid_stays_unnamed():
    """The stem's map viewed ``[B, N, D]`` without the transpose: the view's axes are mixes of ``D`` and the grid, no
    whole grid, so the lookup's position axis lined up with them keeps no name (its ``D`` is the embedding's own)
    and only the view is reported."""
    t, lookup = _looked(wrong=True)
    assert lookup.outputs[0].dims == (None, None, "D")
    assert [(d.kind, t.events[d.event].op) for d in t.diagnostics if d.severity == "error"] == [("mixed-axis", "view")]


class _RelativeKeys(torch.nn.Module):
    """NEZHA's key-side relative term (transformers v4.40, ``NezhaSelfAttention``): a buffer of one ``d_k`` vector
    per (query, key) distance, cut ``[:T, :T]`` and ``permute(0, 2, 1)``d, multiplied by the queries ``[T, B·H,
    d_k]``; the value-side term multiplies the probabilities ``[T, B·H, T]`` by another cut of it."""

    def __init__(self):
        super().__init__()
        self.register_buffer("table", torch.randn(16, 16, 8))

    def forward(self, q, probs):
        B, H, T, d = q.size()
        q = q.permute(2, 0, 1, 3).contiguous().view(T, B * H, d)                      # (T, B·H, d_k)
        probs = probs.permute(2, 0, 1, 3).contiguous().view(T, B * H, T)              # (T, B·H, T)
        keys = torch.matmul(q, self.table[:T, :T, :].permute(0, 2, 1))               # (T, B·H, T)
        values = torch.matmul(probs, self.table[:T, :T, :])                          # (T, B·H, d_k)
        return keys, values


def test_a_held_table_a_product_sums_against_a_named_axis_takes_that_name():
    """The buffer's depth meets the queries' ``d_k`` in the product's sum: each entry pairs with the same entry, one
    axis. On 69fb7a4 it had no name (NEZHA ``? ... not checked (unnamed axes): __getitem__, permute, matmul``); the
    walk pins the buffer, so the value-side cut is ``[T, T, d_k]`` too, and the value-side product ``[T, B·H, T] @
    [T, T, d_k]`` (one product per query position, rows ``B·H``) is no ``attends-over-wrong-axis``: its rows hold
    the batch (rules/diagnose.py ``_tokens_as_batch``; with the names and without that, correct NEZHA was ``✗``)."""
    model = _RelativeKeys()
    q, probs = torch.randn(2, 4, 6, 8), torch.softmax(torch.randn(2, 4, 6, 6), -1)
    with torch.no_grad(), shapetrace.trace(dims="B=2 T=6 D=32 H=4") as t:
        shapetrace.name(q, "B H T d_k")
        shapetrace.name(probs, "B H T T")
        model(q, probs)
    cuts = [e.outputs[0].dims for e in t.events if e.op == "__getitem__"]
    assert cuts == [("T", "T", "d_k"), ("T", "T", "d_k")]
    assert [e.outputs[0].dims for e in t.events if e.op == "matmul"] == [("T", "B*H", "T"), ("T", "B*H", "d_k")]
    assert [d.kind for d in t.diagnostics if d.severity in ("error", "warning")] == []
    assert t.report().verdict.mark == "✓"


def test_a_table_made_from_the_input_is_not_named_by_a_product():
    """Only a table a module holds: the same product with the right operand computed from the input (``q`` itself,
    cut and permuted) names nothing new from the sum."""
    q = torch.randn(6, 8, 8)
    with torch.no_grad(), shapetrace.trace(dims="B=2 T=6 D=32 H=4") as t:
        other = torch.randn(6, 8, 6) * 1.0
        torch.matmul(q, other)
    (product,) = [e for e in t.events if e.op == "matmul"]
    assert product.inputs[1].dims == (None, None, None)


class _LookedUp(torch.nn.Module):
    """XGLM's, M2M100's and Speech2Text's positions: a held float buffer's rows looked up by positions the forward
    computes, ``weights.index_select(0, positions.view(-1)).view(B, T, -1).detach()``, then added to the embeddings."""

    def __init__(self, swap: bool = False):
        super().__init__()
        self.register_buffer("weights", torch.randn(40, 32), persistent=False)
        self.swap = swap

    def forward(self, x):
        B, T, _ = x.shape
        positions = torch.arange(T).unsqueeze(0).expand(B, -1) + 2                   # (B, T)
        rows = self.weights.index_select(0, positions.reshape(-1))                   # (B·T, D)
        rows = rows.view(T, B, -1).transpose(0, 1) if self.swap else rows.view(B, T, -1)
        return x + rows.detach()


def test_a_held_tables_rows_looked_up_by_computed_positions_take_the_features_they_meet():
    """On eefe532 the lookup's column axis had no name (XGLM and M2M100 '? not checked: index_select, view');
    it meets the embeddings' D, so it is D back through the view to the lookup; the buffer keeps no name. The
    rows viewed (T, B) and transposed stay an error (their [B, T] read as [T, B]: broadcast-mismatch)."""
    x = torch.randn(2, 6, 32)
    for swap in (False, True):
        with torch.no_grad(), shapetrace.trace(dims="B=2 T=6 D=32") as t:
            shapetrace.name(x, "B T D")
            _LookedUp(swap)(x)
        rows = {e.op: e for e in t.events}
        if not swap:
            assert rows["index_select"].inputs[0].dims == (None, None)
            assert rows["index_select"].outputs[0].dims == ("B*T", "D")
            assert rows["view"].outputs[0].dims == ("B", "T", "D")
            assert t.report().verdict.mark == "✓"
        else:
            assert [d.kind for d in t.diagnostics if d.severity == "error"] == ["broadcast-mismatch"]


def test_a_lookup_that_meets_the_tokens_or_head_features_is_not_named_by_the_use():
    """Only a features axis is carried back onto a lookup: a table's rows added to per-head tensors ``[B, H, T,
    d_k]`` (a rotary cache's shape) keep their unnamed column, which other rules read on its values."""
    class Cache(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("table", torch.randn(40, 8), persistent=False)

        def forward(self, q):
            return q + self.table.index_select(0, torch.arange(q.shape[2]))          # (T, 8) on (B, H, T, d_k)

    q = torch.randn(2, 4, 6, 8)
    with torch.no_grad(), shapetrace.trace(dims="B=2 T=6 D=32 H=4") as t:
        shapetrace.name(q, "B H T d_k")
        Cache()(q)
    (lookup,) = [e for e in t.events if e.op == "index_select"]
    assert lookup.outputs[0].dims == ("T", None)
