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
    assert set(saved["ppl"]) == {"full", "shorter", "sink", "tova"} and len(saved["ppl"]["tova"]["8"]["per_chunk"]) == 2
    assert experiments.sweep(real_model, tokenizer, **SMALL_SWEEP)["ppl"] == data["ppl"]  # resumed: nothing measured again
    assert data["ppl"]["tova"][16]["ppl"] < data["ppl"]["tova"][8]["ppl"] * 1.5


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
    assert set(data["results"]) == {"full/full", "tova/32"} and data["results"]["full/full"]["total"] == 1


def test_memory(real_model):
    data = experiments.memory(real_model, context=64, sizes=(16,), budget_gib=0.05, steps=1)
    full, tova = data["rows"][-1], data["rows"][0]
    assert tova["max_batch"] > full["max_batch"] >= 1 and tova["tokens_per_s"] > 0


def test_cli_errors_are_clear(capsys):
    for argv, message in [(["ppl", "--policy", "nope", "--size", "3"], "unknown policy 'nope'"),
                          (["ppl", "--policy", "tova", "--size", "0"], "--size must be at least 1"),
                          (["ppl", "--policy", "tova"], "needs --size"),
                          (["ppl", "--policy", "sink", "--size", "4"], "--sinks 4 must be smaller than --size 4"),
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
