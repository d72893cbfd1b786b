"""engine/rules/diagnose.py's words for merges: a merge is never told to split, a merged axis says what
its entries pair (a token with a head is not a token with a feature), and a merge of [B, T, H, d_k] that
cuts across T is told to merge where it is, not to transpose."""

from __future__ import annotations

from conftest import cli_in_process

ENV = {"NO_COLOR": "1", "COLUMNS": "100"}


def _strides(chain: str) -> str:
    res = cli_in_process("strides", "2,6,512", chain, "--heads", "8", "--no-diagrams", env=ENV)
    assert res.returncode in (0, 1), res.stderr
    return " ".join(res.stdout.split())


def test_a_merge_across_tokens_and_heads_gets_a_merge_fix():
    """The merge in the Annotated Transformer's MultiHeadedAttention, `x.view(nbatches, -1, h * d_k)`,
    written with the wrong sizes on [B, T, H, d_k]: axis 1 mixes T and H; the fix merges H with d_k."""
    out = _strides("view(2, 6, 8, 64).view(2, 8, 384)")
    assert ("error mixed-axis: step 2 (view) turns [B=2, T=6, H=8, d_k=64] into [B=2, !T·H=8, !H·d_k=384]: "
            "axis 1 (size 8) holds pieces of T and H") in out
    assert ("Merge each head with its features, the neighbours that make D: .view(B, T, H * d_k) turns "
            "[B, T, H, d_k] into [B, T, D].") in out
    assert "Split the features" not in out


def test_a_split_that_mixes_keeps_the_split_fix():
    # the correct twin of the fix: FuxiCTR issue #30's view(B, H, T, d_k) straight from [B, T, D]
    out = _strides("view(2, 8, 6, 64)")
    assert ("Split the features where they are: view(B, T, H, d_k), then transpose(1, 2) to move the heads "
            "ahead of the tokens.") in out


def test_tokens_merged_with_heads_say_token_head_pairs_and_how_to_merge():
    out = _strides("view(2, 6, 8, 64).reshape(2, 48, 64)")
    assert "axis 1 flattens T and H into one axis, so each of its entries is a (token, head) pair." in out
    assert "(token, feature)" not in out
    assert "Merge each head with its features, the neighbours that make D: .view(B, T, H * d_k)" in out


def test_heads_in_front_merged_with_tokens_are_moved_back_first():
    # bloom/GPT-style [B, H, T, d_k] flattened without the transpose back: (head, token) pairs
    out = _strides("view(2, 6, 8, 64).transpose(1, 2).reshape(2, 48, 64)")
    assert "axis 1 flattens H and T into one axis, so each of its entries is a (head, token) pair." in out
    assert ("In attention it usually means the heads were merged without moving the tokens back in front: "
            "transpose(1, 2) before .contiguous().view(B, T, D).") in out


def test_a_merged_axis_says_what_its_entries_pair_by_role_not_by_letter():
    """timm's ``Attention`` names its tokens ``N`` (tests/corpus/public54/timm_vit_attention.py at equal sizes): a
    merge of N with d_k pairs a token with a feature; on 08a58515 the message called it a (feature, feature) pair."""
    from tests.corpus.helpers import round_sizes, traced_build
    from tests.corpus.public54 import timm_vit_attention

    t = traced_build(timm_vit_attention, "qkv-permute-tokens-as-heads", round_sizes(timm_vit_attention)[1])
    merged = next(d.message for d in t.diagnostics if d.kind == "tokens-merged-with-features")
    assert "axis 2 flattens N and d_k into one axis, so each of its entries is a (token, feature) pair." in merged
