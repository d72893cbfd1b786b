"""``run --kv-heads N`` (shapetrace/app/session.py's variant path): the same dependency contracts as the
plain ``run``, the heads contract measured on grouped-query heads, and a grouped-query head-order bug still ✗."""

from __future__ import annotations

import pytest

from shapetrace.app.session import traced_variant
from shapetrace.attention.config import AttentionConfig
from shapetrace.attention.reference import ConfigurableAttention

CONTRACTS = ("held on the values: batch entries stay apart, each token depends on itself, heads\n"
             "  stay apart\n")


@pytest.mark.parametrize("kv_heads, ops", [("2", 22), ("1", 22)])   # GQA (Llama 2 70B), MQA (Shazeer 2019)
def test_run_kv_heads_prints_the_plain_runs_contracts(cli, kv_heads, ops):
    res = cli("run", "--kv-heads", kv_heads, "--width", "100")
    assert res.exit_code == 0, res.stdout
    assert (f"\n✓ checked all {ops} ops that could carry a layout bug: every axis keeps its meaning from input to\n"
            f"  output; {CONTRACTS}") in res.stdout


def test_run_kv_heads_json_lists_the_contracts_that_held(cli):
    import json

    data = json.loads(cli("run", "--kv-heads", "2", "--json").stdout)
    assert data["verdict"]["contracts"] == ["batch entries stay apart", "each token depends on itself",
                                       "heads stay apart"]


def _tiled(self, x):
    """Llama's repeat_kv (meta-llama/llama model.py: expand then reshape, kv heads 0, 0, 1, 1, ...) written
    with ``repeat`` instead: kv heads 0, 1, 0, 1, ... (the catalogue's ``repeat-tiles`` mutant)."""
    return x.repeat(1, self.n_rep, 1, 1) if self.n_rep > 1 else x   # (B, H, T_k, d_k), kv heads tiled


def test_a_grouped_query_head_order_bug_still_ends_with_a_cross(monkeypatch):
    # --break has no grouped-query break for `run` (repeat-tiles is an exercise mutant), so the
    # model's repeat_kv is swapped for the tiling one; every shape stays right, only the values tell.
    monkeypatch.setattr(ConfigurableAttention, "repeat_kv", _tiled)
    run = traced_variant(AttentionConfig(kv_heads=2), "cpu")
    report = run.report()
    assert report.verdict.mark == "✗" and report.verdict.errors == 1, report.verdict
    assert report.verdict.contracts == ("batch entries stay apart", "each token depends on itself")
    broken, held, unmeasured = run.trace._measured()   # the heads contract, measured on grouped-query heads
    assert [d.message.split(":")[1] for d in broken] == [
        " head 1 of the output depends on head 1 of the keys (output heads 3, 4 and 6 too), but grouped-query "
        "attention pairs query head 1 with key/value head 0 (query heads 0-3 share it, as repeat_interleave and "
        "Llama's repeat_kv lay them out)",
        " head 1 of the output depends on head 1 of the values (output heads 3, 4 and 6 too), but grouped-query "
        "attention pairs query head 1 with key/value head 0 (query heads 0-3 share it, as repeat_interleave and "
        "Llama's repeat_kv lay them out)"]
    assert unmeasured == []
    monkeypatch.undo()   # the correct twin stays silent
    report = traced_variant(AttentionConfig(kv_heads=2), "cpu").report()
    assert report.verdict.mark == "✓" and "heads stay apart" in report.verdict.contracts
