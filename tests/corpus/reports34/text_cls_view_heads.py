"""649453932/Chinese-Text-Classification-Pytorch issue #10 ("Transformer是否有问题？", "is the Transformer
wrong?"): the repository's Transformer text classifier splits the heads with
``Q.view(batch_size * num_head, -1, dim_head)`` straight from ``(batch, seq, dim_model)`` and merges them back
with ``context.view(batch_size, -1, dim_head * num_head)``; the reporter showed, with ``h = 3``, ``batch = 1``,
4 tokens and 5 features, that the merge view strings one head's tokens together instead of each token's heads
(``view`` is no transpose). The fix splits with ``view(B, T, H, d_k).transpose(1, 2)`` and merges with the
transpose back before the view.

The idiom (models/Transformer.py): an ``nn.Embedding`` of the padded token ids, a fixed sinusoidal
``Positional_Encoding`` added, encoder blocks of ``Multi_Head_Attention`` (``fc_Q``/``fc_K``/``fc_V``, a 3-D
``Scaled_Dot_Product_Attention`` with ``scale = K.size(-1) ** -0.5``, ``fc``, dropout, residual, ``LayerNorm``)
and a ``Position_wise_Feed_Forward``, then the tokens flattened (``out.view(out.size(0), -1)``) into the
classifier.

Bug (view for transpose): ``view-heads`` (the repository's split and merge)."""

import sys

import torch
import torch.nn.functional as F
from torch import nn

BUGS = ("view-heads",)
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)
VOCAB, CLASSES = 50, 10


class Positional_Encoding(nn.Module):
    def __init__(self, embed, pad_size):
        super().__init__()
        pos = torch.arange(pad_size, dtype=torch.float32)[:, None]                    # (T, 1)
        i = torch.arange(embed)[None, :]                                              # (1, D)
        angle = pos / 10000.0 ** ((i // 2) * 2.0 / embed)                             # (T, D)
        self.register_buffer("pe", torch.where(i % 2 == 0, torch.sin(angle), torch.cos(angle)))

    def forward(self, x):
        return x + self.pe                                                            # (B, T, D)


class Scaled_Dot_Product_Attention(nn.Module):
    def forward(self, Q, K, V, scale=None):
        attention = torch.matmul(Q, K.permute(0, 2, 1))                               # (B*H, T, T)
        if scale:
            attention = attention * scale
        attention = F.softmax(attention, dim=-1)
        return torch.matmul(attention, V)                                             # (B*H, T, d_k)


class Multi_Head_Attention(nn.Module):
    def __init__(self, dim_model, num_head, bug=""):
        super().__init__()
        self.num_head, self.bug = num_head, bug
        self.dim_head = dim_model // num_head
        self.fc_Q = nn.Linear(dim_model, num_head * self.dim_head)
        self.fc_K = nn.Linear(dim_model, num_head * self.dim_head)
        self.fc_V = nn.Linear(dim_model, num_head * self.dim_head)
        self.attention = Scaled_Dot_Product_Attention()
        self.fc = nn.Linear(num_head * self.dim_head, dim_model)
        self.dropout = nn.Dropout(0.0)
        self.layer_norm = nn.LayerNorm(dim_model)

    def split(self, x, batch_size):
        if self.bug == "view-heads":
            return x.view(batch_size * self.num_head, -1, self.dim_head)              # (B*H, T, d_k)
        x = x.view(batch_size, -1, self.num_head, self.dim_head).transpose(1, 2)      # (B, H, T, d_k)
        return x.reshape(batch_size * self.num_head, -1, self.dim_head)               # (B*H, T, d_k)

    def merge(self, context, batch_size):
        if self.bug == "view-heads":
            return context.view(batch_size, -1, self.dim_head * self.num_head)        # (B, T, D)
        context = context.view(batch_size, self.num_head, -1, self.dim_head)          # (B, H, T, d_k)
        return context.transpose(1, 2).reshape(batch_size, -1, self.dim_head * self.num_head)  # (B, T, D)

    def forward(self, x):
        batch_size = x.size(0)
        Q = self.split(self.fc_Q(x), batch_size)                                      # (B*H, T, d_k)
        K = self.split(self.fc_K(x), batch_size)                                      # (B*H, T, d_k)
        V = self.split(self.fc_V(x), batch_size)                                      # (B*H, T, d_k)
        scale = K.size(-1) ** -0.5
        context = self.attention(Q, K, V, scale)                                      # (B*H, T, d_k)
        out = self.dropout(self.fc(self.merge(context, batch_size)))                  # (B, T, D)
        return self.layer_norm(out + x)


class Position_wise_Feed_Forward(nn.Module):
    def __init__(self, dim_model, hidden):
        super().__init__()
        self.fc1 = nn.Linear(dim_model, hidden)
        self.fc2 = nn.Linear(hidden, dim_model)
        self.layer_norm = nn.LayerNorm(dim_model)

    def forward(self, x):
        return self.layer_norm(self.fc2(F.relu(self.fc1(x))) + x)


class Encoder(nn.Module):
    def __init__(self, dim_model, num_head, hidden, bug=""):
        super().__init__()
        self.attention = Multi_Head_Attention(dim_model, num_head, bug=bug)
        self.feed_forward = Position_wise_Feed_Forward(dim_model, hidden)

    def forward(self, x):
        return self.feed_forward(self.attention(x))


class Model(nn.Module):
    def __init__(self, embed, num_head, pad_size, bug=""):
        super().__init__()
        self.embedding = nn.Embedding(VOCAB, embed, padding_idx=VOCAB - 1)
        self.postion_embedding = Positional_Encoding(embed, pad_size)
        self.encoder = Encoder(embed, num_head, 2 * embed, bug=bug)
        self.fc1 = nn.Linear(pad_size * embed, CLASSES)

    def forward(self, x):
        out = self.postion_embedding(self.embedding(x))                               # (B, T, D)
        out = self.encoder(out)                                                       # (B, T, D)
        out = out.view(out.size(0), -1)                                               # (B, T*D)
        return self.fc1(out)


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    return Model(D, H, T, bug=bug).eval(), (torch.randint(0, VOCAB - 1, (B, T)),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
