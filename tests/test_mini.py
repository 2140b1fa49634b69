"""t2r/mini.py, T2R's own experiment in miniature, on a tiny configuration and a short text (no
download): pretraining lowers the loss, the saved folder loads through load_weights with the same
logits, Kasai's map is one set of weights per head, a resumed run is the uninterrupted one, and the
whole experiment runs through."""
import math
import pathlib

import pytest
import torch

import llama
import load_weights
from t2r import linear, mini
from conftest import EXACT, GPL3, assert_close, tokens

TINY = dict(vocab=300, dim=16, layers=1, heads=2, ffn=32, context=16, batch=2, pretrain_steps=6,
            finetune_steps=2, eval_every=3, eval_chunks=2, features=(2, 4))

if GPL3.is_file():
    TEXT = GPL3.read_text()[:20_000]
else:  # any prose will do: the tokenizer is trained on it
    TEXT = " ".join(f"the {w} of the {v} is the {w}." for w in ("state", "row", "key") for v in ("model", "query")) * 200


def setup(p=TINY):
    tok = mini.train_tokenizer([TEXT[:15_000]], p["vocab"])
    chunks, test = mini.texts(tok, [TEXT[:15_000]], [TEXT[15_000:]], p["context"], p["eval_chunks"])
    return tok, chunks, test, mini.config(p, tok.get_vocab_size())


def fit(model, maps, chunks, test, steps, checkpoint=None):
    return mini.fit(model, maps, chunks, test, steps=steps, peak=1e-2, batch=2, seed=0, checkpoint=checkpoint,
                    eval_every=2, label="test", log=lambda s: None)


def test_pretraining_lowers_the_held_out_loss():
    tok, chunks, test, cfg = setup()
    model = mini.init_model(cfg, 0)
    before = mini.held_out_loss(model, None, test)
    _, run = fit(model, None, chunks, test, 30)
    assert run["step"] == 30 and run["tokens"] == 30 * 2 * 16
    assert run["curve"][-1]["loss"] < before - 0.3, (before, run["curve"])


def test_the_saved_folder_loads_with_the_same_logits(tmp_path):
    tok, chunks, test, cfg = setup()
    model, _ = fit(mini.init_model(cfg, 0), None, chunks, test, 3)
    mini.save_folder(model, tok, tmp_path)
    loaded = load_weights.load_model(tmp_path)
    x = test[:2]
    assert torch.equal(llama.forward(loaded, x), llama.forward(model, x))
    assert load_weights.load_tokenizer(tmp_path).encode("the state").ids == tok.encode("the state").ids


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
    tok, chunks, test, cfg = setup()
    model = mini.init_model(cfg, 0).to(dtype=torch.float64)
    maps = linear.FeatureMaps(cfg, 4, "t2r", dtype=torch.float64)
    x = test[:1]
    assert_close(linear.run(model, maps, x), llama.forward(model, x, mini.attention_of(maps)), atol=EXACT)


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
    assert rerun["losses"] == run["losses"] and rerun["step"] == 6
    assert torch.equal(llama.forward(resumed, test[:1]), llama.forward(whole, test[:1]))


def test_the_experiment_runs_through(tmp_path):
    log = []
    data = mini.experiment(TINY, tmp_path, log.append, train_texts=[TEXT[:15_000]], eval_texts=[TEXT[15_000:]])
    rows = {(r["method"], r["init"], r["features"]): r for r in data["rows"]}
    assert set(rows) == {("transformer", "random", None), ("T2R", "pretrained", 4), ("ELU+1", "pretrained", None),
                         ("T2R", "random", 4), ("ELU+1", "random", None), ("T2R", "pretrained", 2)}
    assert all(math.isfinite(r["ppl"]) and r["ppl"] > 1 for r in data["rows"])
    assert rows[("T2R", "random", 4)]["train_tokens"] == (6 + 2) * 2 * 16  # equal tokens: pretraining + finetune
    assert rows[("T2R", "pretrained", 2)]["state_bytes"] < rows[("T2R", "pretrained", 4)]["state_bytes"]
    assert set(data["curves"]) == {r["name"] for r in data["rows"]}
    assert (tmp_path / "model.safetensors").is_file() and load_weights.load_model(tmp_path).config.n_layers == 1
    mini.table(data), mini.targets(data)
    again = mini.experiment(TINY, tmp_path, log.append, train_texts=[TEXT[:15_000]], eval_texts=[TEXT[15_000:]])
    assert [r["ppl"] for r in again["rows"]] == [r["ppl"] for r in data["rows"]]  # every run resumed, none retrained
    assert sum("resuming" in line for line in log) == len(data["rows"])
