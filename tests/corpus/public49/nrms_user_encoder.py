"""microsoft/recommenders ``recommenders/models/newsrec/models/nrms.py`` (NRMS, Wu et al. 2019) as ported to torch
in yusanshi/news-recommendation (``src/model/NRMS``): the news encoder embeds a title's words, runs multi-head self
attention over them (``W_Q``/``W_K``/``W_V``, heads by ``view(batch_size, -1, num_attention_heads, d_k)
.transpose(1, 2)``, scores ``/ sqrt(d_k)``, the heads merged back with ``transpose(1, 2).contiguous().view``) and
pools them with additive attention (``tanh(linear(x)) @ attention_query_vector``, a softmax over the words, a
``bmm`` of the weights with the words); the user encoder does the same over the clicked news' vectors. The
clicked titles enter as one tensor ``(B, N, T)`` (a batch of sets of sequences) and the news encoder runs on all
of them at once, as Keras' ``TimeDistributed(titleencoder)(his_input_title)`` does: ``(B*N, T)`` folded in, the
news vectors unfolded ``view(B, N, D)``.

Bug (unfold): ``unfold-set-major``: the news vectors unfolded as ``view(N, B, D).transpose(0, 1)``, reading the
batch-major fold ``(B*N)`` as set-major: each user gets another user's clicked news."""

import sys

import torch
from torch import nn

BUGS = ("unfold-set-major",)
TWINS = ()
DIMS = ("B=2 T=5 D=32 H=4 N=3",)


class MultiHeadSelfAttention(nn.Module):
    def __init__(self, d_model, num_attention_heads):
        super().__init__()
        self.num_attention_heads, self.d_k = num_attention_heads, d_model // num_attention_heads
        self.W_Q, self.W_K, self.W_V = (nn.Linear(d_model, d_model) for _ in range(3))

    def forward(self, x):
        batch_size = x.size(0)
        q = self.W_Q(x).view(batch_size, -1, self.num_attention_heads, self.d_k).transpose(1, 2)  # (B, H, T, d_k)
        k = self.W_K(x).view(batch_size, -1, self.num_attention_heads, self.d_k).transpose(1, 2)  # (B, H, T, d_k)
        v = self.W_V(x).view(batch_size, -1, self.num_attention_heads, self.d_k).transpose(1, 2)  # (B, H, T, d_k)
        scores = torch.matmul(q, k.transpose(-1, -2)) / self.d_k ** 0.5                          # (B, H, T, T)
        attn = torch.softmax(scores, dim=-1)
        context = torch.matmul(attn, v)                                                          # (B, H, T, d_k)
        return context.transpose(1, 2).contiguous().view(batch_size, -1, self.num_attention_heads * self.d_k)


class AdditiveAttention(nn.Module):
    def __init__(self, query_vector_dim, candidate_vector_dim):
        super().__init__()
        self.linear = nn.Linear(candidate_vector_dim, query_vector_dim)
        self.attention_query_vector = nn.Parameter(torch.empty(query_vector_dim).uniform_(-0.1, 0.1))

    def forward(self, candidate_vector):                                                # (B, T, D)
        temp = torch.tanh(self.linear(candidate_vector))                                # (B, T, Q)
        candidate_weights = torch.softmax(torch.matmul(temp, self.attention_query_vector), dim=1)  # (B, T)
        return torch.bmm(candidate_weights.unsqueeze(dim=1), candidate_vector).squeeze(dim=1)      # (B, D)


class NRMS(nn.Module):
    def __init__(self, num_words, d_model, heads, query_vector_dim=16, bug=""):
        super().__init__()
        self.bug = bug
        self.word_embedding = nn.Embedding(num_words, d_model)
        self.news_attention = MultiHeadSelfAttention(d_model, heads)
        self.news_pooling = AdditiveAttention(query_vector_dim, d_model)
        self.user_attention = MultiHeadSelfAttention(d_model, heads)
        self.user_pooling = AdditiveAttention(query_vector_dim, d_model)

    def news_encoder(self, title):                                                      # (B*N, T)
        words = self.word_embedding(title)                                              # (B*N, T, D)
        return self.news_pooling(self.news_attention(words))                            # (B*N, D)

    def forward(self, clicked_titles):                                                  # (B, N, T)
        batch_size, num_clicked, num_words = clicked_titles.shape
        news = self.news_encoder(clicked_titles.reshape(batch_size * num_clicked, num_words))  # (B*N, D)
        if self.bug == "unfold-set-major":
            clicked = news.view(num_clicked, batch_size, -1).transpose(0, 1)            # (B, N, D) [unfold]
        else:
            clicked = news.view(batch_size, num_clicked, -1)                            # (B, N, D) [unfold]
        return self.user_pooling(self.user_attention(clicked))                          # (B, D)


def build(bug="", B=2, T=5, D=32, H=4, N=3):
    torch.manual_seed(0)
    return NRMS(50, D, H, bug=bug).eval(), (torch.randint(0, 50, (B, N, T)),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
