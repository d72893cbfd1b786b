"""huggingface/transformers, src/transformers/models/pegasus_x/modeling_pegasus_x.py (v4.46,
``PegasusXGlobalLocalAttention``, ``PegasusXEncoderLayer``, ``PegasusXEncoder``): the encoder keeps ``G`` learnt
global tokens (``embed_global``) beside the ``T`` input tokens; each attention projects both with the same
``q_proj``/``k_proj``/``v_proj`` and ``_shape`` (``view(B, n, H, d).transpose(1, 2)``). The globals attend to
all (``cat([global_k, token_k], dim=2)``, ``einsum("BHGF,BHXF->BHGX")``, the padding mask on the token keys,
``softmax``); each token attends within its block (``view(B, H, N, K, d)``: ``N`` blocks of ``K`` tokens) and to
the globals: ``einsum("BHNKF,BHNXF->BHNKX")`` and ``einsum("BHNKF,BHGF->BHNKG")`` joined by ``cat`` on the last
axis, the blocked padding mask added, one ``softmax``, split back, ``einsum`` with the blocked and the global values,
summed and ``view(B, H, T, d)``; then ``transpose(1, 2).reshape(B, T, D)`` and ``out_proj``. (The staggered
layers' half-block shift is left out: one layer.)

Bugs: ``blocks-size-first``: the blocked tokens as ``view(B, H, K, N, d)`` where ``view(B, H, N, K, d)`` is
meant, the mask blocked the same way, so the einsums read ``K`` blocks of ``N`` tokens (the block size and the block
count swapped: the natural slip of block-local ports that write the block size first; each token attends within 2
neighbours, not 5: a window of the wrong width, decided by no name); ``softmax-local-global-apart``: the local and
the global scores normalised by two softmaxes instead of one over their ``cat`` (each token's weights then sum to
2: the slip of ports that attend to the two key sets separately)."""

import sys

import torch
from torch import nn


class PegasusXGlobalLocalAttention(nn.Module):
    def __init__(self, dim, heads, block_size, bug=""):
        super().__init__()
        self.embed_dim, self.num_heads, self.block_size, self.bug = dim, heads, block_size, bug
        self.head_dim = dim // heads
        self.k_proj = nn.Linear(dim, dim, bias=False)
        self.v_proj = nn.Linear(dim, dim, bias=False)
        self.q_proj = nn.Linear(dim, dim, bias=False)
        self.out_proj = nn.Linear(dim, dim, bias=False)

    def _shape(self, tensor, seq_len, bsz):
        return tensor.view(bsz, seq_len, self.num_heads, self.head_dim).transpose(1, 2).contiguous()

    def _blocks(self, tensor, bsz, num_blocks):
        if self.bug == "blocks-size-first":
            return tensor.view(bsz, self.num_heads, self.block_size, num_blocks, self.head_dim)
        return tensor.view(bsz, self.num_heads, num_blocks, self.block_size, self.head_dim)

    def forward(self, token_hidden_states, global_hidden_states, mask):  # (B, T, D), (B, G, D), (B, T)
        bsz, seq_len, _ = token_hidden_states.size()
        global_len = global_hidden_states.size(1)
        token_q = self._shape(self.q_proj(token_hidden_states), seq_len, bsz)          # (B, H, T, d)
        token_k = self._shape(self.k_proj(token_hidden_states), seq_len, bsz)
        token_v = self._shape(self.v_proj(token_hidden_states), seq_len, bsz)
        global_q = self._shape(self.q_proj(global_hidden_states), global_len, bsz)     # (B, H, G, d)
        global_k = self._shape(self.k_proj(global_hidden_states), global_len, bsz)
        global_v = self._shape(self.v_proj(global_hidden_states), global_len, bsz)
        global_out = self.compute_global(global_q, global_k, global_v, token_k, token_v, mask)
        local_out = self.compute_local(token_q, token_k, token_v, global_k, global_v, mask)
        token_out = self.out_proj(local_out.transpose(1, 2).reshape(bsz, seq_len, self.embed_dim))
        global_out = self.out_proj(global_out.transpose(1, 2).reshape(bsz, global_len, self.embed_dim))
        return token_out, global_out

    def compute_global(self, global_q, global_k, global_v, token_k, token_v, mask):
        extended_mask = nn.functional.pad(mask, pad=(global_k.shape[2], 0), value=0)   # (B, G + T)
        global_and_local_k = torch.cat([global_k, token_k], dim=2)
        global_and_local_v = torch.cat([global_v, token_v], dim=2)
        attn_weights = torch.einsum("BHGF,BHXF->BHGX", global_q, global_and_local_k) * self.head_dim ** -0.5
        attn_weights = attn_weights + extended_mask[:, None, None, :]
        attn_probs = nn.functional.softmax(attn_weights, dim=-1)
        return torch.einsum("BHGX,BHXF->BHGF", attn_probs, global_and_local_v)

    def compute_local(self, token_q, token_k, token_v, global_k, global_v, mask):
        bsz, num_heads, seq_len, dim_per_head = token_q.shape
        num_blocks = seq_len // self.block_size
        blocked_q = self._blocks(token_q, bsz, num_blocks)                # (B, H, N, K, d)
        blocked_k = self._blocks(token_k, bsz, num_blocks)
        blocked_v = self._blocks(token_v, bsz, num_blocks)
        if self.bug == "blocks-size-first":
            blocked_mask = mask.view(bsz, self.block_size, num_blocks)
        else:
            blocked_mask = mask.view(bsz, num_blocks, self.block_size)    # (B, N, K)
        scale = dim_per_head ** -0.5
        local_scores = torch.einsum("BHNKF,BHNXF->BHNKX", blocked_q, blocked_k) * scale   # (B, H, N, K, K)
        local_scores = local_scores + blocked_mask[:, None, :, None, :]
        global_scores = torch.einsum("BHNKF,BHGF->BHNKG", blocked_q, global_k) * scale    # (B, H, N, K, G)
        if self.bug == "softmax-local-global-apart":
            local_probs = nn.functional.softmax(local_scores, dim=-1)
            global_probs = nn.functional.softmax(global_scores, dim=-1)
        else:
            attn_weights = torch.cat([global_scores, local_scores], dim=-1)   # (B, H, N, K, G + K)
            attn_probs = nn.functional.softmax(attn_weights, dim=-1)
            global_probs = attn_probs[:, :, :, :, :global_k.shape[2]]
            local_probs = attn_probs[:, :, :, :, global_k.shape[2]:]
        local_out = torch.einsum("BHNKX,BHNXF->BHNKF", local_probs, blocked_v)
        global_out = torch.einsum("BHNKG,BHGF->BHNKF", global_probs, global_v)
        return (local_out + global_out).view(bsz, num_heads, seq_len, dim_per_head)     # (B, H, T, d)


class PegasusXEncoderLayer(nn.Module):
    def __init__(self, dim, heads, block_size, bug=""):
        super().__init__()
        self.self_attn = PegasusXGlobalLocalAttention(dim, heads, block_size, bug)
        self.self_attn_layer_norm = nn.LayerNorm(dim)
        self.global_self_attn_layer_norm = nn.LayerNorm(dim)
        self.fc1, self.fc2 = nn.Linear(dim, 2 * dim), nn.Linear(2 * dim, dim)
        self.final_layer_norm = nn.LayerNorm(dim)

    def forward(self, hidden_states, global_hidden_states, mask):
        tokens, globals_ = self.self_attn(self.self_attn_layer_norm(hidden_states),
                                          self.global_self_attn_layer_norm(global_hidden_states), mask)
        hidden_states, global_hidden_states = hidden_states + tokens, global_hidden_states + globals_
        hidden_states = hidden_states + self.fc2(nn.functional.gelu(self.fc1(self.final_layer_norm(hidden_states))))
        return hidden_states, global_hidden_states


class PegasusXEncoder(nn.Module):
    def __init__(self, dim, heads, globals_=3, block_size=3, bug="", vocab=60, max_positions=64):
        super().__init__()
        self.embed_tokens = nn.Embedding(vocab, dim, padding_idx=0)
        self.embed_global = nn.Embedding(globals_, dim)
        self.embed_positions = nn.Embedding(max_positions, dim)
        self.layers = nn.ModuleList([PegasusXEncoderLayer(dim, heads, block_size, bug)])
        self.layer_norm = nn.LayerNorm(dim)

    def forward(self, input_ids, attention_mask):                         # (B, T), (B, T)
        bsz, seq_len = input_ids.shape
        inputs_embeds = self.embed_tokens(input_ids)
        hidden_states = inputs_embeds + self.embed_positions(torch.arange(seq_len))
        inverted_mask = 1.0 - attention_mask.to(hidden_states.dtype)
        mask_min_value = torch.finfo(hidden_states.dtype).min
        inverted_mask = inverted_mask.masked_fill(inverted_mask.bool(), mask_min_value)     # (B, T)
        global_hidden_states = self.embed_global(torch.arange(self.embed_global.num_embeddings)[None].expand(bsz, -1))
        for layer in self.layers:
            hidden_states, global_hidden_states = layer(hidden_states, global_hidden_states, inverted_mask)
        return self.layer_norm(hidden_states), global_hidden_states


BUGS = ("blocks-size-first", "softmax-local-global-apart")
TWINS = ()
DIMS = ("B=2 T=10 D=32 H=4 G=3",)


def build(bug="", B=2, T=10, D=32, H=4, G=3):
    """Two blocks of ``T // 2`` tokens; the last sequence ends with one pad token."""
    torch.manual_seed(0)
    input_ids = torch.randint(1, 60, (B, T))
    mask = torch.ones(B, T, dtype=torch.long)
    mask[-1, -1] = 0
    input_ids[-1, -1] = 0
    return PegasusXEncoder(D, H, globals_=G, block_size=T // 2, bug=bug).eval(), (input_ids, mask)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
