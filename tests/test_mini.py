"""t2r/mini.py, T2R's own experiment in miniature, on a tiny configuration and a short text (no
download): pretraining lowers the dev loss, the saved folder loads through load_weights with the same
logits, Kasai's map is one set of weights per head, the training form equals the recurrent view, the
splits share nothing, a resumed run is the uninterrupted one, and the whole experiment runs through
(also in two worker processes, to the same numbers)."""
import math
import pathlib

import pytest
import torch

import llama
import load_weights
from t2r import linear, mini
from conftest import EXACT, GPL3, assert_close, tokens

TINY = dict(vocab=300, dim=16, layers=1, heads=2, ffn=32, context=16, batch=2, pretrain_steps=6,
            finetune_steps=2, eval_every=3, finetune_eval_every=1, dev_chunks=2, seeds=2, features=(2, 4),
            conversions=(0.5,))

if GPL3.is_file():
    TEXT = GPL3.read_text()[:20_000]
else:  # any prose will do: the tokenizer is trained on it
    TEXT = " ".join(f"the {w} of the {v} is the {w}.\n" for w in ("state", "row", "key") for v in ("model", "query")) * 200
SOURCES = {"a": TEXT[:10_000], "b": TEXT[10_000:18_000]}
EXTRA = {"other": TEXT[18_000:]}


def setup(p=TINY):
    tok = mini.train_tokenizer([TEXT[:15_000]], p["vocab"])
    chunks, test = mini.cut(tok, [TEXT[:15_000]], p["context"]), mini.cut(tok, [TEXT[15_000:]], p["context"])[:2]
    return tok, chunks, test, mini.config(p, tok.get_vocab_size())


def fit(model, maps, chunks, test, steps, checkpoint=None):
    model, _, run = mini.fit(model, maps, chunks, test, steps=steps, peak=1e-2, batch=2, seed=0, checkpoint=checkpoint,
                             eval_every=2, label="test", log=lambda s: None)
    return model, run


def test_pretraining_lowers_the_held_out_loss():
    tok, chunks, test, cfg = setup()
    model = mini.init_model(cfg, 0)
    before = mini.held_out_loss(model, None, test)
    _, run = fit(model, None, chunks, test, 30)
    assert run["step"] == 30 and run["tokens"] == 30 * 2 * 16
    assert run["curve"][0] == {"step": 0, "tokens": 0, "seconds": 0.0, "loss": before}  # the start, before any step
    assert run["best"]["loss"] < before - 0.3, (before, run["curve"])


def test_the_returned_model_is_the_best_on_dev():
    """Early stopping: a run whose dev loss rises at the end returns the model of its lowest dev loss."""
    tok, chunks, test, cfg = setup()
    model, run = fit(mini.init_model(cfg, 0), None, chunks, test, 12)
    best = min(run["curve"], key=lambda c: c["loss"])
    assert run["best"]["step"] == best["step"]
    assert mini.held_out_loss(model, None, test) == pytest.approx(best["loss"], abs=1e-6)


def test_the_saved_folder_loads_with_the_same_logits(tmp_path):
    tok, chunks, test, cfg = setup()
    model, _ = fit(mini.init_model(cfg, 0), None, chunks, test, 3)
    mini.save_folder(model, tok, tmp_path)
    loaded = load_weights.load_model(tmp_path)
    x = test[:2]
    assert torch.equal(llama.forward(loaded, x), llama.forward(model, x))
    assert load_weights.load_tokenizer(tmp_path).encode("the state").ids == tok.encode("the state").ids


def test_the_splits_share_no_text_and_no_test_book_trains():
    """Every source in 20 pieces at line ends: dev and test are pieces 9 and 19, the rest trains; put
    back together the pieces are the text, and a book given as a test set of its own never trains."""
    text = "".join(f"line {i} of the source\n" for i in range(1000))
    train, dev, test = mini.split(text)
    assert "".join([train[0], dev, train[1], test] + train[2:]) == text
    lines = lambda ts: {l for t in ts for l in t.splitlines()}
    assert not lines(train) & lines([dev]) and not lines(train) & lines([test]) and not lines([dev]) & lines([test])
    assert abs(len(dev) - len(text) / 20) < 50 and abs(len(test) - len(text) / 20) < 50
    train_texts, dev_texts, tests = mini.texts(SOURCES, EXTRA)
    assert set(tests) == {"test", "other"} and tests["other"] == [EXTRA["other"]]
    assert not any(EXTRA["other"][:200] in t for t in train_texts + dev_texts)
    assert len(dev_texts) == len(tests["test"]) == len(SOURCES)


def test_kasai_map_is_one_set_of_weights_per_head():
    """T2R's φ(x) = ReLU(W x + b): one W, b per (layer, KV head), read by the keys and every query head."""
    cfg = llama.Config(vocab_size=11, dim=16, n_layers=2, n_heads=4, n_kv_heads=2, head_dim=4, ffn_dim=8)
    maps = linear.FeatureMaps(cfg, 3, "t2r", dtype=torch.float64)
    assert {n: tuple(p.shape) for n, p in maps.named_parameters()} == {"wk": (2, 2, 1, 3, 4), "bk": (2, 2, 1, 3)}
    with torch.no_grad():
        maps.bk.normal_()
    x = torch.randn(1, 2, 2, 5, 4, dtype=torch.float64)  # the same vectors as queries (G = 2) and as keys
    for h in range(2):
        want = torch.relu(x[:, h] @ maps.wk[1, h, 0].T + maps.bk[1, h, 0])  # (1, G, 5, r)
        assert_close(maps.phi(1, x, "q")[:, h], want, atol=EXACT)
        assert_close(maps.phi(1, x[:, :, :1], "k")[:, h, 0], want[:, 0], atol=EXACT)


def test_the_swapped_model_two_views_are_exact():
    """The training form (linear.quadratic, φ(Q)φ(K)ᵀ under the causal mask) = the recurrent view, float64."""
    tok, chunks, test, cfg = setup()
    model = mini.init_model(cfg, 0).to(dtype=torch.float64)
    for kind, r in (("t2r", 4), ("elu", 0)):
        maps = linear.FeatureMaps(cfg, r, kind, dtype=torch.float64)
        x = test[:1]
        assert_close(linear.run(model, maps, x), llama.forward(model, x, mini.attention_of(maps)), atol=EXACT, msg=kind)


def test_a_resumed_run_is_the_uninterrupted_one(tmp_path):
    tok, chunks, test, cfg = setup()
    maps = lambda: linear.FeatureMaps(cfg, 4, "t2r", seed=1)
    whole, run = fit(mini.init_model(cfg, 0), maps(), chunks, test, 6)

    def stop(line):  # Ctrl-C as step 4 is reported (its checkpoint is written just before)
        if "step 4/6" in line:
            raise KeyboardInterrupt
    ckpt = tmp_path / "run.safetensors"
    with pytest.raises(KeyboardInterrupt):
        mini.fit(mini.init_model(cfg, 0), maps(), chunks, test, steps=6, peak=1e-2, batch=2, seed=0,
                 checkpoint=ckpt, eval_every=2, label="test", log=stop)
    resumed, rerun = fit(mini.init_model(cfg, 0), maps(), chunks, test, 6, ckpt)
    timeless = lambda best: {k: v for k, v in best.items() if k != "seconds"}  # wall time differs run to run
    assert rerun["losses"] == run["losses"] and rerun["step"] == 6 and timeless(rerun["best"]) == timeless(run["best"])
    assert torch.equal(llama.forward(resumed, test[:1]), llama.forward(whole, test[:1]))


def test_a_folder_of_another_preset_is_refused(tmp_path):
    """A folder the quick preset (vocab 512) trained in, run with the full one (1,024): its tokenizer and
    every checkpoint were reused, and the results said vocab 1,024 of a model of 512."""
    tok, *_ = setup()
    (tmp_path / "runs").mkdir()
    tok.save(str(tmp_path / "runs" / "tokenizer.json"))
    with pytest.raises(ValueError, match=r"tokenizer.json has 300 tokens, this preset 400 \(the folder of another preset"):
        mini.experiment(dict(TINY, vocab=400), tmp_path, lambda s: None, by_source=SOURCES, extra_tests=EXTRA, jobs=1)


def test_the_experiment_runs_through(tmp_path):
    log = []
    data = mini.experiment(TINY, tmp_path, log.append, by_source=SOURCES, extra_tests=EXTRA, jobs=1)
    rows = {(r["method"], r["init"], r["features"], r["teacher_steps"], r["seed"]): r for r in data["rows"]}
    assert set(rows) == {("transformer", "random", None, 6, 0), ("T2R", "pretrained", 2, 6, 0),
                         ("T2R", "pretrained", 4, 3, 0)} | {
        (m, i, f, 6 if i == "pretrained" else 0, s) for m, f in (("T2R", 4), ("ELU+1", None))
        for i in ("pretrained", "random") for s in (0, 1)}
    assert all(math.isfinite(x) for r in data["rows"] for x in r["test_loss"].values())
    assert rows[("T2R", "random", 4, 0, 0)]["train_tokens"] == 6 * 2 * 16  # the transformer's whole budget
    assert rows[("T2R", "pretrained", 4, 6, 0)]["train_tokens"] == 2 * 2 * 16  # the finetune alone
    assert rows[("T2R", "pretrained", 2, 6, 0)]["state_bytes"] < rows[("T2R", "pretrained", 4, 6, 0)]["state_bytes"]
    groups = {g["name"]: g for g in data["groups"]}
    assert groups["T2R r=4 (from scratch)"]["seeds"] == [0, 1] and groups["T2R r=4 (teacher at step 3, finetuned)"]
    assert (tmp_path / "model.safetensors").is_file() and load_weights.load_model(tmp_path).config.n_layers == 1
    data["claims"], data["conversions"] = mini.claims(data), mini.conversions(data)
    assert [v for _, _, v in data["claims"]] and all(v in ("holds", "a tie", "reversed", "fails") for _, _, v in data["claims"])
    mini.table(data), mini.claims_table(data), mini.conversions_table(data), mini.summary(data)
    again = mini.experiment(TINY, tmp_path, log.append, by_source=SOURCES, extra_tests=EXTRA, jobs=2)
    assert [r["test_loss"] for r in again["rows"]] == [r["test_loss"] for r in data["rows"]]  # every run reused
    assert sum("resuming" in line for line in log) == len(data["rows"])


def test_a_verdict_needs_twice_the_seeds_spread():
    assert mini._verdict([0.10, 0.11, 0.09])[2] == "holds"
    assert mini._verdict([0.10, -0.05, 0.20])[2] == "a tie"          # a mean inside twice the spread
    assert mini._verdict([0.01, 0.01, 0.01])[2] == "a tie"            # steady, but under MARGIN
    assert mini._verdict([-0.10, -0.11, -0.09])[2] == "reversed"
