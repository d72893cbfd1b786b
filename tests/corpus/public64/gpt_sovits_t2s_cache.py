"""RVC-Boss/GPT-SoVITS, GPT_SoVITS/AR/models/t2s_model.py (``T2SBlock.process_prompt`` and ``decode_next_token``,
``T2STransformer``, ``Text2SemanticDecoder.infer_panel_naive``) and GPT_SoVITS/AR/modules/embedding.py
(``SinePositionalEmbedding``): the VALL-E-style AR decoder of GPT-SoVITS, text (phonemes) to semantic tokens. The
phonemes and the prompt's semantic tokens are embedded, each with its own sinusoidal table from position 0
(``x * x_scale + alpha * pe[:, :x.size(1)]``), concatenated ``[x; y]`` and attended under VALL-E's mask: the text
rows see all the text and none of the audio (``F.pad(zeros(x_len, x_len), (0, y_len), value=True)``), the audio
rows see all the text and the audio causally (``F.pad(triu(ones(y_len, y_len), 1), (x_len, 0), value=False)``),
True = masked, handed to ``scaled_dot_product_attention`` as ``~attn_mask``. The block keeps its caches before the
head split (``k_cache = k``, ``[B, S+T, D]``); heads ``view(B, T, H, -1).transpose(1, 2)``; merged by
``permute(2, 0, 1, 3).reshape(B * T, D)``, ``view(T, B, D).transpose(1, 0)``; post-norm. Each new token
(``decode_next_token``) is embedded at ``pe[:, y_len + idx]``, its k and v appended ``torch.cat([k_cache, k],
dim=1)``, and attends every cached position unmasked. Two blocks (``T2STransformer``): what the first block's rows
attend reaches the second block's keys and values, and so the last row and the step.

Bugs: ``text-sees-audio``: the text rows padded with ``value=False`` (the phonemes attend the prompt's audio,
which in training is the future of the sequence the loss is read on); ``merge-batch-time-swapped``: the merge
written ``attn.transpose(1, 2).reshape(B * T, D)`` (batch-major) while ``view(T, B, D).transpose(1, 0)`` still reads
it time-major (batch entries and tokens mixed in the prompt pass, and so in the second block's cache; the merge of
the one-token step itself is unaffected);
``step-position-not-advanced``: the new token embedded at ``pe[:, idx]`` (position 0 of the audio table) instead of
``pe[:, y_len + idx]``."""

import math
import sys

import torch
import torch.nn.functional as F
from torch import nn

PHONEMES, SEMANTIC = 40, 50


class SinePositionalEmbedding(nn.Module):
    def __init__(self, embedding_dim, scale=False, max_len=64):
        super().__init__()
        self.x_scale = math.sqrt(embedding_dim) if scale else 1.0
        self.alpha = nn.Parameter(torch.ones(1))
        position = torch.arange(0, max_len, dtype=torch.float32).unsqueeze(1)
        div_term = torch.exp(torch.arange(0, embedding_dim, 2).float() * -(math.log(10000.0) / embedding_dim))
        pe = torch.zeros(max_len, embedding_dim)
        pe[:, 0::2] = torch.sin(position * div_term)
        pe[:, 1::2] = torch.cos(position * div_term)
        self.register_buffer("pe", pe.unsqueeze(0))                                 # (1, max_len, D)

    def forward(self, x):
        return x * self.x_scale + self.alpha * self.pe[:, : x.size(1)]              # (B, T, D)


class T2SBlock(nn.Module):
    def __init__(self, num_heads, hidden_dim, bug=""):
        super().__init__()
        self.num_heads, self.hidden_dim, self.bug = num_heads, hidden_dim, bug
        self.qkv = nn.Linear(hidden_dim, 3 * hidden_dim)
        self.out = nn.Linear(hidden_dim, hidden_dim)
        self.mlp = nn.Sequential(nn.Linear(hidden_dim, 2 * hidden_dim), nn.ReLU(),
                                 nn.Linear(2 * hidden_dim, hidden_dim))
        self.norm_1, self.norm_2 = nn.LayerNorm(hidden_dim), nn.LayerNorm(hidden_dim)

    def attend(self, q, k_cache, v_cache, attn_mask):
        batch_size, q_len, kv_len = q.shape[0], q.shape[1], k_cache.shape[1]
        q = q.view(batch_size, q_len, self.num_heads, -1).transpose(1, 2)           # (B, H, T, d_k)
        k = k_cache.view(batch_size, kv_len, self.num_heads, -1).transpose(1, 2)    # (B, H, S+T, d_k)
        v = v_cache.view(batch_size, kv_len, self.num_heads, -1).transpose(1, 2)    # (B, H, S+T, d_k)
        attn = F.scaled_dot_product_attention(q, k, v, (~attn_mask) if attn_mask is not None else None)
        if self.bug == "merge-batch-time-swapped":
            attn = attn.transpose(1, 2).reshape(batch_size * q_len, self.hidden_dim)  # (B·T, D)
        else:
            attn = attn.permute(2, 0, 1, 3).reshape(batch_size * q_len, self.hidden_dim)  # (T·B, D)
        return attn.view(q_len, batch_size, self.hidden_dim).transpose(1, 0)        # (B, T, D)

    def post(self, x, attn):
        x = self.norm_1(x + self.out(attn))
        return self.norm_2(x + self.mlp(x))

    def process_prompt(self, x, attn_mask):                                         # (B, S+T, D)
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        return self.post(x, self.attend(q, k, v, attn_mask)), k, v

    def decode_next_token(self, x, k_cache, v_cache):                              # (B, 1, D)
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        k_cache = torch.cat([k_cache, k], dim=1)                                    # (B, S+T+1, D)
        v_cache = torch.cat([v_cache, v], dim=1)
        return self.post(x, self.attend(q, k_cache, v_cache, None)), k_cache, v_cache


class T2STransformer(nn.Module):
    def __init__(self, num_blocks, num_heads, hidden_dim, bug=""):
        super().__init__()
        self.blocks = nn.ModuleList([T2SBlock(num_heads, hidden_dim, bug) for _ in range(num_blocks)])

    def process_prompt(self, x, attn_mask):
        k_cache, v_cache = [], []
        for block in self.blocks:
            x, k_cache_, v_cache_ = block.process_prompt(x, attn_mask)
            k_cache.append(k_cache_)
            v_cache.append(v_cache_)
        return x, k_cache, v_cache

    def decode_next_token(self, x, k_cache, v_cache):
        for i, block in enumerate(self.blocks):
            x, k_cache[i], v_cache[i] = block.decode_next_token(x, k_cache[i], v_cache[i])
        return x, k_cache, v_cache


class Text2SemanticDecoder(nn.Module):
    def __init__(self, hidden_dim, num_heads, bug=""):
        super().__init__()
        self.num_head, self.bug = num_heads, bug
        self.ar_text_embedding = nn.Embedding(PHONEMES, hidden_dim)
        self.ar_text_position = SinePositionalEmbedding(hidden_dim)
        self.ar_audio_embedding = nn.Embedding(SEMANTIC, hidden_dim)
        self.ar_audio_position = SinePositionalEmbedding(hidden_dim)
        self.t2s_transformer = T2STransformer(2, num_heads, hidden_dim, bug)
        self.ar_predict_layer = nn.Linear(hidden_dim, SEMANTIC, bias=False)

    def forward(self, x, y, next_token):                                            # (B, S), (B, T), (B, 1)
        x = self.ar_text_position(self.ar_text_embedding(x))                        # (B, S, D)
        y_emb = self.ar_audio_embedding(y)                                          # (B, T, D)
        y_len, x_len, bsz = y_emb.shape[1], x.shape[1], x.shape[0]
        xy_pos = torch.concat([x, self.ar_audio_position(y_emb)], dim=1)            # (B, S+T, D)
        src_len = x_len + y_len
        x_attn_mask_pad = F.pad(torch.zeros((x_len, x_len), dtype=torch.bool), (0, y_len),
                                value=self.bug != "text-sees-audio")                # (S, S+T)
        y_attn_mask = F.pad(torch.triu(torch.ones(y_len, y_len, dtype=torch.bool), diagonal=1), (x_len, 0), value=False)
        xy_attn_mask = torch.concat([x_attn_mask_pad, y_attn_mask], dim=0).unsqueeze(0) \
            .expand(bsz * self.num_head, -1, -1).view(bsz, self.num_head, src_len, src_len)  # (B, H, S+T, S+T)
        xy_dec, k_cache, v_cache = self.t2s_transformer.process_prompt(xy_pos, xy_attn_mask)
        logits = self.ar_predict_layer(xy_dec[:, -1])                               # (B, V)
        idx = 0
        position = idx if self.bug == "step-position-not-advanced" else y_len + idx
        y_emb = self.ar_audio_embedding(next_token)                                 # (B, 1, D)
        position_table = self.ar_audio_position
        xy_pos = y_emb * position_table.x_scale + position_table.alpha * position_table.pe[:, position]
        xy_dec, _, _ = self.t2s_transformer.decode_next_token(xy_pos, k_cache, v_cache)
        return logits, self.ar_predict_layer(xy_dec[:, -1])


BUGS = ("text-sees-audio", "merge-batch-time-swapped", "step-position-not-advanced")
TWINS = ()
DIMS = ("B=2 S=5 T=6 D=32 H=4",)
EQUAL = {DIMS[0]: "B=4 S=5 T=4 D=32 H=4"}


def build(bug="", B=2, S=5, T=6, D=32, H=4):  # noqa: N803
    """``S`` phonemes, a prompt of ``T`` semantic tokens, and the token sampled next."""
    torch.manual_seed(0)
    phonemes, prompts = torch.randint(0, PHONEMES, (B, S)), torch.randint(0, SEMANTIC, (B, T))
    inputs = (phonemes, prompts, torch.randint(0, SEMANTIC, (B, 1)))
    return Text2SemanticDecoder(D, H, bug).eval(), inputs


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
