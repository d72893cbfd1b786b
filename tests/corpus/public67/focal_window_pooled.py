"""microsoft/Focal-Transformer, classification/focal_transformer.py (``WindowAttention`` with ``pool_method="fc"``,
``FocalTransformerBlock.forward``, ``window_partition``, ``window_partition_noreshape``, ``window_reverse``,
``get_relative_position_index``): focal self-attention at ``focal_level=2``, ``expand_size=0``, no shift. The map
``(B, H, W, C)`` is cut into ``window_size`` windows for the queries, keys and values (``window_partition(t,
ws).view(-1, ws * ws, nH, C // nH).transpose(1, 2)``); each window is also pooled to one token by a
``Linear(ws * ws, 1)`` over its pixels (``view(B, nWh, nWw, ws * ws, C).transpose(3, 4)``, ``flatten(-2)``), and
every window's queries attend, besides their own window, the pooled windows around it: ``nn.Unfold(kernel_size=
(k, k), padding=k // 2)`` over the pooled keys and values ``(B, C, nWh, nWw)``, ``view(B, C, k, k, -1).permute(0, 4,
2, 3, 1)`` and ``view(-1, k * k, nH, C // nH).transpose(1, 2)`` (windows outer, kernel positions inner; the same
unfold of a ones map gives ``-100`` on the zero padding); two bias tables: Swin's ``(offsets, nH)`` inside the
window, ``relative_position_bias_table_to_windows`` ``(nH, offsets)`` read through ``get_relative_position_index(
window_size, (focal_window, focal_window))`` and ``view(-1, ws * ws, focal_window ** 2)``; ``softmax(dim=-1)`` over
the window's and the pooled keys, ``(attn @ v_all).transpose(1, 2).reshape(-1, ws * ws, C)``, ``window_reverse``.

Bugs: ``unfold-kernel-outer``: the unfolded keys read ``view(B, k, k, C, -1)`` (``nn.Unfold``'s ``C·k·k`` axis
taken as kernel positions outer, channels inner: each "pooled key" mixes channels of nine windows);
``pool-view-for-transpose``: ``view(B, nWh, nWw, C, ws * ws)`` for the ``transpose(3, 4)`` (the pooling ``Linear``
runs over runs of memory, not over a window's pixels); ``bias-index-windows-swapped``: the to-windows index built
``get_relative_position_index((fw, fw), window_size)`` (arguments swapped) and viewed as ``(ws², fw²)``."""

import sys

import torch
from torch import nn


def window_partition(x, window_size):
    B, H, W, C = x.shape
    x = x.view(B, H // window_size, window_size, W // window_size, window_size, C)   # (B, nWh, ws, nWw, ws, C)
    return x.permute(0, 1, 3, 2, 4, 5).contiguous().view(-1, window_size, window_size, C)   # (B·nW, ws, ws, C)


def window_reverse(windows, window_size, H, W):
    B = int(windows.shape[0] / (H * W / window_size / window_size))
    x = windows.view(B, H // window_size, W // window_size, window_size, window_size, -1)
    return x.permute(0, 1, 3, 2, 4, 5).contiguous().view(B, H, W, -1)               # (B, H, W, C)


def get_relative_position_index(q_windows, k_windows):
    coords_q = torch.stack(torch.meshgrid(torch.arange(q_windows[0]), torch.arange(q_windows[1]), indexing="ij"))
    coords_k = torch.stack(torch.meshgrid(torch.arange(k_windows[0]), torch.arange(k_windows[1]), indexing="ij"))
    relative_coords = coords_q.flatten(1)[:, :, None] - coords_k.flatten(1)[:, None, :]   # (2, q, k)
    relative_coords = relative_coords.permute(1, 2, 0).contiguous()                  # (q, k, 2)
    relative_coords[:, :, 0] += k_windows[0] - 1
    relative_coords[:, :, 1] += k_windows[1] - 1
    relative_coords[:, :, 0] *= (q_windows[1] + k_windows[1]) - 1
    return relative_coords.sum(-1)                                                    # (q, k)


class WindowAttention(nn.Module):
    def __init__(self, dim, window_size, focal_window, num_heads, bug=""):
        super().__init__()
        self.dim, self.window_size, self.focal_window, self.num_heads, self.bug = dim, window_size, focal_window, \
            num_heads, bug
        self.scale = (dim // num_heads) ** -0.5
        ws, fw = window_size, focal_window
        self.relative_position_bias_table = nn.Parameter(torch.randn((2 * ws - 1) * (2 * ws - 1), num_heads) * 0.02)
        self.register_buffer("relative_position_index", get_relative_position_index((ws, ws), (ws, ws)))
        self.unfold = nn.Unfold(kernel_size=(fw, fw), stride=1, padding=fw // 2)
        self.relative_position_bias_table_to_windows = nn.Parameter(torch.randn(num_heads, (ws + fw - 1) ** 2) * 0.02)
        swapped = bug == "bias-index-windows-swapped"
        index_k = get_relative_position_index((fw, fw), (ws, ws)) if swapped else \
            get_relative_position_index((ws, ws), (fw, fw))
        self.register_buffer("relative_position_index_0", index_k)
        self.qkv = nn.Linear(dim, dim * 3)
        self.proj = nn.Linear(dim, dim)

    def unfold_windows(self, t, B, C):                                               # (B, C, nWh, nWw)
        k = self.focal_window
        if self.bug == "unfold-kernel-outer":
            t = self.unfold(t).view(B, k, k, C, -1).permute(0, 4, 1, 2, 3).contiguous()   # (B, nW, k, k, C)
        else:
            t = self.unfold(t).view(B, C, k, k, -1).permute(0, 4, 2, 3, 1).contiguous()   # (B, nW, k, k, C)
        return t.view(-1, k * k, self.num_heads, C // self.num_heads).transpose(1, 2)  # (B·nW, nH, k·k, C/nH)

    def forward(self, x_all):
        x, x_window_pooled = x_all                                                   # (B, H, W, C), (B, nWh, nWw, C)
        B, nH, nW, C = x.shape
        ws, fw = self.window_size, self.focal_window
        qkv = self.qkv(x).reshape(B, nH, nW, 3, C).permute(3, 0, 1, 2, 4).contiguous()   # (3, B, H, W, C)
        q_windows, k_windows, v_windows = map(lambda t: window_partition(t, ws).view(
            -1, ws * ws, self.num_heads, C // self.num_heads).transpose(1, 2),
            (qkv[0], qkv[1], qkv[2]))                                                # (B·nW, nH, ws², C/nH)
        nWh, nWw = x_window_pooled.shape[1:3]
        mask = x_window_pooled.new(nWh, nWw).fill_(1)
        unfolded_mask = self.unfold(mask.unsqueeze(0).unsqueeze(1)).view(1, 1, fw, fw, -1).permute(
            0, 4, 2, 3, 1).contiguous().view(nWh * nWw, -1, 1)                        # (nW, fw², 1)
        x_window_masks = unfolded_mask.flatten(1).unsqueeze(0)                        # (1, nW, fw²)
        x_window_masks = x_window_masks.masked_fill(x_window_masks == 0, -100.0).masked_fill(x_window_masks > 0, 0.0)
        qkv_pooled = self.qkv(x_window_pooled).reshape(B, nWh, nWw, 3, C).permute(3, 0, 4, 1, 2).contiguous()
        k_pooled, v_pooled = (self.unfold_windows(t, B, C) for t in (qkv_pooled[1], qkv_pooled[2]))
        k_all = torch.cat([k_windows, k_pooled], 2)                                  # (B·nW, nH, ws² + fw², C/nH)
        v_all = torch.cat([v_windows, v_pooled], 2)
        attn = (q_windows * self.scale) @ k_all.transpose(-2, -1)                    # (B·nW, nH, ws², ws² + fw²)
        window_area = ws * ws
        bias = self.relative_position_bias_table[self.relative_position_index.view(-1)].view(
            window_area, window_area, -1).permute(2, 0, 1).contiguous()              # (nH, ws², ws²)
        attn[:, :, :window_area, :window_area] = attn[:, :, :window_area, :window_area] + bias.unsqueeze(0)
        bias_to_windows = self.relative_position_bias_table_to_windows[:, self.relative_position_index_0.view(-1)].view(
            -1, window_area, fw * fw)                                                 # (nH, ws², fw²)
        mask_rows = x_window_masks[:, :, None, None, :].repeat(attn.shape[0] // x_window_masks.shape[1], 1, 1, 1, 1)
        attn[:, :, :window_area, window_area:] = attn[:, :, :window_area, window_area:] + bias_to_windows.unsqueeze(0) \
            + mask_rows.view(-1, 1, 1, x_window_masks.shape[-1])                     # (B·nW, 1, 1, fw²)
        attn = attn.softmax(dim=-1)
        x = (attn @ v_all).transpose(1, 2).reshape(attn.shape[0], window_area, C)    # (B·nW, ws², C)
        return self.proj(x)


class FocalTransformerBlock(nn.Module):
    def __init__(self, dim, input_resolution, num_heads, window_size=2, focal_window=3, bug=""):
        super().__init__()
        self.input_resolution, self.window_size, self.bug = input_resolution, window_size, bug
        self.norm1 = nn.LayerNorm(dim)
        self.pool_layer = nn.Linear(window_size * window_size, 1)
        self.pool_layer.weight.data.fill_(1.0 / (window_size * window_size))
        self.pool_layer.bias.data.fill_(0)
        self.attn = WindowAttention(dim, window_size, focal_window, num_heads, bug)

    def forward(self, x):                                                             # (B, H·W, C)
        H, W = self.input_resolution
        B, L, C = x.shape
        shortcut, ws = x, self.window_size
        x = self.norm1(x).view(B, H, W, C)                                            # (B, H, W, C)
        x_windows = x.view(B, H // ws, ws, W // ws, ws, C)                            # (B, nWh, ws, nWw, ws, C)
        x_windows = x_windows.permute(0, 1, 3, 2, 4, 5).contiguous()                  # (B, nWh, nWw, ws, ws, C)
        nWh, nWw = x_windows.shape[1:3]
        if self.bug == "pool-view-for-transpose":
            x_windows = x_windows.view(B, nWh, nWw, C, ws * ws)                       # (B, nWh, nWw, C, ws²)
        else:
            x_windows = x_windows.view(B, nWh, nWw, ws * ws, C).transpose(3, 4)       # (B, nWh, nWw, C, ws²)
        x_windows_pooled = self.pool_layer(x_windows).flatten(-2)                     # (B, nWh, nWw, C)
        attn_windows = self.attn([x, x_windows_pooled])                               # (B·nW, ws², C)
        attn_windows = attn_windows.view(-1, ws, ws, C)
        x = window_reverse(attn_windows, ws, H, W).view(B, H * W, C)                  # (B, H·W, C)
        return shortcut + x


BUGS = ("unfold-kernel-outer", "pool-view-for-transpose", "bias-index-windows-swapped")
TWINS = ()
DIMS = ("B=2 D=32 H=4 Hp=4 Wp=6",)   # (windows of 2 x 2: a 2 x 3 grid of windows, each one pooled)
EQUAL = {DIMS[0]: "B=4 D=32 H=4 Hp=4 Wp=4"}


def build(bug="", B=2, D=32, H=4, Hp=4, Wp=6):  # noqa: N803
    torch.manual_seed(0)
    model = FocalTransformerBlock(D, (Hp, Wp), H, bug=bug).eval()
    return model, (torch.randn(B, Hp * Wp, D),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
