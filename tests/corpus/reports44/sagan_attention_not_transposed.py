"""heykeetae/Self-Attention-GAN issue #11 ("Is this a writing error: attention.permute(0,1,2)?"): ``sagan_models.py``'s
``Self_Attn.forward`` took the output as ``torch.bmm(proj_value, attention.permute(0,1,2))``, a permutation that
changes nothing, where the paper's eq. (2) sums each query's row of the attention map over the keys, which with
the values laid out ``B x C x N`` needs ``attention.permute(0,2,1)``; the maintainer answered that
``permute(0,2,1)`` is the correct permutation ("Batch * Q_uery* Key -> Batch*Key*Query") and that the fixed
version had not been pushed.

The idiom (``Self_Attn``, with the generator's conv block around it): ``query_conv``/``key_conv``
``Conv2d(in_dim, in_dim//8, 1)``, ``value_conv`` ``Conv2d(in_dim, in_dim, 1)``, ``view(m_batchsize, -1,
width*height)`` (the key and value ``B x C x N``, the query permuted to ``B x N x C``), ``energy = bmm(query,
key)``, ``nn.Softmax(dim=-1)`` with no scale, ``out.view(m_batchsize, C, width, height)``, ``gamma*out + x``
(``gamma`` starts at zero; set to 0.5 here, as after training).

Bugs: ``attention-not-transposed``: ``attention.permute(0,1,2)`` (issue #11); ``softmax-over-queries``:
``nn.Softmax(dim=1)`` on the ``B x N x N`` energy (each key's column normalised over the queries)."""

import sys

import torch
from torch import nn

BUGS = ("attention-not-transposed", "softmax-over-queries")
TWINS = ()
DIMS = ("B=2 D=64 Hp=3 Wp=5",)
EQUAL = {DIMS[0]: "B=4 D=64 Hp=4 Wp=4"}


class Self_Attn(nn.Module):  # noqa: N801
    """Self attention layer"""

    def __init__(self, in_dim, activation, bug=""):
        super().__init__()
        self.chanel_in, self.activation, self.bug = in_dim, activation, bug
        self.query_conv = nn.Conv2d(in_channels=in_dim, out_channels=in_dim // 8, kernel_size=1)
        self.key_conv = nn.Conv2d(in_channels=in_dim, out_channels=in_dim // 8, kernel_size=1)
        self.value_conv = nn.Conv2d(in_channels=in_dim, out_channels=in_dim, kernel_size=1)
        self.gamma = nn.Parameter(torch.zeros(1))
        self.softmax = nn.Softmax(dim=1 if bug == "softmax-over-queries" else -1)

    def forward(self, x):
        m_batchsize, C, width, height = x.size()
        proj_query = self.query_conv(x).view(m_batchsize, -1, width * height).permute(0, 2, 1)   # B X N X C'
        proj_key = self.key_conv(x).view(m_batchsize, -1, width * height)                         # B X C' X N
        energy = torch.bmm(proj_query, proj_key)                                                   # B X N X N
        attention = self.softmax(energy)                                                           # B X N X N
        proj_value = self.value_conv(x).view(m_batchsize, -1, width * height)                     # B X C X N
        if self.bug == "attention-not-transposed":
            out = torch.bmm(proj_value, attention.permute(0, 1, 2))                                # B X C X N
        else:
            out = torch.bmm(proj_value, attention.permute(0, 2, 1))                                # B X C X N
        out = out.view(m_batchsize, C, width, height)                                              # B X C X W X H
        out = self.gamma * out + x
        return out, attention


class GenBlock(nn.Module):
    def __init__(self, conv_dim, bug=""):
        super().__init__()
        self.l3 = nn.Sequential(nn.ConvTranspose2d(conv_dim, conv_dim, 3, 1, 1), nn.BatchNorm2d(conv_dim), nn.ReLU())
        self.attn1 = Self_Attn(conv_dim, "relu", bug=bug)
        self.last = nn.Sequential(nn.Conv2d(conv_dim, 3, 3, 1, 1), nn.Tanh())

    def forward(self, z):
        out = self.l3(z)
        out, p1 = self.attn1(out)
        return self.last(out), p1


def build(bug="", B=2, D=64, Hp=3, Wp=5):  # noqa: N803
    torch.manual_seed(0)
    model = GenBlock(D, bug=bug)
    nn.init.constant_(model.attn1.gamma, 0.5)
    return model.eval(), (torch.randn(B, D, Hp, Wp),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
