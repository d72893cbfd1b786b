"""nikhilbarhate99/min-decision-transformer issue #2 ("The position of ``dropout`` operation are different from
official repo ?", closed; the author: "this is not an exact reproduction of the Decision Transformer paper ...
zeroing the weights and then multiplying with the values is the same as zeroing the final attention values"
is the reply, and the code kept its form): ``MaskedCausalAttention`` applied its attention dropout to the
output ``att_drop(normalized_weights @ v)`` where the official GPT-2 code drops the normalised weights before
the product. In evaluation mode both dropouts are the identity, so the two forms compute the same values:
the variant is a twin (the difference exists only in training, with random masks, which a trace of one
forward pass in ``eval()`` cannot see).

The idiom: min-decision-transformer's ``DecisionTransformer`` (timestep embeddings added to the return,
state and action embeddings, the three stacked on ``dim=1`` and ``permute(0, 2, 1, 3).reshape(B, 3 * T,
h_dim)`` to interleave them, ``embed_ln``, one ``Block`` of ``MaskedCausalAttention`` with the ``tril`` buffer
``view(1, 1, max_T, max_T)`` filled with ``-inf``, the MLP, then ``reshape(B, T, 3, h_dim).permute(0, 2, 1,
3)`` to read the action prediction from the state tokens).

Twin (dropout position): ``dropout-on-output``: ``att_drop(normalized_weights @ v)``."""

import math
import sys

import torch
import torch.nn.functional as F
from torch import nn

BUGS = ()
TWINS = ("dropout-on-output",)
DIMS = ("B=2 T=6 D=32 H=4",)


class MaskedCausalAttention(nn.Module):
    def __init__(self, h_dim, max_T, n_heads, drop_p, bug=""):
        super().__init__()
        self.n_heads, self.max_T, self.bug = n_heads, max_T, bug
        self.q_net, self.k_net, self.v_net = nn.Linear(h_dim, h_dim), nn.Linear(h_dim, h_dim), nn.Linear(h_dim, h_dim)
        self.proj_net = nn.Linear(h_dim, h_dim)
        self.att_drop, self.proj_drop = nn.Dropout(drop_p), nn.Dropout(drop_p)
        ones = torch.ones((max_T, max_T))
        self.register_buffer("mask", torch.tril(ones).view(1, 1, max_T, max_T))

    def forward(self, x):
        B, T, C = x.shape
        N, D = self.n_heads, C // self.n_heads
        q = self.q_net(x).view(B, T, N, D).transpose(1, 2)
        k = self.k_net(x).view(B, T, N, D).transpose(1, 2)
        v = self.v_net(x).view(B, T, N, D).transpose(1, 2)
        weights = q @ k.transpose(2, 3) / math.sqrt(D)
        weights = weights.masked_fill(self.mask[..., :T, :T] == 0, float("-inf"))
        normalized_weights = F.softmax(weights, dim=-1)
        if self.bug == "dropout-on-output":
            attention = self.att_drop(normalized_weights @ v)
        else:
            attention = self.att_drop(normalized_weights) @ v
        attention = attention.transpose(1, 2).contiguous().view(B, T, N * D)
        return self.proj_drop(self.proj_net(attention))


class Block(nn.Module):
    def __init__(self, h_dim, max_T, n_heads, drop_p, bug=""):
        super().__init__()
        self.attention = MaskedCausalAttention(h_dim, max_T, n_heads, drop_p, bug)
        self.mlp = nn.Sequential(nn.Linear(h_dim, 4 * h_dim), nn.GELU(), nn.Linear(4 * h_dim, h_dim),
                                 nn.Dropout(drop_p))
        self.ln1, self.ln2 = nn.LayerNorm(h_dim), nn.LayerNorm(h_dim)

    def forward(self, x):
        x = x + self.attention(x)
        x = self.ln1(x)
        x = x + self.mlp(x)
        return self.ln2(x)


class DecisionTransformer(nn.Module):
    def __init__(self, state_dim, act_dim, h_dim, n_heads, context_len, max_timestep=32, bug=""):
        super().__init__()
        self.h_dim = h_dim
        self.block = Block(h_dim, 3 * context_len, n_heads, 0.1, bug)
        self.embed_ln = nn.LayerNorm(h_dim)
        self.embed_timestep = nn.Embedding(max_timestep, h_dim)
        self.embed_rtg, self.embed_state = nn.Linear(1, h_dim), nn.Linear(state_dim, h_dim)
        self.embed_action = nn.Linear(act_dim, h_dim)
        self.predict_action = nn.Sequential(nn.Linear(h_dim, act_dim), nn.Tanh())

    def forward(self, timesteps, states, actions, returns_to_go):           # (B,T), (B,T,s), (B,T,a), (B,T,1)
        B, T, _ = states.shape
        time_embeddings = self.embed_timestep(timesteps)
        state_embeddings = self.embed_state(states) + time_embeddings
        action_embeddings = self.embed_action(actions) + time_embeddings
        returns_embeddings = self.embed_rtg(returns_to_go) + time_embeddings
        h = torch.stack((returns_embeddings, state_embeddings, action_embeddings), dim=1)
        h = h.permute(0, 2, 1, 3).reshape(B, 3 * T, self.h_dim)
        h = self.block(self.embed_ln(h))
        h = h.reshape(B, T, 3, self.h_dim).permute(0, 2, 1, 3)
        return self.predict_action(h[:, 1])                                            # (B, T, a)


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    model = DecisionTransformer(11, 3, D, H, T, bug=bug).eval()
    timesteps = torch.arange(T).unsqueeze(0).repeat(B, 1)
    return model, (timesteps, torch.randn(B, T, 11), torch.randn(B, T, 3), torch.randn(B, T, 1))


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
