"""hyunwoongko/transformer PR #40: the source padding mask built (ids != pad).unsqueeze(1).unsqueeze(3), shape
(B, 1, T, 1): it hides padded queries (rows), not padded keys; fix .unsqueeze(1).unsqueeze(2): (B, 1, 1, T)."""
import math
import sys

import torch
from torch import nn

BUGS = ("mask-on-queries",)


class ScaleDotProductAttention(nn.Module):
    def forward(self, q, k, v, mask=None):
        batch_size, head, length, d_tensor = k.size()
        score = (q @ k.transpose(2, 3)) / math.sqrt(d_tensor)
        if mask is not None:
            score = score.masked_fill(mask == 0, -10000)
        return torch.softmax(score, dim=-1) @ v

class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, n_head):
        super().__init__()
        self.n_head = n_head
        self.attention = ScaleDotProductAttention()
        self.w_q, self.w_k, self.w_v, self.w_concat = (nn.Linear(d_model, d_model) for _ in range(4))

    def split(self, tensor):
        batch_size, length, d_model = tensor.size()
        return tensor.view(batch_size, length, self.n_head, d_model // self.n_head).transpose(1, 2)

    def concat(self, tensor):
        batch_size, head, length, d_tensor = tensor.size()
        return tensor.transpose(1, 2).contiguous().view(batch_size, length, head * d_tensor)

    def forward(self, x, ids):
        q, k, v = self.split(self.w_q(x)), self.split(self.w_k(x)), self.split(self.w_v(x))
        return self.w_concat(self.concat(self.attention(q, k, v, mask=self.make_mask(ids))))

class Encoder(MultiHeadAttention):
    def __init__(self, d, h, bug):
        super().__init__(d, h)
        self.bug = bug

    def make_mask(self, ids):
        if self.bug == "mask-on-queries":
            return (ids != 0).unsqueeze(1).unsqueeze(3)  # (B, 1, T, 1)
        return (ids != 0).unsqueeze(1).unsqueeze(2)  # (B, 1, 1, T)

def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    ids = torch.randint(1, 9, (B, T))
    ids[0, T - 2:] = 0   # sequence 0 ends in two padding tokens
    return Encoder(D, H, bug), (torch.randn(B, T, D), ids)

if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    model(*inputs)
