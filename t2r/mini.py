"""T2R's own experiment in miniature, as Kasai et al.'s table: python -m t2r.mini [--quick]  ->  results/t2r_mini.*

Kasai et al. (2021, arXiv 2103.13076, section 4) did not convert a model trained elsewhere: they
pretrained their own transformer language model (WikiText-103), swapped its attention for T2R's,
finetuned every weight, and compared the result with the same RNN trained from random initialisation
and with ELU+1. Two claims, tested apart here:
  (a) accuracy: T2R from the pretrained transformer ends below T2R from random initialisation given the
      transformer's whole budget, close to the transformer; ELU+1 gains less from pretraining;
  (b) cost: with pretraining paid, the finetune reaches from-scratch's best in far fewer tokens.

1. The text: Shakespeare's works (data/corpus.plays: 41 plays and poems, pinned and hash-checked) and the
   two Canterbury books that are not evaluated on. Each source is cut into 20 pieces at line ends:
   piece 9 is held out as dev, piece 19 as test, the rest trains (and trains the BPE tokenizer).
   As You Like It (a play never trained on) and Alice are two more test sets, reported apart.
2. A small LLaMA (multi-head, tied embeddings) pretrained for a stated budget, saved as config.json,
   model.safetensors and tokenizer.json: a folder load_weights reads like any Hugging Face checkpoint.
3. Its attention swapped for T2R's (Kasai's map, one ReLU(W x + b) per head for queries and keys,
   t2r.linear kind "t2r") or ELU+1, every weight finetuned at a peak rate below pretraining's; the
   same RNNs from random initialisation for the transformer's whole budget; T2R at 8 to 64 features;
   conversions of the teacher's earlier checkpoints (when does conversion start to pay?).

Every run keeps its best checkpoint on dev (early stopping); every reported figure is on test, as
the mean and standard deviation over seeds. The RNN rows train in the quadratic form (linear.quadratic,
φ(Q)φ(K)ᵀ under the causal mask: as fast as softmax attention at these lengths), in two one-thread
processes side by side. Each run checkpoints as it goes (in the cache folder, beside the default
model): a rerun resumes or reuses it.
"""
import argparse
import dataclasses
import functools
import json
import math
import os
import pathlib
import statistics
import sys
import time

from engine import threads  # noqa: F401  (first of all: OpenMP's wait policy is set before torch loads it)

import numpy as np
import torch
import torch.nn.functional as F
from safetensors.torch import load_file, save_file

import llama
import load_weights
from data import corpus, default_model
from engine import guards
from lab import experiments, harness
from t2r import linear, train

# full: 4 layers x 128 on 256-token chunks, batch 16 (4,096 tokens a step); the transformer's budget,
# 1,200 steps (4.9 M tokens, about two passes over the training text: at 600 its dev loss still fell), is
# every from-scratch run's too.
# The finetune is a quarter of it, its peak the teacher's last rate: conversion raises no rate at the swap.
PRESETS = {
    "full": dict(vocab=1024, dim=128, layers=4, heads=4, ffn=384, context=256, batch=16, pretrain_steps=1200,
                 finetune_steps=300, eval_every=50, finetune_eval_every=25, dev_chunks=64, seeds=3,
                 features=(8, 16, 32, 64), conversions=(0.25, 0.5)),
    "quick": dict(vocab=512, dim=64, layers=2, heads=2, ffn=192, context=128, batch=16, pretrain_steps=400,
                  finetune_steps=100, eval_every=50, finetune_eval_every=25, dev_chunks=48, seeds=1,
                  features=(8, 64), conversions=()),
}
LR = {"pretrain": 2e-3, "finetune": 2e-4}  # peak rates; warmup then cosine decay to a tenth (2e-4: the teacher's last)
PIECES, DEV, TEST = 20, 9, 19  # every source in 20 pieces at line ends: piece 9 is dev, piece 19 test
BOOKS = ("lcet10", "plrabn12")  # the Canterbury books that train; alice29 and asyoulik are test sets


# ---------------------------------------------------------------- the tokenizer and the model

def train_tokenizer(texts, vocab: int):
    """A byte-level BPE of `vocab` tokens (so that the embeddings stay a small share of the weights)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(texts, trainers.BpeTrainer(vocab_size=vocab, show_progress=False,
                                                       initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    return tok


def config(p: dict, vocab: int) -> llama.Config:
    return llama.Config(vocab_size=vocab, dim=p["dim"], n_layers=p["layers"], n_heads=p["heads"],
                        n_kv_heads=p["heads"], head_dim=p["dim"] // p["heads"], ffn_dim=p["ffn"],
                        tie_embeddings=True, max_positions=p["context"])


def init_model(cfg: llama.Config, seed: int) -> llama.Model:
    """GPT-2's start: weights N(0, 0.02), the projections into the residual stream scaled by
    1/√(2 layers), norms at 1 (random_model's sharper scale is for tests, not for training)."""
    g = torch.Generator().manual_seed(seed)
    r = lambda *s, std=0.02: torch.randn(*s, generator=g) * std
    out = 0.02 / math.sqrt(2 * cfg.n_layers)
    q, kv = cfg.n_heads * cfg.head_dim, cfg.n_kv_heads * cfg.head_dim
    layers = [llama.Layer(attn_norm=torch.ones(cfg.dim), wq=r(q, cfg.dim), wk=r(kv, cfg.dim), wv=r(kv, cfg.dim),
                          wo=r(cfg.dim, q, std=out), mlp_norm=torch.ones(cfg.dim), w_gate=r(cfg.ffn_dim, cfg.dim),
                          w_up=r(cfg.ffn_dim, cfg.dim), w_down=r(cfg.dim, cfg.ffn_dim, std=out)) for _ in range(cfg.n_layers)]
    embed = r(cfg.vocab_size, cfg.dim)
    return llama.Model(config=cfg, embed=embed, layers=layers, norm=torch.ones(cfg.dim), lm_head=embed,
                       inv_freq=llama.rope_frequencies(cfg))


def save_folder(model: llama.Model, tok, folder):
    """config.json, model.safetensors and tokenizer.json in Hugging Face's names (load_weights' table)."""
    from safetensors.torch import save_file
    c, folder = model.config, pathlib.Path(folder)
    if tok.get_vocab_size() > c.vocab_size:  # its first text out of range, far from here
        raise ValueError(f"the tokenizer has {tok.get_vocab_size():,} tokens, the model's embedding {c.vocab_size:,}")
    if shards := sorted(p.name for p in folder.glob("*.safetensors*") if p.name != "model.safetensors"
                        and not p.name.startswith(".")):  # a save killed halfway left its hidden temporary file
        raise ValueError(f"{folder} holds another checkpoint's weights ({', '.join(shards[:3])}), which load_model would "
                         "read with or in place of this model's: save to an empty folder")
    folder.mkdir(parents=True, exist_ok=True)
    tied = c.tie_embeddings and model.lm_head is model.embed  # a head trained apart is the model's own, not the embedding
    kind = "mistral" if c.sliding_window else "llama"  # load_weights reads a window from Mistral's config only
    cfg = {"model_type": kind, "architectures": [f"{kind.capitalize()}ForCausalLM"], "vocab_size": c.vocab_size,
           "hidden_size": c.dim, "num_hidden_layers": c.n_layers, "num_attention_heads": c.n_heads,
           "num_key_value_heads": c.n_kv_heads, "head_dim": c.head_dim, "intermediate_size": c.ffn_dim,
           "rms_norm_eps": c.norm_eps, "rope_theta": c.rope_theta, "rope_scaling": c.rope_scaling,
           "sliding_window": c.sliding_window, "tie_word_embeddings": tied, "max_position_embeddings": c.max_positions,
           "hidden_act": "silu", "torch_dtype": str(model.dtype).removeprefix("torch.")}
    tensors = {"model.embed_tokens.weight": model.embed, "model.norm.weight": model.norm}
    if not tied:  # its own output head (the miniature's is tied; a model built elsewhere may not be),
        tensors["lm_head.weight"] = model.lm_head.clone()  # a copy: safetensors stores no tensor twice
    for i, L in enumerate(model.layers):
        tensors |= {f"model.layers.{i}.{name}": getattr(L, field) for name, field in load_weights.LAYER_NAMES.items()}
    harness.atomic_write(folder / "config.json", json.dumps(cfg, indent=1))
    with harness.atomic(folder / "model.safetensors") as tmp:
        save_file({n: t.detach().contiguous() for n, t in tensors.items()}, str(tmp))
    with harness.atomic(folder / "tokenizer.json") as tmp:
        tok.save(str(tmp))


# ---------------------------------------------------------------- training

def rate(step: int, steps: int, peak: float) -> float:
    """Linear warmup over the first 5% of the steps, then cosine decay to a tenth of the peak."""
    warm = max(1, steps // 20)
    if step < warm:
        return peak * (step + 1) / warm
    return peak * (0.1 + 0.45 * (1 + math.cos(math.pi * (step - warm) / max(1, steps - warm))))


def attention_of(maps):
    """llama.forward's attention: softmax (maps None) or plain linear attention with maps' φ."""
    if maps is None:
        return None
    # the quadratic form: at a few hundred tokens the fastest; a student's linear.py may leave it unwritten
    fast = _written(linear.quadratic)
    return lambda i, q, k, v: linear.swapped(maps, i, q, k, v, block=None if fast else q.shape[3])


@functools.cache
def _written(fn) -> bool:
    """Whether fn (linear.quadratic) runs, rather than raising NotImplementedError (a course skeleton's)."""
    x = torch.ones(1, 1, 1, 2, 1)
    try:
        fn(x, x, x, x, x)
    except NotImplementedError:
        return False
    return True


def loss_of(model, maps, x) -> torch.Tensor:
    logits = llama.forward(model, x, attention_of(maps))[:, :-1]     # (B, T - 1, vocab)
    return F.cross_entropy(logits.flatten(0, 1).float(), x[:, 1:].flatten())


@torch.no_grad()
def held_out_loss(model, maps, test, batch: int = 16) -> float:
    """Mean next-token loss over the held-out chunks (N, T), every row on the same tokens."""
    return sum(loss_of(model, maps, test[i:i + batch]).item() * len(test[i:i + batch])
               for i in range(0, len(test), batch)) / len(test)


def fit(model, maps, chunks, dev, *, steps, peak, batch, seed, checkpoint, eval_every, label, log, keep=()) -> tuple:
    """Train every weight of `model` (and the maps, if any) for `steps` steps of `batch` chunks:
    AdamW (weight decay on the matrices only, not on norms or biases), `rate`'s schedule, next-token
    loss; the dev loss at step 0 (for a swapped model: what the swap alone costs) and every `eval_every`
    steps. The batch of step s is drawn by a generator seeded with (seed, s) and the schedule depends on
    s alone, so a run resumed from its checkpoint reads and does what one run through would.
    Returns (the model at its lowest dev loss, detached; the maps, set to theirs; the run's meta with its
    curve of dev loss against tokens). keep: steps whose model is also saved (<checkpoint>-step<s>)."""
    params, build = train.weights(model, "full")
    if maps is not None:
        params |= {f"maps.{n}": p for n, p in maps.named_parameters()}
    groups = [{"params": [p for p in params.values() if p.dim() >= 2]},
              {"params": [p for p in params.values() if p.dim() < 2], "weight_decay": 0.0}]
    opt = torch.optim.AdamW(groups, lr=peak, betas=(0.9, 0.95), weight_decay=0.1)
    settings = {"label": label, "steps": steps, "peak": peak, "batch": batch, "seed": seed, "chunks": list(chunks.shape),
                "text": harness.fingerprint(chunks, dev),  # by their tokens: other text of one shape is another run
                "maps": None if maps is None else train.describe(maps),
                # the code that trains: a run saved by other code is refused by name, never served as this code's
                "code": train.code_key(pathlib.Path(__file__), pathlib.Path(linear.__file__))}  # and a student's linear.py
    best = None if checkpoint is None else pathlib.Path(f"{checkpoint}.best")
    run = train._resume(checkpoint, params, opt, settings, log)
    evaluate = lambda: held_out_loss(train.detached(build), maps, dev)
    kept = None  # the best weights, if this process's part of the run found them (else the file `best` holds them)
    if run["step"] == 0:
        run["curve"] = [{"step": 0, "tokens": 0, "seconds": 0.0, "loss": evaluate()}]
        run["best"] = dict(run["curve"][0])
        kept = {n: p.detach().clone() for n, p in params.items()}
        if best is not None:
            _save_tensors(best, params)
    t0, done_s = time.time(), run["seconds"]
    while run["step"] < steps:
        g = torch.Generator().manual_seed(seed * 1_000_003 + run["step"])
        x = chunks[torch.randint(len(chunks), (batch,), generator=g)]  # (batch, T)
        for group in opt.param_groups:
            group["lr"] = rate(run["step"], steps, peak)
        loss = loss_of(build(), maps, x)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(list(params.values()), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        run["step"] += 1
        run["tokens"] += x.numel()
        run["losses"].append(loss.item())
        run["seconds"] = done_s + time.time() - t0
        if run["step"] in keep and checkpoint is not None:
            _save_tensors(f"{checkpoint}-step{run['step']}", params)
        if run["step"] % eval_every == 0 or run["step"] == steps:
            now = {"step": run["step"], "tokens": run["tokens"], "seconds": round(run["seconds"], 1), "loss": evaluate()}
            run["curve"].append(now)
            if now["loss"] < run["best"]["loss"]:
                run["best"] = dict(now)
                kept = {n: p.detach().clone() for n, p in params.items()}
                if best is not None:  # saved before the run's checkpoint, which names it as the best
                    _save_tensors(best, params)
            if checkpoint is not None:  # saved before the log line, so a run stopped at it resumes from here
                train._save_run(checkpoint, params, opt, run)
            left = run["seconds"] / run["step"] * (steps - run["step"])
            log(f"   {label}: step {run['step']}/{steps}, {run['tokens']:,} tokens, {run['tokens'] / run['seconds']:.0f} "
                f"tokens/s, loss {loss.item():.3f}, dev {now['loss']:.3f}, {left:.0f} s left")
            t0, done_s = time.time(), run["seconds"]
    run["tokens_per_s"] = run["tokens"] / max(run["seconds"], 1e-9)
    _restore(params, kept if kept is not None else _load_tensors(best, params))
    return train.detached(build), maps, run


def _save_tensors(path, params: dict):
    with harness.atomic(pathlib.Path(path)) as tmp:
        save_file({n: p.detach().contiguous() for n, p in params.items()}, str(tmp))


def _load_tensors(path, params: dict) -> dict:
    try:
        tensors = load_file(str(path))
    except Exception as e:
        raise ValueError(f"{path}: cannot read these saved weights ({e}); delete the run's files to start again") from None
    wrong = [n for n, p in params.items() if n not in tensors or tensors[n].shape != p.shape]
    if wrong:
        raise ValueError(f"{path}: tensor {wrong[0]!r} is missing or of another shape; delete the run's files to start again")
    return tensors


@torch.no_grad()
def _restore(params: dict, tensors: dict):
    for n, p in params.items():
        p.copy_(tensors[n])


# ---------------------------------------------------------------- the text: sources, splits, chunks

def split(text: str, pieces: int = PIECES):
    """(training texts, dev text, test text): `text` cut into `pieces` pieces at line ends; piece DEV is
    dev, piece TEST is test, the pieces before, between and after them train (each stretch on its own,
    so no training chunk runs into a held-out piece)."""
    cuts = [0] + [(text.find("\n", len(text) * i // pieces) + 1) or len(text) for i in range(1, pieces)] + [len(text)]
    part = [text[a:b] for a, b in zip(cuts, cuts[1:])]
    train_texts = ["".join(part[:DEV]), "".join(part[DEV + 1:TEST]), "".join(part[TEST + 1:])]
    return [t for t in train_texts if t], part[DEV], part[TEST]


def sources() -> dict:
    """{name: text}: Shakespeare's 41 works and the two Canterbury books that train."""
    return corpus.plays() | {b: corpus.book(b) for b in BOOKS}


def cut(tok, texts, context: int) -> torch.Tensor:
    """(N, context) token chunks of every text, each text on its own (a shorter tail is left out)."""
    experiments.check_tokenizer(tok)
    ids = [c for t in texts for c in corpus.chunks(tok.encode(t).ids, context)]
    if not ids:
        raise ValueError(f"the texts give no chunk of {context} tokens")
    return torch.tensor(ids)


def texts(by_source: dict, extra_tests: dict):
    """(training texts, dev texts, {test set: texts}): the splits of every source, and extra_tests
    ({name: text}, books never trained on) as test sets of their own."""
    train_texts, dev, test = [], [], []
    for text in by_source.values():
        t, d, e = split(text)
        train_texts += t
        dev.append(d)
        test.append(e)
    return train_texts, dev, {"test": test} | {name: [text] for name, text in extra_tests.items()}


def spaced(chunks: torch.Tensor, n: int) -> torch.Tensor:
    """n chunks spread evenly over `chunks` (all of them if fewer): the dev chunks a curve is read on."""
    return chunks[torch.linspace(0, len(chunks) - 1, min(n, len(chunks))).long()]


# ---------------------------------------------------------------- the experiment

def experiment(p: dict, folder, log=print, by_source=None, extra_tests=None, jobs: int = 2, linear_file=None) -> dict:
    """Every row of the table. folder: where the pretrained model, its tokenizer and the runs'
    checkpoints live. The texts default to `sources()` and the two evaluation books."""
    folder = pathlib.Path(folder)
    for name in ("config.json", "model.safetensors", "tokenizer.json"):  # save_folder's, refused now, not after pretraining
        if os.path.lexists(folder / name):
            harness.check_file_path(folder / name, f"the model folder's {name}")
    runs = folder / "runs"
    runs.mkdir(parents=True, exist_ok=True)
    by_source = by_source or sources()
    extra_tests = extra_tests if extra_tests is not None else {"asyoulik": corpus.book("asyoulik"),
                                                               "alice": corpus.book("alice29")}
    train_texts, dev_texts, test_texts = texts(by_source, extra_tests)
    from tokenizers import Tokenizer
    tok_file = runs / "tokenizer.json"  # the one every run was trained with (save_folder copies it beside the model)
    if tok_file.is_file():
        tok = Tokenizer.from_file(str(tok_file))
    else:
        tok = train_tokenizer(train_texts, p["vocab"])  # the training text alone: no held-out piece shapes it
    if tok.get_vocab_size() != p["vocab"]:  # another preset's folder: its runs would be served as this preset's
        raise ValueError(f"{tok_file if tok_file.is_file() else 'the tokenizer'} has {tok.get_vocab_size()} tokens, this "
                         f"preset {p['vocab']} (the folder of another preset, or a text too short for that many): name "
                         "another --folder")
    if not tok_file.is_file():
        with harness.atomic(tok_file) as tmp:
            tok.save(str(tmp))
    chunks, dev = cut(tok, train_texts, p["context"]), cut(tok, dev_texts, p["context"])
    tests = {name: cut(tok, t, p["context"]) for name, t in test_texts.items()}
    dev_curve = spaced(dev, p["dev_chunks"])
    log(f"tokenizer: {tok.get_vocab_size()} tokens; {len(by_source)} sources; training {chunks.numel():,} tokens "
        f"({len(chunks)} chunks of {chunks.shape[1]}), dev {dev.numel():,} (curves on {len(dev_curve)} chunks), "
        + ", ".join(f"{name} {t.numel():,}" for name, t in tests.items()))
    cfg = config(p, tok.get_vocab_size())
    P = p["pretrain_steps"]
    at = sorted({round(f * P) for f in p["conversions"]})  # the teacher's earlier checkpoints to convert

    base, _, pre = fit(init_model(cfg, 0), None, chunks, dev_curve, steps=P, peak=LR["pretrain"], batch=p["batch"],
                       seed=0, checkpoint=runs / "transformer.safetensors", eval_every=p["eval_every"],
                       label="transformer", log=log, keep=at)
    save_folder(base, tok, folder)
    n_params = sum(t.numel() for t in [base.embed, base.norm] + [getattr(L, f.name) for L in base.layers
                   for f in dataclasses.fields(llama.Layer)])
    log(f"pretrained: {cfg.n_layers} layers, {cfg.dim} wide, {cfg.n_heads} heads, {n_params:,} weights; best dev "
        f"{pre['best']['loss']:.3f} at step {pre['best']['step']}; saved in {folder}")
    rows = [row("transformer", "random", None, 0, P, base, None, pre, tests)]

    top, S = max(p["features"]), range(p["seeds"])
    shown = [("t2r", top, "pretrained", s, P) for s in S] + [("elu", 0, "pretrained", s, P) for s in S]  # the table's order
    shown += [("t2r", top, "random", s, 0) for s in S] + [("elu", 0, "random", s, 0) for s in S]
    shown += [("t2r", r, "pretrained", 0, P) for r in sorted(p["features"]) if r != top]
    shown += [("t2r", top, "pretrained", 0, step) for step in at]
    shared = (p, str(folder), cfg, chunks, dev_curve, tests, None if linear_file is None else str(linear_file))
    longest_first = sorted(shown, key=lambda job: job[2] == "pretrained")
    done = {}
    for job, r in harness.pool_map(train_row, shared, longest_first, jobs):
        log(r.pop("log"))
        done[job] = r
    rows += [done[job] for job in shown]
    return {"preset": p, "config": dataclasses.asdict(cfg), "weights": n_params, "lr": LR,
            "tokens": {"train": chunks.numel(), "dev": dev.numel(), **{n: t.numel() for n, t in tests.items()}},
            "rows": rows, "groups": groups(rows)}


def train_row(p, folder, cfg, chunks, dev, tests, linear_file, kind, r, init, seed, teacher_step) -> dict:
    """One RNN run (in a worker process): `kind` with r features, from random initialisation (the
    transformer's whole budget) or from the teacher at `teacher_step` (a finetune); its row."""
    if linear_file is not None and linear.__name__ == "t2r.linear":
        use_linear(linear_file)
    folder, lines = pathlib.Path(folder), []
    runs, P = folder / "runs", p["pretrain_steps"]
    maps = linear.FeatureMaps(cfg, r, kind, seed=seed + 1)
    if init == "random":
        start, steps, peak, every = init_model(cfg, seed), P, LR["pretrain"], p["eval_every"]
    else:
        start, steps, peak, every = teacher(folder, cfg, teacher_step, P), p["finetune_steps"], LR["finetune"], \
            p["finetune_eval_every"]
    name = f"{kind}-{maps.r}-{init}" + (f"-at{teacher_step}" if init == "pretrained" and teacher_step != P else "") + f"-seed{seed}"
    model, maps, run = fit(start, maps, chunks, dev, steps=steps, peak=peak, batch=p["batch"], seed=seed + 2,
                           checkpoint=runs / f"{name}.safetensors", eval_every=every, label=name, log=lines.append)
    out = row("T2R" if kind == "t2r" else "ELU+1", init, maps.r if kind == "t2r" else None, seed, teacher_step,
              model, maps, run, tests)
    return out | {"log": "\n".join(lines)}


def teacher(folder, cfg, step: int, P: int) -> llama.Model:
    """The transformer after `step` of its P steps: the saved folder, or a checkpoint kept on the way."""
    if step == P:
        return load_weights.load_model(folder)
    params, build = train.weights(init_model(cfg, 0), "full")
    _restore(params, _load_tensors(folder / "runs" / f"transformer.safetensors-step{step}", params))
    return train.detached(build)


def row(method, init, features, seed, teacher_step, model, maps, run, tests) -> dict:
    """One run's row: its loss on every test set at its best dev checkpoint, the state one sequence
    holds at the chunks' length, what its training cost (for a finetune: the finetune alone)."""
    c, T = model.config, next(iter(tests.values())).shape[1]
    state = (2 * c.n_layers * c.n_kv_heads * T * c.head_dim * model.embed.element_size() if maps is None
             else linear.state_bytes(model, maps))
    return {"method": method, "init": init, "features": features, "seed": seed, "teacher_steps": teacher_step,
            "state_bytes": state, "dev_loss": run["best"]["loss"], "best_step": run["best"]["step"],
            "train_tokens": run["tokens"], "seconds": round(run["seconds"], 1), "tokens_per_s": round(run["tokens_per_s"], 1),
            "test_loss": {name: held_out_loss(model, maps, t) for name, t in tests.items()}, "curve": run["curve"]}


def by_setting(rows) -> dict:
    """{(method, init, features, teacher steps): that setting's rows, one per seed}, in the rows' order."""
    out = {}
    for r in rows:
        out.setdefault((r["method"], r["init"], r["features"], r["teacher_steps"]), []).append(r)
    return out


def groups(rows) -> list:
    """The rows of one setting (by_setting) over their seeds: mean and standard deviation (over seeds;
    0 for one seed) of every test set's loss and perplexity."""
    out, P = by_setting(rows), rows[0]["teacher_steps"]  # rows[0] is the transformer: its steps are the whole budget
    sd = lambda xs: statistics.stdev(xs) if len(xs) > 1 else 0.0
    table = []
    for (method, init, features, at), rs in out.items():
        name = method + (f" r={features}" if features else "") + (
            "" if method == "transformer" else " (from scratch)" if init == "random" else
            " (pretrained, finetuned)" if at == P else f" (teacher at step {at}, finetuned)")
        sets = {}
        for s in rs[0]["test_loss"]:
            losses = [r["test_loss"][s] for r in rs]
            ppls = [math.exp(x) for x in losses]
            sets[s] = {"loss": statistics.mean(losses), "loss_std": sd(losses), "ppl": statistics.mean(ppls),
                       "ppl_std": sd(ppls)}
        table.append({"name": name, "method": method, "init": init, "features": features, "teacher_steps": at,
                      "seeds": [r["seed"] for r in rs], "ppl": sets["test"]["ppl"], "ppl_std": sets["test"]["ppl_std"],
                      "dev_loss": statistics.mean(r["dev_loss"] for r in rs), "dev_loss_std": sd([r["dev_loss"] for r in rs]),
                      "train_tokens": rs[0]["train_tokens"], "seconds": statistics.mean(r["seconds"] for r in rs),
                      "state_bytes": rs[0]["state_bytes"], "sets": sets})
    return table


# ---------------------------------------------------------------- Kasai's claims, each with its verdict

MARGIN = 0.02  # nats: a difference smaller than this, or than twice the seeds' spread of it, is a tie


def _runs(data, method, init, features, at=None):
    """{seed: row} of one setting (at: the teacher's steps; default its whole budget)."""
    at = 0 if init == "random" else data["preset"]["pretrain_steps"] if at is None else at
    rows = {r["seed"]: r for r in by_setting(data["rows"]).get((method, init, features, at), [])}
    if not rows:  # a mean of no run failed as statistics' bare error
        raise ValueError(f"no row of {method}, {init}, {features} features at {at} teacher steps: the preset names a "
                         "setting the rows do not hold")
    return rows


def _paired(a: dict, b: dict, value) -> list:
    """value(a[s]) - value(b[s]) for every seed both have."""
    return [value(a[s]) - value(b[s]) for s in sorted(a) if s in b]


def _verdict(diffs: list, spread=None) -> tuple:
    """(mean, standard deviation, verdict) of paired differences (positive: the claim's way): holds if
    the mean exceeds both MARGIN and twice the spread (the differences' own, or `spread`), reversed if
    it falls below minus that, else a tie."""
    mean = statistics.mean(diffs)
    sd = spread if spread is not None else statistics.stdev(diffs) if len(diffs) > 1 else 0.0
    margin = max(MARGIN, 2 * sd)
    verdict = "holds" if mean > margin else "reversed" if mean < -margin else "a tie"
    return mean, sd, verdict + (" (one seed: no spread to weigh it against)" if len(diffs) < 2 and spread is None else "")


def _reach(curve, target):
    """Tokens at the first evaluation whose dev loss is at or below target, or None."""
    return next((c["tokens"] for c in curve if c["loss"] <= target), None)


def _top(data) -> int:
    """The largest feature count of a results file's preset (none: named, not max()'s bare error)."""
    features = data["preset"]["features"]
    if not isinstance(features, (list, tuple)) or not features or not all(type(f) is int and f >= 1 for f in features):
        raise ValueError(f"preset.features is {features!r}: a run trains one or more feature counts, whole numbers >= 1")
    return max(features)


def seeds(n: int) -> str:
    return f"{n} seed" + ("s" if n != 1 else "")


def claims(data) -> list:
    """Kasai's claims as [(claim, figure, verdict)], from the per-seed rows."""
    top = _top(data)
    test = lambda r: r["test_loss"]["test"]
    t2r, t2r0 = _runs(data, "T2R", "pretrained", top), _runs(data, "T2R", "random", top)
    elu, elu0 = _runs(data, "ELU+1", "pretrained", None), _runs(data, "ELU+1", "random", None)
    tf = _transformer(data["rows"], data)
    n = len(t2r)
    out = []
    a = _paired(t2r0, t2r, test)
    m, sd, v = _verdict(a)
    out.append(("(a) T2R pretrained below T2R from scratch (test loss, nats)",
                f"{m:+.3f} ± {sd:.3f} (from scratch minus pretrained: positive favours pretraining; {seeds(len(a))})", v))
    ratio = statistics.mean(math.exp(test(r)) for r in t2r.values()) / math.exp(test(tf)) - 1
    out.append(("T2R pretrained within 8% of its transformer's perplexity",
                f"{ratio:+.1%} ({seeds(n)}, one teacher)", "holds" if ratio <= 0.08 else "fails"))
    reach = [(_reach(t2r[s]["curve"], t2r0[s]["dev_loss"]), _reach(t2r0[s]["curve"], t2r0[s]["dev_loss"]))
             for s in sorted(t2r) if s in t2r0]
    if all(ft is not None for ft, _ in reach):
        frac = statistics.mean(ft for ft, _ in reach) / statistics.mean(sc for _, sc in reach)
        out.append(("(b) the finetune reaches from-scratch's best dev loss with at most a third of its tokens",
                    f"{statistics.mean(ft for ft, _ in reach):,.0f} against {statistics.mean(sc for _, sc in reach):,.0f} "
                    f"tokens ({frac:.2f})", "holds" if frac <= 1 / 3 else "fails"))
    else:  # not reached: a failure only where the finetune ran the third the claim allows
        missed, ran = sum(ft is None for ft, _ in reach), data["preset"]["finetune_steps"] / data["preset"]["pretrain_steps"]
        out.append(("(b) the finetune reaches from-scratch's best dev loss with at most a third of its tokens",
                    f"not reached within the finetune ({ran:.2f} of from-scratch's tokens) in {missed} of {len(reach)} seeds",
                    "fails" if ran >= 1 / 3 else "not shown here"))
    g = _paired(t2r0, t2r, test)
    e = _paired(elu0, elu, test)
    m, sd, v = _verdict([x - y for x, y in zip(g, e)])
    out.append(("T2R gains more from pretraining than ELU+1 (nats)",
                f"T2R {statistics.mean(g):+.3f}, ELU+1 {statistics.mean(e):+.3f}: {m:+.3f} ± {sd:.3f}", v))
    small = min(data["preset"]["features"])
    if small != top:
        low = _runs(data, "T2R", "pretrained", small)
        spread = statistics.stdev(map(test, t2r.values())) if n > 1 else None
        m, sd, v = _verdict([test(low[s]) - statistics.mean(map(test, t2r.values())) for s in sorted(low)], spread)
        out.append((f"the test loss falls from {small} to {top} features (pretrained)",
                    f"{m:+.3f} nats ({'one seed' if len(low) < 2 else f'{len(low)} seeds'} at r={small}; the seeds' spread "
                    f"at r={top}: {sd:.3f})" if n > 1 else f"{m:+.3f} nats", v))
    return out


def conversions(data) -> list:
    """When does conversion start to pay: for every teacher checkpoint converted, [teacher tokens, the
    converted RNN's best dev loss, from-scratch T2R's dev loss at the same total tokens (its curve, the
    mean over seeds; its last point where the total is past its budget), their difference]."""
    top, per = _top(data), data["preset"]["batch"] * data["preset"]["context"]
    scratch = list(_runs(data, "T2R", "random", top).values())
    at = sorted({r["teacher_steps"] for r in data["rows"] if r["method"] == "T2R" and r["init"] == "pretrained"})
    out = []
    for step in at:
        conv = _runs(data, "T2R", "pretrained", top, step)
        tokens = (step + data["preset"]["finetune_steps"]) * per
        def dev_at(curve):  # the loss at the evaluation nearest below `tokens`
            return [c["loss"] for c in curve if c["tokens"] <= tokens][-1]
        ref = statistics.mean(dev_at(r["curve"]) for r in scratch)
        mine = statistics.mean(r["dev_loss"] for r in conv.values())
        out.append([step * per, mine, ref, ref - mine])
    return out


def _transformer(rows: list, data) -> dict:
    """The teacher's row (or group) among `rows`, found by what it is, not by its place."""
    found = [r for r in rows if r["method"] == "transformer" and r["teacher_steps"] == data["preset"]["pretrain_steps"]]
    if len(found) != 1:
        raise ValueError(f"{len(found)} rows of the transformer at its {data['preset']['pretrain_steps']} steps: one expected")
    return found[0]


def table(data, main: bool = False) -> str:
    """Every row, with the other test sets (the log's); main: the transformer and the four rows the claims
    compare (T2R and ELU+1 at the most features, pretrained and from scratch), test and dev only (the chapter's)."""
    base, P, top = _transformer(data["groups"], data)["ppl"], data["preset"]["pretrain_steps"], _top(data)
    groups = [g for g in data["groups"] if not main or g["method"] == "transformer" and g["teacher_steps"] == P
              or g["features"] in (top, None) and g["teacher_steps"] in (P, 0) and g["method"] != "transformer"]
    extra = [] if main else [s for s in data["groups"][0]["sets"] if s != "test"]
    pm = lambda x, sd: f"{x:.2f} ± {sd:.2f}" if sd else f"{x:.2f}"
    lines = ["| row | seeds | state (KiB) | training tokens | " + ("" if main else "seconds | ") + "dev loss | test ppl | "
             "vs transformer | " + "".join(f"{s} ppl | " for s in extra), "|---" * (7 + (not main) + len(extra)) + "|"]
    for g in groups:
        if not g["seeds"]:
            raise ValueError(f"{g['name']}: a row of no seed")
        dev = f"{g['dev_loss']:.3f}" + (f" ± {g['dev_loss_std']:.3f}" if g["dev_loss_std"] else "")
        lines.append(f"| {g['name']} | {len(g['seeds'])} | {g['state_bytes'] / 1024:.1f} | {g['train_tokens']:,} | "
                     + ("" if main else f"{g['seconds']:.0f} | ") + f"{dev} | {pm(g['ppl'], g['ppl_std'])} | "
                     f"{g['ppl'] / base - 1:+.1%} | " + "".join(pm(g["sets"][s]["ppl"], g["sets"][s]["ppl_std"]) + " | "
                                                            for s in extra))
    return "\n".join(line.rstrip() for line in lines)


def main_table(data) -> str:
    return table(data, main=True)


def claims_table(data) -> str:
    lines = ["| claim | figure | verdict |", "|---|---|---|"]
    lines += [f"| {c} | {f} | **{v}** |" for c, f, v in claims(data)]  # from the rows, by today's rule
    return "\n".join(lines)


def conversions_table(data) -> str:
    """The conversion curve: the later the swap, the better or worse than from scratch (the log's; none without it)."""
    lines = []
    if data.get("conversions"):
        lines += ["| teacher tokens converted | converted: best dev loss | from scratch at the same total tokens (at most its budget) | "
                  "advantage (nats) |", "|---|---|---|---|"]
        if any(len(row) != 4 for row in data["conversions"]):
            raise ValueError("a conversions row holds [teacher tokens, converted loss, from-scratch loss, their difference]")
        lines += [f"| {t:,} | {a:.3f} | {b:.3f} | {b - a:+.3f} |" for t, a, b, _ in data["conversions"]]  # the difference, as shown
    return "\n".join(lines)


def summary(data) -> str:
    """One sentence of the main rows, for README."""
    by = {(g["method"], g["init"], g["features"], g["teacher_steps"]): g for g in data["groups"]}
    P, top = data["preset"]["pretrain_steps"], _top(data)
    tf, t2r, t2r0 = by[("transformer", "random", None, P)], by[("T2R", "pretrained", top, P)], by[("T2R", "random", top, 0)]
    verdict = {c.split(" ")[0]: v for c, _, v in claims(data)}
    stored = {c.split(" ")[0]: v for c, _, v in data.get("claims", []) if isinstance(c, str)}  # what the run printed
    newer = [f"{k}: the run's JSON and log say {stored[k]!r}" for k in ("(a)", "(b)") if stored.get(k, verdict[k]) != verdict[k]]
    return (f"A {data['weights']:,}-weight LLaMA pretrained here on Shakespeare and two other books ({tf['train_tokens']:,} "
            f"tokens read): test perplexity "
            f"{tf['ppl']:.2f}; T2R r={top} swapped in and finetuned ({t2r['train_tokens']:,} tokens) {t2r['ppl']:.2f} ± "
            f"{t2r['ppl_std']:.2f}, from scratch for the transformer's budget {t2r0['ppl']:.2f} ± {t2r0['ppl_std']:.2f} "
            f"({len(t2r['seeds'])} seeds): claim (a) {verdict['(a)']}, claim (b) {verdict['(b)']}"
            + (f" ({'; '.join(newer)}, by a rule since replaced)." if newer else "."))


def draw(plt, data):
    P = data["preset"]["pretrain_steps"]
    fig = plt.gcf()
    fig.set_size_inches(10, 4.2)
    ax = plt.subplot(1, 2 if data.get("conversions") else 1, 1)
    by = by_setting(data["rows"])
    top = _top(data)
    for g in data["groups"]:
        if g["features"] not in (None, top) or (g["init"] == "pretrained" and g["teacher_steps"] != P):
            continue
        rs = by[(g["method"], g["init"], g["features"], g["teacher_steps"])]
        shift = P if g["init"] == "pretrained" else 0  # a finetune goes on from where pretraining stopped
        x = [shift + c["step"] for c in rs[0]["curve"]]
        ys = torch.tensor([[c["loss"] for c in r["curve"]] for r in rs])
        line, = ax.plot(x, ys.mean(0), "--" if g["init"] == "random" and g["method"] != "transformer" else "-", label=g["name"])
        if len(rs) > 1:
            ax.fill_between(x, ys.mean(0) - ys.std(0), ys.mean(0) + ys.std(0), color=line.get_color(), alpha=0.25)
    ax.set_ylim(top=min(ax.get_ylim()[1], data["groups"][0]["dev_loss"] + 1.5))
    ax.set_xlabel("training steps (a finetune goes on from the teacher's last)")
    ax.set_ylabel("dev loss (mean ± std over seeds)")
    ax.set_title("T2R in miniature: swap-then-finetune against from scratch", fontsize=9)
    ax.legend(fontsize=6)
    if data.get("conversions"):
        ax = plt.subplot(1, 2, 2)
        t, _, _, d = zip(*data["conversions"])
        ax.plot(t, d, "o-")
        ax.axhline(0, color="grey", lw=0.5)
        ax.set_xlabel("teacher's training tokens when converted")
        ax.set_ylabel("from scratch minus converted, dev loss (nats)")
        ax.set_title("when does conversion start to pay?", fontsize=9)


def use_linear(path) -> None:
    """Run every row with the t2r/linear.py at `path` (a student's) in place of the repository's."""
    import importlib.util
    global linear
    path = pathlib.Path(path)
    if not path.is_file():
        raise SystemExit(f"error: --linear {path}: " + ("a folder, not a file" if path.is_dir() else
                         "not a regular file (a device, a pipe or a socket)" if path.exists() else "no such file"))
    if path.suffix != ".py":  # importlib finds no loader for another suffix
        raise SystemExit(f"error: --linear {path}: not a Python file (a copy of t2r/linear.py, ending .py)")
    if chosen := os.environ.get("MSRNN_RESULTS", "").strip():  # the folder the user chose, as harness reads it
        try:
            results = pathlib.Path(chosen).expanduser().resolve()
        except (RuntimeError, OSError) as e:  # a link that leads back to itself
            raise SystemExit(f"error: MSRNN_RESULTS={chosen!r}: {e}; set it to a folder") from None
    elif path.resolve().parent.name == "t2r":  # the course's layout: course/work/t2r/linear.py -> course/work/results
        results = path.resolve().parent.parent / "results"
    else:
        raise SystemExit(f"error: --linear {path}: its results go beside its t2r/ folder (course/work/t2r/linear.py -> "
                         "course/work/results/), and this file is in no t2r/ folder; move it, or set MSRNN_RESULTS")
    if results == (pathlib.Path(__file__).resolve().parents[1] / "results"):  # the repository's own t2r/linear.py
        raise SystemExit(f"error: --linear {path} sends its results to the repository's results/, where the published run "
                         "is: that file is the repository's own (run without --linear), or set MSRNN_RESULTS")
    spec = importlib.util.spec_from_file_location("student_linear", path)
    mod = importlib.util.module_from_spec(spec)  # the global only once every check passed
    try:
        spec.loader.exec_module(mod)
    except KeyboardInterrupt:
        raise
    except BaseException as e:  # sys.exit() at import would end the run with status 0 and no word; a BaseException
        raise SystemExit(f"error: --linear {path} failed to import: {guards._typename(e)}: {guards._said(e)}") from None  # of
        # its own (and an exception whose str raises is named by its type)
    missing = [n for n in ("FeatureMaps", "quadratic", "attention", "swapped", "LinearState", "init_state", "run",
                           "state_bytes") if not callable(vars(mod).get(n))]  # the file's own, not what a
    # module __getattr__ answers; and FeatureMaps and LinearState are classes
    missing += [n for n in ("FeatureMaps", "LinearState") if n not in missing and not isinstance(vars(mod)[n], type)]
    if "FeatureMaps" not in missing and not issubclass(vars(mod)["FeatureMaps"], torch.nn.Module):
        missing.append("FeatureMaps (an nn.Module)")
    if missing:
        raise SystemExit(f"error: --linear {path} has no {', '.join(missing)}: it is not a copy of t2r/linear.py "
                         "(course/skeleton/t2r/linear.py is the one to fill)")
    linear, harness.RESULTS = mod, results  # never the repository's results/
    print(f"t2r.mini: the rows run {path}; results go to {results}/", flush=True)


def preflight(p: dict):
    """Every piece of linear.py a row needs, once on a tiny model, before minutes of pretraining: a
    course skeleton's function still to write is named at once."""
    import traceback
    cfg = config(dict(p, dim=8, layers=1, heads=2, ffn=8, context=8), 16)
    model, x = init_model(cfg, 0), torch.stack([torch.arange(8), torch.arange(8, 16)])  # tokens apart: the same token at
    # every position hides a mask; two sequences: a quadratic that mixes them (a sum over the batch) differs
    said, learns, shapes, tied, fast = [], [], [], None, []

    def shaped(attend):  # what swapped returns, beside what llama.forward needs (else its error names llama.py)
        def run(i, q, k, v):
            out = attend(i, q, k, v)
            shapes.append((tuple(getattr(out, "shape", ())), tuple(q.shape), (i, q, k, v)))
            return out
        return run
    try:
        for kind, r in (("t2r", 6), ("elu", 0)):  # r apart from head_dim (4): a transposed W does not fit
            maps = linear.FeatureMaps(cfg, r, kind)
            if (out := llama.forward(model, x, shaped(attention_of(maps)))).requires_grad:  # the maps must learn (a φ under
                out.sum().backward()  # no_grad does not; ELU+1 has nothing to learn)
            learns += [p.grad is not None and bool(p.grad.any()) for p in maps.parameters()] or [kind == "elu"]
            said.append(linear.state_bytes(model, maps))
            tied = tied or maps
        if _written(linear.quadratic):  # the rows train with the student's quadratic, which no graded test reads: its
            i, q, k, v = shapes[0][2]  # values and gradients, in float64, against its graded attention
            with torch.no_grad():
                pos, g = torch.arange(q.shape[3]), tied.gamma(i)
                ins = [t.detach().double() for t in (q, k, v, tied.phi(i, q, "q", pos), tied.phi(i, k, "k", pos))]
            fast, blocked = [], []
            for got, f in ((fast, lambda *a: linear.quadratic(*a, tied.window, tied.sinks, g)),
                           (blocked, lambda *a: linear.attention(*a, tied.window, 3, tied.sinks, g))):
                xs = [t.clone().requires_grad_() for t in ins]
                out = f(*xs)
                (out * torch.linspace(-1, 1, out.numel(), dtype=out.dtype).view_as(out)).sum().backward()
                got += [out.detach(), *(torch.zeros_like(x) if x.grad is None else x.grad for x in xs)]
    except (Exception, SystemExit) as e:  # a skeleton's function not written yet, one that fails or exits: named where,
        frames = traceback.extract_tb(sys.exc_info()[2])  # before pretraining, in the student's file if the chain passes it
        where = next((f for f in reversed(frames) if f.filename == getattr(linear, "__file__", None)), frames[-1])
        if shapes and shapes[-1][0] != shapes[-1][1]:
            raise ValueError(f"{getattr(linear, '__file__', 'linear.py')}: swapped returned shape {shapes[-1][0]}; llama."
                             f"forward needs the queries' {shapes[-1][1]} ({guards._typename(e)}: {guards._said(e)})") from None
        raise ValueError(f"{pathlib.Path(where.filename).name}: {where.name} " + (
            "is not written yet (it raises NotImplementedError, " if isinstance(e, NotImplementedError) else
            f"raised {guards._typename(e)}: {guards._said(e)} (") + f"line {where.lineno}); the rows need it") from None
    if fast and (gap := max((a - b).abs().max().item() for a, b in zip(fast, blocked))) > 1e-8:
        raise ValueError(f"{getattr(linear, '__file__', 'linear.py')}: quadratic differs from attention by {gap:.1e} "
                         "(in its output or its gradients, float64): the rows would train with quadratic")
    if not all(learns):
        raise ValueError(f"{getattr(linear, '__file__', 'linear.py')}: the maps' weights get no gradient through the "
                         "swapped attention (φ under torch.no_grad, or a detached tensor?): the rows would train nothing")
    if bad := [s for s in said if not (isinstance(s, (int, np.integer)) and not isinstance(s, bool) and s > 0)]:
        raise ValueError(f"{getattr(linear, '__file__', 'linear.py')}: state_bytes gave {bad[0]!r}, not a whole number of "
                         "bytes > 0")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="a smaller model, one seed, shorter runs (about 2 minutes on 2 cores)")
    ap.add_argument("--folder", type=harness.path, help="where the model and checkpoints go "
                    "(default: the cache folder's t2r-mini-<preset>)")
    ap.add_argument("--name", help="results/<name>.* (default t2r_mini, or t2r_mini_quick)")
    ap.add_argument("--jobs", type=harness.at_least(1), default=2, help="RNN runs side by side, one thread each (default 2)")
    ap.add_argument("--debug", action="store_true", help=harness.DEBUG_HELP)
    ap.add_argument("--linear", type=harness.path, help="another t2r/linear.py to run the rows with (the course's "
                    "part 7: course/work/t2r/linear.py); its results go to course/work/results/")
    args = harness.parse(ap, argv)
    global linear
    home = linear, harness.RESULTS  # a --linear file serves this run alone
    with guards.kept():  # what the run changes (one thread a job) is put back after it
        try:
            if args.linear is not None:
                with guards.kept():  # what its import changes (a folder, a seed), undone before the run reads them
                    use_linear(args.linear)
            preset = "quick" if args.quick else "full"
            # another linear.py trains its rows afresh: its own folder, named by its content (not the repository's runs)
            mine = "" if args.linear is None else "-" + harness.fingerprint(args.linear)[:8]
            folder = args.folder or default_model.cache_root() / f"t2r-mini-{preset}{mine}"
            if folder.exists() and not folder.is_dir():
                raise ValueError(f"--folder {folder} is a file: name a new or empty folder")
            if folder.is_dir() and any(folder.iterdir()) and not (folder / "runs" / "tokenizer.json").is_file():
                raise ValueError(f"--folder {folder} holds files of something else (no runs/tokenizer.json of an earlier "
                                 f"t2r.mini run): its config.json, model.safetensors and tokenizer.json would be replaced; "
                                 f"name a new or empty folder")
            if args.name is not None and not args.name.strip():
                raise ValueError("--name is empty: give a name, or leave --name out for the default")
            side_by_side = min(args.jobs, threads.cores())  # harness.pool_map runs no more processes than cores
            if side_by_side < args.jobs:
                print(f"[msrnn] --jobs {args.jobs}: {threads.cores()} core(s) here, so {side_by_side} run side by side", file=sys.stderr)
            if side_by_side == 1:  # the runs go in this process, one after another: one thread, as each would have had
                torch.set_num_threads(1)
            # another number of jobs rounds differently (one thread each): not the published run, unless named
            name = harness.own_name(args.name, harness.run_name("t2r_mini_quick" if args.quick else "t2r_mini",
                                                                [("jobs", args.jobs)] if args.jobs != 2 else []), ["t2r_mini", "t2r_mini_quick"])
            preflight(PRESETS[preset])  # first: a skeleton's missing function, before a results folder is made beside it
            harness.check_writable(name)
            t0, version = time.time(), harness.code_version()
            with harness.transcript() as printed:
                data = experiment(PRESETS[preset], folder, jobs=args.jobs, linear_file=args.linear)
                data["claims"], data["conversions"] = claims(data), conversions(data)
                print("\n" + table(data) + "\n\n" + claims_table(data) + "\n\n" + conversions_table(data) + "\n", flush=True)
            about = {"code_version": version, "jobs": side_by_side,  # the command as typed (harness.save), quoted
                     "threads": "one per job", "folder": str(folder), "seconds": round(time.time() - t0, 1)}
            path = harness.save(name, data, about, printed.getvalue(), draw)
            print(f"t2r.mini: {time.time() - t0:.0f} s; results in {path.with_suffix('.*')}")
            return data
        finally:  # refused, failed or done: the next run in this process reads what it read before
            linear, harness.RESULTS = home


if __name__ == "__main__":
    harness.command(main)
