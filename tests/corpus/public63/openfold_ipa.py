"""aqlaboratory/openfold, openfold/model/structure_module.py (``PointProjection``, ``InvariantPointAttention``
with ``is_multimer=False``, the non-inplace branch), with openfold/utils/rigid_utils.py (``rot_vec_mul``,
``Rigid.apply`` / ``invert_apply``, here a small ``Rigid`` of rotation matrices and translations) and
openfold/utils/tensor_utils.py (``permute_final_dims``, ``flatten_final_dims``), commit ce0029e: AlphaFold 2's
Algorithm 22. The single representation ``s`` ``(B, N_res, c_s)``, the pair ``z`` ``(B, N_res, N_res, c_z)``, one
frame per residue, the residue mask ``(B, N_res)``. ``q`` and ``kv`` viewed ``(..., H, -1)`` (``k, v =
torch.split(kv, c_hidden)``); the points ``linear(s)`` split in three and stacked ``(..., H·P, 3)``, viewed ``(...,
H, P, 3)``, moved to the global frame by ``rigids[..., None, None].apply``; ``a = matmul(permute_final_dims(q, (1, 0,
2)), permute_final_dims(k, (1, 2, 0)))`` ``(B, H, N, N)`` times ``sqrt(1 / (3 c))``, plus ``sqrt(1/3) ·
permute_final_dims(linear_b(z), (2, 0, 1))``; the point term ``q_pts.unsqueeze(-4) - k_pts.unsqueeze(-5)`` ``(B, N_q,
N_k, H, P, 3)`` squared and summed over xyz, ``softplus(head_weights)`` per head, summed over the points, ``-0.5``,
``permute_final_dims(pt_att, (2, 0, 1))``; the square mask ``inf · (mask_i mask_j - 1)``; ``softmax(-1)``; the
scalar output ``matmul(a, v.transpose(-2, -3)).transpose(-2, -3)``, the point output summed over the keys, ``(2, 0,
3, 1)`` back to ``(B, N, H, P_v, 3)`` and ``invert_apply`` to the local frame, its norm, the pair output
``matmul(a.transpose(-2, -3), z)``; all concatenated into ``linear_out``.

Bugs: ``pair-bias-transposed``: ``permute_final_dims(b, (2, 1, 0))``, the bias of edge (j, i) added to the score
of (i, j) (the pair is not symmetric); ``mask-query-rows``: ``square_mask = inf · (mask.unsqueeze(-1) - 1)``, the
key side left out (the padded residues' own rows pushed down, every real residue still attends the padding);
``point-term-transposed``: ``q_pts.unsqueeze(-5) - k_pts.unsqueeze(-4)`` (``|q_j - k_i|`` for the score of (i,
j))."""

import math
import sys

import torch
from torch import nn


def permute_final_dims(tensor, inds):
    zero_index = -1 * len(inds)
    first_inds = list(range(len(tensor.shape[:zero_index])))
    return tensor.permute(first_inds + [zero_index + i for i in inds])


def flatten_final_dims(t, no_dims):
    return t.reshape(t.shape[:-no_dims] + (-1,))


def rot_vec_mul(r, t):
    x, y, z = torch.unbind(t, dim=-1)
    return torch.stack([r[..., i, 0] * x + r[..., i, 1] * y + r[..., i, 2] * z for i in range(3)], dim=-1)


class Rigid:
    def __init__(self, rots, trans):
        self._rots, self._trans = rots, trans                                       # (B, N, 3, 3), (B, N, 3)

    def __getitem__(self, index):
        return Rigid(self._rots[index + (slice(None), slice(None))], self._trans[index + (slice(None),)])

    def apply(self, pts):
        return rot_vec_mul(self._rots, pts) + self._trans

    def invert_apply(self, pts):
        return rot_vec_mul(self._rots.transpose(-1, -2), pts - self._trans)


class PointProjection(nn.Module):
    def __init__(self, c_hidden, num_points, no_heads):
        super().__init__()
        self.no_heads, self.num_points = no_heads, num_points
        self.linear = nn.Linear(c_hidden, no_heads * 3 * num_points)

    def forward(self, activations, rigids):
        points_local = self.linear(activations)
        out_shape = points_local.shape[:-1] + (self.no_heads, self.num_points, 3)
        points_local = torch.split(points_local, points_local.shape[-1] // 3, dim=-1)
        points_local = torch.stack(points_local, dim=-1).view(out_shape)            # (B, N, H, P, 3)
        return rigids[..., None, None].apply(points_local)


class InvariantPointAttention(nn.Module):
    def __init__(self, c_s, c_z, c_hidden, no_heads, no_qk_points, no_v_points, inf=1e5, eps=1e-8, bug=""):
        super().__init__()
        self.c_hidden, self.no_heads = c_hidden, no_heads
        self.no_qk_points, self.no_v_points = no_qk_points, no_v_points
        self.inf, self.eps, self.bug = inf, eps, bug
        hc = c_hidden * no_heads
        self.linear_q = nn.Linear(c_s, hc)
        self.linear_q_points = PointProjection(c_s, no_qk_points, no_heads)
        self.linear_kv = nn.Linear(c_s, 2 * hc)
        self.linear_kv_points = PointProjection(c_s, no_qk_points + no_v_points, no_heads)
        self.linear_b = nn.Linear(c_z, no_heads)
        self.head_weights = nn.Parameter(torch.full((no_heads,), 0.541324854612918))
        self.linear_out = nn.Linear(no_heads * (c_z + c_hidden + no_v_points * 4), c_s)
        self.softmax, self.softplus = nn.Softmax(dim=-1), nn.Softplus()

    def forward(self, s, z, r, mask):
        q = self.linear_q(s)
        q = q.view(q.shape[:-1] + (self.no_heads, -1))                              # (B, N, H, C)
        q_pts = self.linear_q_points(s, r)                                          # (B, N, H, P_qk, 3)
        kv = self.linear_kv(s)
        kv = kv.view(kv.shape[:-1] + (self.no_heads, -1))                           # (B, N, H, 2C)
        k, v = torch.split(kv, self.c_hidden, dim=-1)                               # (B, N, H, C)
        kv_pts = self.linear_kv_points(s, r)
        k_pts, v_pts = torch.split(kv_pts, [self.no_qk_points, self.no_v_points], dim=-2)

        b = self.linear_b(z)                                                        # (B, N, N, H)
        a = torch.matmul(permute_final_dims(q, (1, 0, 2)), permute_final_dims(k, (1, 2, 0)))   # (B, H, N, N)
        a = a * math.sqrt(1.0 / (3 * self.c_hidden))
        bias = permute_final_dims(b, (2, 1, 0) if self.bug == "pair-bias-transposed" else (2, 0, 1))
        a = a + math.sqrt(1.0 / 3) * bias                                           # (B, H, N, N)
        if self.bug == "point-term-transposed":
            pt_att = q_pts.unsqueeze(-5) - k_pts.unsqueeze(-4)                      # (B, N_k, N_q, H, P, 3)
        else:
            pt_att = q_pts.unsqueeze(-4) - k_pts.unsqueeze(-5)                      # (B, N_q, N_k, H, P, 3)
        pt_att = sum(torch.unbind(pt_att ** 2, dim=-1))
        head_weights = self.softplus(self.head_weights).view(*((1,) * len(pt_att.shape[:-2]) + (-1, 1)))
        head_weights = head_weights * math.sqrt(1.0 / (3 * (self.no_qk_points * 9.0 / 2)))
        pt_att = torch.sum(pt_att * head_weights, dim=-1) * (-0.5)                  # (B, N, N, H)
        if self.bug == "mask-query-rows":
            square_mask = self.inf * (mask.unsqueeze(-1) - 1)                       # (B, N, 1)
        else:
            square_mask = self.inf * (mask.unsqueeze(-1) * mask.unsqueeze(-2) - 1)  # (B, N, N)
        a = a + permute_final_dims(pt_att, (2, 0, 1))
        a = self.softmax(a + square_mask.unsqueeze(-3))                             # (B, H, N, N)

        o = torch.matmul(a, v.transpose(-2, -3)).transpose(-2, -3)                  # (B, N, H, C)
        o = flatten_final_dims(o, 2)
        o_pt = torch.sum(a[..., None, :, :, None] * permute_final_dims(v_pts, (1, 3, 0, 2))[..., None, :, :],
                         dim=-2)                                                    # (B, H, 3, N, P_v)
        o_pt = permute_final_dims(o_pt, (2, 0, 3, 1))                               # (B, N, H, P_v, 3)
        o_pt = r[..., None, None].invert_apply(o_pt)
        o_pt_norm = flatten_final_dims(torch.sqrt(torch.sum(o_pt ** 2, dim=-1) + self.eps), 2)
        o_pt = torch.unbind(o_pt.reshape(*o_pt.shape[:-3], -1, 3), dim=-1)          # 3 × (B, N, H·P_v)
        o_pair = flatten_final_dims(torch.matmul(a.transpose(-2, -3), z), 2)         # (B, N, H·c_z)
        return self.linear_out(torch.cat((o, *o_pt, o_pt_norm, o_pair), dim=-1))


BUGS = ("pair-bias-transposed", "mask-query-rows", "point-term-transposed")
TWINS = ()
DIMS = ("B=2 T=5 D=32 H=4",)
EQUAL = {DIMS[0]: "B=4 T=4 D=32 H=4"}
C_Z, P_QK, P_V = 16, 6, 7


def build(bug="", B=2, T=5, D=32, H=4):  # noqa: N803
    """``B`` chains of ``T`` residues (the last chain's last two padded), a random frame per residue."""
    torch.manual_seed(0)
    rots = torch.linalg.qr(torch.randn(B, T, 3, 3)).Q
    mask = torch.ones(B, T)
    mask[-1, -2:] = 0.0
    inputs = (torch.randn(B, T, D), torch.randn(B, T, T, C_Z), Rigid(rots, torch.randn(B, T, 3)), mask)
    return InvariantPointAttention(D, C_Z, D // H, H, P_QK, P_V, bug=bug).eval(), inputs


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
