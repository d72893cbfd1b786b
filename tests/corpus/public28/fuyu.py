"""huggingface/transformers, src/transformers/models/fuyu/modeling_fuyu.py and image_processing_fuyu.py (v4.46,
``FuyuForCausalLM.gather_continuous_embeddings``, ``FuyuImageProcessor.patchify_image``) with the Persimmon decoder
it runs (src/transformers/models/persimmon/modeling_persimmon.py, ``PersimmonAttention``): the image is cut into
patches row by row (``unfold(2, p, p).unfold(3, p, p)``, the grid ``(h, w)`` put before the pixels and channels and
flattened to ``(B, h·w, p·p·C)``), ``vision_embed_tokens`` (a ``Linear`` of the raw patch) maps each to ``D``, and
their embeddings replace the image placeholders of the text ids, where each row of ``w`` placeholders ends with an
image-newline token (the row break) before the text prompt. Persimmon's attention: a fused ``query_key_value``,
``view(B, T, H, 3, d)`` and ``[..., 0, :]`` etc., ``q_layernorm``/``k_layernorm`` over the head's ``d``,
``transpose(1, 2)``, partial rotary on the first half of ``d`` (``rotate_half``, ``cat`` with the pass part),
``q @ k.transpose(2, 3) / sqrt(d)``, the causal mask ``(B, 1, T, T)`` added, ``softmax(dim=-1, dtype=float32)``,
``@ v``, ``transpose(1, 2).reshape(B, T, D)``, ``dense``.

Bugs: ``patches-columns-first``: the patch grid flattened column by column (``permute(0, 3, 2, ...)``: the
``(w, h)`` order), so each row break follows a column of patches (the natural slip of a hand patchify, the same
class as reports of swapped ``h``/``w`` in ViT patch orders); ``causal-mask-hides-diagonal``: the causal mask built
with ``triu(diagonal=0)`` where ``diagonal=1`` is meant (the window off by one: no token sees itself)."""

import sys

import torch
from torch import nn

VOCAB, IMAGE_PLACEHOLDER, IMAGE_NEWLINE = 50, 1, 2


def patchify(image, patch, bug=""):                                      # (B, C, Hi, Wi)
    B, C = image.shape[:2]
    patches = image.unfold(2, patch, patch).unfold(3, patch, patch)      # (B, C, h, w, p, p)
    if bug == "patches-columns-first":
        patches = patches.permute(0, 3, 2, 4, 5, 1)                      # (B, w, h, p, p, C)
    else:
        patches = patches.permute(0, 2, 3, 4, 5, 1)                      # (B, h, w, p, p, C)
    return patches.reshape(B, -1, patch * patch * C)                    # (B, P, p·p·C)


def rotate_half(x):
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


class PersimmonRotaryEmbedding(nn.Module):
    def __init__(self, dim, base=25000.0):
        super().__init__()
        self.register_buffer("inv_freq", 1.0 / (base ** (torch.arange(0, dim, 2).float() / dim)), persistent=False)

    def forward(self, position_ids):                                     # (1, T)
        freqs = position_ids[:, :, None].float() * self.inv_freq[None, None, :]
        emb = torch.cat((freqs, freqs), dim=-1)                          # (1, T, r)
        return emb.cos(), emb.sin()


class PersimmonAttention(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.hidden_size, self.num_heads = dim, heads
        self.head_dim = dim // heads
        self.rotary_ndims = self.head_dim // 2                          # partial_rotary_factor 0.5
        self.query_key_value = nn.Linear(dim, 3 * dim)
        self.dense = nn.Linear(dim, dim)
        self.q_layernorm = nn.LayerNorm(self.head_dim)
        self.k_layernorm = nn.LayerNorm(self.head_dim)
        self.rotary_emb = PersimmonRotaryEmbedding(self.rotary_ndims)

    def forward(self, hidden_states, attention_mask, position_ids):
        bsz, q_len, _ = hidden_states.size()
        fused = self.query_key_value(hidden_states).view(bsz, q_len, self.num_heads, 3, self.head_dim)
        query, key, value = fused[..., 0, :], fused[..., 1, :], fused[..., 2, :]
        query, key = self.q_layernorm(query), self.k_layernorm(key)
        query, key, value = query.transpose(1, 2), key.transpose(1, 2), value.transpose(1, 2)   # (B, H, T, d)
        cos, sin = self.rotary_emb(position_ids)
        cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)                    # (1, 1, T, r)
        q_rot, q_pass = query[..., :self.rotary_ndims], query[..., self.rotary_ndims:]
        k_rot, k_pass = key[..., :self.rotary_ndims], key[..., self.rotary_ndims:]
        q_rot = q_rot * cos + rotate_half(q_rot) * sin
        k_rot = k_rot * cos + rotate_half(k_rot) * sin
        query, key = torch.cat((q_rot, q_pass), dim=-1), torch.cat((k_rot, k_pass), dim=-1)
        attn_weights = torch.matmul(query, key.transpose(2, 3)) / self.head_dim ** 0.5
        attn_weights = attn_weights + attention_mask                     # (B, H, T, T)
        attn_weights = nn.functional.softmax(attn_weights, dim=-1, dtype=torch.float32).to(query.dtype)
        attn_output = torch.matmul(attn_weights, value).transpose(1, 2).reshape(bsz, q_len, self.hidden_size)
        return self.dense(attn_output)


class PersimmonDecoderLayer(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.self_attn = PersimmonAttention(dim, heads)
        self.input_layernorm, self.post_attention_layernorm = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.dense_h_to_4h, self.dense_4h_to_h = nn.Linear(dim, 4 * dim), nn.Linear(4 * dim, dim)

    def forward(self, hidden_states, attention_mask, position_ids):
        hidden_states = hidden_states + self.self_attn(self.input_layernorm(hidden_states), attention_mask,
                                                       position_ids)
        mlp = self.dense_4h_to_h(torch.relu(self.dense_h_to_4h(self.post_attention_layernorm(hidden_states))) ** 2)
        return hidden_states + mlp


class FuyuForCausalLM(nn.Module):
    def __init__(self, dim, heads, channels=3, patch=2, bug=""):
        super().__init__()
        self.bug, self.patch = bug, patch
        self.vision_embed_tokens = nn.Linear(patch * patch * channels, dim)
        self.embed_tokens = nn.Embedding(VOCAB, dim)
        self.layers = nn.ModuleList([PersimmonDecoderLayer(dim, heads)])
        self.final_layernorm = nn.LayerNorm(dim)

    def gather_continuous_embeddings(self, word_embeddings, continuous_embeddings, image_patch_input_indices):
        output_embeddings = word_embeddings.clone()
        for batch_idx in range(word_embeddings.shape[0]):
            dst_indices = torch.nonzero(image_patch_input_indices[batch_idx] >= 0, as_tuple=True)[0]
            src_indices = image_patch_input_indices[batch_idx][dst_indices]
            output_embeddings[batch_idx][dst_indices] = continuous_embeddings[batch_idx][src_indices]
        return output_embeddings

    def forward(self, input_ids, image, image_patch_input_indices):     # (B, T), (B, C, Hi, Wi), (B, T)
        patches = patchify(image, self.patch, self.bug)                  # (B, P, p·p·C)
        patch_embeddings = self.vision_embed_tokens(patches)             # (B, P, D)
        inputs_embeds = self.embed_tokens(input_ids)                     # (B, T, D)
        hidden_states = self.gather_continuous_embeddings(inputs_embeds, patch_embeddings, image_patch_input_indices)
        seq_length = input_ids.shape[1]
        position_ids = torch.arange(seq_length, dtype=torch.long).unsqueeze(0)
        diagonal = 0 if self.bug == "causal-mask-hides-diagonal" else 1
        causal = torch.triu(torch.full((seq_length, seq_length), torch.finfo(hidden_states.dtype).min), diagonal)
        causal = causal[None, None].expand(input_ids.shape[0], 1, seq_length, seq_length)
        for layer in self.layers:
            hidden_states = layer(hidden_states, causal, position_ids)
        return self.final_layernorm(hidden_states)


BUGS = ("patches-columns-first", "causal-mask-hides-diagonal")
TWINS = ()
DIMS = ("B=2 T=13 D=32 H=4 P=6",)
EQUAL = {DIMS[0]: "B=4 T=13 D=32 H=4 P=6"}


def build(bug="", B=2, T=13, D=32, H=4, P=6, rows=2, patch=2):
    """``P`` patches in ``rows`` rows of ``P // rows`` (each row then its newline token), then text to ``T``."""
    torch.manual_seed(0)
    cols = P // rows
    image = torch.randn(B, 3, rows * patch, cols * patch)
    ids, index = [], []
    for r in range(rows):
        ids += [IMAGE_PLACEHOLDER] * cols + [IMAGE_NEWLINE]
        index += list(range(r * cols, (r + 1) * cols)) + [-1]
    text = T - len(ids)
    input_ids = torch.tensor(ids).expand(B, -1)
    input_ids = torch.cat([input_ids, torch.randint(3, VOCAB, (B, text))], dim=1)
    indices = torch.tensor(index + [-1] * text).expand(B, -1)
    return FuyuForCausalLM(D, H, patch=patch, bug=bug).eval(), (input_ids, image, indices)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
