"""huggingface/transformers, src/transformers/models/nystromformer/modeling_nystromformer.py
(``NystromformerSelfAttention``; https://github.com/huggingface/transformers/blob/main/src/transformers/models/
nystromformer/modeling_nystromformer.py, after mlpen/Nystromformer's ``NystromAttention``): queries and keys
scaled by ``1 / sqrt(sqrt(head_size))``; landmarks as segment means, ``query_layer.reshape(-1,
num_attention_heads, num_landmarks, seq_len // num_landmarks, head_size).mean(dim=-2)``; three softmaxes
``kernel_1 = softmax(q @ k_landmarksᵀ)``, ``kernel_2 = softmax(q_landmarks @ k_landmarksᵀ)``, ``kernel_3 =
softmax(q_landmarks @ kᵀ + mask)``; ``iterative_inv`` (Newton-Schulz pseudo-inverse started from ``value
= 1 / torch.max(torch.sum(key, dim=-2), dim=-1).values[:, :, None, None] * key.transpose(-1, -2)``, the
default ``inv_coeff_init_option``; six iterations);
``matmul(matmul(kernel_1, iterative_inv(kernel_2)), matmul(kernel_3, v))``; a depthwise ``Conv2d(H, H,
(k, 1), groups=H)`` over the values' tokens added; ``permute(0, 2, 1, 3)`` and ``view``.

Bugs (argument): ``landmarks-before-transpose``: the landmarks taken from the ``(B, T, H, d)`` view before
``permute(0, 2, 1, 3)`` (``reshape(-1, H, L, T // L, d)`` of token-major rows: each "segment" mixes tokens
and heads); ``kernel1-softmax-queries``: ``softmax(q @ k_landmarksᵀ, dim=-2)`` (over the queries: each
landmark's weights sum to one over the tokens instead of each token's over the landmarks);
``inverse-init-global-max``: the ``"original"`` start (mlpen/Nystromformer's ``1 /
torch.max(torch.sum(K, dim=-2)) * K.transpose(-1, -2)``): one maximum over the whole batch and every head,
so after six iterations each entry's output depends on the other entries of its batch."""

import math
import sys

import torch
from torch import nn

BUGS = ("landmarks-before-transpose", "kernel1-softmax-queries", "inverse-init-global-max")
TWINS = ()
DIMS = ("B=2 T=12 D=32 H=4",)
EQUAL = {"B=2 T=12 D=32 H=4": "B=4 T=4 D=32 H=4"}


class NystromformerSelfAttention(nn.Module):
    def __init__(self, hidden_size=32, num_attention_heads=4, num_landmarks=2, conv_kernel_size=3, bug=""):
        super().__init__()
        self.bug = bug
        self.num_attention_heads = num_attention_heads
        self.attention_head_size = hidden_size // num_attention_heads
        self.all_head_size = hidden_size
        self.num_landmarks = num_landmarks
        self.query = nn.Linear(hidden_size, hidden_size)
        self.key = nn.Linear(hidden_size, hidden_size)
        self.value = nn.Linear(hidden_size, hidden_size)
        self.conv = nn.Conv2d(num_attention_heads, num_attention_heads, kernel_size=(conv_kernel_size, 1),
                              padding=(conv_kernel_size // 2, 0), bias=False, groups=num_attention_heads)

    def iterative_inv(self, mat, n_iter=6):
        identity = torch.eye(mat.size(-1))
        key = mat
        if self.bug == "inverse-init-global-max":
            value = 1 / torch.max(torch.sum(key, dim=-2)) * key.transpose(-1, -2)  # bug: one max for the batch
        else:
            value = 1 / torch.max(torch.sum(key, dim=-2), dim=-1).values[:, :, None, None] * key.transpose(-1, -2)
        for _ in range(n_iter):
            key_value = torch.matmul(key, value)
            value = torch.matmul(
                0.25 * value,
                13 * identity
                - torch.matmul(key_value, 15 * identity - torch.matmul(key_value, 7 * identity - key_value)),
            )
        return value

    def transpose_for_scores(self, layer):
        new_layer_shape = layer.size()[:-1] + (self.num_attention_heads, self.attention_head_size)
        layer = layer.view(*new_layer_shape)  # (B, T, H, d)
        return layer.permute(0, 2, 1, 3)  # (B, H, T, d)

    def forward(self, hidden_states, attention_mask):
        seq_len = hidden_states.size(1)
        mixed_query_layer = self.query(hidden_states)
        key_layer = self.transpose_for_scores(self.key(hidden_states))
        value_layer = self.transpose_for_scores(self.value(hidden_states))
        query_layer = self.transpose_for_scores(mixed_query_layer)
        query_layer = query_layer / math.sqrt(math.sqrt(self.attention_head_size))
        key_layer = key_layer / math.sqrt(math.sqrt(self.attention_head_size))
        shape = (-1, self.num_attention_heads, self.num_landmarks, seq_len // self.num_landmarks,
                 self.attention_head_size)
        if self.bug == "landmarks-before-transpose":
            q_token_major = mixed_query_layer.view(*mixed_query_layer.size()[:-1], self.num_attention_heads, -1)
            q_landmarks = (q_token_major / math.sqrt(math.sqrt(self.attention_head_size))).reshape(shape)
            q_landmarks = q_landmarks.mean(dim=-2)  # bug: (B, H, L, d) of mixed rows
        else:
            q_landmarks = query_layer.reshape(shape).mean(dim=-2)  # (B, H, L, d)
        k_landmarks = key_layer.reshape(shape).mean(dim=-2)  # (B, H, L, d)
        softmax_dim = -2 if self.bug == "kernel1-softmax-queries" else -1
        kernel_1 = nn.functional.softmax(torch.matmul(query_layer, k_landmarks.transpose(-1, -2)), dim=softmax_dim)
        kernel_2 = nn.functional.softmax(torch.matmul(q_landmarks, k_landmarks.transpose(-1, -2)), dim=-1)
        attention_scores = torch.matmul(q_landmarks, key_layer.transpose(-1, -2))  # (B, H, L, T)
        attention_scores = attention_scores + attention_mask
        kernel_3 = nn.functional.softmax(attention_scores, dim=-1)
        attention_probs = torch.matmul(kernel_1, self.iterative_inv(kernel_2))  # (B, H, T, L)
        new_value_layer = torch.matmul(kernel_3, value_layer)  # (B, H, L, d)
        context_layer = torch.matmul(attention_probs, new_value_layer)  # (B, H, T, d)
        context_layer += self.conv(value_layer)
        context_layer = context_layer.permute(0, 2, 1, 3).contiguous()  # (B, T, H, d)
        new_context_layer_shape = context_layer.size()[:-2] + (self.all_head_size,)
        return context_layer.view(*new_context_layer_shape)  # (B, T, D)


class NystromformerLayer(nn.Module):
    def __init__(self, hidden_size=32, num_attention_heads=4, bug=""):
        super().__init__()
        self.attention = NystromformerSelfAttention(hidden_size, num_attention_heads, bug=bug)

    def forward(self, hidden_states, mask):
        extended = (1.0 - mask[:, None, None, :].to(hidden_states.dtype)) * -10000.0  # (B, 1, 1, T)
        return self.attention(hidden_states, extended)


def build(bug="", B=2, T=12, D=32, H=4):
    """--dims 'B=2 T=12 D=32 H=4': hidden states (B, T, D), two landmarks, no padding."""
    torch.manual_seed(0)
    return NystromformerLayer(D, H, bug).eval(), (torch.randn(B, T, D), torch.ones(B, T, dtype=torch.long))


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
