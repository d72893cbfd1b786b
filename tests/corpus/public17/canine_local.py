"""huggingface/transformers, src/transformers/models/canine/modeling_canine.py (v4.40, ``CanineSelfAttention``,
``CanineAttention`` with ``local=True``, ``CharactersToMolecules``, ``_create_3d_attention_mask_from_input_mask``,
``_downsample_attention_mask``): characters ``(B, T, D)`` through one local transformer layer: ``from_chunks`` and
``to_chunks`` of ``attend_from_chunk_width`` / ``attend_to_chunk_width`` every ``..._stride`` characters
(``chunk_end = min(seq_length, chunk_start + width)``), each pair attended apart
(``from_tensor[:, from_start:from_end]``, ``to_tensor[:, to_start:to_end]``, ``attention_mask[:,
from_start:from_end, to_start:to_end]``) and ``torch.cat(attention_output_chunks, dim=1)``; the self-attention
BERT's (``view(B, T, H, d).permute(0, 2, 1, 3)``, ``(1 - mask) * min`` added on ``mask.unsqueeze(1)``); then
``CharactersToMolecules``: ``cls = char_encoding[:, 0:1]``, ``torch.transpose(char_encoding, 1, 2)``, a
``Conv1d(D, D, kernel_size=rate, stride=rate)``, ``torch.transpose(downsampled, 1, 2)``, GELU, the last molecule
dropped and ``cat([cls, downsampled_truncated], dim=1)``, LayerNorm; one global layer over the molecules with the
mask ``MaxPool1d(rate)`` of the characters' mask.

Bugs (argument): ``conv-output-not-transposed``: the downsampled ``(B, D, T/rate)`` read as molecules by
``downsampled.reshape(B, -1, D)`` (the ``transpose(1, 2)`` back forgotten, hidden by a reshape). A known miss,
``chunk-end-off-by-one``: ``to`` chunks ``min(seq_length, chunk_start + width + 1)`` (each block's characters
also see the first character of the next block, the slip an inclusive end makes): overlapping key chunks are a
design elsewhere (BigBird's and Longformer's bands), and nothing recorded states the width meant."""

import sys

import torch
from torch import nn


def create_3d_attention_mask(from_tensor, to_mask):                              # (B, F, D), (B, T)
    batch_size, from_seq_length = from_tensor.shape[0], from_tensor.shape[1]
    to_mask = torch.reshape(to_mask, (batch_size, 1, to_mask.shape[1])).float()
    broadcast_ones = torch.ones(size=(batch_size, from_seq_length, 1), dtype=torch.float32)
    return broadcast_ones * to_mask                                                # (B, F, T)


class CanineSelfAttention(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.num_attention_heads, self.attention_head_size = heads, dim // heads
        self.query, self.key, self.value = nn.Linear(dim, dim), nn.Linear(dim, dim), nn.Linear(dim, dim)

    def transpose_for_scores(self, x):
        x = x.view(x.size()[:-1] + (self.num_attention_heads, self.attention_head_size))
        return x.permute(0, 2, 1, 3)                                                 # (B, H, T, d)

    def forward(self, from_tensor, to_tensor, attention_mask):
        query_layer = self.transpose_for_scores(self.query(from_tensor))
        key_layer = self.transpose_for_scores(self.key(to_tensor))
        value_layer = self.transpose_for_scores(self.value(to_tensor))
        attention_scores = torch.matmul(query_layer, key_layer.transpose(-1, -2)) / self.attention_head_size**0.5
        attention_mask = (1.0 - attention_mask.unsqueeze(1).float()) * torch.finfo(attention_scores.dtype).min
        attention_probs = nn.functional.softmax(attention_scores + attention_mask, dim=-1)
        context_layer = torch.matmul(attention_probs, value_layer).permute(0, 2, 1, 3).contiguous()
        return context_layer.view(context_layer.size()[:-2] + (query_layer.shape[1] * query_layer.shape[-1],))


class CanineLayer(nn.Module):
    def __init__(self, dim, heads, local=False, width=4, bug=""):
        super().__init__()
        self.local, self.width, self.bug = local, width, bug
        self.self = CanineSelfAttention(dim, heads)
        self.dense, self.norm = nn.Linear(dim, dim), nn.LayerNorm(dim)

    def attend(self, hidden_states, attention_mask):                               # (B, T, D), (B, T, T)
        if not self.local:
            return self.self(hidden_states, hidden_states, attention_mask)
        seq_length = hidden_states.shape[1]
        extra = 1 if self.bug == "chunk-end-off-by-one" else 0
        from_chunks = [(s, min(seq_length, s + self.width)) for s in range(0, seq_length, self.width)]
        to_chunks = [(s, min(seq_length, s + self.width + extra)) for s in range(0, seq_length, self.width)]
        attention_output_chunks = []
        for (from_start, from_end), (to_start, to_end) in zip(from_chunks, to_chunks):
            from_tensor_chunk = hidden_states[:, from_start:from_end, :]
            to_tensor_chunk = hidden_states[:, to_start:to_end, :]
            attention_mask_chunk = attention_mask[:, from_start:from_end, to_start:to_end]
            attention_output_chunks.append(self.self(from_tensor_chunk, to_tensor_chunk, attention_mask_chunk))
        return torch.cat(attention_output_chunks, dim=1)

    def forward(self, hidden_states, attention_mask):
        return self.norm(hidden_states + self.dense(self.attend(hidden_states, attention_mask)))


class CharactersToMolecules(nn.Module):
    def __init__(self, dim, rate, bug=""):
        super().__init__()
        self.bug = bug
        self.conv = nn.Conv1d(dim, dim, kernel_size=rate, stride=rate)
        self.activation, self.LayerNorm = nn.GELU(), nn.LayerNorm(dim)

    def forward(self, char_encoding):                                              # (B, T, D)
        cls_encoding = char_encoding[:, 0:1, :]
        char_encoding = torch.transpose(char_encoding, 1, 2)                          # (B, D, T)
        downsampled = self.conv(char_encoding)                                       # (B, D, T/rate)
        if self.bug == "conv-output-not-transposed":
            downsampled = downsampled.reshape(downsampled.shape[0], -1, downsampled.shape[1])
        else:
            downsampled = torch.transpose(downsampled, 1, 2)                         # (B, T/rate, D)
        downsampled = self.activation(downsampled)
        downsampled_truncated = downsampled[:, 0:-1, :]
        result = torch.cat([cls_encoding, downsampled_truncated], dim=1)
        return self.LayerNorm(result)


class CanineModel(nn.Module):
    def __init__(self, dim, heads, rate=3, width=4, bug=""):
        super().__init__()
        self.rate = rate
        self.initial_char_encoder = CanineLayer(dim, heads, local=True, width=width, bug=bug)
        self.chars_to_molecules = CharactersToMolecules(dim, rate, bug)
        self.encoder = CanineLayer(dim, heads)
        self.pool = nn.MaxPool1d(kernel_size=rate, stride=rate)

    def forward(self, char_embeddings, attention_mask):                            # (B, T, D), (B, T)
        extended = create_3d_attention_mask(char_embeddings, attention_mask)
        chars = self.initial_char_encoder(char_embeddings, extended)
        molecules = self.chars_to_molecules(chars)                                   # (B, T/rate, D)
        molecule_mask = self.pool(attention_mask.float().reshape(attention_mask.shape[0], 1, -1)).squeeze(1)
        return self.encoder(molecules, create_3d_attention_mask(molecules, molecule_mask))


BUGS = ("conv-output-not-transposed",)
TWINS = ()
KNOWN_MISSES = ("chunk-end-off-by-one",)
DIMS = ("B=2 T=12 D=32 H=4",)
EQUAL = {"B=2 T=12 D=32 H=4": "B=4 T=12 D=32 H=4"}


def build(bug="", B=2, T=12, D=32, H=4):
    torch.manual_seed(0)
    mask = torch.ones(B, T, dtype=torch.long)
    mask[-1, -3:] = 0                                                               # the last text padded
    return CanineModel(D, H, bug=bug).eval(), (torch.randn(B, T, D), mask)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
