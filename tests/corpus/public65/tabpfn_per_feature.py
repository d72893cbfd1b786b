"""PriorLabs/TabPFN, src/tabpfn/model/layer.py (``PerFeatureEncoderLayer.forward``: ``attn_between_features``,
``attn_between_items`` with ``multiquery_item_attention_for_test_set``) and src/tabpfn/model/multi_head_attention.py
(``MultiHeadAttention``: ``compute_qkv``, ``_rearrange_inputs_to_flat_batch``, ``compute_attention_heads``' einsum
path; TabPFN v2, 2025): the state is ``(batch, num_items, num_feature_blocks, d_model)``; attention runs over the
second-to-last axis only, every leading axis folded into the batch (``x.reshape(-1, *x.shape[-2:])``): first
between the features of each item (``x`` as it is), then between the items of each feature, for which the state is
``transpose(1, 2)``-ed and back; the training items (``x[:, :single_eval_pos]``) attend each other, the test items
attend the training items only. Heads from ``einsum("... s, j h d s -> ... j h d", x, w)``, scores
``einsum("b q h d, b k h d -> b q k h")`` scaled by ``1 / sqrt(d_k)``, ``torch.softmax(logits, dim=2)`` (the keys'
axis of that layout), ``einsum("b q k h, b k h d -> b q h d")``, ``einsum("... h d, h d s -> ... s", ..., w_out)``,
``add_input``, a ``LayerNorm`` after each sublayer.

Bugs: ``softmax-over-heads``: ``torch.softmax(logits, dim=-1)`` (the usual last axis, which in the ``b q k h``
layout is the heads); ``train-items-no-transpose``: the training items' attention called on ``x[:,
:single_eval_pos]`` without ``transpose(1, 2)`` (the comment says attention always treats dim -2 as the sequence:
the features are attended again); ``items-back-reshape``: the test items' output put back with ``.reshape(B,
n_test, F, D)`` instead of ``.transpose(1, 2)``; ``test-keys-include-test``: the test items attend all items, the
other test items included (the leak the train/test split exists to prevent)."""

import sys

import torch
from torch import nn


class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, nhead, bug=""):
        super().__init__()
        self.nhead, self.d_k, self.bug = nhead, d_model // nhead, bug
        self._w_q = nn.Parameter(torch.randn(1, nhead, self.d_k, d_model) * d_model**-0.5)
        self._w_kv = nn.Parameter(torch.randn(2, nhead, self.d_k, d_model) * d_model**-0.5)
        self._w_out = nn.Parameter(torch.randn(nhead, self.d_k, d_model) * d_model**-0.5)

    def compute_attention_heads(self, q, k, v):                                  # (b, q, h, d), (b, k, h, d)
        logits = torch.einsum("b q h d, b k h d -> b q k h", q, k) * self.d_k**-0.5   # (b, T_q, T_k, H)
        ps = torch.softmax(logits, dim=-1 if self.bug == "softmax-over-heads" else 2)
        return torch.einsum("b q k h, b k h d -> b q h d", ps, v)                # (b, T_q, H, d_k)

    def forward(self, x, x_kv=None):                                             # (..., T_q, D), (..., T_k, D)
        x_kv = x if x_kv is None else x_kv
        shape = x.shape
        x, x_kv = x.reshape(-1, *x.shape[-2:]), x_kv.reshape(-1, *x_kv.shape[-2:])   # (b, T_q, D), (b, T_k, D)
        q = torch.einsum("... s, j h d s -> ... j h d", x, self._w_q).squeeze(-3)    # (b, T_q, H, d_k)
        k, v = torch.einsum("... s, j h d s -> ... j h d", x_kv, self._w_kv).unbind(-3)   # (b, T_k, H, d_k)
        out = self.compute_attention_heads(q, k, v)                              # (b, T_q, H, d_k)
        out = torch.einsum("... h d, h d s -> ... s", out, self._w_out)          # (b, T_q, D)
        return out.reshape(shape) + x.reshape(shape)                             # (..., T_q, D) (add_input)


class PerFeatureEncoderLayer(nn.Module):
    def __init__(self, d_model, nhead, bug=""):
        super().__init__()
        self.bug = bug
        self.self_attn_between_features = MultiHeadAttention(d_model, nhead, bug)
        self.self_attn_between_items = MultiHeadAttention(d_model, nhead, bug)
        self.mlp = nn.Sequential(nn.Linear(d_model, 2 * d_model), nn.GELU(), nn.Linear(2 * d_model, d_model))
        self.layer_norms = nn.ModuleList([nn.LayerNorm(d_model, elementwise_affine=False) for _ in range(3)])

    def attn_between_items(self, x, single_eval_pos):                            # (B, T, N, D)
        train = x[:, :single_eval_pos]                                           # (B, T_train, N, D)
        keys = x if self.bug == "test-keys-include-test" else train
        new_x_test = self.self_attn_between_items(x[:, single_eval_pos:].transpose(1, 2), keys.transpose(1, 2))
        if self.bug == "items-back-reshape":
            new_x_test = new_x_test.reshape(x.shape[0], -1, *x.shape[2:])        # (B, T_test, N, D)
        else:
            new_x_test = new_x_test.transpose(1, 2)                              # (B, T_test, N, D)
        if self.bug == "train-items-no-transpose":
            new_x_train = self.self_attn_between_items(train, train)             # (B, T_train, N, D)
        else:
            new_x_train = self.self_attn_between_items(train.transpose(1, 2), train.transpose(1, 2)).transpose(1, 2)
        return torch.cat([new_x_train, new_x_test], dim=1)                       # (B, T, N, D)

    def forward(self, state, single_eval_pos):                                   # (B, T, N, D)
        sublayers = [self.self_attn_between_features, lambda x: self.attn_between_items(x, single_eval_pos),
                     lambda x: x + self.mlp(x)]
        for sublayer, layer_norm in zip(sublayers, self.layer_norms):
            state = layer_norm(sublayer(state))                                  # (B, T, N, D)
        return state


BUGS = ("softmax-over-heads", "train-items-no-transpose", "items-back-reshape", "test-keys-include-test")
TWINS = ()
DIMS = ("B=2 T=7 N=3 D=32 H=4",)   # (T: the items, the last two the test items; N: the feature blocks)


def build(bug="", B=2, T=7, N=3, D=32, H=4):  # noqa: N803
    torch.manual_seed(0)
    return PerFeatureEncoderLayer(D, H, bug).eval(), (torch.randn(B, T, N, D), T - 2)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
