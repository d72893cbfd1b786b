"""sgl-project/sglang issue #8675 ("[Bug] ``torch_native`` backend uses wrong indices for kv cache retrieval and
does not support cross attention", 2025): in the extend and decode phases the torch-native attention backend
wrote the step's keys and values into the token pool at ``out_cache_loc`` (``[0, 1, 2, 3]`` for a 4-token
extend) and read them back through ``req_to_token[req_pool_idx, :seq_len_kv]`` (``[1, 2, 3, 4]``), so "the key
and value tensors are always shifted by 1 and the output is not correct"; the report's fix reads them from
the same indices they were written to.

The idiom (``torch_native_backend.py``, ``_run_sdpa_forward_extend``): the layer's flat tokens ``q, k, v
[N, H, d]`` (``N`` = the batch's tokens, requests laid end to end), ``k_buffer[out_cache_loc] = k`` (the
pool's ``set_kv_buffer``), then per request ``per_req_query = query[start:end].movedim(0, 1)`` ``[H, T, d]``,
``per_req_key = k_buffer[per_req_tokens].movedim(0, 1)``, ``scaled_dot_product_attention(...unsqueeze(0),
is_causal=True).squeeze(0).movedim(1, 0)`` written into the output at ``start:end``. Here every request of
the batch has ``T`` new tokens and no prefix; the pool is a zero buffer of ``P`` slots.

Bug (cache read): ``req-to-token-shifted``: the keys and values read through the request table, whose slots
are the written ones plus one (slot 0 is the allocator's reserved padding slot)."""

import sys

import torch
import torch.nn.functional as F
from torch import nn

BUGS = ("req-to-token-shifted",)
TWINS = ()
DIMS = ("B=2 T=5 D=32 H=4",)


class TorchNativeExtend(nn.Module):
    def __init__(self, hidden, num_heads, bug=""):
        super().__init__()
        self.bug, self.num_heads, self.head_dim = bug, num_heads, hidden // num_heads
        self.qkv_proj = nn.Linear(hidden, 3 * hidden, bias=False)
        self.o_proj = nn.Linear(hidden, hidden, bias=False)

    def forward(self, hidden_states, seq_lens, out_cache_loc, req_to_token, k_buffer, v_buffer):
        N = hidden_states.shape[0]
        q, k, v = self.qkv_proj(hidden_states).chunk(3, dim=-1)                       # (N, H*d) each
        q = q.view(N, self.num_heads, self.head_dim)                                   # (N, H, d)
        k = k.view(N, self.num_heads, self.head_dim)                                   # (N, H, d)
        v = v.view(N, self.num_heads, self.head_dim)                                   # (N, H, d)
        k_buffer, v_buffer = k_buffer.clone(), v_buffer.clone()
        k_buffer[out_cache_loc] = k                                                    # (P, H, d)
        v_buffer[out_cache_loc] = v
        output = torch.empty_like(q)
        start = 0
        for req_pool_idx, seq_len in enumerate(seq_lens.tolist()):
            end = start + seq_len
            if self.bug == "req-to-token-shifted":
                per_req_tokens = req_to_token[req_pool_idx, :seq_len]
            else:
                per_req_tokens = out_cache_loc[start:end]
            per_req_query = q[start:end].movedim(0, 1)                                 # (H, T, d)
            per_req_key = k_buffer[per_req_tokens].movedim(0, 1)                       # (H, T, d)
            per_req_value = v_buffer[per_req_tokens].movedim(0, 1)                     # (H, T, d)
            per_req_out = F.scaled_dot_product_attention(
                per_req_query.unsqueeze(0), per_req_key.unsqueeze(0), per_req_value.unsqueeze(0),
                is_causal=True).squeeze(0).movedim(1, 0)                              # (T, H, d)
            output[start:end] = per_req_out
            start = end
        return self.o_proj(output.reshape(N, -1))                                      # (N, H*d)


def build(bug="", B=2, T=5, D=32, H=4):
    torch.manual_seed(0)
    d, slots = D // H, B * T + 2
    seq_lens = torch.full((B,), T)
    out_cache_loc = torch.arange(B * T)                                                # where the step writes
    req_to_token = (torch.arange(B * T) + 1).view(B, T)                               # the table's slots (B, T)
    k_buffer, v_buffer = torch.zeros(slots, H, d), torch.zeros(slots, H, d)
    inputs = (torch.randn(B * T, D), seq_lens, out_cache_loc, req_to_token, k_buffer, v_buffer)
    return TorchNativeExtend(D, H, bug=bug).eval(), inputs


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
