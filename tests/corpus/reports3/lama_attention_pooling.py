"""catalyst-team/catalyst PR #285 ("fixing softmax dim for attention pooling", from the NeurIPS-18 prosthetics
LAMA actor): the temporal attention pooling scored each step of the observation history with a
``Conv1d(features, 1, kernel_size=1)``, shaped ``(B, 1, L)``, and normalised it with ``nn.Softmax(dim=1)``:
over the one-entry channel axis, so every weight was 1 and the "attention" was a plain sum over the
history. The fix normalises over the history, ``dim=2``.

Catalyst's idiom: an ``nn.Sequential(Conv1d, Softmax)`` on ``features.transpose(1, 2)``, the weights times
the features summed over the history, the pooled vector concatenated with the last step and the average,
then a ``Linear`` head. L history steps of F features each.

Bug (argument): ``softmax-channels``."""

import sys

import torch
from torch import nn

BUGS = ("softmax-channels",)
TWINS = ()
DIMS = ("B=2 T=6 D=32",)
EQUAL = {"B=2 T=6 D=32": "B=4 T=4 D=32"}


class TemporalAttentionPooling(nn.Module):
    def __init__(self, features_in, bug=""):
        super().__init__()
        self.attention_pooling = nn.Sequential(
            nn.Conv1d(features_in, 1, kernel_size=1),
            nn.Softmax(dim=1 if bug == "softmax-channels" else 2),               # [softmax]
        )

    def forward(self, features):                                               # (B, L, F)
        x = features.transpose(1, 2)                                           # (B, F, L)
        x_a = self.attention_pooling(x)                                        # (B, 1, L)
        return (x * x_a).sum(dim=2, keepdim=False)                             # (B, F)


class LamaActor(nn.Module):
    def __init__(self, features, bug=""):
        super().__init__()
        self.pooling = TemporalAttentionPooling(features, bug)
        self.head = nn.Linear(3 * features, 4)

    def forward(self, history):
        x_attn = self.pooling(history)                                         # (B, F)
        x_last, x_avg = history[:, -1, :], history.mean(dim=1)                # (B, F)
        return self.head(torch.cat([x_attn, x_last, x_avg], dim=1))


def build(bug="", B=2, T=6, D=32):
    torch.manual_seed(0)
    return LamaActor(D, bug).eval(), (torch.randn(B, T, D),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
