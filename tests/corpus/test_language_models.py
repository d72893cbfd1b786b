"""Language-model attention whose call takes more than the input, or keeps state between calls: the
dependency contracts (issue 33 item 5) must run the call as the traced code ran it.

* An attention mask or a cross-attention's memory is an argument with a batch axis of its own: the
  measuring batch is entry 0 of the input twice, so each of those arguments must be entry 0 twice too
  (before, entry 1's padding or memory read as a causal leak on correct code).
* A module that keeps a KV cache on ``self`` between calls: the check reruns the first call, so it must
  run on the state that call found, not on the cache the later decode steps left (before: "batch entries
  mix" on a correct decode loop).

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
    causal triangle and the padding mask passed in. The bug builds the triangle with ``triu`` (the
    future kept, the past hidden: "causal mask off by one / reversed" reports)."""

    def __init__(self, bug=False):
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
        causal = ones.triu() if self.bug else ones.tril()                          # (T, T)
        mask = causal[None, None, :, :] & attention_mask[:, None, None, :].bool()  # (B, 1, T, T)
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
    assert t.contracts == ["batch entries stay apart", "each token depends on itself", "the causal mask holds"]


@pytest.mark.parametrize(("B", "T"), SIZES)
def test_a_reversed_triangle_beside_a_padding_mask_still_leaks(B, T):
    torch.manual_seed(1)
    model, x, mask = Qwen2Attention(bug=True), torch.randn(B, T, D), _padding(B, T)
    t = _traced(f"B={B} T={T} D={D} H={H} H_kv={H_KV}", lambda: model(x, mask), [(x, "B T D"), (mask, "B T")])
    assert [kind for kind, _ in _errors(t)] == ["causal-mask-leaks"]
    assert _errors(t)[0][1].startswith(f"measured on the values: output token 0 of batch 0 depends on input token "
                                       f"{T - 1}, a later token")


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
                                     "see the future (reversed, or not applied).")
