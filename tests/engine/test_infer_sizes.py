"""engine/sizes.py and engine/infer/sizes.py: sizes read with ``x.size(i)`` carry that axis to what is built
from them. Each case fails on the engine before (noted per test); correct twins stay silent."""

import math
import pickle

import pytest
import torch
import torch.nn as nn

import shapetrace
from shapetrace.engine.sizes import SizeOf, SizeQuot, SizeSum


def kinds(t):
    return [d.kind for d in t.diagnostics if d.kind != "ambiguous-sizes"]


def test_a_size_read_while_tracing_is_an_int_that_remembers_its_axis():
    x = torch.randn(2, 6, 8)
    with shapetrace.trace(dims="B=2 T=6 D=8 H=2"):
        n = x.size(1)
        whole = x.size()
    assert type(n) is SizeOf and n == 6 and n.axis == 1 and repr(n) == "6"
    assert type(n * 2) is int and type(n - 1) is int and type(whole) is torch.Size
    assert type(n + 1) is SizeSum and (n + 1).terms == (n, 1) and type(n + 1 + 1) is int   # (past + T keeps both)
    third = n // 3   # (a fold's leading pieces, Bloom's batch_size_and_num_heads // num_heads)
    assert type(third) is SizeQuot and third == 2 and (third.of, third.by) == (n, 3) and type(third // 1) is int
    assert type(n // n) is int and type(n // 2.0) is float and pickle.loads(pickle.dumps(third)) == 2
    assert pickle.loads(pickle.dumps(n)) == 6 and type(pickle.loads(pickle.dumps(n))) is int
    assert type(x.size(1)) is int   # outside a trace: torch's own int


@pytest.mark.parametrize("read,bug", [(0, True), (1, False)])
def test_positions_from_the_batch_size_on_batch_first_input_are_a_finding(read, bug):
    """The seq-first habit ``pos = torch.arange(x.size(0))`` (PyTorch's word-language-model
    PositionalEncoding reads ``x.size(0)`` for tokens of a ``[T, B, D]`` input) applied to a batch-first
    ``[B, T, D]`` input, with a learned position table (GPT-2's ``wpe``): at B = T the positions count
    batch entries and torch broadcasts them onto the tokens. Before: no finding (``arange`` unnamed).
    The twin reads ``x.size(1)``: silent."""
    x = torch.randn(4, 4, 32)                                   # (B, T, D)
    wpe = nn.Embedding(16, 32)
    with shapetrace.trace(dims="B=4 T=4 D=32 H=4") as t:
        pos = torch.arange(x.size(read))                        # (B,) — or (T,) in the twin
        y = x + wpe(pos)                                        # (B, T, D) + (B, D) or (T, D)
    assert y.shape == (4, 4, 32)
    assert [e.output.dims for e in t.events if e.op == "embedding"] == [(("B", "T")[read], "D")]
    assert kinds(t) == (["broadcast-mismatch"] if bug else [])


def test_a_class_token_expanded_over_the_batch_is_named_batch():
    """timm's VisionTransformer: ``self.cls_token.expand(x.shape[0], -1, -1)`` (here with ``x.size(0)``,
    which carries its axis; ``x.shape[0]`` does not). Before: ``expand`` gave ``[None, None, None]``."""
    x = torch.randn(2, 6, 32)                                   # (B, N, D)
    cls_token = nn.Parameter(torch.zeros(1, 1, 32))             # (1, 1, D)
    with shapetrace.trace(dims="B=2 T=6 D=32 H=4") as t:
        cls = cls_token.expand(x.size(0), -1, -1)               # (B, 1, D)
        torch.cat((cls, x), dim=1)                              # (B, 1+T, D)
    assert [e.output.dims[0] for e in t.events if e.op == "expand"] == ["B"]


def test_a_causal_mask_built_from_token_counts_has_token_axes_at_equal_sizes():
    """nanoGPT-style ``torch.ones(T, T).tril()`` with ``T = x.size(1)``: ``[T, T]`` even where B = T = H,
    where sizes alone are ambiguous. Before: an ambiguous size guess."""
    x = torch.randn(4, 4, 16)
    with shapetrace.trace(dims="B=4 T=4 D=16 H=4") as t:
        T = x.size(1)
        torch.ones(T, T).tril()
    assert [e.output.dims for e in t.events if e.op == "tril"] == [("T", "T")]


def test_sizes_not_read_from_an_axis_name_nothing():
    """``arange(n + 1)``, ``arange(1, n)`` and a literal size carry no axis: unnamed, never guessed; beside a literal,
    a size read from an axis still names its own (``zeros(n, 3)`` is ``[T, 3]``: the 3 unnamed). Fails on 1ffa66a
    for ``zeros(n, 3)`` (both axes unnamed: a literal beside it cost the read size its name)."""
    x = torch.randn(2, 6, 8)
    with shapetrace.trace(dims="B=2 T=6 D=8 H=2") as t:
        n = x.size(1)
        a = torch.arange(n + 1)
        b = torch.arange(1, n)
        c = torch.zeros(n, 3)
        for made in (a, b, c):
            made.flip(0)
    assert [e.output.dims for e in t.events if e.op == "flip"] == [(None,), (None,), ("T", None)]


# -- whole shapes: x.shape, x.size() (torch.Size) carry their axes item by item -----------------------

def test_every_way_of_reading_a_shape_carries_its_axes():
    """``x.shape[i]``, ``x.shape[-1]``, ``B, T, C = x.size()`` (nanoGPT's CausalSelfAttention),
    ``B, T, C = x.shape``, ``*_, d = x.shape`` and ``x.size()[:-1] + (H, d)`` (HF ViTSelfAttention's
    ``transpose_for_scores``) carry the node and axis as ``x.size(i)`` does; arithmetic on them
    (``T * 2``) is a plain int, but a floor division by a plain int (``C // n_head``) keeps what it divides
    (:class:`SizeQuot`). Before: every one was a plain int (torch.Size)."""
    x = torch.randn(2, 6, 8)                                    # (B, T, C)
    with shapetrace.trace(dims="B=2 T=6 D=8 H=2"):
        reads = {"x.shape[1]": x.shape[1], "x.shape[-1]": x.shape[-1]}
        B, T, C = x.size()
        reads.update({"size() B": B, "size() T": T, "size() C": C})
        B, T, C = x.shape
        reads.update({"shape B": B, "shape T": T, "shape C": C})
        *_, d = x.shape
        reads["*_, d"] = d
        new_shape = x.size()[:-1] + (2, 4)                      # (B, T, H, d_k)
        node = x.size(0).node
        doubled, per_head = T * 2, C // 2
    assert {k: (type(v), v.node, v.axis, int(v)) for k, v in reads.items()} == {
        "x.shape[1]": (SizeOf, node, 1, 6), "x.shape[-1]": (SizeOf, node, 2, 8),
        "size() B": (SizeOf, node, 0, 2), "size() T": (SizeOf, node, 1, 6), "size() C": (SizeOf, node, 2, 8),
        "shape B": (SizeOf, node, 0, 2), "shape T": (SizeOf, node, 1, 6), "shape C": (SizeOf, node, 2, 8),
        "*_, d": (SizeOf, node, 2, 8)}
    assert type(new_shape) is torch.Size and new_shape == (2, 6, 2, 4)
    assert [(type(n), getattr(n, "axis", None)) for n in new_shape] == [(SizeOf, 0), (SizeOf, 1), (int, None),
                                                                       (int, None)]
    assert (type(doubled), doubled, type(per_head), per_head) == (int, 12, SizeQuot, 4)
    assert [type(n) for n in x.shape] == [int, int, int]        # outside a trace: torch's own ints


def test_a_shape_read_after_an_in_place_reshape_is_read_from_the_new_node():
    """``x.shape`` is made once per node; ``x.unsqueeze_(0)`` gives ``x`` a new node, so the next read has
    the new axes (``T`` is axis 2 of it), never the sizes of the node before. Before: plain ints."""
    x = torch.randn(2, 6)                                       # (B, T)
    with shapetrace.trace(dims="B=2 T=6 D=8 H=2"):
        before, again = x.shape, x.shape
        x.unsqueeze_(0)                                         # (1, B, T)
        after = x.shape
    assert again is before and before == (2, 6) and after == (1, 2, 6)
    assert [n.axis for n in after] == [0, 1, 2] and after[2].node != before[1].node


@pytest.mark.parametrize("sizes", [(2, 6), (4, 4)], ids=["B=2,N=6", "B=N=4"])
def test_a_class_token_expanded_to_x_shape_0_is_named_batch(sizes):
    """timm's VisionTransformer ``_pos_embed``: ``torch.cat([self.cls_token.expand(x.shape[0], -1, -1), x],
    dim=1)``. Before: the expand was ``[None, None, None]`` (``x.shape[0]`` carried nothing)."""
    B, N = sizes
    x = torch.randn(B, N, 32)                                   # (B, N, D)
    cls_token = nn.Parameter(torch.zeros(1, 1, 32))             # (1, 1, D)
    with shapetrace.trace(dims=f"B={B} T={N} D=32 H=4") as t:
        cls = cls_token.expand(x.shape[0], -1, -1)              # (B, 1, D)
        torch.cat((cls, x), dim=1)                              # (B, 1+N, D)
    assert [e.output.dims[0] for e in t.events if e.op == "expand"] == ["B"]
    assert kinds(t) == []


def test_a_class_token_expanded_to_the_token_count_is_a_join_mismatch_at_equal_sizes():
    """The wrong twin of timm's line at B = N: ``expand(x.shape[1], -1, -1)`` grows the class token to
    the token count, and ``cat`` joins it along dim 1 with a batch axis: one copy per token stands
    where batch entries belong. Shapes agree, so torch says nothing. Before: no finding."""
    x = torch.randn(4, 4, 32)                                   # (B, N, D), B = N
    cls_token = nn.Parameter(torch.zeros(1, 1, 32))             # (1, 1, D)
    with shapetrace.trace(dims="B=4 T=4 D=32 H=4") as t:
        cls = cls_token.expand(x.shape[1], -1, -1)              # (N, 1, D): not (B, 1, D)
        torch.cat((cls, x), dim=1)                              # (?, 1+N, D)
    assert [e.output.dims[0] for e in t.events if e.op == "expand"] == ["T"]
    assert kinds(t) == ["join-mismatch"]


@pytest.mark.parametrize("batch", [2, 4], ids=["B=2,N=16", "B=N=4"])
def test_hf_vit_embeddings_unpack_pixel_values_shape(batch):
    """HF ViTEmbeddings: ``batch_size, num_channels, height, width = pixel_values.shape`` then
    ``self.cls_token.expand(batch_size, -1, -1)``. Before: the expand was unnamed."""
    pixels = torch.randn(batch, 3, 16, 16)                      # (B, C, H_img, W_img)
    proj = nn.Conv2d(3, 32, 4 if batch == 2 else 8, stride=4 if batch == 2 else 8)
    cls_token = nn.Parameter(torch.zeros(1, 1, 32))             # (1, 1, D)
    with shapetrace.trace(dims=f"B={batch} D=32 H=4") as t:
        shapetrace.name(pixels, "B _ _ _")
        batch_size, num_channels, height, width = pixels.shape
        x = proj(pixels).flatten(2).transpose(1, 2)             # (B, N, D)
        cls = cls_token.expand(batch_size, -1, -1)              # (B, 1, D)
        torch.cat((cls, x), dim=1)                              # (B, 1+N, D)
    assert x.shape == (batch, 16 if batch == 2 else 4, 32)
    assert [e.output.dims[0] for e in t.events if e.op == "expand"] == ["B"]
    assert kinds(t) == []


@pytest.mark.parametrize("read,bug", [(0, True), (1, False)])
def test_positions_from_x_shape_0_on_batch_first_input_are_a_finding(read, bug):
    """Positions counted from ``x.shape[0]`` (the seq-first habit of PyTorch's word-language-model
    PositionalEncoding, ``x.size(0)`` for ``[T, B, D]``) on batch-first input, added through a learned
    table (GPT-2's ``wpe``) at B = T = 4: the batch entries get positions. Before: silent, since
    ``x.shape[0]`` carried nothing. The twin ``x.shape[1]`` (lucidrains' ``b, n, _ = x.shape``) stays
    silent."""
    x = torch.randn(4, 4, 32)                                   # (B, T, D)
    wpe = nn.Embedding(16, 32)
    with shapetrace.trace(dims="B=4 T=4 D=32 H=4") as t:
        pos = torch.arange(x.shape[read])                       # (B,) — or (T,) in the twin
        y = x + wpe(pos)                                        # (B, T, D) + (B, D) or (T, D)
    assert y.shape == (4, 4, 32)
    assert [e.output.dims for e in t.events if e.op == "embedding"] == [(("B", "T")[read], "D")]
    assert kinds(t) == (["broadcast-mismatch"] if bug else [])


@pytest.mark.parametrize("order,sizes", [("B, T", (4, 4)), ("T, B", (4, 4)), ("B, T", (2, 6))],
                         ids=["nanoGPT B=T", "seq-first B=T", "nanoGPT B=2,T=6"])
def test_a_causal_mask_from_unpacked_sizes_lines_up_only_when_unpacked_in_order(order, sizes):
    """nanoGPT's ``B, T, C = x.size()`` then a ``[T, T]`` causal mask; the wrong twin unpacks in the
    seq-first order of ``F.multi_head_attention_forward`` (``tgt_len, bsz, embed_dim = query.shape``) on
    batch-first input, so the mask counts batch entries: ``[B, B]`` put onto ``[B, H, T, T]`` scores, which
    at B = T no shape check sees. Before: ``[T, T]`` or an ambiguous guess in both, and no finding."""
    B_, T_ = sizes
    x = torch.randn(B_, T_, 32)                                 # (B, T, C)
    with shapetrace.trace(dims=f"B={B_} T={T_} D=32 H=4") as t:
        if order == "B, T":
            B, T, C = x.size()
        else:
            T, B, C = x.size()                                  # seq-first unpacking: T is the batch size
        q = x.view(B_, T_, 4, 8).transpose(1, 2)                # (B, H, T, d_k)
        att = q @ q.transpose(-2, -1)                           # (B, H, T, T)
        mask = torch.ones(T, T).tril()                          # (T, T), or (B, B)
        att.masked_fill(mask == 0, float("-inf")).softmax(-1)   # (B, H, T, T)
    wrong = order == "T, B"
    assert [e.output.dims for e in t.events if e.op == "tril"] == [("B", "B") if wrong else ("T", "T")]
    assert kinds(t) == (["broadcast-mismatch"] if wrong else [])


def test_token_type_ids_built_from_the_whole_shape_of_seq_first_ids():
    """HF BertModel: ``input_shape = input_ids.size()`` then ``token_type_ids = torch.zeros(input_shape,
    dtype=torch.long)``, here on seq-first ids ``[T, B]`` (PyTorch's word_language_model batches) at
    B = T: the zeros have the ids' axes, so the two embeddings add up silently. Before: the zeros were
    seeded from sizes as batch-first ``[B, T]`` and the sum was a false ``broadcast-mismatch``."""
    ids = torch.randint(0, 10, (4, 4))                          # (T, B)
    words, token_type = nn.Embedding(10, 32), nn.Embedding(2, 32)
    with shapetrace.trace(dims="B=4 T=4 D=32 H=4") as t:
        shapetrace.name(ids, "T B")
        input_shape = ids.size()
        token_type_ids = torch.zeros(input_shape, dtype=torch.long)   # (T, B)
        words(ids) + token_type(token_type_ids)                 # (T, B, D)
    assert [e.output.dims for e in t.events if e.op == "embedding"] == [("T", "B", "D")] * 2
    assert kinds(t) == []


# -- indices: positions followed through relative-position arithmetic into a bias table -----------------

def _relative_position_bucket(relative_position, num_buckets=32, max_distance=128):
    """HF transformers' ``T5Attention._relative_position_bucket`` (bidirectional), line for line."""
    num_buckets //= 2
    relative_buckets = (relative_position > 0).to(torch.long) * num_buckets
    relative_position = torch.abs(relative_position)
    max_exact = num_buckets // 2
    is_small = relative_position < max_exact
    relative_position_if_large = max_exact + (
        torch.log(relative_position.float() / max_exact) / math.log(max_distance / max_exact)
        * (num_buckets - max_exact)).to(torch.long)
    relative_position_if_large = torch.min(relative_position_if_large,
                                           torch.full_like(relative_position_if_large, num_buckets - 1))
    return relative_buckets + torch.where(is_small, relative_position, relative_position_if_large)


@pytest.mark.parametrize("sizes,wrong", [((2, 6), False), ((4, 4), False), ((4, 4), True)],
                         ids=["B=2,T=6", "B=T=4", "B=T=4 seq-first unpacking"])
def test_a_t5_relative_position_bias_indexed_by_positions_of_the_wrong_axis_is_a_finding(sizes, wrong):
    """HF T5Attention: ``batch_size, seq_length = hidden_states.shape[:2]``, then ``compute_bias``:
    ``context_position = arange(query_length)[:, None]``, ``memory_position = arange(key_length)[None, :]``,
    their difference bucketed (``_relative_position_bucket``), looked up in ``relative_attention_bias``,
    ``permute([2, 0, 1]).unsqueeze(0)`` and added onto the scores. The positions are followed through the
    arithmetic, the buckets and the table: the bias is ``[T, T]``. The wrong twin unpacks the shape
    seq-first (``seq_length, batch_size = ...``): its positions count batch entries, the bias is ``[B, B]``
    on ``[B, H, T, T]`` scores, which at B = T only names show. Before: the positions carried nothing and
    neither case said anything."""
    B_, T_ = sizes
    H, D = 4, 32
    x = torch.randn(B_, T_, D)                                  # (B, T, D)
    q_proj, k_proj = nn.Linear(D, D, bias=False), nn.Linear(D, D, bias=False)
    relative_attention_bias = nn.Embedding(32, H)
    with shapetrace.trace(dims=f"B={B_} T={T_} D={D} H={H}") as t:
        if wrong:
            seq_length, batch_size = x.shape[:2]                # seq-first unpacking of batch-first input
        else:
            batch_size, seq_length = x.shape[:2]
        q = q_proj(x).view(B_, -1, H, D // H).transpose(1, 2)   # (B, H, T, d_k)
        k = k_proj(x).view(B_, -1, H, D // H).transpose(1, 2)   # (B, H, T, d_k)
        scores = torch.matmul(q, k.transpose(3, 2))             # (B, H, T, T)
        context_position = torch.arange(seq_length, dtype=torch.long)[:, None]   # (T, 1)
        memory_position = torch.arange(seq_length, dtype=torch.long)[None, :]    # (1, T)
        relative_position = memory_position - context_position                   # (T, T)
        values = relative_attention_bias(_relative_position_bucket(relative_position))   # (T, T, H)
        position_bias = values.permute([2, 0, 1]).unsqueeze(0)  # (1, H, T, T)
        scores += position_bias                                 # (B, H, T, T)
        scores.float().softmax(dim=-1)                          # (B, H, T, T)
    tokens = ("B", "B") if wrong else ("T", "T")
    # the table's last axis meets the scores' heads: the heads, where no other axis of the scores has H entries
    heads = "H" if H not in sizes else None
    assert [e.output.dims for e in t.events if e.op == "embedding"] == [(*tokens, heads)]
    assert [e.output.dims[-2:] for e in t.events if e.op == "unsqueeze"] == [tokens]
    assert kinds(t) == (["broadcast-mismatch"] if wrong else [])


class _BertEmbeddings(nn.Module):
    """transformers' BertEmbeddings (5.x): buffered position ids sliced ``[:, cache_length : seq_length +
    cache_length]``, buffered token-type ids expanded and gathered at those positions, three embeddings."""

    def __init__(self, D: int, positions: int = 32):
        super().__init__()
        self.words, self.types, self.places = nn.Embedding(50, D), nn.Embedding(2, D), nn.Embedding(positions, D)
        self.register_buffer("position_ids", torch.arange(positions).expand((1, -1)), persistent=False)
        self.register_buffer("token_type_ids", torch.zeros(1, positions, dtype=torch.long), persistent=False)

    def forward(self, ids, cache_length: int = 0):
        batch_size, seq_length = ids.size()
        position_ids = self.position_ids[:, cache_length: seq_length + cache_length]          # (1, T)
        types = torch.gather(self.token_type_ids.expand(position_ids.shape[0], -1), dim=1,
                             index=position_ids)                                               # (1, T)
        types = types.expand(batch_size, seq_length)                                           # (B, T)
        return self.words(ids) + self.types(types) + self.places(position_ids)                 # (B, T, D)


def test_positions_counted_after_a_cache_length_and_a_table_gathered_at_them_are_the_tokens():
    """``[c : n + c]`` counts the ``n`` positions after ``c`` (as ``arange(c, c + n)`` does), whichever term
    comes first in the sum; a gather from an unnamed table at those positions is indexed as they are. On
    8110233 both were unnamed: ``? checked 1 of 7 ops ...; not checked (unnamed axes): #0 __getitem__, #1
    expand, #2 gather, #3 expand and 2 more`` (BERT, RoBERTa, ELECTRA on first sight). The table's own
    ``expand`` to its size (``[1, 32]`` to ``[1, 32]``) stays unnamed (nothing says what its 32 positions
    index) and, reading its operand as it lies, is not counted."""
    torch.manual_seed(0)
    model, ids = _BertEmbeddings(16).eval(), torch.randint(0, 50, (2, 6))
    with torch.no_grad(), shapetrace.trace(dims="B=2 T=6 D=16 H=2") as t:
        model(ids)
    assert [(e.op, e.outputs[0].dims) for e in t.events[:6]] == [
        ("__getitem__", (None, "T")), ("expand", (None, None)), ("gather", (None, "T")), ("expand", ("B", "T")),
        ("embedding", ("B", "T", "D")), ("embedding", ("B", "T", "D"))]
    # (the expand as it lies, and the expand of the buffer of zeros: neither counted)
    assert t.report().verdict.line.startswith("✓ checked all 5 ops")
    with torch.no_grad(), shapetrace.trace(dims="B=2 T=6 D=16 H=2") as t:
        model(ids, cache_length=3)
    assert t.events[0].outputs[0].dims == (None, "T")


def _streams_bias(x, ngram, width):
    """ProphetNet's ``ngram_attention_bias`` (tests/corpus/public29/prophetnet.py): a block per predicting stream,
    ``torch.ones((ngram, T, T))`` with ``T`` read from the input and ``ngram`` the config's count; and a buffer
    ``torch.zeros(B, T, width)`` whose last size is the config's width."""
    T = x.size(1)
    bias = torch.ones((ngram, T, T)).clone()
    return bias, torch.zeros(x.size(0), T, width).clone()


@pytest.mark.parametrize("B", [2, 3])
def test_a_literal_size_beside_read_ones_names_no_data_axis(B):
    """The stream count (2) is the code's own: at B = 2 it is not the batch, and the block is ``[2, T, T]`` as it is
    at B = 3: each size read from an axis names its own, the literal none (:func:`partly_read_axes`). A literal
    equal to ``D`` (a width, no data size) is seeded ``[B, T, D]`` as before. Fails on d3df833 at B = 2: the block
    was seeded ``[B, T, T]`` by its shape (the batch name from an equal size: ProphetNet's predicting streams read
    as the batch, and everything after them, ``1+B*T``); on 1ffa66a at both sizes: the block was all unnamed."""
    x = torch.randn(B, 6, 32)
    with torch.no_grad(), shapetrace.trace(dims=f"B={B} T=6 D=32 H=4") as t:
        shapetrace.name(x, "B T D")
        _streams_bias(x, 2, 32)
    clones = [e for e in t.events if e.op == "clone"]
    assert [e.outputs[0].dims for e in clones] == [(None, "T", "T"), ("B", "T", "D")]


def test_a_cut_of_a_merged_grid_to_the_token_count_names_nothing():
    """sglang issue #35345: a 1-D rope kernel reads M-RoPE's ``[3, T]`` ids as ``positions.reshape(-1)[:T]``.
    The first T entries of a merge of unnamed axes are its grid's first elements in memory order (one row of
    ``[3, T]``, or three ids of a third of the tokens of ``[T, 3]``), no count of positions along one axis: the
    cut stays unnamed. A cut of one unnamed axis to that size (a table's ``wpe[:T]``) is still T. Fails on
    eefe532 (the cut of the merge was named T)."""
    x = torch.randn(6, 8)
    grid = torch.arange(18).reshape(3, 6)
    table = torch.randn(64, 8)
    with shapetrace.trace(dims="T=6 D=8 H=2") as t:
        n = x.shape[0]
        grid.reshape(-1)[:n].flip(0)
        table[:n].flip(0)
    assert [e.output.dims for e in t.events if e.op == "flip"] == [(None,), ("T", None)]


@pytest.mark.parametrize("method", ["new_ones", "new_zeros", "new_full"])
def test_a_mask_made_by_a_tensor_method_from_read_sizes_has_their_axes(method):
    """Transformer-XL's ``torch.triu(word_emb.new_ones(qlen, klen), diagonal=1)``: ``x.new_ones(n, m)`` is
    ``torch.ones(n, m)`` with x's dtype and device, so sizes read from x's axes name it as they name
    ``torch.ones``'s. Before (5afe940): ``new_ones`` was an unknown op, its ``[T, T]`` unnamed, and the ``triu``
    and every op the mask met were not checked. The twin, ``torch.ones`` itself, was named already."""
    x = torch.randn(6, 2, 32)                                   # (T, B, D)
    with shapetrace.trace(dims="B=2 T=6 D=32 H=4") as t:
        qlen = x.size(0)
        made = getattr(x, method)
        ones = made((qlen, qlen), 1.0) if method == "new_full" else made(qlen, qlen)
        torch.triu(ones, diagonal=1)                            # (T, T)
        torch.triu(torch.ones(qlen, qlen), diagonal=1)          # (T, T): the twin
    assert [e.output.dims for e in t.events if e.op == "triu"] == [("T", "T")] * 2
    assert kinds(t) == []


def test_a_method_made_tensor_from_literal_sizes_names_nothing_by_its_sizes_alone():
    """``x.new_zeros(6, 6)`` with sizes written as literals carries no axis: like ``torch.zeros(6, 6)``
    it is a fresh tensor, never named from its tensor ``x``'s axes (that tensor gives only the dtype)."""
    x = torch.randn(2, 6, 32)                                   # (B, T, D)
    with shapetrace.trace(dims="B=2 T=6 D=32 H=4") as t:
        mask = x.new_zeros(3, 5)
        torch.triu(mask, diagonal=1)                            # (3, 5)
    assert [e.output.dims for e in t.events if e.op == "triu"] == [(None, None)]


def test_a_size_summed_from_two_reads_is_the_axis_their_join_makes():
    """wenet's second chunk: ``torch.ones(n_batch, 1, cache.size(2) + chunk_size)``, a mask over the cached frames
    and the chunk's (tests/corpus/public43/wenet_chunk_cache.py). On 0131a52 (main) the sum, no read of one axis,
    left the whole mask unnamed, its ``B`` too (``? checked 41 of 44``); now it is ``[B, 1, S+T]``, as
    ``cat([cache, x], 1)`` names the keys. A sum with a literal (``n + 1``) still names nothing."""
    x, cache = torch.randn(2, 3, 8), torch.randn(2, 5, 8)
    with shapetrace.trace(dims="B=2 T=3 S=5 D=8") as t:
        shapetrace.name(x, "B T D")
        shapetrace.name(cache, "B S D")
        torch.cat([cache, x], dim=1).sum(-1)
        torch.ones(x.size(0), 1, cache.size(1) + x.size(1)).flip(0)
        torch.ones(x.size(0), 1, cache.size(1) + 1).flip(0)
    assert [e.output.dims for e in t.events if e.op == "cat"] == [("B", "S+T", "D")]
    assert [e.output.dims[-1] for e in t.events if e.op == "flip"] == ["S+T", None]
    assert next(e for e in t.events if e.op == "flip").output.dims == ("B", None, "S+T")


@pytest.mark.parametrize("sizes", ["B=2 T=6 D=32 H=2", "B=2 T=9 D=64 H=4", "B=2 T=4 D=8 H=2"])
def test_a_features_axis_cut_to_the_token_count_takes_neither_name(sizes):
    """10-zin/Synthesizer's dense attention (tests/corpus/public19/synthesizer_dense.py): each token's weights over
    the keys are ``w2(relu(w1(x)))`` of width ``H * max_len``, viewed ``(B, T, H, max_len)`` and cut ``[..., :T]``.
    Where ``max_len = D / H`` the width equals ``D`` and its view reads as ``(H, d_k)``; the code then cuts that
    ``d_k`` to the token count and adds it to a ``(H, T, T)`` table: on e5fbbd5 (main) a false
    ``broadcast-mismatch`` (T against ``d_k[0:T]``) on correct code (the corpus sweep at other sizes found it at
    ``H = 2, D = 32`` and ``H = 4, D = 64``). A features axis cut to a count read from the tokens is read as
    positions by the code and as features by the names: it takes neither. A table's unnamed axis cut so
    (``wpe[:T]``) is still ``T``, and the real bug of the file (heads merged without the transpose) still ✗."""
    dims = dict(kv.split("=") for kv in sizes.split())
    B, T, D, H = (int(dims[k]) for k in "BTDH")
    max_len = D // H
    w2, value = nn.Linear(D, H * max_len), nn.Linear(D, D)
    table, wpe = nn.Parameter(torch.randn(H, max_len, max_len)), nn.Parameter(torch.randn(max_len, D))
    x = torch.randn(B, T, D)
    with torch.no_grad(), shapetrace.trace(dims=sizes) as t:
        n = x.shape[1]
        dense = w2(x).view(B, n, H, max_len)[..., :n].permute(0, 2, 1, 3)           # (B, H, T, ·)
        attn = 0.5 * dense.softmax(-1) + 0.5 * table[:, :n, :n].unsqueeze(0).softmax(-1)   # (B, H, T, T)
        v = value(x).view(B, n, H, D // H).transpose(1, 2)                        # (B, H, T, d_k)
        (attn @ v).transpose(1, 2).reshape(B, n, D)                               # (B, T, D)
        (x + wpe[:n]).flip(0)                                                     # (B, T, D)
    cut = next(e for e in t.events if e.op == "__getitem__")
    assert cut.output.dims == ("B", "T", "H", None)
    assert next(e for e in t.events if e.op == "flip").output.dims == ("B", "T", "D")
    assert [d.kind for d in t.diagnostics if d.severity in ("error", "warning")] == []


def test_a_join_that_holds_a_declared_sequence_keeps_its_parts_names():
    """Blaizzy/mlx-vlm's chunked prefill (tests/corpus/reports26/mlxvlm_chunked_mrope_positions.py, issue #1737)
    at T = 9, S = 10: the chunk's keys joined after a cache of one entry, ``cat([k_cache, k], 2)``, are ``1+T``
    by their parts, and 1 + 9 = 10 is the declared S. On 90abc24 the join was renamed ``S`` by that sum, so
    the scores read as queries of one sequence against keys of another and the chunk's shifted causal mask
    (``k_pos > q_pos`` from the cache's offset) got a false ``causal-mask-across-sequences`` (``!`` on correct
    code). A join whose parts name a declared sequence keeps them: T is its last part. A class token before
    the patches (``1+N``, DINO, ViT) is still the declared ``T`` (tests/engine/test_libraries.py)."""
    from tests.corpus.reports26 import mlxvlm_chunked_mrope_positions as module

    model, inputs = module.build("", B=2, T=9, D=32, H=4, S=10)
    with torch.no_grad(), shapetrace.trace(dims="B=2 T=9 D=32 H=4 S=10") as t:
        model(*inputs)
    keys = [e for e in t.events if e.op == "cat" and tuple(e.output.shape) == (2, 4, 10, 8)]
    assert [e.output.dims[2] for e in keys] == ["1+T", "1+T"]
    assert next(e for e in t.events if e.op == "softmax").output.dims == ("B", "H", "T", "1+T")
    assert [d.kind for d in t.diagnostics if d.severity in ("error", "warning")] == []


def test_a_bias_built_from_a_config_count_and_read_lengths_names_the_lengths():
    """Pix2Struct's ``Pix2StructTextAttention`` (transformers, ``compute_bias`` off; tests/corpus/public26)
    builds ``position_bias = torch.zeros((1, self.n_heads, seq_length, seq_length))`` with ``seq_length`` read from
    ``hidden_states.shape[:2]`` and the head count a config literal: no seed fits ``[1, 4, 6, 6]``, so each read
    length names its axis and the literal stays unnamed (``[1, 4, T, T]``), at B = 2 and at B = 3. Fails on 1ffa66a
    (every axis unnamed: the bias's rows were not known to be the queries)."""
    for B in (2, 3):
        x = torch.randn(B, 6, 32)
        with torch.no_grad(), shapetrace.trace(dims=f"B={B} T=6 D=32 H=4") as t:
            shapetrace.name(x, "B T D")
            batch_size, seq_length = x.shape[:2]
            torch.zeros((1, 4, seq_length, seq_length)).clone()   # (1, H, T, T)
        assert [e.outputs[0].dims for e in t.events if e.op == "clone"] == [(None, None, "T", "T")], B
