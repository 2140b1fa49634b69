"""Smoke tests: every experiment and CLI command runs end to end on a tiny input."""
import json
import shutil

import pytest

import demo
import experiments


@pytest.fixture(autouse=True)
def results_in_tmp(tmp_path, monkeypatch):
    monkeypatch.setattr(experiments, "RESULTS", tmp_path)


SMALL_SWEEP = dict(sizes=(8, 16), names=("sink", "tova"), n_chunks=2, chunk=48)


def test_sweep(real_model, tokenizer, tmp_path):
    data = experiments.sweep(real_model, tokenizer, **SMALL_SWEEP)
    saved = json.loads((tmp_path / "sweep_2x48.json").read_text())
    assert set(saved["ppl"]) == {"full", "shorter", "Window+4", "TOVA"} and len(saved["ppl"]["TOVA"]["8"]["per_chunk"]) == 2
    assert experiments.sweep(real_model, tokenizer, **SMALL_SWEEP)["ppl"] == data["ppl"]  # resumed: nothing measured again
    assert data["ppl"]["TOVA"][16]["ppl"] < data["ppl"]["TOVA"][8]["ppl"] * 1.5


def test_sweep_in_two_processes(real_model, tokenizer, tmp_path):
    one = experiments.sweep(real_model, tokenizer, **SMALL_SWEEP)["ppl"]
    shutil.rmtree(tmp_path / "sweep")
    two = experiments.sweep(real_model, tokenizer, jobs=2, **SMALL_SWEEP)["ppl"]
    for name in one:  # one thread or two may round the sums differently: the same to 1e-5
        for size in one[name]:
            assert two[name][size]["ppl"] == pytest.approx(one[name][size]["ppl"], rel=1e-5)


def test_retention(real_model, tokenizer):
    data = experiments.retention(real_model, tokenizer, size=16, length=64, layer=3, picture=True)
    held = data["_held"]
    assert held.shape == (64, 64) and (held.sum(1)[16:] == 16).all()  # size rows held after every step
    assert 0 < data["recent_share"] <= 1


def test_passkey(real_model, tokenizer):
    data = experiments.passkey(real_model, tokenizer, sizes=(32,), names=("tova",), length=120, depths=(0.5,),
                               keys=(12345,))
    assert set(data["results"]) == {"full cache", "TOVA/32/step"} and data["results"]["full cache"]["total"] == 1


def test_memory(real_model):
    data = experiments.memory(real_model, context=64, sizes=(16,), budget_gib=0.05, steps=1)
    full, tova = data["rows"][-1], data["rows"][0]
    assert tova["max_batch"] > full["max_batch"] >= 1 and tova["tokens_per_s"] > 0


def test_cli_errors_are_clear(capsys):
    for argv, message in [(["ppl", "--policy", "nope", "--size", "3"], "unknown policy 'nope'"),
                          (["ppl", "--policy", "tova", "--size", "0"], "--size must be at least 1"),
                          (["ppl", "--policy", "tova"], "needs --size"),
                          (["ppl", "--policy", "sink:8", "--size", "8", "--tokens", "20"], "sinks=8 must be smaller"),
                          (["sweep", "--policies", "tova", "nope.py:fn"], "policy file nope.py not found"),
                          (["passkey", "--policies", "sink:1,2"], "sink takes 1 parameter"),
                          (["ppl", "--size", "8", "--text", "/nonexistent.txt"], "not found"),
                          (["--model", "/nonexistent", "ppl"], "no such checkpoint folder")]:
        with pytest.raises((SystemExit, Exception), match=message):
            demo.main(argv)


def test_cli_ppl(tmp_path, capsys):
    text = tmp_path / "t.txt"
    text.write_text("It was a bright cold day in April, and the clocks were striking thirteen. " * 8)
    demo.main(["ppl", "--policy", "tova", "--size", "16", "--text", str(text), "--chunk", "64"])
    assert "perplexity" in capsys.readouterr().out


def test_bench_quick(real_model):
    import bench
    out = bench.main(["--quick", "--threads", "1"])
    assert out["decode"]["ours_tokens_per_s"] > 0 and set(out["prefill"]) >= {"full", "tova", "token_by_token"}


# ---------------------------------------------------------------- your own policy, end to end

MINE = """
import torch

def newest_but_first(rows):
    \"\"\"Window+1 written by a user: keep the first token and the most recent.\"\"\"
    pos = rows.pos[:, :1].double()
    return pos.masked_fill(pos == 0, float("inf"))
newest_but_first.label = "Mine+1"

def broken(rows):
    return rows.pos[:, :1].double()[:, :, rows.size + 99]
"""


def test_a_policy_of_ones_own_runs_everywhere(real_model, tokenizer, tmp_path):
    def keep_loud(rows):
        """Defined in a test: keep the rows whose keys have the largest norm."""
        return rows.keys.norm(dim=-1).mean(1, keepdim=True) + 1e-6 * rows.pos[:, :1]  # ties broken by position
    (tmp_path / "mine.py").write_text(MINE)
    mine = f"{tmp_path}/mine.py:newest_but_first"
    data = experiments.sweep(real_model, tokenizer, sizes=(8,), names=(keep_loud, mine, "sink:1"), n_chunks=1, chunk=40)
    assert data["policies"] == ["keep_loud", "Mine+1", "Window+1"]
    # the user's Window+1 is the built-in sink:1, under the user's own name, in the JSON too
    assert data["ppl"]["Mine+1"][8]["ppl"] == data["ppl"]["Window+1"][8]["ppl"]
    assert json.loads((tmp_path / "sweep_1x40.json").read_text())["policies"] == data["policies"]
    key = experiments.passkey(real_model, tokenizer, sizes=(16,), names=(mine,), length=60, depths=(0.5,), keys=(1,),
                              regimes=("step", "full"))
    assert set(key["results"]) == {"full cache", "Mine+1/16/step", "Mine+1/16/full"}


def test_cli_runs_a_policy_from_a_file_and_names_its_errors(tmp_path, capsys):
    (tmp_path / "mine.py").write_text(MINE)
    text = tmp_path / "t.txt"
    text.write_text("It was a bright cold day in April, and the clocks were striking thirteen. " * 8)
    demo.main(["ppl", "--policy", f"{tmp_path}/mine.py:newest_but_first", "--size", "16", "--text", str(text),
               "--chunk", "64", "--prompt", "full"])
    out = capsys.readouterr().out
    assert "policy Mine+1, size 16" in out and "after a prompt of 32 read in full" in out
    for spec, message in [(f"{tmp_path}/mine.py:nothing", r"mine.py has no function 'nothing' \(it defines: "
                                                          r"newest_but_first, broken\)"),
                          (f"{tmp_path}/missing.py:fn", "missing.py not found"),
                          (f"{tmp_path}/mine.py:broken", r"policy broken raised IndexError: .* \(at .*mine.py:11: ")]:
        with pytest.raises(ValueError, match=message):
            demo.main(["ppl", "--policy", spec, "--size", "16", "--text", str(text), "--chunk", "64"])
    (tmp_path / "syntax.py").write_text("def f(rows:\n")
    with pytest.raises(ValueError, match="could not import .*syntax.py: SyntaxError"):
        demo.main(["ppl", "--policy", f"{tmp_path}/syntax.py:f", "--size", "16", "--text", str(text)])


def test_check_cli_quality(real_model, tokenizer, tmp_path):
    import check
    table = check.quality(check.policies.named("window"), real_model, tokenizer, sizes=(16,), length=64,
                          cache=tmp_path)
    assert set(table) == {(p, 16, r) for p in ("Window", "Window+4", "TOVA") for r in ("step", "full")}
    assert table["TOVA", 16, "full"] < table["Window", 16, "step"]  # a full prompt, and TOVA, help on any text
