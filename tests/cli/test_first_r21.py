"""First contact, round 2 (issue 23), the pieces outside the narrow layout and the page: torch's own ops
cite their call once, the heat map's title, numbering and notation."""

from __future__ import annotations

import re

from conftest import model_line


def test_torch_mha_cites_its_call_once_and_says_where_the_other_ops_run(cli):
    out = cli("run", "--impl", "torch", "--width", "100").output
    lines = out.splitlines()
    calls = [line for line in lines if "self.mha(" in line]
    call = model_line("y, weights = self.mha(", "variants.py")
    assert calls == ["      y, weights = self.mha(x, memory, memory, key_padding_mask=keys, attn_mask=at…  "
                     f"variants.py:{call}"]   # cut so that where it is still fits
    inside = [line for line in lines if line.strip().startswith("inside the call above")]
    assert set(inside) == {f"      inside the call above (variants.py:{call}), in module mha"}
    table = out.split("\n26 ops")[0]
    rows = re.findall(r"^ +\d+ [a-z_]+ ", table, re.M)
    assert len(rows) > 15 and len(inside) == len(rows) - 1  # every row shown after #0


def test_a_line_that_closes_its_call_is_cited_on_every_row(cli):
    out = cli("run", "--width", "100").output
    assert "inside the call above" not in out and " …\n" not in out
    split = model_line("x = x.view(B, T, self.heads, self.d_k)")
    assert out.count(f"x = x.view(B, T, self.heads, self.d_k)  reference.py:{split}") == 1


def test_a_merged_axis_is_spelled_b_dot_h_in_sentences_as_in_shapes(cli):
    out = cli("run", "--impl", "torch", "--width", "100").output
    assert "splits 3·D into qkv × D: a view" in out
    assert "matrix per (B·H): row = query token" in out
    assert re.findall(r"\w\*\w", out) == []
