"""kzl/decision-transformer, gym/decision_transformer/models/decision_transformer.py (``DecisionTransformer
.forward``) over a GPT-2 block in the style of huggingface/transformers' ``GPT2Attention`` (``c_attn`` fused,
``split``, ``_split_heads``, a causal ``bias`` buffer, ``torch.where(causal_mask, w, mask_value)``): returns,
states and actions embedded, each plus a timestep embedding, then ``torch.stack((returns, states, actions),
dim=1).permute(0, 2, 1, 3).reshape(B, 3 * T, D)`` interleaves them as (R_1, s_1, a_1, R_2, ...); after the
transformer ``x.reshape(B, T, 3, D).permute(0, 2, 1, 3)`` and the action predicted from the state tokens
``x[:, 1]``.

Bugs (argument): ``stack-without-permute``: the stacked embeddings reshaped without the ``permute`` (tokens
grouped by kind, not interleaved: every state then sees every return-to-go, later ones too, through the causal
mask; the slip reported in ports that stack on ``dim=2`` but keep the permute, or drop both);
``readout-from-actions``: the action predicted from ``x[:, 2]`` (the action tokens, so each prediction sees the
action it predicts)."""

import sys

import torch
from torch import nn


class GPT2Attention(nn.Module):
    def __init__(self, dim, heads, max_positions=64):
        super().__init__()
        self.heads, self.head_dim = heads, dim // heads
        self.c_attn, self.c_proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
        self.register_buffer("bias", torch.tril(torch.ones(max_positions, max_positions, dtype=torch.bool))
                             .view(1, 1, max_positions, max_positions), persistent=False)

    def _split_heads(self, x):
        return x.view(x.size()[:-1] + (self.heads, self.head_dim)).permute(0, 2, 1, 3)

    def forward(self, x):                                                        # (B, 3T, D)
        q, k, v = self.c_attn(x).split(x.size(-1), dim=2)
        q, k, v = self._split_heads(q), self._split_heads(k), self._split_heads(v)
        w = torch.matmul(q, k.transpose(-1, -2)) / v.size(-1) ** 0.5
        n = q.size(-2)
        causal_mask = self.bias[:, :, :n, :n]
        w = torch.where(causal_mask, w, torch.tensor(torch.finfo(w.dtype).min, dtype=w.dtype))
        w = nn.functional.softmax(w, dim=-1)
        out = torch.matmul(w, v).permute(0, 2, 1, 3).contiguous()
        return self.c_proj(out.view(out.size()[:-2] + (self.heads * self.head_dim,)))


class DecisionTransformer(nn.Module):
    def __init__(self, state_dim, act_dim, dim, heads, bug="", max_ep_len=32):
        super().__init__()
        self.bug = bug
        self.embed_timestep = nn.Embedding(max_ep_len, dim)
        self.embed_return, self.embed_state = nn.Linear(1, dim), nn.Linear(state_dim, dim)
        self.embed_action = nn.Linear(act_dim, dim)
        self.embed_ln, self.ln = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.attn = GPT2Attention(dim, heads)
        self.predict_action = nn.Linear(dim, act_dim)

    def forward(self, states, actions, returns_to_go, timesteps):              # (B, T, S), (B, T, A), (B, T, 1)
        B, T = states.shape[0], states.shape[1]
        time_embeddings = self.embed_timestep(timesteps)
        state_embeddings = self.embed_state(states) + time_embeddings
        action_embeddings = self.embed_action(actions) + time_embeddings
        returns_embeddings = self.embed_return(returns_to_go) + time_embeddings
        stacked = torch.stack((returns_embeddings, state_embeddings, action_embeddings), dim=1)  # (B, 3, T, D)
        if self.bug != "stack-without-permute":
            stacked = stacked.permute(0, 2, 1, 3)                                # (B, T, 3, D)
        x = self.embed_ln(stacked.reshape(B, 3 * T, -1))
        x = x + self.attn(self.ln(x))
        x = x.reshape(B, T, 3, -1).permute(0, 2, 1, 3)                           # (B, 3, T, D)
        return self.predict_action(x[:, 2] if self.bug == "readout-from-actions" else x[:, 1])


BUGS = ("stack-without-permute", "readout-from-actions")
TWINS = ()
DIMS = ("B=2 T=5 D=32 H=4",)


def build(bug="", B=2, T=5, D=32, H=4):
    torch.manual_seed(0)
    model = DecisionTransformer(3, 2, D, H, bug).eval()
    inputs = (torch.randn(B, T, 3), torch.randn(B, T, 2), torch.randn(B, T, 1),
              torch.arange(T).unsqueeze(0).expand(B, -1))
    return model, inputs


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
