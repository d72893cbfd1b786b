"""``--long-names`` spells axis names out everywhere a name appears: the shape column, the sentences
under each op (terminal, Markdown export, page), not only the shapes (issue 23, item 11)."""

from __future__ import annotations

import json
import re

from shapetrace.app.classroom import spell_long


def test_spell_long_spells_whole_names_only():
    long = {"B": "batch"}   # any mapping turns it on; the spelling is the project's one vocabulary
    assert spell_long("splits D into H × d_k: a view", long) == "splits d_model into heads × d_head: a view"
    assert spell_long("swaps H and T[-1:]; [B·H, T, T] and d_k[0:2]", long) == \
        "swaps heads and seq_len[-1:]; [batch·heads, seq_len, seq_len] and d_head[0:2]"
    assert spell_long("The Tensor has B_kv, D_kv and T_k", long) == "The Tensor has B_kv, D_kv and T_k"
    assert spell_long("splits D into H × d_k", None) == "splits D into H × d_k"


def test_run_long_names_spells_the_sentences_too(cli):
    out = cli("run", "--long-names", "--width", "100").output
    assert "      splits d_model into heads × d_head: a view, no data moves (same memory, new shape and strides)" \
        in out.splitlines()
    assert "swaps heads and seq_len: each head becomes its own batch of [seq_len, d_head] matrices" in out
    assert not re.search(r"splits D into H", out)


def test_markdown_export_long_names_spells_the_notes(cli, tmp_path):
    path = tmp_path / "t.md"
    assert cli("run", "--long-names", "--export", str(path)).exit_code == 0
    text = path.read_text()
    assert "splits d_model into heads × d_head" in text and "splits D into H" not in text


def test_page_long_names_spells_the_sentences(cli, tmp_path):
    path = tmp_path / "t.html"
    assert cli("run", "--long-names", "--export", str(path)).exit_code == 0
    data = path.read_text()
    sentences = re.findall(r'"sentence": ?"([^"]*)"', data)
    assert sentences and any("d_model into heads" in s for s in sentences)
    assert not any("D into H" in s for s in sentences), json.dumps(sentences[:3])
