"""lucidrains/block-recurrent-transformer-pytorch, block_recurrent_transformer_pytorch/
block_recurrent_transformer_pytorch.py (``AttentionBlock.forward``, ``StateContainer.read`` / ``write``,
``Attend.forward``, ``BlockRecurrentTransformer.get_causal_attn_mask``): one recurrent layer of the Block-Recurrent
Transformer on one block. Queries have ``heads`` heads, keys and values one (``to_kv = Linear(dim, dim_head * 2)``,
scored by ``einsum('b h i d, b j d -> b h i j')``); the previous block's keys and values (``xl_memories``, the
stacked ``(k, v)``) are concatenated in front ``cat((past_k, k), dim=1)`` and the causal mask padded on the left
for them, ``F.pad(attn_mask, (mem_len, 0), value=True)``. The state container: ``read`` cross-attends the block's
own queries ``q_to_state`` (``rearrange('... n (h d) -> ... h n d')``) to keys and values of the layer-normed states
plus learned ``state_pos_ids``; ``write`` runs the states' self-attention and their cross-attention to the block's
keys and values, concatenates the two on the features ``cat(..., dim=-1)`` ``(b, h, s, 2d)``, merges heads, projects
``to_state_out``, and gates the new states with a learned EMA ``sigmoid(learned_ema_beta) * z + (1 - ...) *
states``. The read is concatenated to the attention output before ``to_out``. (Rotary/xpos left out.)

Bugs: ``xl-mask-pad-right``: ``F.pad(attn_mask, (0, mem_len), value=True)`` (the memory's all-true columns put
after the block's: the causal pattern lands on the memory's keys and every query sees the whole current block);
``state-kv-from-init-state``: the read's keys and values made from ``init_state`` instead of the states passed in
(issue #3, "recurrent state keys and values are derived from self.init_state rather than previous recurrent state",
fixed by the author: the recurrence reads nothing of the previous block); ``state-query-view-heads``:
``q_to_state.view(b, h, n, -1)`` for the rearrange (the block's tokens and heads interleaved in the queries to the
states)."""

import sys

import torch
import torch.nn.functional as F
from einops import rearrange, repeat
from torch import einsum, nn


class LayerNorm(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.gamma = nn.Parameter(torch.ones(dim))
        self.register_buffer("beta", torch.zeros(dim))

    def forward(self, x):
        return F.layer_norm(x, x.shape[-1:], self.gamma, self.beta)


class Attend(nn.Module):
    def forward(self, q, k, v, mask=None):
        scale = q.shape[-1] ** -0.5
        k_einsum = "b j d" if k.ndim == 3 else "b h j d"
        v_einsum = "b j d" if v.ndim == 3 else "b h j d"
        sim = einsum(f"b h i d, {k_einsum} -> b h i j", q, k) * scale         # (b, h, i, j)
        if mask is not None:
            sim = sim.masked_fill(~mask, -torch.finfo(sim.dtype).max)
        attn = sim.softmax(dim=-1)
        return einsum(f"b h i j, {v_einsum} -> b h i d", attn, v)             # (b, h, i, d)


class StateContainer(nn.Module):
    def __init__(self, dim, num_state_vectors, dim_head, heads, bug=""):
        super().__init__()
        self.heads, self.bug = heads, bug
        inner_dim = dim_head * heads
        self.state_norm = LayerNorm(dim)
        self.q_to_state = nn.Linear(dim, inner_dim, bias=False)
        self.q_from_state = nn.Linear(dim, inner_dim, bias=False)
        self.state_to_q = nn.Linear(dim, inner_dim, bias=False)
        self.state_to_kv = nn.Linear(dim, dim_head * 2, bias=False)
        self.init_state = nn.Parameter(torch.randn(num_state_vectors, dim) * 0.1)
        self.state_pos_ids = nn.Parameter(torch.randn(num_state_vectors, dim))
        self.to_state_out = nn.Linear(inner_dim * 2, dim, bias=False)
        self.attend = Attend()
        self.state_out_to_gate = nn.Linear(dim, dim)
        self.learned_ema_beta = nn.Parameter(torch.randn(dim) * 0.1)

    def read(self, x, states):
        normed_states = self.state_norm(states) + self.state_pos_ids          # (b, s, dim)
        q_to_state = self.q_to_state(x)
        if self.bug == "state-query-view-heads":
            q_to_state = q_to_state.view(x.shape[0], self.heads, x.shape[1], -1)
        else:
            q_to_state = rearrange(q_to_state, "... n (h d) -> ... h n d", h=self.heads)   # (b, h, n, d)
        if self.bug == "state-kv-from-init-state":
            init = repeat(self.init_state, "s d -> b s d", b=x.shape[0])      # (b, s, dim)
            state_k, state_v = self.state_to_kv(self.state_norm(init) + self.state_pos_ids).chunk(2, dim=-1)
        else:
            state_k, state_v = self.state_to_kv(normed_states).chunk(2, dim=-1)   # (b, s, d)
        to_state_out = self.attend(q_to_state, state_k, state_v)              # (b, h, n, d)
        to_state_out = rearrange(to_state_out, "b h n d -> b n (h d)")        # (b, n, h·d)
        return to_state_out, (states, normed_states, state_k, state_v)

    def write(self, memories, cache):
        k, v = memories
        states, normed_states, state_k, state_v = cache
        q_from_state = rearrange(self.q_from_state(normed_states), "... n (h d) -> ... h n d", h=self.heads)
        state_q = rearrange(self.state_to_q(normed_states), "b n (h d) -> b h n d", h=self.heads)   # (b, h, s, d)
        state_out = self.attend(state_q, state_k, state_v)                    # (b, h, s, d)
        from_state_out = self.attend(q_from_state, k, v)                      # (b, h, s, d)
        state_out = torch.cat((state_out, from_state_out), dim=-1)            # (b, h, s, 2d)
        state_out = rearrange(state_out, "b h n d -> b n (h d)")              # (b, s, h·2d)
        state_out = self.to_state_out(state_out)
        z = self.state_out_to_gate(state_out)
        learned_ema_decay = self.learned_ema_beta.sigmoid()
        return learned_ema_decay * z + (1 - learned_ema_decay) * states


class AttentionBlock(nn.Module):
    def __init__(self, dim, dim_head, heads, num_state_vectors, bug=""):
        super().__init__()
        inner_dim = dim_head * heads
        self.heads, self.bug = heads, bug
        self.norm = LayerNorm(dim)
        self.to_q = nn.Linear(dim, inner_dim, bias=False)
        self.to_kv = nn.Linear(dim, dim_head * 2, bias=False)
        self.attend = Attend()
        self.to_out = nn.Linear(inner_dim * 2, dim, bias=False)
        self.state_container = StateContainer(dim, num_state_vectors, dim_head, heads, bug)

    def forward(self, x, xl_memories, states):
        seq_len = x.shape[1]
        x = self.norm(x)
        q, k, v = (self.to_q(x), *self.to_kv(x).chunk(2, dim=-1))             # (b, n, h·d), 2 × (b, n, d)
        q = rearrange(q, "b n (h d) -> b h n d", h=self.heads)                # (b, h, n, d)
        memories = torch.stack((k, v))                                        # (2, b, n, d)
        mem_len = xl_memories.shape[-2]
        past_k, past_v = xl_memories
        k = torch.cat((past_k, k), dim=1)                                     # (b, m + n, d)
        v = torch.cat((past_v, v), dim=1)                                     # (b, m + n, d)
        attn_mask = ~torch.ones((seq_len, seq_len), dtype=torch.bool).triu(1)
        pad = (0, mem_len) if self.bug == "xl-mask-pad-right" else (mem_len, 0)
        attn_mask = F.pad(attn_mask, pad, value=True)                         # (n, m + n)
        out = self.attend(q, k, v, mask=attn_mask)                            # (b, h, n, d)
        out = rearrange(out, "b h n d -> b n (h d)")                          # (b, n, h·d)
        to_state_out, cache = self.state_container.read(x, states)
        out = torch.cat((out, to_state_out), dim=-1)                          # (b, n, 2·h·d)
        new_states = self.state_container.write(memories, cache)
        return self.to_out(out), memories, new_states


BUGS = ("xl-mask-pad-right", "state-kv-from-init-state", "state-query-view-heads")
TWINS = ()
DIMS = ("B=2 T=5 S=3 D=32 H=4",)   # (T: the block width, S: the state vectors)
EQUAL = {DIMS[0]: "B=4 T=4 S=4 D=32 H=4"}


def build(bug="", B=2, T=5, S=3, D=32, H=4):  # noqa: N803
    """The second block: ``x (B, T, D)``, the first block's stacked keys and values ``(2, B, T, D / H)`` and the
    states it wrote ``(B, S, D)``."""
    torch.manual_seed(0)
    model = AttentionBlock(D, D // H, H, num_state_vectors=S, bug=bug).eval()
    return model, (torch.randn(B, T, D), torch.randn(2, B, T, D // H), torch.randn(B, S, D))


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
