"""keras-team/keras-hub pull request #2911 ("[LiteRT-LM 7/28] Model Specs: Qwen Architecture Family"), review
thread on ``keras_hub/src/utils/litertlm/traceable_ops.py`` (gemini-code-assist, marked critical): the traceable
``dot_product_attention`` took a 3-D ``mask`` ``(B, Q, K)`` straight into ``torch.where(mask, scores,
large_neg)`` against 4-D scores ``(B, H, Q, K)``: broadcasting reads the mask as ``(1, B, Q, K)``, so "the mask
for batch ``b`` is applied to head ``b`` of all batches, instead of being applied to all heads of batch ``b``"
-- silent when ``B == H`` (a shape error otherwise); the fix unsqueezes a 3-D mask to ``(B, 1, Q, K)``.

The idiom: keras-hub's Qwen attention on the torch backend (``query_dense``/``key_dense``/``value_dense``
``EinsumDense`` to ``(B, T, H, d)``, grouped KV heads repeated with ``repeat_interleave`` on the heads axis),
``merge_padding_and_attention_mask``: the padding mask ``(B, T)`` and a causal ``(T, T)`` mask combined into
``(B, T, T)``; the traceable op in ``BSHD`` layout (``einsum("bqhd,bkhd->bhqk")`` scaled by ``head_dim ** -0.5``,
``torch.where(mask, scores, large_neg)``, ``softmax(-1)``, ``einsum("bhqk,bkhd->bqhd")``), ``output_dense``.

Bug (mask axes): ``mask-on-heads``: the 3-D mask is not unsqueezed; at ``B == H`` (here 4) the scores of batch
``b``'s head ``h`` take the mask of sequence ``h``."""

import sys

import torch
from torch import nn

BUGS = ("mask-on-heads",)
TWINS = ()
DIMS = ("B=4 T=6 D=32 H=4 H_kv=2",)


def merge_padding_and_attention_mask(padding_mask):
    T = padding_mask.shape[1]
    causal = torch.tril(torch.ones(T, T, dtype=torch.bool))
    return padding_mask[:, None, :] & causal[None]                               # (B, T, T)


def dot_product_attention(query, key, value, mask=None, bug=""):
    scale = query.shape[-1] ** -0.5
    scores = torch.einsum("bqhd,bkhd->bhqk", query, key) * scale
    if mask is not None:
        if mask.ndim == 3 and bug != "mask-on-heads":
            mask = mask[:, None, :, :]
        large_neg = torch.finfo(scores.dtype).min
        scores = torch.where(mask, scores, torch.full_like(scores, large_neg))
    probs = torch.softmax(scores, dim=-1)
    return torch.einsum("bhqk,bkhd->bqhd", probs, value)


class QwenAttention(nn.Module):
    def __init__(self, hidden_dim, num_query_heads, num_key_value_heads, bug=""):
        super().__init__()
        self.bug = bug
        self.num_query_heads, self.num_key_value_heads = num_query_heads, num_key_value_heads
        self.head_dim = hidden_dim // num_query_heads
        self.query_dense = nn.Linear(hidden_dim, num_query_heads * self.head_dim)
        self.key_dense = nn.Linear(hidden_dim, num_key_value_heads * self.head_dim)
        self.value_dense = nn.Linear(hidden_dim, num_key_value_heads * self.head_dim)
        self.output_dense = nn.Linear(num_query_heads * self.head_dim, hidden_dim, bias=False)

    def forward(self, hidden_states, padding_mask):
        B, T, _ = hidden_states.shape
        query = self.query_dense(hidden_states).view(B, T, self.num_query_heads, self.head_dim)
        key = self.key_dense(hidden_states).view(B, T, self.num_key_value_heads, self.head_dim)
        value = self.value_dense(hidden_states).view(B, T, self.num_key_value_heads, self.head_dim)
        groups = self.num_query_heads // self.num_key_value_heads
        key = key.repeat_interleave(groups, dim=2)
        value = value.repeat_interleave(groups, dim=2)
        mask = merge_padding_and_attention_mask(padding_mask)
        out = dot_product_attention(query, key, value, mask=mask, bug=self.bug)
        return self.output_dense(out.reshape(B, T, -1))


def build(bug="", B=4, T=6, D=32, H=4, H_kv=2):
    torch.manual_seed(0)
    model = QwenAttention(D, H, H_kv, bug=bug).eval()
    lengths = torch.tensor([T - (b % 3) for b in range(B)])
    padding_mask = torch.arange(T)[None, :] < lengths[:, None]                     # (B, T), right-padded
    return model, (torch.randn(B, T, D), padding_mask)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
