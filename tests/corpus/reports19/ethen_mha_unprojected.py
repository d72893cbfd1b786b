"""ethen8181/machine-learning issue #13 ("it may be an error in torch transformer."; the author: "Thanks for
spotting this. I've checked in the fix"): the notebook's ``MultiHeadAttention`` multiplied the queries by the
keys without dividing the scores by ``sqrt(head_dim)``, and its ``forward`` computed ``linear_proj =
self.linear_proj(output)`` but returned ``output``, the merged heads before the output projection. The fix
scales the scores and returns the projection.

The notebook's idiom (its seq2seq transformer, written for teaching): ``query_proj``/``key_proj``/
``value_proj`` linears, ``view(batch_size, -1, n_heads, head_dim).permute(0, 2, 1, 3)``, ``torch.matmul(query,
key.permute(0, 1, 3, 2))``, ``masked_fill(mask == 0, -1e10)`` with the decoder's subsequent mask
(``torch.tril``), ``softmax(dim=-1)``, ``permute(0, 2, 1, 3).contiguous().view(batch_size, -1, hid_dim)``,
the ``linear_proj``; a post-norm decoder layer (attention, residual, ``LayerNorm``, position-wise feed
forward) over embedded target tokens.

Bug (argument): ``unprojected``: the merged heads returned, the projection computed and dropped. Twin
(argument): ``unscaled``: the scores not divided by ``sqrt(head_dim)``. A twin: scores with no scale are
correct code elsewhere (T5 and Mesh TensorFlow fold the scale into the weights' initialisation and never
divide), so nothing the trace records tells this model meant to scale."""

import sys

import torch
from torch import nn

BUGS = ("unprojected",)
TWINS = ("unscaled",)
DIMS = ("B=2 T=6 D=32 H=4",)


class MultiHeadAttention(nn.Module):
    def __init__(self, hid_dim, n_heads, bug=""):
        super().__init__()
        self.hid_dim, self.n_heads, self.head_dim, self.bug = hid_dim, n_heads, hid_dim // n_heads, bug
        self.query_proj = nn.Linear(hid_dim, hid_dim)
        self.key_proj = nn.Linear(hid_dim, hid_dim)
        self.value_proj = nn.Linear(hid_dim, hid_dim)
        self.linear_proj = nn.Linear(hid_dim, hid_dim)
        self.scale = self.head_dim ** 0.5

    def forward(self, query, key, value, mask=None):
        batch_size = query.shape[0]
        query = self.query_proj(query).view(batch_size, -1, self.n_heads, self.head_dim).permute(0, 2, 1, 3)
        key = self.key_proj(key).view(batch_size, -1, self.n_heads, self.head_dim).permute(0, 2, 1, 3)
        value = self.value_proj(value).view(batch_size, -1, self.n_heads, self.head_dim).permute(0, 2, 1, 3)
        energy = torch.matmul(query, key.permute(0, 1, 3, 2))                                 # [scores]
        if self.bug != "unscaled":
            energy = energy / self.scale
        if mask is not None:
            energy = energy.masked_fill(mask == 0, -1e10)
        attention = torch.softmax(energy, dim=-1)
        output = torch.matmul(attention, value)
        output = output.permute(0, 2, 1, 3).contiguous().view(batch_size, -1, self.hid_dim)  # [merge]
        linear_proj = self.linear_proj(output)
        return output if self.bug == "unprojected" else linear_proj                           # [out]


class DecoderLayer(nn.Module):
    def __init__(self, hid_dim, n_heads, pf_dim=64, bug=""):
        super().__init__()
        self.self_attention = MultiHeadAttention(hid_dim, n_heads, bug)
        self.self_attn_layer_norm = nn.LayerNorm(hid_dim)
        self.ff_layer_norm = nn.LayerNorm(hid_dim)
        self.positionwise_feedforward = nn.Sequential(
            nn.Linear(hid_dim, pf_dim), nn.ReLU(), nn.Linear(pf_dim, hid_dim))

    def forward(self, trg, trg_mask):
        _trg = self.self_attention(trg, trg, trg, trg_mask)
        trg = self.self_attn_layer_norm(trg + _trg)
        return self.ff_layer_norm(trg + self.positionwise_feedforward(trg))


class Decoder(nn.Module):
    def __init__(self, hid_dim, n_heads, n_layers=2, bug=""):
        super().__init__()
        self.layers = nn.ModuleList([DecoderLayer(hid_dim, n_heads, bug=bug) for _ in range(n_layers)])

    def forward(self, trg):
        trg_len = trg.shape[1]
        trg_mask = torch.tril(torch.ones((trg_len, trg_len))).bool()[None, None]              # (1, 1, T, T)
        for layer in self.layers:
            trg = layer(trg, trg_mask)
        return trg


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    return Decoder(D, H, bug=bug).eval(), (torch.randn(B, T, D),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
