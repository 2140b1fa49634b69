"""T2R's own experiment in miniature: python -m t2r.mini [--quick]  ->  results/t2r_mini.{json,log,png}

Kasai et al. (2021, arXiv 2103.13076, section 4) did not convert a model trained elsewhere: they
pretrained their own transformer language model, swapped its attention for T2R's, finetuned, and
compared the result with the same RNN trained from random initialisation and with ELU+1. SmolLM2
read ~2 T tokens, far beyond what a CPU can convert; a model this machine pretrains itself is not.

1. A byte-level BPE tokenizer and a small LLaMA (multi-head, tied embeddings) pretrained on the two
   training books and Debian's license texts, never the evaluation books, saved as config.json, model.safetensors and
   tokenizer.json: a folder load_weights reads like any Hugging Face checkpoint.
2. Its attention swapped for T2R's (Kasai's map, one ReLU(W x + b) per head for queries and keys,
   t2r.linear kind "t2r") or ELU+1, every weight finetuned; the same RNNs trained from random
   initialisation for as many tokens as pretraining and finetuning together; T2R at 8 to 64 features.

Every row's perplexity is on the same held-out tokens (the evaluation books). Each training run
checkpoints as it goes (in the cache folder, beside the default model): a rerun resumes or reuses it.
"""
import argparse
import dataclasses
import json
import math
import pathlib
import time

from engine import threads  # noqa: F401  (first of all: OpenMP's wait policy is set before torch loads it)

import torch
import torch.nn.functional as F

import llama
import load_weights
from data import corpus, default_model
from lab import harness
from t2r import linear, train

# Pretraining stops near the lowest held-out loss: the training text is small (about 0.5 M tokens),
# so a longer run only learns it by heart (twice as many steps raised the held-out loss while the
# training loss fell, in a run of an earlier preset).
PRESETS = {  # full: 37 minutes on 2 shared cores; quick: the same rows, smaller, in 2-3 minutes
    "full": dict(vocab=1024, dim=128, layers=4, heads=4, ffn=384, context=512, batch=8,
                 pretrain_steps=350, finetune_steps=100, eval_every=25, eval_chunks=24, features=(8, 16, 32, 64)),
    "quick": dict(vocab=512, dim=64, layers=2, heads=2, ffn=192, context=256, batch=8,
                  pretrain_steps=300, finetune_steps=80, eval_every=25, eval_chunks=24, features=(8, 16, 32, 64)),
}
TRAIN_BOOKS, EVAL_BOOKS = ("lcet10", "plrabn12"), ("alice29", "asyoulik")  # the licenses train too
LR = {"pretrain": 2e-3, "finetune": 1e-3}  # peak rates; warmup then cosine decay to a tenth


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
    folder.mkdir(parents=True, exist_ok=True)
    cfg = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "vocab_size": c.vocab_size,
           "hidden_size": c.dim, "num_hidden_layers": c.n_layers, "num_attention_heads": c.n_heads,
           "num_key_value_heads": c.n_kv_heads, "head_dim": c.head_dim, "intermediate_size": c.ffn_dim,
           "rms_norm_eps": c.norm_eps, "rope_theta": c.rope_theta, "tie_word_embeddings": c.tie_embeddings,
           "max_position_embeddings": c.max_positions, "hidden_act": "silu", "torch_dtype": "float32"}
    tensors = {"model.embed_tokens.weight": model.embed, "model.norm.weight": model.norm}
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
    # one block as long as the text: at a few hundred tokens the quadratic form is the cheapest
    return lambda i, q, k, v: linear.swapped(maps, i, q, k, v, block=q.shape[3])


def loss_of(model, maps, x) -> torch.Tensor:
    logits = llama.forward(model, x, attention_of(maps))[:, :-1]     # (B, T - 1, vocab)
    return F.cross_entropy(logits.flatten(0, 1).float(), x[:, 1:].flatten())


@torch.no_grad()
def held_out_loss(model, maps, test, batch: int = 8) -> float:
    """Mean next-token loss over the held-out chunks (N, T), every row on the same tokens."""
    return sum(loss_of(model, maps, test[i:i + batch]).item() * len(test[i:i + batch])
               for i in range(0, len(test), batch)) / len(test)


def fit(model, maps, chunks, test, *, steps, peak, batch, seed, checkpoint, eval_every, label, log) -> tuple:
    """Train every weight of `model` (and the maps, if any) for `steps` steps of `batch` chunks:
    AdamW, `rate`'s schedule, next-token loss. The batch of step s is drawn by a generator seeded with
    (seed, s) and the schedule depends on s alone, so a run resumed from its checkpoint reads and does
    what one run through would. Returns (the trained model, detached; the run's meta with its curve of
    held-out loss against seconds)."""
    params, build = train.weights(model, "full")
    if maps is not None:
        params |= {f"maps.{n}": p for n, p in maps.named_parameters()}
    opt = torch.optim.AdamW(list(params.values()), lr=peak, betas=(0.9, 0.95), weight_decay=0.1)
    settings = {"label": label, "steps": steps, "peak": peak, "batch": batch, "seed": seed, "chunks": list(chunks.shape),
                "maps": None if maps is None else train.describe(maps)}
    run = train._resume(checkpoint, params, opt, settings, log)
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
        last = run["step"] == steps
        if run["step"] % eval_every == 0 or last:
            run["curve"].append({"step": run["step"], "tokens": run["tokens"], "seconds": round(run["seconds"], 1),
                                 "loss": held_out_loss(train.detached(build), maps, test)})
            if checkpoint is not None:  # saved before the log line, so a run stopped at it resumes from here
                train._save_run(checkpoint, params, opt, run)
            left = run["seconds"] / run["step"] * (steps - run["step"])
            log(f"   {label}: step {run['step']}/{steps}, {run['tokens']:,} tokens, {run['tokens'] / run['seconds']:.0f} "
                f"tokens/s, loss {loss.item():.3f}, held-out {run['curve'][-1]['loss']:.3f}, {left:.0f} s left")
            t0, done_s = time.time(), run["seconds"]
    run["tokens_per_s"] = run["tokens"] / max(run["seconds"], 1e-9)
    return train.detached(build), run


# ---------------------------------------------------------------- the experiment

def texts(tok, train_texts, eval_texts, context: int, eval_chunks: int):
    """(training chunks, held-out chunks): the training texts cut into chunks of `context` tokens, and
    the first `eval_chunks` of the evaluation texts, concatenated."""
    cut = lambda ts: torch.tensor(corpus.chunks([i for t in ts for i in tok.encode(t).ids], context))
    test = cut(eval_texts)
    if len(test) < eval_chunks:
        raise ValueError(f"the evaluation texts give {len(test)} chunks of {context} tokens, fewer than {eval_chunks}")
    return cut(train_texts), test[:eval_chunks]


def experiment(p: dict, folder, log=print, seed: int = 0, train_texts=None, eval_texts=None) -> dict:
    """Every row of the table, each trained (or resumed) in turn. folder: where the pretrained model,
    its tokenizer and the runs' checkpoints live. The texts default to train.training_sources and EVAL_BOOKS."""
    folder = pathlib.Path(folder)
    runs = folder / "runs"
    runs.mkdir(parents=True, exist_ok=True)
    train_texts = train_texts or train.training_sources(TRAIN_BOOKS)
    eval_texts = eval_texts or [corpus.book(b) for b in EVAL_BOOKS]
    from tokenizers import Tokenizer
    tok_file = runs / "tokenizer.json"  # the one every run was trained with (save_folder copies it beside the model)
    if tok_file.is_file():
        tok = Tokenizer.from_file(str(tok_file))
    else:
        tok = train_tokenizer(train_texts, p["vocab"])
        with harness.atomic(tok_file) as tmp:
            tok.save(str(tmp))
    chunks, test = texts(tok, train_texts, eval_texts, p["context"], p["eval_chunks"])
    log(f"tokenizer: {tok.get_vocab_size()} tokens; training {chunks.numel():,} tokens ({len(chunks)} chunks of "
        f"{chunks.shape[1]}), held out {test.numel():,} ({len(test)} chunks of the evaluation books)")
    cfg = config(p, tok.get_vocab_size())
    common = dict(batch=p["batch"], eval_every=p["eval_every"], log=log)
    P, Fs = p["pretrain_steps"], p["finetune_steps"]

    base, pre = fit(init_model(cfg, seed), None, chunks, test, steps=P, peak=LR["pretrain"], seed=seed,
                    checkpoint=runs / "transformer.safetensors", label="transformer", **common)
    save_folder(base, tok, folder)
    n_params = sum(t.numel() for t in [base.embed, base.norm] + [getattr(L, f.name) for L in base.layers
                   for f in dataclasses.fields(llama.Layer)])
    log(f"pretrained: {cfg.n_layers} layers, {cfg.dim} wide, {cfg.n_heads} heads, {n_params:,} weights; saved in {folder}")
    rows = [row("transformer", "random", None, base, None, pre, test)]

    def rnn(kind, r, init):
        maps = linear.FeatureMaps(cfg, r, kind, seed=seed + 1)
        start = base if init == "pretrained" else init_model(cfg, seed)
        steps = Fs if init == "pretrained" else P + Fs  # from scratch: as many tokens as pretraining + finetuning
        name = f"{kind}-{maps.r}-{init}"
        model, run = fit(start, maps, chunks, test, steps=steps, seed=seed + 2, checkpoint=runs / f"{name}.safetensors",
                         peak=LR["finetune" if init == "pretrained" else "pretrain"], label=name, **common)
        if init == "pretrained":  # its curve goes on from where pretraining stopped
            run["curve"] = [dict(c, seconds=c["seconds"] + pre["seconds"]) for c in run["curve"]]
        rows.append(row("T2R" if kind == "t2r" else "ELU+1", init, maps.r if kind == "t2r" else None, model, maps, run, test))

    rnn("t2r", max(p["features"]), "pretrained")
    rnn("elu", 0, "pretrained")
    rnn("t2r", max(p["features"]), "random")
    rnn("elu", 0, "random")
    for r in sorted(p["features"])[:-1]:
        rnn("t2r", r, "pretrained")
    return {"preset": p, "config": dataclasses.asdict(cfg), "weights": n_params, "rows": rows,
            "curves": {r["name"]: r.pop("curve") for r in rows}}


def row(method, init, features, model, maps, run, test) -> dict:
    """One row: perplexity on the held-out chunks, the state one sequence holds at their length, what
    its training cost (for a finetuned row: the finetune alone)."""
    loss, T = held_out_loss(model, maps, test), test.shape[1]
    c = model.config
    state = (2 * c.n_layers * c.n_kv_heads * T * c.head_dim * model.embed.element_size() if maps is None
             else linear.state_bytes(model, maps))
    name = method + (f" r={features}" if features else "") + (" (pretrained, finetuned)" if maps is not None and
                                                                  init == "pretrained" else " (from scratch)" if maps else "")
    return {"name": name, "method": method, "init": init, "features": features, "state_bytes": state,
            "train_tokens": run["tokens"], "seconds": round(run["seconds"], 1),
            "tokens_per_s": round(run["tokens_per_s"], 1), "ppl": math.exp(loss), "curve": run["curve"]}


def table(data) -> str:
    base = data["rows"][0]["ppl"]
    lines = ["| row | init | features | state (KiB) | training tokens | seconds | tokens/s | held-out ppl | vs transformer |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in data["rows"]:
        lines.append(f"| {r['name']} | {r['init']} | {r['features'] or '–'} | {r['state_bytes'] / 1024:.1f} | "
                     f"{r['train_tokens']:,} | {r['seconds']:.0f} | {r['tokens_per_s']:.0f} | {r['ppl']:.2f} | "
                     f"{r['ppl'] / base - 1:+.1%} |")
    return "\n".join(lines)


def summary(data) -> str:
    """One sentence of the table's main rows, for README."""
    by = {(r["method"], r["init"], r["features"]): r for r in data["rows"]}
    top = max(data["preset"]["features"])
    tf, t2r, t2r0 = by[("transformer", "random", None)], by[("T2R", "pretrained", top)], by[("T2R", "random", top)]
    elu, elu0 = by[("ELU+1", "pretrained", None)], by[("ELU+1", "random", None)]
    return (f"On a {data['weights']:,}-weight LLaMA pretrained here ({tf['train_tokens']:,} tokens, {tf['seconds']:.0f} s), "
            f"held-out perplexity {tf['ppl']:.2f}; T2R r={top} swapped in and finetuned ({t2r['train_tokens']:,} tokens) "
            f"{t2r['ppl']:.2f} ({t2r['ppl'] / tf['ppl'] - 1:+.0%}), from scratch at equal tokens {t2r0['ppl']:.2f}; "
            f"ELU+1 {elu['ppl']:.2f} finetuned, {elu0['ppl']:.2f} from scratch; the state {t2r['state_bytes'] / 1024:.0f} KiB "
            f"against the cache's {tf['state_bytes'] / 1024:.0f} KiB at {data['config']['max_positions']} tokens.")


def targets(data) -> dict:
    """The issue's targets, each as (figure, met)."""
    by = {(r["method"], r["init"], r["features"]): r["ppl"] for r in data["rows"]}
    top = max(data["preset"]["features"])
    tf, t2r, t2r0 = by[("transformer", "random", None)], by[("T2R", "pretrained", top)], by[("T2R", "random", top)]
    elu, elu0 = by[("ELU+1", "pretrained", None)], by[("ELU+1", "random", None)]
    ablation = [by[("T2R", "pretrained", r)] for r in sorted(data["preset"]["features"])]
    return {"T2R finetuned within 15% of the transformer": (t2r / tf - 1, t2r <= 1.15 * tf),
            "T2R finetuned below T2R from scratch": (t2r - t2r0, t2r < t2r0),
            "pretraining gain larger for T2R than for ELU+1": ((t2r0 - t2r) - (elu0 - elu), t2r0 - t2r > elu0 - elu),
            "perplexity falls from 8 to 64 features": (ablation, all(a > b for a, b in zip(ablation, ablation[1:])))}


def draw(plt, data):
    for name, curve in data["curves"].items():
        plt.plot([c["seconds"] for c in curve], [c["loss"] for c in curve], "-" if "scratch" not in name else "--", label=name)
    plt.xlabel("training seconds (a finetune starts where pretraining ended)")
    plt.ylabel("held-out next-token loss")
    plt.title("T2R in miniature: swap-then-finetune against training from scratch")
    plt.legend(fontsize=6)


def use_linear(path) -> None:
    """Run every row with the t2r/linear.py at `path` (a student's) in place of the repository's."""
    import importlib.util
    global linear
    path = pathlib.Path(path)
    if not path.is_file():
        raise SystemExit(f"error: --linear {path}: no such file")
    spec = importlib.util.spec_from_file_location("student_linear", path)
    linear = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(linear)
    harness.RESULTS = path.resolve().parent.parent / "results"  # course/work/results, never the repository's


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="a smaller model and shorter runs (about 5 minutes)")
    ap.add_argument("--folder", type=pathlib.Path, help="where the model and checkpoints go "
                    "(default: the cache folder's t2r-mini-<preset>)")
    ap.add_argument("--name", help="results/<name>.* (default t2r_mini, or t2r_mini_quick)")
    ap.add_argument("--linear", type=pathlib.Path, help="another t2r/linear.py to run the rows with (the course's "
                    "part 7: course/work/t2r/linear.py); its results go to course/work/results/")
    args = ap.parse_args(argv)
    if args.linear is not None:
        use_linear(args.linear)
    preset = "quick" if args.quick else "full"
    # another linear.py trains its rows afresh: its own folder, named by its content (not the repository's runs)
    mine = "" if args.linear is None else "-" + harness.fingerprint(args.linear)[:8]
    folder = args.folder or default_model.cache_root() / f"t2r-mini-{preset}{mine}"
    t0, version = time.time(), harness.code_version()
    with harness.transcript() as printed:
        data = experiment(PRESETS[preset], folder)
        data["targets"] = targets(data)
        print("\n" + table(data) + "\n", flush=True)
        for what, (figure, met) in data["targets"].items():
            print(f"{'met' if met else 'NOT met'}: {what} ({figure if isinstance(figure, list) else f'{figure:+.3f}'})")
    about = {"code_version": version, "command": "python -m t2r.mini" + " --quick" * args.quick
             + (f" --linear {args.linear}" if args.linear else ""),
             "folder": str(folder), "seconds": round(time.time() - t0, 1)}
    path = harness.save(args.name or ("t2r_mini_quick" if args.quick else "t2r_mini"), data, about, printed.getvalue(), draw)
    print(f"t2r.mini: {time.time() - t0:.0f} s; results in {path.with_suffix('.*')}")
    return data


if __name__ == "__main__":
    main()
