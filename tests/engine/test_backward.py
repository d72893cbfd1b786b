"""The backward pass (:mod:`shapetrace.engine.backward`): every gradient checked against what torch itself
hands a hook on that tensor, its names against the forward's, and what autograd keeps against a count made
with ``saved_tensors_hooks`` on an untraced twin of the same run."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

import shapetrace
from shapetrace.attention.reference import ConfigurableAttention, MultiHeadAttention


# nanoGPT's CausalSelfAttention (karpathy/nanoGPT, model.py), its non-flash path, line for line; `kept`
# holds each intermediate so that a test can hook it
class CausalSelfAttention(nn.Module):
    def __init__(self, n_embd: int, n_head: int, block_size: int):
        super().__init__()
        self.c_attn = nn.Linear(n_embd, 3 * n_embd)
        self.c_proj = nn.Linear(n_embd, n_embd)
        self.n_head, self.n_embd = n_head, n_embd
        self.register_buffer("bias", torch.tril(torch.ones(block_size, block_size))
                             .view(1, 1, block_size, block_size))
        self.kept: list[torch.Tensor] = []

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)   # (B, nh, T, hs)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)   # (B, nh, T, hs)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)   # (B, nh, T, hs)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))   # (B, nh, T, T)
        att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
        att = F.softmax(att, dim=-1)
        y = att @ v                                                       # (B, nh, T, hs)
        y = y.transpose(1, 2).contiguous().view(B, T, C)                  # (B, T, C)
        self.kept += [q, k, v, att, y]
        return self.c_proj(y)


# nanoGPT's Block and a two-layer GPT from token ids (wte + wpe, ln_1/attn/ln_2/mlp, ln_f, tied lm_head)
class Block(nn.Module):
    def __init__(self, n_embd: int, n_head: int, block_size: int):
        super().__init__()
        self.ln_1, self.ln_2 = nn.LayerNorm(n_embd), nn.LayerNorm(n_embd)
        self.attn = CausalSelfAttention(n_embd, n_head, block_size)
        self.c_fc, self.c_proj = nn.Linear(n_embd, 4 * n_embd), nn.Linear(4 * n_embd, n_embd)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.c_proj(F.gelu(self.c_fc(self.ln_2(x))))


class GPT(nn.Module):
    def __init__(self, vocab: int = 50, n_embd: int = 16, n_head: int = 4, block_size: int = 8, layers: int = 2):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab, n_embd), nn.Embedding(block_size, n_embd)
        self.h = nn.ModuleList(Block(n_embd, n_head, block_size) for _ in range(layers))
        self.ln_f = nn.LayerNorm(n_embd)
        self.lm_head = nn.Linear(n_embd, vocab, bias=False)
        self.lm_head.weight = self.wte.weight

    def forward(self, idx):
        b, t = idx.size()
        pos = torch.arange(0, t, dtype=torch.long)
        x = self.wte(idx) + self.wpe(pos)
        for block in self.h:
            x = block(x)
        return self.lm_head(self.ln_f(x))


def _layout(g: torch.Tensor) -> tuple:
    """What torch says of a gradient; its bytes are the distinct elements of memory it reaches."""
    return tuple(g.shape), g.stride(), _reached_bytes(g), str(g.dtype).removeprefix("torch.")


def _reached_bytes(g: torch.Tensor) -> int:
    storage = torch.arange(g.storage_offset() + g.untyped_storage().nbytes() // g.element_size())
    reached = torch.as_strided(storage, g.shape, g.stride(), g.storage_offset()).unique()
    return reached.numel() * g.element_size()


def test_the_grad_of_the_sum_the_tool_runs_is_one_element_expanded_and_says_its_4_bytes():
    # the backward of out.sum() hands each output element the same 1: torch expands a scalar (stride 0)
    torch.manual_seed(0)
    model = CausalSelfAttention(16, 2, block_size=6)
    with shapetrace.trace("B=2 T=6 D=16 H=2", backward=True) as t:
        model(torch.randn(2, 6, 16))
    first = t.backward.rows[0].arrived[0]
    assert (first.shape, first.stride, first.nbytes) == ((2, 6, 16), (0, 0, 0), 4)


def _traced_with_hooks(model, dims, *inputs, names=()):
    """Trace ``model(*inputs)`` with its backward, a torch hook on each tensor it keeps in ``kept``;
    returns the trace and, for each kept tensor, (its event, its output position, what the hook saw)."""
    seen: dict[int, tuple] = {}
    with shapetrace.trace(dims, backward=True) as t:
        for x, n in zip(inputs, names):
            shapetrace.name(x, n)
        model(*inputs)
        for i, kept in enumerate(model.kept):
            kept.register_hook(lambda g, i=i: seen.__setitem__(i, _layout(g)))
    inference = t._inferred()
    places = [inference.made_by[t.capture.known_node(kept)] for kept in model.kept]
    return t, places, seen


@pytest.mark.parametrize(("B", "T", "C", "nh"), [(2, 6, 16, 2), (4, 4, 16, 4)], ids=["B2-T6-H2", "T=H=B=4"])
def test_every_grad_that_arrives_at_a_forward_tensor_is_the_one_torch_hands_its_hook(B, T, C, nh):
    torch.manual_seed(0)
    model = CausalSelfAttention(C, nh, block_size=T)
    t, places, seen = _traced_with_hooks(model, f"B={B} T={T} D={C} H={nh}", torch.randn(B, T, C))
    rows = {row.event: row for row in t.backward.rows}
    assert len(seen) == 5
    for i, (event, position) in enumerate(places):
        row = rows[event]
        grad = row.arrived[0] if len(row.arrived) == 1 else row.arrived[position]
        assert (grad.shape, grad.stride, grad.nbytes, grad.dtype) == seen[i], (i, t.events[event].op)
        assert grad.dims == t.events[event].outputs[position].dims   # the forward tensor's own names
    q_row, att_row = rows[places[0][0]], rows[places[3][0]]
    assert q_row.arrived[0].dims == ("B", "H", "T", "d_k")
    assert att_row.op == "softmax" and att_row.arrived[0].dims == ("B", "H", "T", "T")


def test_the_reference_runs_backward_in_autograd_order_each_row_tied_to_its_forward_op():
    torch.manual_seed(0)
    model, x = MultiHeadAttention(16, 2), torch.randn(2, 3, 16)
    with shapetrace.trace("B=2 T=3 D=16 H=2", backward=True) as t:
        shapetrace.name(x, "B T D")
        model(x)
    rows = [(r.event, r.op) for r in t.backward.rows]
    # the forward: 0-2 q, 3-5 k, 6-8 v, 9 k.transpose, 10 q @ k_t, 11 softmax, 12 @ v, 13-15 merge, 16 w_o
    assert rows == [(16, "linear"), (15, "view"), (14, "contiguous"), (13, "transpose"), (12, "matmul"),
                    (11, "softmax"), (None, "div"), (10, "matmul"), (9, "transpose"), (8, "transpose"),
                    (7, "view"), (6, "linear"), (5, "transpose"), (4, "view"), (3, "linear"), (2, "transpose"),
                    (1, "view"), (0, "linear")]
    scores = t.backward.rows[7]
    assert [(g.of, g.dims, g.memory) for g in scores.made] == [
        ("operand 0", ("B", "H", "T", "d_k"), "new"), ("operand 1", ("B", "H", "d_k", "T"), "new")]
    assert scores.sentence == "dY [B, H, T, T]; dA = dY · Bᵀ [B, H, T, d_k]; dB = Aᵀ · dY [B, H, d_k, T]"
    assert scores.nodes[:2] == ("UnsafeViewBackward0", "BmmBackward0")


def test_the_grad_of_a_transpose_is_a_transpose_of_the_incoming_grad_a_view():
    torch.manual_seed(0)
    model, x = MultiHeadAttention(16, 2), torch.randn(2, 3, 16)
    with shapetrace.trace("B=2 T=3 D=16 H=2", backward=True) as t:
        model(x)
    merge = next(r for r in t.backward.rows if r.event == 13)   # y.transpose(1, 2) in merge_heads
    incoming, sent = merge.arrived[0], merge.made[0]
    assert sent.memory == "view" and sent.nbytes == incoming.nbytes
    assert sent.shape == (2, 2, 3, 8) and sent.dims == ("B", "H", "T", "d_k")
    assert sent.stride == (incoming.stride[0], incoming.stride[2], incoming.stride[1], incoming.stride[3])
    assert merge.sentence == ("the grad of an axis reorder is the same reorder undone: [B, T, H, d_k] → "
                              "[B, H, T, d_k], a view (no data moves)")
    contiguous = next(r for r in t.backward.rows if r.event == 14)
    assert contiguous.made[0].memory == "same"   # a copy's grad is the incoming grad itself


def test_parameter_grads_are_their_dot_grad_named_by_the_linear_that_used_them():
    torch.manual_seed(0)
    model, x = MultiHeadAttention(16, 2), torch.randn(2, 3, 16)
    with shapetrace.trace("B=2 T=3 D=16 H=2", backward=True) as t:
        model(x)
    params = {p.of: p for p in t.backward.params}
    assert sorted(params) == sorted(f"{n}.grad" for n, _ in model.named_parameters())
    for name, p in model.named_parameters():
        got = params[f"{name}.grad"]
        assert (got.shape, got.stride, got.nbytes) == (tuple(p.grad.shape), p.grad.stride(),
                                                         p.grad.numel() * p.grad.element_size())
    assert params["w_q.weight.grad"].dims == ("D", "D") and params["w_o.bias.grad"].dims == ("D",)
    w_q = next(r for r in t.backward.rows if r.event == 0)
    assert w_q.sentence == ("dY [B, T, D]; dW = dYᵀ · x, summed over B, T: [D, D]; "
                            "db = dY summed over B, T: [D]")   # (x needs no grad: no dx)


def test_repeat_kv_grad_sums_over_n_rep():
    # grouped-query attention's repeat_kv (Llama, transformers' modeling_llama.repeat_kv: x[:, :, None]
    # .expand(B, H_kv, n_rep, T, d).reshape(B, H, T, d)): its grad sums the n_rep copies back
    torch.manual_seed(0)
    model, x = ConfigurableAttention(16, 4, kv_heads=2), torch.randn(2, 3, 16)
    with shapetrace.trace("B=2 T=3 D=16 H=4 H_kv=2", backward=True) as t:
        model(x)
    expands = [r for r in t.backward.rows if r.op == "expand"]
    assert len(expands) == 2
    for row in expands:
        assert row.arrived[0].dims == ("B", "H_kv", "n_rep", "T", "d_k")
        assert row.arrived[0].shape == (2, 2, 2, 3, 4)
        assert row.made[0].shape == (2, 2, 1, 3, 4) and row.made[0].memory == "new"
        assert row.sentence == ("the grad of an expand sums over the repeated axes: [B, H_kv, n_rep, T, d_k] → "
                                "[B, H_kv, 1, T, d_k], a new tensor")
    params = {p.of: p for p in t.backward.params}
    assert params["w_k.weight.grad"].dims == ("D_kv", "D") and params["w_k.weight.grad"].shape == (8, 16)


def test_cross_attention_grads_keep_queries_and_keys_apart():
    # the Annotated Transformer's decoder src-attn: queries from x, keys and values from the encoder memory
    torch.manual_seed(0)
    model = ConfigurableAttention(16, 4)
    x, memory = torch.randn(2, 3, 16), torch.randn(2, 5, 16, requires_grad=True)
    with shapetrace.trace("B=2 T_q=3 T_k=5 D=16 H=4", backward=True) as t:
        shapetrace.name(x, "B T_q D")
        shapetrace.name(memory, "B T_k D")
        model(x, memory)
    scores = next(r for r in t.backward.rows if r.op == "matmul" and r.arrived[0].shape == (2, 4, 3, 5))
    assert scores.arrived[0].dims == ("B", "H", "T_q", "T_k")
    assert [g.dims for g in scores.made] == [("B", "H", "T_q", "d_k"), ("B", "H", "d_k", "T_k")]
    w_k = next(r for r in t.backward.rows if r.event == 3)
    assert w_k.made[0].of == "operand 0" and w_k.made[0].dims == ("B", "T_k", "D")
    assert w_k.made[0].shape == tuple(memory.shape)


def _saved_by_torch(run) -> tuple[int, int]:
    """(tensors saved, bytes of their distinct storages), counted by saved_tensors_hooks on an untraced run."""
    storages: dict[int, int] = {}
    count = 0

    def pack(t):
        nonlocal count
        count += 1
        storages[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = run()
    del out
    return count, sum(storages.values())


def test_what_autograd_keeps_totals_what_saved_tensors_hooks_count_on_the_reference():
    torch.manual_seed(0)
    model, x = MultiHeadAttention(16, 2), torch.randn(2, 3, 16)
    count, total = _saved_by_torch(lambda: model(x))
    with shapetrace.trace("B=2 T=3 D=16 H=2", backward=True) as t:
        model(x)
    b = t.backward
    assert (len(b.saved), b.saved_bytes) == (count, total)
    assert b.weights_bytes == 2 * 2 * 3 * 3 * 4   # the [B, H, T, T] weights, kept once for two savers
    weights = [s for s in b.saved if s.weights]
    assert [(s.op, s.saver, s.shares_with is None) for s in weights] == [
        ("softmax", "SoftmaxBackward0", True), ("matmul", "BmmBackward0", False)]
    assert weights[0].dims == ("B", "H", "T", "T")


def test_what_autograd_keeps_totals_what_saved_tensors_hooks_count_on_a_small_gpt():
    torch.manual_seed(0)
    model, idx = GPT(), torch.randint(0, 50, (2, 8))
    count, total = _saved_by_torch(lambda: model(idx))
    with shapetrace.trace("B=2 T=8 D=16 H=4", backward=True) as t:
        model(idx)
    assert (len(t.backward.saved), t.backward.saved_bytes) == (count, total)
    assert t.backward.weights_bytes == 2 * (2 * 4 * 8 * 8 * 4)   # two layers' [B, H, T, T] weights
    params = {p.of for p in t.backward.params}
    assert "wte.weight.grad" in params and "h.1.attn.c_attn.weight.grad" in params


def test_gpt2_from_transformers_saved_totals_equal_torchs_count():
    transformers = pytest.importorskip("transformers", reason="transformers is not installed (optional)")
    config = transformers.GPT2Config(n_layer=2, n_head=4, n_embd=32, n_positions=16, vocab_size=64,
                                     attn_implementation="eager")
    torch.manual_seed(0)
    model, ids = transformers.GPT2LMHeadModel(config).eval(), torch.randint(0, 64, (2, 8))
    count, total = _saved_by_torch(lambda: model(ids).logits)
    with shapetrace.trace("B=2 T=8 D=32 H=4", backward=True) as t:
        logits = model(ids).logits
        logits.sum().backward()
    assert (len(t.backward.saved), t.backward.saved_bytes) == (count, total)
    assert t.backward.rows and all(p.shape for p in t.backward.params)


def test_a_backward_the_block_runs_itself_is_the_one_traced_and_none_runs_twice():
    torch.manual_seed(0)
    model, x = MultiHeadAttention(16, 2), torch.randn(2, 3, 16)
    model(x).pow(2).mean().backward()
    expected = model.w_q.weight.grad.clone()
    model.zero_grad()
    with shapetrace.trace("B=2 T=3 D=16 H=2", backward=True) as t:
        loss = model(x).pow(2).mean()
        loss.backward()
    assert torch.equal(model.w_q.weight.grad, expected)   # (a second backward would have doubled it)
    assert [(r.event, r.op) for r in t.backward.rows[:3]] == [(17, "mean"), (None, "pow"), (16, "linear")]


def test_a_checkpointed_block_runs_its_own_backward_traced_as_it_does_untraced():
    """transformers' gradient_checkpointing_enable wraps each block in torch.utils.checkpoint, non-reentrant
    (modeling_utils.py). Its own ``.backward()`` under trace(backward=True) raised CheckpointError ("Unpack is
    being triggered for a tensor that was already unpacked once"): tying each saved tensor to its node read the
    checkpoint's saved tensors once before the backward did. The twin without checkpoint is the test above."""
    from torch.utils.checkpoint import checkpoint

    torch.manual_seed(0)
    model, x = MultiHeadAttention(16, 2), torch.randn(2, 3, 16)
    counted: list[int] = []

    def count(t):
        counted.append(t.untyped_storage().nbytes())
        return t

    with torch.autograd.graph.saved_tensors_hooks(count, lambda t: t):
        loss = checkpoint(model, x, use_reentrant=False).pow(2).mean()
    loss.backward()
    expected = model.w_q.weight.grad.clone()
    model.zero_grad()
    with shapetrace.trace("B=2 T=3 D=16 H=2", backward=True) as t:
        loss = checkpoint(model, x, use_reentrant=False).pow(2).mean()
        loss.backward()
    assert torch.equal(model.w_q.weight.grad, expected) and (t.backward.note, t.backward.runs) == ("", 1)
    assert [(r.event, r.op) for r in t.backward.rows[:3]] == [(17, "mean"), (None, "pow"), (16, "linear")]
    assert [r.event for r in t.backward.rows][-1] == 0 and len(t.backward.rows) == 20
    # what autograd keeps: the checkpoint's input and pow's, as torch's own hooks count them (the block's
    # inner tensors are recomputed in the backward, not kept)
    assert [s.storage_bytes for s in t.backward.saved] == counted == [384, 384]


def test_no_backward_is_traced_unless_asked_and_none_runs_without_grad():
    model, x = MultiHeadAttention(16, 2), torch.randn(2, 3, 16)
    with shapetrace.trace("B=2 T=3 D=16 H=2") as plain:
        model(x)
    assert plain.backward is None and model.w_q.weight.grad is None
    with torch.no_grad(), shapetrace.trace("B=2 T=3 D=16 H=2", backward=True) as t:
        model(x)
    assert t.backward.rows == () and t.backward.note == "no backward ran: no traced result requires grad"
    assert t.backward.saved == ()


def test_the_backward_is_plain_data_for_json():
    model, x = MultiHeadAttention(16, 2), torch.randn(2, 3, 16)
    with shapetrace.trace("B=2 T=3 D=16 H=2", backward=True) as t:
        model(x)
    data = t.backward.to_dict()
    assert sorted(data) == ["activation_bytes", "alike", "note", "params", "rows", "runs", "saved", "saved_bytes",
                            "weights_bytes"]
    assert (data["runs"], data["alike"]) == (1, 1)
    assert data["rows"][0]["arrived"][0] == {"of": "output", "shape": [2, 3, 16], "stride": [0, 0, 0],
                                             "dims": ["B", "T", "D"], "dtype": "float32", "nbytes": 4,
                                             "memory": "incoming"}


@settings(max_examples=12, deadline=None)
@given(B=st.integers(1, 3), T=st.integers(1, 5), H=st.integers(1, 4), d_k=st.integers(1, 4))
def test_over_sizes_every_grad_has_its_forward_tensors_shape_and_names_and_the_saved_total_is_torchs(B, T, H, d_k):
    # equal sizes (T = H = B) come up as often as any: a name never follows from a size
    torch.manual_seed(0)
    model, x = MultiHeadAttention(H * d_k, H), torch.randn(B, T, H * d_k)
    count, total = _saved_by_torch(lambda: model(x))
    with shapetrace.trace(f"B={B} T={T} D={H * d_k} H={H}", backward=True) as t:
        shapetrace.name(x, "B T D")
        model(x)
    events = t.events
    for row in t.backward.rows:
        if row.event is None:
            continue
        out = events[row.event].output
        assert (row.arrived[0].shape, row.arrived[0].dims) == (out.shape, out.dims)
        for grad in row.made:
            if grad.of.startswith("operand "):
                source = events[row.event].inputs[int(grad.of.split()[1])]
                assert (grad.shape, grad.dims) == (source.shape, source.dims)
    assert (len(t.backward.saved), t.backward.saved_bytes) == (count, total)
    assert {p.of: p.shape for p in t.backward.params} == {f"{n}.grad": tuple(p.shape)
                                                          for n, p in model.named_parameters()}


# Transformer-XL's memory bug, as lesson 13 shows it (kimiyoung/transformer-xl, mem_transformer.py updates its
# memory under torch.no_grad() for this reason): a key cache kept from step 1, whose graph step 1's backward freed
def _two_steps_through_a_kept_cache(detach: bool) -> tuple:
    torch.manual_seed(0)
    w_k = nn.Linear(4, 4)
    with pytest.raises(RuntimeError) if not detach else _nothing(), \
            shapetrace.trace("B=1 T=2 D=4", backward=True) as t:
        cache = w_k(torch.randn(1, 2, 4))                        # (B, T, D): step 1's keys
        cache.sum().backward()                                   # step 1 trains
        if detach:
            cache = cache.detach()
        keys = torch.cat([cache, w_k(torch.randn(1, 1, 4))], dim=1)   # (B, T+1, D)
        keys.sum().backward()                                    # raises without the detach: step 1 is freed
    return t.backward


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def test_a_block_that_raises_after_its_own_backward_keeps_that_backward_and_says_so():
    b = _two_steps_through_a_kept_cache(detach=False)
    assert b.note == "the traced block raised after its backward ran: the rows are that backward's"
    assert [(r.event, r.op) for r in b.rows] == [(1, "sum"), (0, "linear")]
    assert [(s.event, s.op, s.saver, s.storage_bytes) for s in b.saved] == [(0, "linear", "AddmmBackward0", 32)]
    # the twin that detaches the cache runs both steps, and says nothing
    twin = _two_steps_through_a_kept_cache(detach=True)
    assert (twin.note, twin.runs) == ("", 2)


def test_a_block_that_raises_before_any_backward_says_none_ran():
    w_k = nn.Linear(4, 4)
    with pytest.raises(ValueError), shapetrace.trace("B=1 T=2 D=4", backward=True) as t:
        w_k(torch.randn(1, 2, 4))
        raise ValueError("the script's own error, before its backward")
    assert (t.backward.rows, t.backward.note) == ((), "no backward ran: the traced block raised")


def test_a_two_d_product_of_queries_and_keys_is_one_matrix_with_no_batch_to_be_per():
    # lesson 13's head-backward by hand (one head, 2-D, as the CS231n-style exercise writes it): dp = dy @ vᵀ is
    # [T, T_k] like the scores; a 2-D matmul has no batch axes, so no "per ()"
    from shapetrace.engine.sentences import annotate

    torch.manual_seed(0)
    k, v, dy = torch.randn(5, 2), torch.randn(5, 2), torch.randn(4, 2)
    with shapetrace.trace("T=4 T_k=5 d_k=2") as t:
        shapetrace.name(k, "T_k d_k")
        shapetrace.name(v, "T_k d_k")
        shapetrace.name(dy, "T d_k")
        dp = dy @ v.transpose(-2, -1)                            # (T, T_k) = (T, d_k) @ (d_k, T_k)
    assert t.events[-1].output.dims == ("T", "T_k") and dp.shape == (4, 5)
    assert annotate(t.events[-1]) == ("scores: sums over d_k, giving one [T, T_k] matrix: row = query token, "
                                      "column = key token; new 80 B")
