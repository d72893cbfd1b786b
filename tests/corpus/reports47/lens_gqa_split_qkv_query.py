"""TransformerLensOrg/TransformerLens pull request #520 ("Fix split_qkv_input for grouped query attention",
merged; fixes issue #519, "split_qkv_input issues with consistency and GQA"): ``transformer_lens/components.py``,
``GroupedQueryAttention.calculate_qkv_matrices``. With ``use_split_qkv_input`` the block hands the attention one
copy of the residual stream per head (``einops.repeat(resid, "batch pos d_model -> batch pos n_heads d_model")``),
and the GQA class named that head axis with a single string for all three projections, ``qkv_einops_string =
"batch pos kv_head_index d_model"``. The block first gave the keys n_heads copies too (the crash of #519, "shape
mismatch in an einsum"); with that fixed (keys and values get ``n_key_value_heads`` copies), the author "noticed
the logits were extremely off. There was a silent issue related to the ``qkv_einops_string`` being incorrect for
just the query": the query's einsum ``"batch pos kv_head_index d_model, head_index d_model d_head -> batch pos
head_index d_head"`` labels the query input's n_heads copies ``kv_head_index``, a letter the output does not keep,
so the einsum sums over the copies: every head's query is the sum of W_Q[h] over all n_heads inputs (n_heads times
the query when no hook edits them; a hook's edit of head i's input leaks into every head). The fix gives the
query its own string, ``"batch pos head_index d_model"``.

TransformerLens's idiom (``components.py`` of the time, ``fancy_einsum`` named axes, written here with
``einops.einsum``, the same pattern language): ``W_Q [head_index, d_model, d_head]``, the grouped ``_W_K``,
``_W_V [kv_head_index, d_model, d_head]`` and their biases; ``calculate_attention_scores`` and
``calculate_z_scores`` expand k and v with ``torch.repeat_interleave(k, dim=2, repeats=repeat_kv_heads)``; scores
``/ attn_scale``, the causal ``mask`` buffer with ``IGNORE``, ``softmax(dim=-1)``, ``z``, ``W_O [head_index,
d_head, d_model]`` summed over the heads, ``b_O``. The block: ``ln1`` (RMS), the split inputs, the residual;
the rotary and the MLP of Mistral-style models left out.

Bugs: ``q-labelled-kv-heads`` (the reported string on the query); ``kv-heads-tiled``: k and v expanded with
``k.repeat(1, 1, repeat_kv_heads, 1)`` (query head h reads kv head h % n_kv, not h // group)."""

import sys

import einops
import torch
from torch import nn

BUGS = ("q-labelled-kv-heads", "kv-heads-tiled")
TWINS = ()
DIMS = ("B=3 T=6 D=32 H=4 H_kv=2",)
EQUAL = {DIMS[0]: "B=4 T=4 D=32 H=4 H_kv=2"}


class RMSNorm(nn.Module):
    def __init__(self, d_model, eps=1e-5):
        super().__init__()
        self.eps, self.w = eps, nn.Parameter(torch.ones(d_model))

    def forward(self, x):
        scale = (x.pow(2).mean(-1, keepdim=True) + self.eps).sqrt()
        return x / scale * self.w


class GroupedQueryAttention(nn.Module):
    def __init__(self, d_model, n_heads, n_key_value_heads, n_ctx=16, bug=""):
        super().__init__()
        self.d_head, self.bug = d_model // n_heads, bug
        self.repeat_kv_heads = n_heads // n_key_value_heads
        self.W_Q = nn.Parameter(torch.randn(n_heads, d_model, self.d_head) * 0.2)
        self._W_K = nn.Parameter(torch.randn(n_key_value_heads, d_model, self.d_head) * 0.2)
        self._W_V = nn.Parameter(torch.randn(n_key_value_heads, d_model, self.d_head) * 0.2)
        self.W_O = nn.Parameter(torch.randn(n_heads, self.d_head, d_model) * 0.2)
        self.b_Q = nn.Parameter(torch.zeros(n_heads, self.d_head))
        self._b_K = nn.Parameter(torch.zeros(n_key_value_heads, self.d_head))
        self._b_V = nn.Parameter(torch.zeros(n_key_value_heads, self.d_head))
        self.b_O = nn.Parameter(torch.zeros(d_model))
        self.attn_scale = self.d_head ** 0.5
        self.register_buffer("mask", torch.tril(torch.ones((n_ctx, n_ctx)).bool()))
        self.register_buffer("IGNORE", torch.tensor(-1e5))

    def calculate_qkv_matrices(self, query_input, key_input, value_input):
        kv_einops_string = "batch pos kv_head_index d_model"
        if self.bug == "q-labelled-kv-heads":
            q_einops_string = kv_einops_string
        else:
            q_einops_string = "batch pos head_index d_model"
        q = einops.einsum(query_input, self.W_Q, f"{q_einops_string}, head_index d_model d_head \
                          -> batch pos head_index d_head") + self.b_Q                # [batch, pos, head_index, d_head]
        k = einops.einsum(key_input, self._W_K, f"{kv_einops_string}, kv_head_index d_model d_head \
                          -> batch pos kv_head_index d_head") + self._b_K         # [batch, pos, kv_head_index, d_head]
        v = einops.einsum(value_input, self._W_V, f"{kv_einops_string}, kv_head_index d_model d_head \
                          -> batch pos kv_head_index d_head") + self._b_V
        return q, k, v

    def expand_kv(self, t):
        if self.bug == "kv-heads-tiled":
            return t.repeat(1, 1, self.repeat_kv_heads, 1)                      # [batch, pos, head_index, d_head]
        return torch.repeat_interleave(t, dim=2, repeats=self.repeat_kv_heads)    # [batch, pos, head_index, d_head]

    def forward(self, query_input, key_input, value_input):
        q, k, v = self.calculate_qkv_matrices(query_input, key_input, value_input)
        k, v = self.expand_kv(k), self.expand_kv(v)
        attn_scores = einops.einsum(q, k, "batch query_pos head_index d_head, batch key_pos head_index d_head \
                                    -> batch head_index query_pos key_pos") / self.attn_scale
        n = attn_scores.size(-1)
        attn_scores = torch.where(self.mask[:n, :n], attn_scores, self.IGNORE)      # [batch, head_index, pos, pos]
        pattern = attn_scores.softmax(dim=-1)
        z = einops.einsum(v, pattern, "batch key_pos head_index d_head, batch head_index query_pos key_pos \
                          -> batch query_pos head_index d_head")                      # [batch, pos, head_index, d_head]
        return einops.einsum(z, self.W_O, "batch pos head_index d_head, head_index d_head d_model \
                             -> batch pos d_model") + self.b_O                        # [batch, pos, d_model]


class TransformerBlock(nn.Module):
    def __init__(self, d_model, n_heads, n_key_value_heads, bug=""):
        super().__init__()
        self.n_heads, self.n_key_value_heads = n_heads, n_key_value_heads
        self.ln1 = RMSNorm(d_model)
        self.attn = GroupedQueryAttention(d_model, n_heads, n_key_value_heads, bug=bug)

    def forward(self, resid_pre):                                                       # [batch, pos, d_model]
        def repeat_along_head_dimension(tensor, n_heads):
            return einops.repeat(tensor, "batch pos d_model -> batch pos n_heads d_model", n_heads=n_heads).clone()

        normalized = self.ln1(resid_pre)
        query_input = repeat_along_head_dimension(normalized, self.n_heads)         # [batch, pos, head_index, d_model]
        key_input = repeat_along_head_dimension(normalized, self.n_key_value_heads)  # [batch, pos, kv_head, d_model]
        value_input = repeat_along_head_dimension(normalized, self.n_key_value_heads)
        return resid_pre + self.attn(query_input, key_input, value_input)


def build(bug="", B=3, T=6, D=32, H=4, H_kv=2):  # noqa: N803
    torch.manual_seed(0)
    return TransformerBlock(D, H, H_kv, bug=bug).eval(), (torch.randn(B, T, D),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
