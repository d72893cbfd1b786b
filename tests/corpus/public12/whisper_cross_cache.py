"""huggingface/transformers, src/transformers/models/whisper/modeling_whisper.py (v4.3x, ``WhisperAttention``
and ``WhisperDecoderLayer``, the tuple ``past_key_value`` of that era): the decoder's self-attention caches
its keys and values (``torch.cat([past_key_value[0], key_states], dim=2)``), the cross-attention projects the
encoder states once at the prefill and reads them from the cache at each later step
(``key_states = past_key_value[0]`` when ``is_cross_attention`` and the cache is there): T_q = 1 at a step,
T_k = S encoder frames; ``_shape``: ``view(bsz, seq_len, H, d).transpose(1, 2)``, scores ``q @ k^T``, a causal
mask on the self-attention's prefill only, ``softmax(dim=-1)``, ``transpose(1, 2).reshape(bsz, tgt_len,
embed_dim)``. The model runs a prefill of T tokens, then one decoding step.

Bug (argument): ``cross-reads-self-cache``: the layer hands the cross-attention the self-attention's cache
(``past_key_value[:2]`` where ``past_key_value[-2:]`` was meant, the slip of the tuple cache layout that the
``Cache`` classes later replaced): at the step the "encoder" keys are the decoder's own past tokens."""

import sys

import torch
from torch import nn

BUGS = ("cross-reads-self-cache",)
TWINS = ()
DIMS = ("B=2 T=6 S=10 D=64 H=4",)


class WhisperAttention(nn.Module):
    def __init__(self, embed_dim, num_heads, is_cross_attention=False):
        super().__init__()
        self.num_heads, self.head_dim = num_heads, embed_dim // num_heads
        self.scaling, self.is_cross_attention = self.head_dim**-0.5, is_cross_attention
        self.k_proj = nn.Linear(embed_dim, embed_dim, bias=False)
        self.v_proj, self.q_proj = nn.Linear(embed_dim, embed_dim), nn.Linear(embed_dim, embed_dim)
        self.out_proj = nn.Linear(embed_dim, embed_dim)

    def _shape(self, tensor, seq_len, bsz):
        return tensor.view(bsz, seq_len, self.num_heads, self.head_dim).transpose(1, 2).contiguous()

    def forward(self, hidden_states, key_value_states=None, past_key_value=None, attention_mask=None):
        bsz, tgt_len, embed_dim = hidden_states.size()
        query_states = self._shape(self.q_proj(hidden_states) * self.scaling, tgt_len, bsz)
        if self.is_cross_attention and past_key_value is not None:
            key_states, value_states = past_key_value[0], past_key_value[1]
        elif self.is_cross_attention:
            key_states = self._shape(self.k_proj(key_value_states), -1, bsz)
            value_states = self._shape(self.v_proj(key_value_states), -1, bsz)
        else:
            key_states = self._shape(self.k_proj(hidden_states), -1, bsz)
            value_states = self._shape(self.v_proj(hidden_states), -1, bsz)
            if past_key_value is not None:
                key_states = torch.cat([past_key_value[0], key_states], dim=2)
                value_states = torch.cat([past_key_value[1], value_states], dim=2)
        attn_weights = torch.matmul(query_states, key_states.transpose(2, 3))  # (B, H, T_q, T_k)
        if attention_mask is not None:
            attn_weights = attn_weights + attention_mask
        attn_weights = nn.functional.softmax(attn_weights, dim=-1)
        attn_output = torch.matmul(attn_weights, value_states).transpose(1, 2)
        attn_output = attn_output.reshape(bsz, tgt_len, embed_dim)
        return self.out_proj(attn_output), (key_states, value_states)


class WhisperDecoderLayer(nn.Module):
    def __init__(self, d, h, bug=""):
        super().__init__()
        self.bug = bug
        self.self_attn, self.encoder_attn = WhisperAttention(d, h), WhisperAttention(d, h, is_cross_attention=True)
        self.self_attn_layer_norm, self.encoder_attn_layer_norm = nn.LayerNorm(d), nn.LayerNorm(d)

    def forward(self, hidden_states, encoder_hidden_states, attention_mask=None, past_key_value=None):
        self_past = past_key_value[:2] if past_key_value is not None else None
        h, self_present = self.self_attn(self.self_attn_layer_norm(hidden_states), past_key_value=self_past,
                                         attention_mask=attention_mask)
        hidden_states = hidden_states + h
        cross_past = None
        if past_key_value is not None:
            cross_past = past_key_value[:2] if self.bug == "cross-reads-self-cache" else past_key_value[-2:]
        h, cross_present = self.encoder_attn(self.encoder_attn_layer_norm(hidden_states), encoder_hidden_states,
                                             past_key_value=cross_past)
        return hidden_states + h, self_present + cross_present


class Decoder(nn.Module):
    def __init__(self, d, h, bug=""):
        super().__init__()
        self.layer = WhisperDecoderLayer(d, h, bug)

    def forward(self, prompt, next_token, encoder_hidden_states):
        t = prompt.shape[1]
        causal = torch.full((t, t), torch.finfo(prompt.dtype).min).triu(1)[None, None]  # (1, 1, T, T)
        _, cache = self.layer(prompt, encoder_hidden_states, attention_mask=causal)
        out, _ = self.layer(next_token, encoder_hidden_states, past_key_value=cache)
        return out  # (B, 1, D)


def build(bug="", B=2, T=6, S=10, D=64, H=4):
    torch.manual_seed(0)
    return Decoder(D, H, bug), (torch.randn(B, T, D), torch.randn(B, 1, D), torch.randn(B, S, D))


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    model(*inputs)
