"""jwohlwend/boltz, src/boltz/model/layers/attention.py (``AttentionPairBias``, Boltz-1, 2024) as the
``DiffusionTransformerLayer`` of src/boltz/model/modules/transformers.py calls it: single representation ``s [B, N,
c_s]`` whose rows are ``n`` structures times ``m`` = ``multiplicity`` diffusion samples, laid out
``repeat_interleave``-style (the code's own ``B = s.shape[0]``), pair representation ``z [n, N, N, c_z]`` and token
mask ``[n, N]`` (repeated ``repeat_interleave(multiplicity, 0)``); ``proj_q/k/v(s).view(B, -1, num_heads,
head_dim)``; the pair bias ``proj_z = Sequential(LayerNorm(c_z), Linear(c_z, num_heads), Rearrange("b ... h -> b
h ..."))`` (here its ``permute(0, 3, 1, 2)``) then ``z.repeat_interleave(multiplicity, 0)``; a sigmoid gate
``proj_g(s)``; ``einsum("bihd,bjhd->bhij") / head_dim ** 0.5 + z``, ``+ (1 - mask[:, None, None].float()) * -inf``
on the keys, ``softmax(dim=-1)``, ``einsum("bhij,bjhd->bihd")``, ``reshape(B, -1, c_s)``, ``proj_o(g * o)``.

Bugs: ``pair-bias-tiled``: ``z.repeat(multiplicity, 1, 1, 1)`` (the samples laid out ``repeat_interleave``-style
read the pair bias tiled: sample ``k`` of structure ``b`` gets structure ``(b·m + k) mod n``'s pairs);
``mask-on-queries``: ``mask[:, None, :, None]`` (the padded tokens' own rows pushed to ``-inf``, every real token
still attends the padding); ``pair-bias-transposed``: ``z.permute(0, 3, 2, 1)`` for the ``Rearrange`` (``z_ji``
added to score ``(i, j)``; the pair representation is not symmetric)."""

import sys

import torch
from torch import nn


class AttentionPairBias(nn.Module):
    def __init__(self, c_s, c_z, num_heads, inf=1e6, bug=""):
        super().__init__()
        assert c_s % num_heads == 0
        self.c_s, self.num_heads, self.head_dim, self.inf, self.bug = c_s, num_heads, c_s // num_heads, inf, bug
        self.norm_s = nn.LayerNorm(c_s)
        self.proj_q = nn.Linear(c_s, c_s)
        self.proj_k = nn.Linear(c_s, c_s, bias=False)
        self.proj_v = nn.Linear(c_s, c_s, bias=False)
        self.proj_g = nn.Linear(c_s, c_s, bias=False)
        self.proj_z = nn.Sequential(nn.LayerNorm(c_z), nn.Linear(c_z, num_heads, bias=False))
        self.proj_o = nn.Linear(c_s, c_s, bias=False)

    def forward(self, s, z, mask, multiplicity=1):
        B = s.shape[0]
        s = self.norm_s(s)
        q = self.proj_q(s).view(B, -1, self.num_heads, self.head_dim)                # (B·m, N, h, d)
        k = self.proj_k(s).view(B, -1, self.num_heads, self.head_dim)                # (B·m, N, h, d)
        v = self.proj_v(s).view(B, -1, self.num_heads, self.head_dim)                # (B·m, N, h, d)
        z = self.proj_z(z)                                                           # (B, N, N, h)
        if self.bug == "pair-bias-transposed":
            z = z.permute(0, 3, 2, 1)                                                # (B, h, N_j, N_i)
        else:
            z = z.permute(0, 3, 1, 2)                                                # (B, h, N_i, N_j)
        if self.bug == "pair-bias-tiled":
            z = z.repeat(multiplicity, 1, 1, 1)                                      # (m·B, h, N, N)
        else:
            z = z.repeat_interleave(multiplicity, 0)                                 # (B·m, h, N, N)
        g = self.proj_g(s).sigmoid()

        attn = torch.einsum("bihd,bjhd->bhij", q.float(), k.float())                 # (B·m, h, N, N)
        attn = attn / (self.head_dim ** 0.5) + z.float()
        if self.bug == "mask-on-queries":
            attn = attn + (1 - mask[:, None, :, None].float()) * -self.inf           # (B·m, 1, N, 1)
        else:
            attn = attn + (1 - mask[:, None, None].float()) * -self.inf              # (B·m, 1, 1, N)
        attn = attn.softmax(dim=-1)
        o = torch.einsum("bhij,bjhd->bihd", attn, v.float()).to(v.dtype)            # (B·m, N, h, d)
        o = o.reshape(B, -1, self.c_s)                                               # (B·m, N, c_s)
        return self.proj_o(g * o)


class DiffusionTransformerLayer(nn.Module):
    def __init__(self, c_s, c_z, heads, bug=""):
        super().__init__()
        self.attn = AttentionPairBias(c_s, c_z, heads, bug=bug)
        self.transition = nn.Sequential(nn.LayerNorm(c_s), nn.Linear(c_s, c_s))

    def forward(self, a, z, mask, multiplicity):
        mask = mask.repeat_interleave(multiplicity, 0)                               # (B·m, N)
        a = a + self.attn(a, z, mask, multiplicity)
        return a + self.transition(a)                                                # (B·m, N, c_s)


BUGS = ("pair-bias-tiled", "mask-on-queries", "pair-bias-transposed")
TWINS = ()
DIMS = ("B=6 T=5 D=32 H=4 M=3",)
EQUAL = {DIMS[0]: "B=4 T=4 D=32 H=4 M=2"}
C_Z = 16


def build(bug="", B=6, T=5, D=32, H=4, M=3):  # noqa: N803
    """``B`` rows of the single representation (the code's ``B = s.shape[0]``): ``B // M`` structures of ``T``
    tokens, ``M`` diffusion samples each; the last structure's last two tokens padded."""
    torch.manual_seed(0)
    structures = B // M
    mask = torch.ones(structures, T)
    mask[-1, -2:] = 0.0
    inputs = (torch.randn(B, T, D), torch.randn(structures, T, T, C_Z), mask, M)
    return DiffusionTransformerLayer(D, C_Z, H, bug).eval(), inputs


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
