"""pmixer/TiSASRec.pytorch, model.py (``TimeAwareMultiHeadAttention``, ``TiSASRec.seq2feats``, commit 442bdf4):
item ids ``(B, T)`` (0 pads the front), ``item_emb * sqrt(D)``, absolute position embeddings for keys and values
(``abs_pos_K_emb``, ``abs_pos_V_emb``) and time-interval embeddings ``(B, T, T, D)`` for keys and values
(``time_matrix_K_emb``, ``time_matrix_V_emb``); heads folded head-major into the batch by
``torch.cat(torch.split(Q, head_size, dim=2), dim=0)`` (``(h*N, T, C/h)``), the interval tables by the same split
on their last axis; scores ``Q_ K_^T + Q_ abs_pos_K_^T + time_matrix_K_ @ Q_.unsqueeze(-1)`` over
``sqrt(head_size)``; padded keys and the future filled with ``-FLOAT_MAX`` by ``torch.where``; softmax;
``attn @ V_ + attn @ abs_pos_V_ + (attn.unsqueeze(-2) @ time_matrix_V_).reshape(...)`` (each query's own
``[T, d_k]`` table of interval values, summed over the keys); heads unfolded by ``torch.cat(torch.split(outputs,
Q.shape[0], dim=0), dim=2)``; ``Q + mha_outputs``, a pointwise ``Conv1d`` feed-forward over ``transpose(-1, -2)``.
pmixer fills the padded *queries* (``time_mask.unsqueeze(-1).expand(attn_weights.shape[0], -1, T)``, which runs
with one head only, the repository's default, and leaves the padded keys open to every real query); the correct
file here fills the padded keys, tiled head-major, as the TensorFlow original's ``key_masks`` (``tf.tile``) does.

Bugs: ``merge-heads-by-reshape``: the ``(h*N, T, C/h) -> (N, T, C)`` unfold written as ``outputs.reshape(N, T, C)``
on head-major rows: each user's features are other users' heads; ``padding-on-queries``: pmixer's own layout of
the padding mask, ``time_mask.unsqueeze(-1)`` widened over the keys (tiled head-major so that four heads run): the
padded positions are hidden as queries, and stay visible as keys to every real query. Twin:
``merge-heads-by-view``: the same unfold spelled ``view(h, N, T, C/h).permute(1, 2, 0, 3).reshape(N, T, C)``
(correct: head-major rows read back as such)."""

import sys

import torch

FLOAT_MIN = -3.4e38


class PointWiseFeedForward(torch.nn.Module):
    def __init__(self, hidden_units):
        super().__init__()
        self.conv1 = torch.nn.Conv1d(hidden_units, hidden_units, kernel_size=1)
        self.conv2 = torch.nn.Conv1d(hidden_units, hidden_units, kernel_size=1)

    def forward(self, inputs):                                            # (B, T, D)
        outputs = self.conv2(torch.relu(self.conv1(inputs.transpose(-1, -2))))   # (B, D, T)
        outputs = outputs.transpose(-1, -2)                               # (B, T, D)
        return outputs + inputs


class TimeAwareMultiHeadAttention(torch.nn.Module):
    def __init__(self, hidden_size, head_num, bug=""):
        super().__init__()
        self.bug = bug
        self.Q_w = torch.nn.Linear(hidden_size, hidden_size)
        self.K_w = torch.nn.Linear(hidden_size, hidden_size)
        self.V_w = torch.nn.Linear(hidden_size, hidden_size)
        self.softmax = torch.nn.Softmax(dim=-1)
        self.hidden_size = hidden_size
        self.head_num = head_num
        self.head_size = hidden_size // head_num

    def forward(self, queries, keys, time_mask, attn_mask, time_matrix_K, time_matrix_V, abs_pos_K, abs_pos_V):
        Q, K, V = self.Q_w(queries), self.K_w(keys), self.V_w(keys)     # (B, T, D)
        Q_ = torch.cat(torch.split(Q, self.head_size, dim=2), dim=0)     # (H*B, T, d_k)
        K_ = torch.cat(torch.split(K, self.head_size, dim=2), dim=0)     # (H*B, T, d_k)
        V_ = torch.cat(torch.split(V, self.head_size, dim=2), dim=0)     # (H*B, T, d_k)
        time_matrix_K_ = torch.cat(torch.split(time_matrix_K, self.head_size, dim=3), dim=0)  # (H*B, T, T, d_k)
        time_matrix_V_ = torch.cat(torch.split(time_matrix_V, self.head_size, dim=3), dim=0)  # (H*B, T, T, d_k)
        abs_pos_K_ = torch.cat(torch.split(abs_pos_K, self.head_size, dim=2), dim=0)   # (H*B, T, d_k)
        abs_pos_V_ = torch.cat(torch.split(abs_pos_V, self.head_size, dim=2), dim=0)   # (H*B, T, d_k)

        attn_weights = Q_.matmul(torch.transpose(K_, 1, 2))             # (H*B, T, T)
        attn_weights += Q_.matmul(torch.transpose(abs_pos_K_, 1, 2))
        attn_weights += time_matrix_K_.matmul(Q_.unsqueeze(-1)).squeeze(-1)   # (H*B, T, T)
        attn_weights = attn_weights / (K_.shape[-1] ** 0.5)

        if self.bug == "padding-on-queries":
            time_mask = time_mask.unsqueeze(-1).repeat(self.head_num, 1, attn_weights.shape[-1])   # (H*B, T, T)
        else:
            time_mask = time_mask.unsqueeze(1).repeat(self.head_num, attn_weights.shape[1], 1)   # (H*B, T, T)
        attn_mask = attn_mask.unsqueeze(0).expand(attn_weights.shape[0], -1, -1)   # (H*B, T, T)
        paddings = torch.ones(attn_weights.shape) * FLOAT_MIN
        attn_weights = torch.where(time_mask, paddings, attn_weights)
        attn_weights = torch.where(attn_mask, paddings, attn_weights)
        attn_weights = self.softmax(attn_weights)                        # (H*B, T, T)

        outputs = attn_weights.matmul(V_)                                # (H*B, T, d_k)
        outputs += attn_weights.matmul(abs_pos_V_)
        outputs += attn_weights.unsqueeze(-2).matmul(time_matrix_V_).reshape(outputs.shape)   # (H*B, T, d_k)

        if self.bug == "merge-heads-by-reshape":
            outputs = outputs.reshape(Q.shape[0], Q.shape[1], -1)        # (B, T, D)
        elif self.bug == "merge-heads-by-view":
            outputs = outputs.view(self.head_num, Q.shape[0], Q.shape[1], self.head_size)   # (H, B, T, d_k)
            outputs = outputs.permute(1, 2, 0, 3).reshape(Q.shape[0], Q.shape[1], -1)     # (B, T, D)
        else:
            outputs = torch.cat(torch.split(outputs, Q.shape[0], dim=0), dim=2)   # (B, T, D)
        return outputs


class TiSASRec(torch.nn.Module):
    def __init__(self, item_num, time_span, maxlen, hidden_units, num_heads, num_blocks=2, bug=""):
        super().__init__()
        self.item_emb = torch.nn.Embedding(item_num + 1, hidden_units, padding_idx=0)
        self.abs_pos_K_emb = torch.nn.Embedding(maxlen, hidden_units)
        self.abs_pos_V_emb = torch.nn.Embedding(maxlen, hidden_units)
        self.time_matrix_K_emb = torch.nn.Embedding(time_span + 1, hidden_units)
        self.time_matrix_V_emb = torch.nn.Embedding(time_span + 1, hidden_units)
        self.attention_layernorms = torch.nn.ModuleList()
        self.attention_layers = torch.nn.ModuleList()
        self.forward_layernorms = torch.nn.ModuleList()
        self.forward_layers = torch.nn.ModuleList()
        self.last_layernorm = torch.nn.LayerNorm(hidden_units, eps=1e-8)
        for _ in range(num_blocks):
            self.attention_layernorms.append(torch.nn.LayerNorm(hidden_units, eps=1e-8))
            self.attention_layers.append(TimeAwareMultiHeadAttention(hidden_units, num_heads, bug))
            self.forward_layernorms.append(torch.nn.LayerNorm(hidden_units, eps=1e-8))
            self.forward_layers.append(PointWiseFeedForward(hidden_units))

    def forward(self, log_seqs, time_matrices):                         # (B, T), (B, T, T)
        seqs = self.item_emb(log_seqs)                                   # (B, T, D)
        seqs = seqs * self.item_emb.embedding_dim ** 0.5
        positions = torch.arange(log_seqs.shape[1]).repeat(log_seqs.shape[0], 1)   # (B, T)
        abs_pos_K = self.abs_pos_K_emb(positions)                        # (B, T, D)
        abs_pos_V = self.abs_pos_V_emb(positions)                        # (B, T, D)
        time_matrix_K = self.time_matrix_K_emb(time_matrices)            # (B, T, T, D)
        time_matrix_V = self.time_matrix_V_emb(time_matrices)            # (B, T, T, D)

        timeline_mask = log_seqs == 0                                    # (B, T)
        seqs = seqs * ~timeline_mask.unsqueeze(-1)                       # (B, T, D)
        tl = seqs.shape[1]
        attention_mask = ~torch.tril(torch.ones((tl, tl), dtype=torch.bool))   # (T, T)

        for i in range(len(self.attention_layers)):
            Q = self.attention_layernorms[i](seqs)
            mha_outputs = self.attention_layers[i](Q, seqs, timeline_mask, attention_mask,
                                                   time_matrix_K, time_matrix_V, abs_pos_K, abs_pos_V)
            seqs = Q + mha_outputs
            seqs = self.forward_layernorms[i](seqs)
            seqs = self.forward_layers[i](seqs)
            seqs = seqs * ~timeline_mask.unsqueeze(-1)
        return self.last_layernorm(seqs)


BUGS = ("merge-heads-by-reshape", "padding-on-queries")
TWINS = ("merge-heads-by-view",)
DIMS = ("B=2 T=6 D=32 H=4",)


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    model = TiSASRec(item_num=20, time_span=16, maxlen=T, hidden_units=D, num_heads=H, bug=bug).eval()
    log_seqs = torch.randint(1, 21, (B, T))
    log_seqs[0, :2] = 0                                                  # (the shorter history, padded at the front)
    stamps = torch.cumsum(torch.randint(0, 4, (B, T)), dim=1)
    time_matrices = (stamps.unsqueeze(2) - stamps.unsqueeze(1)).abs().clamp(max=16)   # (B, T, T)
    return model, (log_seqs, time_matrices)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
