"""microsoft/ClimaX, src/climax/arch.py (``ClimaX.forward_encoder``, ``aggregate_variables``,
``get_var_emb``; 2023): weather fields of ``V`` physical variables ``(B, V, H, W)``; each variable is patch-embedded
by its own ``PatchEmbed`` (a ``Conv2d`` of stride ``p``, ``flatten(2).transpose(1, 2)``) and stacked ``(B, V, L,
D)``; a learnt per-variable embedding is added (``var_embed.unsqueeze(2)``); ``aggregate_variables`` then runs a
cross-attention over the variables of each patch: ``torch.einsum("bvld->blvd", x)``, ``x.flatten(0, 1)`` ``(B·L, V,
D)``, one learnt query ``var_query.repeat_interleave(x.shape[0], dim=0)`` ``(B·L, 1, D)``, ``nn.MultiheadAttention(
batch_first=True)``, ``squeeze()``, ``unflatten(dim=0, sizes=(b, l))`` ``(B, L, D)``; the positional embedding over
the patches and the lead-time embedding are added after it.

Bugs: ``vars-reshape-no-permute``: ``x.reshape(b * l, -1, d)`` straight from ``(B, V, L, D)`` (the einsum
forgotten: each "patch" of the fold is a run of ``V`` consecutive patch tokens of one variable);
``einsum-patch-outer``: ``torch.einsum("bvld->lbvd", x)`` (patches outer) flattened and unflattened ``(b, l)`` as
ClimaX does (the fold's order and the unfold's disagree)."""

import sys

import torch
from torch import nn


class PatchEmbed(nn.Module):
    def __init__(self, patch_size, in_chans, embed_dim):
        super().__init__()
        self.proj = nn.Conv2d(in_chans, embed_dim, kernel_size=patch_size, stride=patch_size)

    def forward(self, x):                                                        # (B, 1, H_img, W_img)
        return self.proj(x).flatten(2).transpose(1, 2)                           # (B, L, D)


class ClimaX(nn.Module):
    def __init__(self, default_vars, num_patches, patch_size=2, embed_dim=32, num_heads=4, bug=""):
        super().__init__()
        self.bug = bug
        self.token_embeds = nn.ModuleList([PatchEmbed(patch_size, 1, embed_dim) for _ in default_vars])
        self.var_embed = nn.Parameter(torch.randn(1, len(default_vars), embed_dim) * 0.02)
        self.var_map = {var: i for i, var in enumerate(default_vars)}
        self.var_query = nn.Parameter(torch.randn(1, 1, embed_dim) * 0.02)
        self.var_agg = nn.MultiheadAttention(embed_dim, num_heads, batch_first=True)
        self.pos_embed = nn.Parameter(torch.randn(1, num_patches, embed_dim) * 0.02)
        self.lead_time_embed = nn.Linear(1, embed_dim)

    def get_var_ids(self, vars):
        return torch.tensor([self.var_map[var] for var in vars])

    def get_var_emb(self, var_emb, vars):
        return var_emb[:, self.get_var_ids(vars), :]                             # (1, V, D)

    def aggregate_variables(self, x):                                            # (B, V, L, D)
        b, _, l, d = x.shape   # noqa: E741 (ClimaX's own names)
        if self.bug == "vars-reshape-no-permute":
            x = x.reshape(b * l, -1, d)                                          # (B·L, V, D)
        elif self.bug == "einsum-patch-outer":
            x = torch.einsum("bvld->lbvd", x).flatten(0, 1)                      # (L·B, V, D)
        else:
            x = torch.einsum("bvld->blvd", x).flatten(0, 1)                      # (B·L, V, D)
        var_query = self.var_query.repeat_interleave(x.shape[0], dim=0)          # (B·L, 1, D)
        x, _ = self.var_agg(var_query, x, x)                                     # (B·L, 1, D)
        x = x.squeeze()                                                          # (B·L, D)
        return x.unflatten(dim=0, sizes=(b, l))                                  # (B, L, D)

    def forward(self, x, lead_times, variables):                                 # (B, V, H_img, W_img), (B,)
        embeds = [self.token_embeds[int(id)](x[:, i : i + 1]) for i, id in enumerate(self.get_var_ids(variables))]
        x = torch.stack(embeds, dim=1)                                           # (B, V, L, D)
        x = x + self.get_var_emb(self.var_embed, variables).unsqueeze(2)         # (B, V, L, D)
        x = self.aggregate_variables(x)                                          # (B, L, D)
        x = x + self.pos_embed                                                   # (B, L, D)
        return x + self.lead_time_embed(lead_times.unsqueeze(-1)).unsqueeze(1)   # (B, L, D)


BUGS = ("vars-reshape-no-permute", "einsum-patch-outer")
TWINS = ()
DIMS = ("B=2 T=6 S=3 D=32 H=4",)   # (T: the patches of a field, 2 x 2T pixels; S: the variables)


def build(bug="", B=2, T=6, S=3, D=32, H=4):  # noqa: N803
    torch.manual_seed(0)
    variables = ("t2m", "u10", "v10", "z500", "q850")[:S]
    model = ClimaX(variables, T, 2, D, H, bug).eval()
    return model, (torch.randn(B, S, 2, 2 * T), torch.rand(B), variables)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
