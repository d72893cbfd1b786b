"""rosinality/mac-network-pytorch issue #7 ("Padded token is not masked when calculating attention in control
unit", closed; the author: "Yes, I didn't used attention masking"): the MAC network's ``ControlUnit`` attends
over the question's words (the LSTM's outputs, padded to the longest question of the batch) with
``softmax(attn(control_question * context), 1)`` and no mask, so a short question's control state is a mixture
that includes its padding positions. The fix the issue asks for restricts the attention to the real words
(``question_len``): the scores of the padded positions filled with ``-inf`` before the softmax.

The idiom: rosinality's ``ControlUnit`` (``position_aware[step](question)``, ``cat([control, position_aware],
1)``, ``control_question(...).unsqueeze(1)``, ``context_prod = control_question * context``, ``attn`` a
``Linear(dim, 1)``, ``softmax(attn_weight, 1)``, ``(attn * context).sum(1)``), the question's words as an
embedding (``padding_idx=0``) through ``lstm_proj`` (standing in for the bidirectional LSTM), the question
vector ``h`` a masked mean of the words, two reasoning steps; the second question padded by two.

Bug (argument): ``no-pad-mask``: the control attention without the padding mask."""

import sys

import torch
import torch.nn.functional as F
from torch import nn

BUGS = ("no-pad-mask",)
TWINS = ()
DIMS = ("B=2 T=6 D=32",)


class ControlUnit(nn.Module):
    def __init__(self, dim, max_step, bug=""):
        super().__init__()
        self.position_aware = nn.ModuleList([nn.Linear(dim, dim) for _ in range(max_step)])
        self.control_question = nn.Linear(dim * 2, dim)
        self.attn = nn.Linear(dim, 1)
        self.bug = bug

    def forward(self, step, context, question, control, pad_mask):            # (B, T, D), (B, D), (B, D), (B, T)
        position_aware = self.position_aware[step](question)
        control_question = self.control_question(torch.cat([control, position_aware], 1))
        control_question = control_question.unsqueeze(1)                       # (B, 1, D)
        context_prod = control_question * context                              # (B, T, D)
        attn_weight = self.attn(context_prod)                                  # (B, T, 1)
        if self.bug != "no-pad-mask":
            attn_weight = attn_weight.masked_fill(pad_mask.unsqueeze(2), float("-inf"))   # [mask]
        attn = F.softmax(attn_weight, 1)                                       # [softmax]
        return (attn * context).sum(1)                                         # (B, D)


class MACQuestion(nn.Module):
    def __init__(self, n_vocab, dim, max_step=2, bug=""):
        super().__init__()
        self.embed = nn.Embedding(n_vocab, dim, padding_idx=0)
        self.lstm_proj = nn.Linear(dim, dim)
        self.control = ControlUnit(dim, max_step, bug)
        self.control_0 = nn.Parameter(torch.zeros(1, dim))
        self.max_step, self.dim = max_step, dim

    def forward(self, question, question_len):                                 # (B, T), (B,)
        b_size, length = question.shape
        pad_mask = torch.arange(length)[None, :] >= question_len[:, None]      # (B, T) True at padding
        context = self.lstm_proj(self.embed(question))                         # (B, T, D)
        keep = (~pad_mask).unsqueeze(2).to(context.dtype)
        h = (context * keep).sum(1) / keep.sum(1)                              # (B, D)
        control = self.control_0.expand(b_size, self.dim)
        for step in range(self.max_step):
            control = self.control(step, context, h, control, pad_mask)
        return control


def build(bug="", B=2, T=6, D=32):
    torch.manual_seed(0)
    question_len = torch.full((B,), T, dtype=torch.long)
    question_len[1] = T - 2                                                    # the second question padded by two
    question = torch.randint(1, 30, (B, T)).masked_fill(torch.arange(T)[None, :] >= question_len[:, None], 0)
    return MACQuestion(30, D, bug=bug).eval(), (question, question_len)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
