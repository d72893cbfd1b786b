"""Exercise repeat-kv-backward: the grad of GQA's repeat_kv, by hand.

The forward (lesson 6) expanded each kv head n_rep times in place, [B, H_kv, n_rep, T, d_k],
and merged the two head axes: query head h read kv head h // n_rep. Given dy = dL/d(output)
[B, H, T, d_k] and n_rep, return the grad of kv, [B, H_kv, T, d_k].
Run `shapetrace exercise check repeat-kv-backward`.
"""

import torch


def repeat_kv_backward(dy, n_rep):
    return dy[:, ::n_rep]                                  # (B, H_kv, T, d_k)?
