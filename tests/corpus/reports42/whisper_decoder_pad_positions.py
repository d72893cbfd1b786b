"""huggingface/transformers issue #20624 ("Whisper doesn't compute positional embeddings properly when given
batches of prompt tokens"; again in pull request #48028, "[Whisper] Fix decoder position IDs for left-padded
batches in longform generation", merged): ``WhisperDecoder`` read its learned positions as
``embed_positions.weight[past_key_values_length : past_key_values_length + T]``, the same ``arange`` for every row,
so in a batch of prompts of different lengths, left-padded to one width, every shorter row's tokens got the
positions of the longer row's ("it assumes all sequences have the same ``past_key_values_length``"). The fix
derives ``decoder_position_ids`` from ``decoder_attention_mask`` (``cumsum(-1) - 1``, the padding at 0), as
PR #48028 restored after a refactor dropped it.

The idiom (``modeling_whisper.py`` of the time): ``embed_tokens`` + ``embed_positions`` (an ``nn.Embedding``);
``WhisperAttention`` (``q_proj`` times ``scaling = head_dim ** -0.5``, ``k_proj`` without bias, ``_shape`` =
``view(B, L, H, d).transpose(1, 2)``, folded to ``(B * H, L, d)`` for ``torch.bmm``, the 4-d mask added on a
``(B, H, T, L)`` view, ``softmax(-1)``, ``bmm`` with the values, ``view(B, H, T, d).transpose(1, 2).reshape``,
``out_proj``); the decoder layer: pre-norm self-attention with the causal mask combined with the padding mask,
cross-attention over the encoder states ``(B, S, D)`` (no mask: Whisper's encoder input is a fixed 30 s window),
GELU MLP; the first row left-padded by two.

Bug (positions): ``positions-without-mask``: ``weight[0:T]`` for every row."""

import sys

import torch
from torch import nn

BUGS = ("positions-without-mask",)
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4 S=5",)
EQUAL = {DIMS[0]: "B=4 T=4 D=32 H=4 S=4"}


class WhisperAttention(nn.Module):
    def __init__(self, embed_dim, num_heads):
        super().__init__()
        self.embed_dim, self.num_heads, self.head_dim = embed_dim, num_heads, embed_dim // num_heads
        self.scaling = self.head_dim ** -0.5
        self.k_proj = nn.Linear(embed_dim, embed_dim, bias=False)
        self.v_proj = nn.Linear(embed_dim, embed_dim)
        self.q_proj = nn.Linear(embed_dim, embed_dim)
        self.out_proj = nn.Linear(embed_dim, embed_dim)

    def _shape(self, tensor, seq_len, bsz):
        return tensor.view(bsz, seq_len, self.num_heads, self.head_dim).transpose(1, 2).contiguous()

    def forward(self, hidden_states, key_value_states=None, attention_mask=None):
        bsz, tgt_len, _ = hidden_states.size()
        kv_states = hidden_states if key_value_states is None else key_value_states
        query_states = self.q_proj(hidden_states) * self.scaling
        key_states = self._shape(self.k_proj(kv_states), -1, bsz)                       # (B, H, L, d)
        value_states = self._shape(self.v_proj(kv_states), -1, bsz)                     # (B, H, L, d)
        proj_shape = (bsz * self.num_heads, -1, self.head_dim)
        query_states = self._shape(query_states, tgt_len, bsz).view(*proj_shape)        # (B*H, T, d)
        key_states = key_states.reshape(*proj_shape)                                    # (B*H, L, d)
        value_states = value_states.reshape(*proj_shape)                                # (B*H, L, d)
        src_len = key_states.size(1)
        attn_weights = torch.bmm(query_states, key_states.transpose(1, 2))              # (B*H, T, L)
        if attention_mask is not None:
            attn_weights = attn_weights.view(bsz, self.num_heads, tgt_len, src_len) + attention_mask
            attn_weights = attn_weights.view(bsz * self.num_heads, tgt_len, src_len)
        attn_weights = nn.functional.softmax(attn_weights, dim=-1)
        attn_output = torch.bmm(attn_weights, value_states)                             # (B*H, T, d)
        attn_output = attn_output.view(bsz, self.num_heads, tgt_len, self.head_dim).transpose(1, 2)   # (B, T, H, d)
        return self.out_proj(attn_output.reshape(bsz, tgt_len, self.embed_dim))         # (B, T, D)


class WhisperDecoderLayer(nn.Module):
    def __init__(self, d_model, heads):
        super().__init__()
        self.self_attn, self.encoder_attn = WhisperAttention(d_model, heads), WhisperAttention(d_model, heads)
        self.self_attn_layer_norm, self.encoder_attn_layer_norm = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.final_layer_norm = nn.LayerNorm(d_model)
        self.fc1, self.fc2 = nn.Linear(d_model, 4 * d_model), nn.Linear(4 * d_model, d_model)

    def forward(self, hidden_states, attention_mask, encoder_hidden_states):
        hidden_states = hidden_states + self.self_attn(self.self_attn_layer_norm(hidden_states),
                                                       attention_mask=attention_mask)
        hidden_states = hidden_states + self.encoder_attn(self.encoder_attn_layer_norm(hidden_states),
                                                          key_value_states=encoder_hidden_states)
        h = self.fc2(nn.functional.gelu(self.fc1(self.final_layer_norm(hidden_states))))
        return hidden_states + h


class WhisperDecoder(nn.Module):
    def __init__(self, vocab, d_model, heads, max_target_positions=16, bug=""):
        super().__init__()
        self.bug = bug
        self.embed_tokens = nn.Embedding(vocab, d_model)
        self.embed_positions = nn.Embedding(max_target_positions, d_model)
        self.layer = WhisperDecoderLayer(d_model, heads)
        self.layer_norm = nn.LayerNorm(d_model)

    def forward(self, input_ids, attention_mask, encoder_hidden_states):               # (B, T), (B, T), (B, S, D)
        bsz, seq_len = input_ids.shape
        inputs_embeds = self.embed_tokens(input_ids)                                    # (B, T, D)
        if self.bug == "positions-without-mask":
            positions = self.embed_positions.weight[0: seq_len]                         # (T, D)
        else:
            position_ids = (attention_mask.cumsum(-1) - 1).clamp(min=0)                 # (B, T)
            positions = self.embed_positions(position_ids)                              # (B, T, D)
        causal = torch.tril(torch.ones(seq_len, seq_len, dtype=torch.bool))             # (T, T)
        keep = causal[None, None, :, :] & attention_mask[:, None, None, :].bool()       # (B, 1, T, T)
        mask = (~keep).float() * torch.finfo(torch.float32).min
        hidden_states = self.layer(inputs_embeds + positions, mask, encoder_hidden_states)
        return self.layer_norm(hidden_states)                                           # (B, T, D)


def build(bug="", B=2, T=6, D=32, H=4, S=5):
    torch.manual_seed(0)
    attention_mask = torch.ones(B, T, dtype=torch.long)
    attention_mask[0, :2] = 0                                                           # left padding
    input_ids = torch.randint(1, 50, (B, T)).masked_fill(attention_mask == 0, 0)
    return WhisperDecoder(50, D, H, bug=bug).eval(), (input_ids, attention_mask, torch.randn(B, S, D))


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
