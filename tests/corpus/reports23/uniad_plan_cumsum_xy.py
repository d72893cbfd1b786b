"""OpenDriveLab/UniAD issue #92 ("Question about cumsum of the planning prediction", labelled bug and fixed,
commit 7903ead with retrained stage-2 weights; Christinepan881: "the tensor is reshaped to [1, T, 2] in the
190 line, which means the cumsum is performed along the xy axis (dim 2)"): the planning head regresses
per-step offsets of the ego trajectory and integrates them into waypoints with ``torch.cumsum``; after the
``view`` to ``(-1, planning_steps, 2)`` the sum ran over ``dim=2``, the (x, y) pair, so each waypoint was
``(dx, dx + dy)`` of its own step instead of the sum of the offsets of the steps before it. The fix sums over
``dim=1``, the planning steps.

The idiom: UniAD's ``PlanningHeadSingleMode`` (the ego query plus a learned ``navi_embed`` for the command,
an ``mlp_fuser``, cross-attention of the plan query to the BEV features, ``[B, 1, D]`` against
``[B, T, D]``, heads by ``view``/``transpose``, ``softmax(dim=-1)``, a residual, ``reg_branch`` to
``planning_steps * 2``, the ``view`` and the ``cumsum``). T is the flattened BEV grid, 3 planning steps.

Bug (reduction axis): ``cumsum-over-xy``: ``torch.cumsum(sdc_traj_all[..., :2], dim=2)``."""

import math
import sys

import torch
from torch import nn

BUGS = ("cumsum-over-xy",)
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)


class PlanCrossAttention(nn.Module):
    def __init__(self, embed_dims, num_heads):
        super().__init__()
        self.num_heads, self.head_dim = num_heads, embed_dims // num_heads
        self.q_proj, self.k_proj = nn.Linear(embed_dims, embed_dims), nn.Linear(embed_dims, embed_dims)
        self.v_proj, self.out_proj = nn.Linear(embed_dims, embed_dims), nn.Linear(embed_dims, embed_dims)

    def forward(self, query, bev):
        B, L, C = query.shape
        S = bev.shape[1]
        q = self.q_proj(query).view(B, L, self.num_heads, self.head_dim).transpose(1, 2)
        k = self.k_proj(bev).view(B, S, self.num_heads, self.head_dim).transpose(1, 2)
        v = self.v_proj(bev).view(B, S, self.num_heads, self.head_dim).transpose(1, 2)
        attn = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(self.head_dim), dim=-1)
        return self.out_proj((attn @ v).transpose(1, 2).reshape(B, L, C))


class PlanningHeadSingleMode(nn.Module):
    def __init__(self, embed_dims, num_heads, planning_steps=3, bug=""):
        super().__init__()
        self.bug, self.planning_steps = bug, planning_steps
        self.navi_embed = nn.Embedding(3, embed_dims)
        self.mlp_fuser = nn.Sequential(nn.Linear(embed_dims * 2, embed_dims), nn.LayerNorm(embed_dims), nn.ReLU())
        self.attn_module = PlanCrossAttention(embed_dims, num_heads)
        self.norm = nn.LayerNorm(embed_dims)
        self.reg_branch = nn.Sequential(nn.Linear(embed_dims, embed_dims), nn.ReLU(),
                                        nn.Linear(embed_dims, planning_steps * 2))

    def forward(self, bev_embed, sdc_traj_query, command):                              # (B,T,D), (B,D), (B,)
        navi_embed = self.navi_embed.weight[command]                                    # (B, D)
        plan_query = self.mlp_fuser(torch.cat([sdc_traj_query, navi_embed], dim=-1)).unsqueeze(1)
        plan_query = self.norm(plan_query + self.attn_module(plan_query, bev_embed))      # (B, 1, D)
        sdc_traj_all = self.reg_branch(plan_query).view((-1, self.planning_steps, 2))
        if self.bug == "cumsum-over-xy":
            sdc_traj_all = torch.cumsum(sdc_traj_all[..., :2], dim=2)                   # [cumsum]
        else:
            sdc_traj_all = torch.cumsum(sdc_traj_all[..., :2], dim=1)                   # [cumsum]
        return sdc_traj_all                                                             # (B, steps, 2)


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    command = torch.tensor([i % 3 for i in range(B)])
    return PlanningHeadSingleMode(D, H, bug=bug).eval(), (torch.randn(B, T, D), torch.randn(B, D), command)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
