"""Language-model attention whose call takes more than the input, or keeps state between calls: the
dependency contracts (issue 33 item 5) must run the call as the traced code ran it.

* An attention mask or a cross-attention's memory is an argument with a batch axis of its own: the
  measuring batch is entry 0 of the input twice, so each of those arguments must be entry 0 twice too
  (before, entry 1's padding or memory read as a causal leak on correct code).
* A module that keeps a KV cache on ``self`` between calls: the check reruns the first call, so it must
  run on the state that call found, not on the cache the later decode steps left (before: "batch entries
  mix" on a correct decode loop).
* A padding mask put on the query axis and combined with a causal triangle (``pad & causal``): the
  combined mask varies along the keys, so only its parts show the bug (before: no finding at all).

Each correct file has a twin with a real bug that the values still catch. Sizes: distinct, T = H = B = 4,
and S = T for the cross-attention.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import shapetrace

D, H, H_KV = 32, 4, 2


def repeat_kv(hidden, n_rep):
    b, h_kv, t, d = hidden.shape                                               # (B, H_kv, T, d_k)
    hidden = hidden[:, :, None, :, :].expand(b, h_kv, n_rep, t, d)             # (B, H_kv, n_rep, T, d_k)
    return hidden.reshape(b, h_kv * n_rep, t, d)                               # (B, H, T, d_k)


class Qwen2Attention(nn.Module):
    """huggingface/transformers models/qwen2/modeling_qwen2.py (Qwen2Attention.forward) through
    integrations/sdpa_attention.py: q/k/v with bias, GQA by ``repeat_kv``, a 4-d boolean mask made of the
    causal triangle and the padding mask passed in. ``bug="triu"`` builds the triangle with ``triu`` (the
    future kept, the past hidden: "causal mask off by one / reversed" reports); ``bug="query"`` puts the
    padding on the query axis (``attention_mask[:, None, :, None]``, hyunwoongko/transformer PR #40)."""

    def __init__(self, bug=None):
        super().__init__()
        self.hd, self.bug = D // H, bug
        self.q_proj, self.k_proj = nn.Linear(D, D), nn.Linear(D, H_KV * self.hd)
        self.v_proj, self.o_proj = nn.Linear(D, H_KV * self.hd), nn.Linear(D, D, bias=False)

    def forward(self, x, attention_mask):
        B, T, _ = x.shape
        q = self.q_proj(x).view(B, T, -1, self.hd).transpose(1, 2)                 # (B, H, T, d_k)
        k = self.k_proj(x).view(B, T, -1, self.hd).transpose(1, 2)                 # (B, H_kv, T, d_k)
        v = self.v_proj(x).view(B, T, -1, self.hd).transpose(1, 2)                 # (B, H_kv, T, d_k)
        k, v = repeat_kv(k, H // H_KV), repeat_kv(v, H // H_KV)                    # (B, H, T, d_k)
        ones = torch.ones(T, T, dtype=torch.bool)
        causal = ones.triu() if self.bug == "triu" else ones.tril()                # (T, T)
        pad = attention_mask[:, None, :, None] if self.bug == "query" else attention_mask[:, None, None, :]
        mask = causal[None, None, :, :] & pad.bool()                               # (B, 1, T, T)
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)             # (B, H, T, d_k)
        return self.o_proj(out.transpose(1, 2).reshape(B, T, -1))                  # (B, T, D)


class DecoderBlock(nn.Module):
    """A decoder block as nanoGPT writes its self-attention (karpathy/nanoGPT model.py, the flash path
    ``F.scaled_dot_product_attention(q, k, v, is_causal=True)``) followed by a cross-attention over an
    encoder's memory with a key padding mask ``[B, 1, 1, S]`` (the PyTorch docs of
    scaled_dot_product_attention). The bug reads the memory of the other batch entry (``memory.flip(0)``,
    as a batch reordered for beam search but not its encoder states)."""

    def __init__(self, bug=False):
        super().__init__()
        self.bug = bug
        self.c_attn, self.q, self.kv, self.proj = nn.Linear(D, 3 * D), nn.Linear(D, D), nn.Linear(D, 2 * D), \
            nn.Linear(D, D)

    def forward(self, x, memory, memory_mask):
        B, T, C = x.size()
        S = memory.size(1)
        q, k, v = self.c_attn(x).split(C, dim=2)
        q = q.view(B, T, H, C // H).transpose(1, 2)                                # (B, nh, T, hs)
        k = k.view(B, T, H, C // H).transpose(1, 2)                                # (B, nh, T, hs)
        v = v.view(B, T, H, C // H).transpose(1, 2)                                # (B, nh, T, hs)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)               # (B, nh, T, hs)
        x = x + y.transpose(1, 2).contiguous().view(B, T, C)                      # (B, T, C)
        q = self.q(x).view(B, T, H, C // H).transpose(1, 2)                        # (B, nh, T, hs)
        k, v = self.kv(memory.flip(0) if self.bug else memory).split(C, dim=2)
        k = k.view(B, S, H, C // H).transpose(1, 2)                                # (B, nh, S, hs)
        v = v.view(B, S, H, C // H).transpose(1, 2)                                # (B, nh, S, hs)
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=memory_mask[:, None, None, :])   # (B, nh, T, hs)
        return self.proj(y.transpose(1, 2).contiguous().view(B, T, C))            # (B, T, C)


def rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)                                                    # (..., d_k/2) each
    return torch.cat((-x2, x1), dim=-1)                                            # (..., d_k)


class CachedAttention(nn.Module):
    """A decode loop's attention that keeps its cache on ``self`` (meta-llama/llama model.py Attention:
    ``cache_k``/``cache_v`` and ``start_pos``; transformers' DynamicCache.update: ``torch.cat`` on the time
    axis). Positions start at the cache's length. The bug inverts the causal flag (``is_causal=T == 1``:
    the prefill attends to the future; the single-token steps need no mask)."""

    def __init__(self, bug=False):
        super().__init__()
        self.hd, self.bug = D // H, bug
        self.wq, self.wk, self.wv, self.wo = (nn.Linear(D, D, bias=False) for _ in range(4))
        self.inv_freq = 1.0 / (10000 ** (torch.arange(0, self.hd, 2).float() / self.hd))
        self.k_cache = self.v_cache = None

    def rope(self, x, positions):
        freqs = torch.outer(positions.float(), self.inv_freq)                      # (T, d_k/2)
        emb = torch.cat((freqs, freqs), dim=-1)                                    # (T, d_k)
        return x * emb.cos() + rotate_half(x) * emb.sin()

    def forward(self, x):
        B, T, _ = x.shape
        past = 0 if self.k_cache is None else self.k_cache.shape[2]
        positions = torch.arange(past, past + T)                                   # (T,)
        q = self.wq(x).view(B, T, H, self.hd).transpose(1, 2)                      # (B, H, T, d_k)
        k = self.wk(x).view(B, T, H, self.hd).transpose(1, 2)                      # (B, H, T, d_k)
        v = self.wv(x).view(B, T, H, self.hd).transpose(1, 2)                      # (B, H, T, d_k)
        q, k = self.rope(q, positions), self.rope(k, positions)
        if self.k_cache is not None:
            k = torch.cat([self.k_cache, k], dim=2)                                # (B, H, past+T, d_k)
            v = torch.cat([self.v_cache, v], dim=2)                                # (B, H, past+T, d_k)
        self.k_cache, self.v_cache = k, v
        causal = T == 1 if self.bug else T > 1
        out = F.scaled_dot_product_attention(q, k, v, is_causal=causal)           # (B, H, T, d_k)
        return self.wo(out.transpose(1, 2).reshape(B, T, -1))                      # (B, T, D)


def _padding(B, T):
    mask = torch.ones(B, T, dtype=torch.long)
    mask[1:, T - 2:] = 0   # every entry but the first is padded at its end
    return mask


def _traced(dims, run, named=()):
    """``run()`` traced with the dependency check; ``named``: (tensor, names) given with ``shapetrace.name``
    (at B = T names from sizes alone would be ambiguous, and nothing would be measured)."""
    torch.manual_seed(0)
    with shapetrace.trace(dims=dims) as t:
        t.check_dependencies()
        for tensor, names in named:
            shapetrace.name(tensor, names)
        run()
    return t


def _errors(t):
    return [(d.kind, d.message) for d in t.diagnostics if d.severity == "error"]


SIZES = [(3, 6), (4, 4)]   # (B, T): distinct, and T = H = B = 4


@pytest.mark.parametrize(("B", "T"), SIZES)
def test_a_padding_mask_passed_in_is_given_entry_zero_with_the_input(B, T):
    """Main measured entry 0's tokens beside entry 1's padding mask and reported on this correct file
    "output token … depends on input token …, a later token"."""
    torch.manual_seed(1)
    model, x, mask = Qwen2Attention(), torch.randn(B, T, D), _padding(B, T)
    t = _traced(f"B={B} T={T} D={D} H={H} H_kv={H_KV}", lambda: model(x, mask), [(x, "B T D"), (mask, "B T")])
    assert _errors(t) == []
    assert t.contracts == ["batch entries stay apart", "each token depends on itself", "the causal mask holds",
                           "padding stays unread"]   # (engine/padding.py: the right-padded entries' pads unread)


@pytest.mark.parametrize(("B", "T"), SIZES)
def test_a_reversed_triangle_beside_a_padding_mask_still_leaks(B, T):
    torch.manual_seed(1)
    model, x, mask = Qwen2Attention(bug="triu"), torch.randn(B, T, D), _padding(B, T)
    t = _traced(f"B={B} T={T} D={D} H={H} H_kv={H_KV}", lambda: model(x, mask), [(x, "B T D"), (mask, "B T")])
    # (round 12: rules/directions reads SDPA's attn_mask hiding the past beside the padding, as it did on
    # masked_fill, so the reversed triangle is named at the SDPA call; the measured leak folds into it as its witness)
    assert [kind for kind, _ in _errors(t)] == ["causal-mask-reversed"]
    assert _errors(t)[0][1].startswith(f"scaled_dot_product_attention #18 hides, along the keys (axis -1, T) of the "
                                       f"scores [..., T={T}, T={T}], exactly the keys before each query")
    assert f"On the values: output token 0 of batch 0 depends on input token {T - 1}, a later token" in _errors(t)[0][1]


CROSS = [(3, 6, 7), (4, 4, 4)]   # (B, T, S): distinct, and B = T = H = S = 4


@pytest.mark.parametrize(("B", "T", "S"), CROSS)
def test_a_cross_attention_memory_is_given_entry_zero_with_the_input(B, T, S):
    """Main gave the measuring batch entry 1's memory: "output token 0 of batch 0 depends on input token
    5, a later token, though the code declares a causal mask (scaled_dot_product_attention #9)"."""
    torch.manual_seed(1)
    model, x, memory = DecoderBlock(), torch.randn(B, T, D), torch.randn(B, S, D)
    memory_mask = _padding(B, S).bool()
    t = _traced(f"B={B} T={T} S={S} D={D} H={H}", lambda: model(x, memory, memory_mask),
                [(x, "B T D"), (memory, "B S D"), (memory_mask, "B S")])
    assert _errors(t) == []
    assert t.contracts[:3] == ["batch entries stay apart", "each token depends on itself", "the causal mask holds"]


@pytest.mark.parametrize(("B", "T", "S"), CROSS)
def test_reading_another_entrys_memory_is_still_a_batch_mix(B, T, S):
    torch.manual_seed(1)
    model, x, memory = DecoderBlock(bug=True), torch.randn(B, T, D), torch.randn(B, S, D)
    memory_mask = _padding(B, S).bool()
    t = _traced(f"B={B} T={T} S={S} D={D} H={H}", lambda: model(x, memory, memory_mask),
                [(x, "B T D"), (memory, "B S D"), (memory_mask, "B S")])
    assert [kind for kind, _ in _errors(t)] == ["batch-entries-mix"]
    assert _errors(t)[0][1].startswith("measured on the values: output token 0 of batch 0 depends on the other "
                                       "batch entries' tokens")


def _decode(model, B, T, steps=3):
    x = torch.randn(B, T, D)
    shapetrace.name(x, "B T D")
    y = model(x)                                                                   # prefill
    for _ in range(steps):
        y = model(y[:, -1:, :])                                                    # one token at a time


@pytest.mark.parametrize(("B", "T"), SIZES)
def test_a_cache_kept_on_the_module_is_measured_on_the_state_the_prefill_found(B, T):
    """Main reran the prefill on the cache the last decode step left: "batch entries mix" on a correct
    decode loop."""
    torch.manual_seed(1)
    model = CachedAttention()
    t = _traced(f"B={B} T={T} D={D} H={H}", lambda: _decode(model, B, T))
    assert _errors(t) == []
    assert t.contracts == ["batch entries stay apart", "each token depends on itself", "the causal mask holds",
                           "heads stay apart"]
    assert model.k_cache.shape == (B, H, T + 3, D // H)   # the cache the run left is put back


@pytest.mark.parametrize(("B", "T"), SIZES)
def test_a_prefill_without_its_causal_mask_leaks_in_a_decode_loop(B, T):
    """The inverted flag puts ``is_causal=True`` on the one-query steps too, where torch aligns the mask
    top-left (the SDPA docs): the rule says so at the step, and the rerun prefill's leak is shown under it."""
    torch.manual_seed(1)
    t = _traced(f"B={B} T={T} D={D} H={H}", lambda: _decode(CachedAttention(bug=True), B, T))
    assert [kind for kind, _ in _errors(t)] == ["causal-mask-misaligned"]
    assert _errors(t)[0][1].endswith(f"On the values: output token 0 of batch 0 depends on input token {T - 1}, a "
                                     "later token, though the code declares a causal mask (scaled_dot_product_"
                                     f"attention #{_errors(t)[0][1].split('#')[1].split()[0]}): the mask lets queries "
                                     "see the future (reversed, or not applied), or another op brings a "
                                     "later token in (a softmax, sum or FFT over the tokens).")


class DecoderSelfAttention(nn.Module):
    """hyunwoongko/transformer (models/model/transformer.py make_trg_mask, models/layers/
    scale_dot_product_attention.py): the target mask is ``pad & tril`` and the scores are filled with
    -10000 where it is 0. The bug builds the padding part with ``.unsqueeze(1).unsqueeze(3)`` ([B, 1, T, 1],
    the query axis), as the repository did until PR #40; the fix ``.unsqueeze(1).unsqueeze(2)``."""

    def __init__(self, bug=False):
        super().__init__()
        self.bug, self.hd = bug, D // H
        self.w_q, self.w_k, self.w_v, self.w_concat = (nn.Linear(D, D) for _ in range(4))

    def split(self, tensor):
        B, T, _ = tensor.size()
        return tensor.view(B, T, H, self.hd).transpose(1, 2)                       # (B, H, T, d_k)

    def forward(self, x, trg):
        B, T, _ = x.size()
        pad = (trg != 0).unsqueeze(1)                                              # (B, 1, T)
        pad = pad.unsqueeze(3) if self.bug else pad.unsqueeze(2)                   # (B, 1, T, 1) or (B, 1, 1, T)
        sub = torch.tril(torch.ones(T, T)).type(torch.bool)                        # (T, T)
        mask = pad & sub                                                           # (B, 1, T, T)
        q, k, v = self.split(self.w_q(x)), self.split(self.w_k(x)), self.split(self.w_v(x))
        score = (q @ k.transpose(2, 3)) / self.hd ** 0.5                           # (B, H, T, T)
        score = score.masked_fill(mask == 0, -10000)
        out = score.softmax(dim=-1) @ v                                            # (B, H, T, d_k)
        return self.w_concat(out.transpose(1, 2).contiguous().view(B, T, D))      # (B, T, D)


def _ids(B, T):
    ids = torch.randint(1, 50, (B, T))
    ids[1:, T - 2:] = 0   # padding at the end of every entry but the first
    return ids


def _mask_findings(t):
    return [(d.kind, d.message) for d in t.diagnostics if d.kind == "mask-wrong-axis"]


@pytest.mark.parametrize(("B", "T"), SIZES)
@pytest.mark.parametrize("bug", [False, True])
def test_a_padding_part_on_the_query_axis_beside_a_triangle_is_found(bug, B, T):
    """Main said nothing of the bug: the combined mask [B, 1, T, T] varies along the keys (the triangle)."""
    torch.manual_seed(1)
    model, x, ids = DecoderSelfAttention(bug=bug), torch.randn(B, T, D), _ids(B, T)
    t = _traced(f"B={B} T={T} D={D} H={H}", lambda: model(x, ids), [(x, "B T D"), (ids, "B T")])
    found = _mask_findings(t)
    if not bug:
        assert _errors(t) == []
        return
    assert [kind for kind, _ in _errors(t)] == ["mask-wrong-axis"]
    index = next(e.index for e in t.events if e.op == "masked_fill")
    assert found[0][1] == (
        f"masked_fill #{index} hides scores [B={B}, H={H}, T={T}, T={T}] with the mask [B={B}, 1, T={T}, T={T}], "
        f"combined from parts; the part [{B}, 1, {T}, 1] varies along the queries and is broadcast over the keys, "
        "and no part hides keys alone (a padding mask put on the query axis): it hides whole query rows while "
        "every query still attends to the padding keys.")


@pytest.mark.parametrize(("B", "T"), SIZES)
def test_an_sdpa_mask_with_its_padding_on_the_query_axis_is_found_without_names(B, T):
    """SDPA's attn_mask is [..., L, S] by position, so this holds with names from sizes alone too."""
    torch.manual_seed(1)
    model, x, mask = Qwen2Attention(bug="query"), torch.randn(B, T, D), _padding(B, T)
    t = _traced(f"B={B} T={T} D={D} H={H} H_kv={H_KV}", lambda: model(x, mask))
    assert [kind for kind, _ in _errors(t)] == ["mask-wrong-axis"]
    assert _errors(t)[0][1].startswith("scaled_dot_product_attention #")
    assert f"the part [{B}, 1, {T}, 1] varies along the queries and is broadcast over the keys" in _errors(t)[0][1]


def test_padding_on_both_axes_is_not_a_finding():
    """Masking padded queries and padded keys (Kyubyong/transformer's "key and query masking") has a part
    on the keys alone: correct, silent."""
    torch.manual_seed(1)
    B, T = 3, 6
    ids, x = _ids(B, T), torch.randn(B, T, D)

    def both(x, ids):
        q = k = x.view(B, T, H, D // H).transpose(1, 2)                            # (B, H, T, d_k)
        pad = ids != 0                                                             # (B, T)
        mask = pad[:, None, :, None] & pad[:, None, None, :]                       # (B, 1, T, T)
        return (q @ k.transpose(-2, -1)).masked_fill(~mask, -1e9).softmax(-1)     # (B, H, T, T)

    t = _traced(f"B={B} T={T} D={D} H={H}", lambda: both(x, ids))
    assert _mask_findings(t) == []


class PhiAttention(nn.Module):
    """huggingface/transformers models/phi/modeling_phi.py (PhiAttention.forward): partial rotary
    (``partial_rotary_factor`` 0.5: ``query_rot, query_pass``), the angles made with ``torch.outer(positions,
    inv_freq)`` as Llama's rotary embedding once did. The bug reads the positions' length from the batch
    axis (``x.size(0)``, issue 33's "positions built from x.size(0) on batch-first input"): at B = T it runs."""

    def __init__(self, bug=False):
        super().__init__()
        self.bug, self.hd = bug, D // H
        self.rot = self.hd // 2
        self.q_proj, self.k_proj, self.v_proj, self.dense = (nn.Linear(D, D) for _ in range(4))
        self.inv_freq = 1.0 / (10000 ** (torch.arange(0, self.rot, 2).float() / self.rot))

    def rotate(self, x, cos, sin):
        x_rot, x_pass = x[..., : self.rot], x[..., self.rot:]                     # (B, H, T, rot), (B, H, T, rest)
        x1, x2 = x_rot[..., : self.rot // 2], x_rot[..., self.rot // 2:]
        x_rot = x_rot * cos + torch.cat((-x2, x1), dim=-1) * sin
        return torch.cat((x_rot, x_pass), dim=-1)                                  # (B, H, T, d_k)

    def forward(self, x):
        B, T, _ = x.shape
        q = self.q_proj(x).view(B, T, H, self.hd).transpose(1, 2)                  # (B, H, T, d_k)
        k = self.k_proj(x).view(B, T, H, self.hd).transpose(1, 2)                  # (B, H, T, d_k)
        v = self.v_proj(x).view(B, T, H, self.hd).transpose(1, 2)                  # (B, H, T, d_k)
        pos = torch.arange(x.size(0) if self.bug else x.size(1), dtype=torch.float32)   # (T,)
        freqs = torch.outer(pos, self.inv_freq)                                    # (T, rot/2)
        emb = torch.cat((freqs, freqs), dim=-1)                                    # (T, rot)
        cos, sin = emb.cos()[None, None], emb.sin()[None, None]                   # (1, 1, T, rot)
        q, k = self.rotate(q, cos, sin), self.rotate(k, cos, sin)
        w = (q @ k.transpose(2, 3)) / self.hd ** 0.5                               # (B, H, T, T)
        w = w + torch.full((T, T), float("-inf")).triu(1)
        out = w.softmax(dim=-1) @ v                                                # (B, H, T, d_k)
        return self.dense(out.transpose(1, 2).reshape(B, T, -1))                   # (B, T, D)


@pytest.mark.parametrize("bug", [False, True])
@pytest.mark.parametrize("size", [4, 6])
def test_positions_read_from_the_batch_axis_are_found_through_an_outer_product(bug, size):
    """``torch.outer`` passed no names (an unknown op), so the table [B, rot/2] was unnamed and the bug
    silent on main; now the table's first axis is the one its positions were counted from."""
    torch.manual_seed(1)
    model, x = PhiAttention(bug=bug), torch.randn(size, size, D)
    t = _traced(f"B={size} T={size} D={D} H={H}", lambda: model(x), [(x, "B T D")])
    found = [(d.kind, d.message) for d in t.diagnostics if d.severity == "error"]
    if not bug:
        assert found == []
        return
    assert {kind for kind, _ in found} == {"broadcast-mismatch"}
    assert found[0][1].endswith(f"[1, 1, B={size}, 4] with [B={size}, H={H}, T={size}, d_k[0:4]=4] from the right: "
                                "axis -2 pairs B (batch) of the first with T (tokens) of the second. Both have "
                                f"{size} entries, so torch broadcasts without complaint, but entry i of B is applied "
                                "to entry i of T.")


def test_an_outer_product_names_each_axis_after_its_operand():
    x, inv = torch.randn(3, 5, D), torch.randn(4)
    with shapetrace.trace(dims=f"B=3 T=5 D={D} H={H}") as t:
        positions = torch.arange(x.shape[1]).float()                               # (T,)
        table = torch.cat([torch.outer(positions, inv)] * 2, dim=-1)               # (T, 8)
    assert table.shape == (5, 8)
    assert [e.output.dims for e in t.events if e.op == "cat"] == [("T", None)]


class StaticCacheAttention(nn.Module):
    """meta-llama/llama model.py ``Attention.forward``: the cache is a buffer made for ``max_batch_size``
    sequences of ``max_seq_len`` tokens, laid out (B, L, H, d); each call writes ``cache_k[:bsz, start_pos:
    start_pos + seqlen] = xk`` and reads ``cache_k[:bsz, : start_pos + seqlen]``; the weights are cast back
    with ``F.softmax(scores.float(), dim=-1).type_as(xq)``. Main named the batch slots a token capacity
    (``L``: "batch axis B … lines up with L") and read ``type_as(xq)`` as a broadcast of xq onto the
    weights ("pairs d_k … with L[0:6]")."""

    def __init__(self, max_batch, max_seq=16):
        super().__init__()
        self.hd = D // H
        self.wq, self.wk, self.wv, self.wo = (nn.Linear(D, D, bias=False) for _ in range(4))
        self.register_buffer("cache_k", torch.zeros(max_batch, max_seq, H, self.hd), persistent=False)
        self.register_buffer("cache_v", torch.zeros(max_batch, max_seq, H, self.hd), persistent=False)

    def forward(self, x, start_pos, mask):
        bsz, seqlen, _ = x.shape
        xq = self.wq(x).view(bsz, seqlen, H, self.hd)                              # (B, T, H, d)
        xk = self.wk(x).view(bsz, seqlen, H, self.hd)                              # (B, T, H, d)
        xv = self.wv(x).view(bsz, seqlen, H, self.hd)                              # (B, T, H, d)
        self.cache_k[:bsz, start_pos: start_pos + seqlen] = xk
        self.cache_v[:bsz, start_pos: start_pos + seqlen] = xv
        keys = self.cache_k[:bsz, : start_pos + seqlen]                            # (B, S, H, d)
        values = self.cache_v[:bsz, : start_pos + seqlen]                          # (B, S, H, d)
        xq, keys, values = xq.transpose(1, 2), keys.transpose(1, 2), values.transpose(1, 2)   # (B, H, ·, d)
        scores = torch.matmul(xq, keys.transpose(2, 3)) / (self.hd ** 0.5)         # (B, H, T, S)
        if mask is not None:
            scores = scores + mask
        scores = F.softmax(scores.float(), dim=-1).type_as(xq)
        output = torch.matmul(scores, values)                                      # (B, H, T, d)
        return self.wo(output.transpose(1, 2).contiguous().view(bsz, seqlen, -1))  # (B, T, D)


@pytest.mark.parametrize("spare", [0, 1])   # max_batch_size = B, or one more
@pytest.mark.parametrize(("B", "T"), SIZES)
def test_a_static_cache_made_for_more_sequences_keeps_its_batch_axis(B, T, spare):
    torch.manual_seed(1)
    model, x = StaticCacheAttention(max_batch=B + spare), torch.randn(B, T, D)
    mask = torch.full((T, T), float("-inf")).triu(1)                               # (T, T)

    def decode():
        y = model(x, 0, mask)                                                      # prefill
        for pos in range(T, T + 3):
            y = model(y[:, -1:, :], pos, None)                                     # one token at a time

    t = _traced(f"B={B} T={T} D={D} H={H}", decode, [(x, "B T D")])
    assert [d for d in t.diagnostics if d.severity in ("error", "warning")] == []
    products = [e for e in t.events if e.op == "matmul"]
    assert products[0].inputs[1].dims == ("B", "H", "d_k", f"L[0:{T}]")
    assert products[0].output.dims == ("B", "H", "T", f"L[0:{T}]")
    assert "the causal mask holds" in t.contracts


def test_a_cast_to_anothers_dtype_names_its_result_from_its_input_alone():
    w, q = torch.randn(2, 4, 6, 6, dtype=torch.float64), torch.randn(2, 4, 6, 16)
    with shapetrace.trace(dims=f"B=2 T=6 D=64 H={H}") as t:
        shapetrace.name(w, "B H T T")
        cast = w.softmax(dim=-1).type_as(q)                                        # (B, H, T, T) float32
    assert cast.dtype == torch.float32
    assert t.diagnostics == []
