"""NVIDIA/TensorRT-LLM pull request #2682 ("use selected index past past key value in attention when using
contin…"; Eayne: "when using continuous kv cache, gpt_attention will only use first past_key_value instead of
past_key_value[selected_indexed]. It will cause calculating result errors when the values of continous kv
caches are not zeros."): with a pool of cache slots shared by the requests (continuous batching), each request's
decode step read the pool's first slots instead of the slots its requests were assigned.

The idiom, written in torch: a pool ``k_pool``/``v_pool`` of ``[N, H, S, d]`` (``N`` slots, ``S`` cached
positions), ``slot_ids`` ``[B]`` (the slot each request holds), the decode step's ``qkv`` projection viewed to
heads, the past keys and values ``k_pool[slot_ids]`` joined with the step's along the positions, scores scaled by
``1/sqrt(d)``, softmax, the values, ``dense``. Two requests hold slots 2 and 0 of three.

Bug (index): ``first-slots``: ``k_pool[:B]``, the pool's first slots, for ``k_pool[slot_ids]``."""

import math
import sys

import torch
from torch import nn

BUGS = ("first-slots",)
TWINS = ()
DIMS = ("B=2 T=1 D=32 H=4 N=3 S=5",)
EQUAL = {DIMS[0]: "B=4 T=4 D=32 H=4 N=6 S=5"}   # (as many slots as requests and more: the bug's [:B] fits)


class GptAttention(nn.Module):
    def __init__(self, hidden_size, num_heads, bug=""):
        super().__init__()
        self.bug = bug
        self.num_heads, self.head_size = num_heads, hidden_size // num_heads
        self.qkv = nn.Linear(hidden_size, 3 * hidden_size)
        self.dense = nn.Linear(hidden_size, hidden_size)

    def forward(self, hidden_states, k_pool, v_pool, slot_ids):                         # (B, T, D), (N, H, S, d)
        B, T, D = hidden_states.shape
        q, k, v = self.qkv(hidden_states).split(D, dim=-1)
        q = q.view(B, T, self.num_heads, self.head_size).transpose(1, 2)                # (B, H, T, d)
        k = k.view(B, T, self.num_heads, self.head_size).transpose(1, 2)
        v = v.view(B, T, self.num_heads, self.head_size).transpose(1, 2)
        if self.bug == "first-slots":
            past_k, past_v = k_pool[:B], v_pool[:B]
        else:
            past_k, past_v = k_pool[slot_ids], v_pool[slot_ids]                         # (B, H, S, d)
        k = torch.cat([past_k, k], dim=2)                                               # (B, H, S+T, d)
        v = torch.cat([past_v, v], dim=2)
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.head_size)
        probs = torch.softmax(scores, dim=-1)
        out = torch.matmul(probs, v).transpose(1, 2).reshape(B, T, D)
        return self.dense(out)


def build(bug="", B=2, T=1, D=32, H=4, N=3, S=5):
    torch.manual_seed(0)
    d = D // H
    slot_ids = torch.tensor([2, 0, 1, 2][:B]) % N
    return GptAttention(D, H, bug=bug).eval(), (torch.randn(B, T, D), torch.randn(N, H, S, d),
                                                torch.randn(N, H, S, d), slot_ids)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
