"""T2R's training, saving and the comparison `python demo.py t2r`; the method is t2r/linear.py.

Training is attention transfer (Hedgehog, Zhang et al. 2024, arXiv 2402.04347; LoLCATs): only φ learns,
so that each layer's linear attention reproduces its softmax output on the frozen model's own q, k, v.
"""
import math
import os
import pathlib
import time

import torch
import torch.nn.functional as F

import llama
import msrnn
from lab import experiments, harness, specs
from t2r import linear
from t2r.linear import FeatureMaps, forward, state_bytes


def save(maps: FeatureMaps, path):
    from safetensors.torch import save_file
    meta = {"kind": maps.kind, "r": str(maps.r), "window": str(maps.window), "layers": ",".join(map(str, maps.layers))}
    with harness.atomic(pathlib.Path(path)) as tmp:
        save_file({n: p.detach().contiguous() for n, p in maps.named_parameters()}, str(tmp), metadata=meta)


def load(path, model: llama.Model) -> FeatureMaps:
    """Maps saved by `save`, checked against the model: every tensor present, no other, each shape right."""
    from safetensors import safe_open
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{path}: no saved maps (train them first: python demo.py t2r)")
    try:
        with safe_open(str(path), "pt") as f:
            meta, tensors = f.metadata() or {}, {n: f.get_tensor(n) for n in f.keys()}
    except Exception as e:  # safetensors reports a truncated or corrupt file in many ways
        raise ValueError(f"{path}: cannot read safetensors file ({e}); delete it and train again") from None
    if not {"kind", "r", "window", "layers"} <= meta.keys():
        raise ValueError(f"{path}: not a T2R maps file (its metadata lacks kind, r, window, layers)")
    layers = [int(i) for i in meta["layers"].split(",") if i]
    if any(not 0 <= i < model.config.n_layers for i in layers):
        raise ValueError(f"{path}: swaps layers {layers}, the model has {model.config.n_layers}")
    maps = FeatureMaps(model.config, int(meta["r"]), meta["kind"], int(meta["window"]), layers,
                       dtype=model.dtype).to(model.device)
    want = dict(maps.named_parameters())
    for name in sorted(want.keys() | tensors.keys()):
        if name not in tensors or name not in want:
            raise ValueError(f"{path}: tensor {name!r} is " + ("missing" if name in want else "not a T2R map"))
        if tensors[name].shape != want[name].shape:
            raise ValueError(f"{path}: tensor {name!r} has shape {tuple(tensors[name].shape)}, this model needs "
                             f"{tuple(want[name].shape)} (maps made for another model?)")
        with torch.no_grad():
            want[name].copy_(tensors[name])
    return maps


# ---------------------------------------------------------------- training

@torch.no_grad()
def collect(model: llama.Model, chunks, layers) -> dict:
    """Layer -> [q, k, v, softmax output] of the frozen model on token chunks (N, T), in float16:
    half the memory, and precise enough for regression targets (the arithmetic stays in model.dtype)."""
    data = {i: [] for i in layers}
    def attend(i, q, k, v):
        o = linear.softmax(model, q, k, v)
        if i in data:
            data[i].append([x.half() for x in (q, k, v, o)])
        return o
    for x in chunks.split(1):
        llama.forward(model, x, attend)
    return {i: [torch.cat(x) for x in zip(*d)] for i, d in data.items()}


def transfer_loss(model, maps: FeatureMaps, data: dict, idx=None, backward=False) -> float:
    """Attention-transfer loss: MSE between each layer's linear and softmax outputs, averaged over layers."""
    total = 0.0
    for i, tensors in data.items():
        q, k, v, o = (x if idx is None else x[idx] for x in tensors)
        q, k, v, o = (x.to(model.dtype) for x in (q, k, v, o))
        loss = F.mse_loss(linear.attention(q, k, v, maps.phi(i, q, "q"), maps.phi(i, k, "k"), maps.window), o)
        if backward:  # layers are independent: one layer's graph in memory at a time
            loss.backward()
        total += loss.item() / len(data)
    return total


def transfer(model, maps: FeatureMaps, data: dict, steps: int, lr: float = 1e-2, batch: int = 1,
             seed: int = 0, log=print) -> list:
    """Attention transfer (Hedgehog, LoLCATs): Adam on the feature maps only. Returns the loss per step."""
    opt = torch.optim.Adam(maps.parameters(), lr=lr)
    g = torch.Generator().manual_seed(seed)
    n, losses, t0 = len(next(iter(data.values()))[0]), [], time.time()
    for step in range(steps):
        opt.zero_grad()
        losses.append(transfer_loss(model, maps, data, torch.randint(n, (batch,), generator=g), backward=True))
        opt.step()
        if log and (step % 10 == 0 or step == steps - 1):
            log(f"   transfer step {step + 1}/{steps}: MSE {losses[-1]:.4g}  ({time.time() - t0:.0f} s)")
    return losses


def finetune_maps(model, maps: FeatureMaps, chunks, steps: int, lr: float = 1e-3, seed: int = 0, log=print) -> list:
    """T2R's second stage, here for the maps only: next-token loss through the whole frozen model."""
    opt = torch.optim.Adam(maps.parameters(), lr=lr)
    g = torch.Generator().manual_seed(seed)
    losses, t0 = [], time.time()
    for step in range(steps):
        x = chunks[torch.randint(len(chunks), (1,), generator=g)][0]
        opt.zero_grad()
        logits = forward(model, maps, x[None])[0, :-1]
        loss = F.cross_entropy(logits.to(llama.wide(logits.dtype)), x[1:].to(logits.device))
        loss.backward()
        opt.step()
        losses.append(loss.item())
        if log:
            log(f"   finetune step {step + 1}/{steps}: next-token loss {losses[-1]:.3f}  ({time.time() - t0:.0f} s)")
    return losses


# ---------------------------------------------------------------- the comparison: python demo.py t2r

def experiment(model, tok, r=(16, 64), window=64, window_r=16, steps=40, finetune=0, train_chunks=4, eval_chunks=2,
               sizes=(32, 256), load_maps=False, log=None) -> dict:
    """Perplexity against bytes of state per sequence at 4,096 tokens: T2R with r features (trained
    here for `steps` attention-transfer and `finetune` next-token steps, or loaded with load_maps),
    ELU+1, and the hybrid (`window` exact rows + T2R of window_r features) next to softmax, TOVA,
    H2O and Window+4 at `sizes`, on the same held-out chunks. The maps are saved as safetensors in results/."""
    log, t_start = log or (lambda msg: None), time.time()
    train = experiments.book_chunks(tok, train_chunks, books=("lcet10", "plrabn12"))  # (N, 4096)
    test = experiments.book_chunks(tok, eval_chunks, books=("alice29", "asyoulik"))
    results, data, collect_s = [], None, 0

    def record(method, family, nll, bytes_, **extra):
        results.append(dict(method=method, family=family, state_bytes=bytes_, ppl=math.exp(nll.mean().item()),
                         ppl_per_chunk=[math.exp(x) for x in nll.mean(1).tolist()], **extra))
        log(f"   {method}: {bytes_ / 2**20:.2f} MiB of state, perplexity {results[-1]['ppl']:.2f}")

    new = lambda *a, **kw: FeatureMaps(model.config, *a, dtype=model.dtype, **kw).to(model.device)
    runs = [new(n) for n in r] + [new(kind="elu")] + ([new(window_r, window=window)] if window else [])
    for maps in runs:
        file = harness.RESULTS / f"t2r_{maps.kind}_r{maps.r}_w{maps.window}.safetensors"
        t0, losses, ft = time.time(), [], []
        if maps.kind == "relu" and load_maps:
            maps = load(file, model)
        elif maps.kind == "relu":
            if data is None:
                log(f"collecting every layer's q, k, v and softmax output on {len(train)} training chunks ...")
                data = collect(model, train, maps.layers)
                collect_s = round(time.time() - t0)
                t0 = time.time()
            log(f"{name(maps)}: attention transfer, {steps} steps")
            losses = transfer(model, maps, data, steps, log=log)
            ft = finetune_maps(model, maps, train, finetune, log=log) if finetune else []
            save(maps, file)
        train_s = round(time.time() - t0)
        with torch.no_grad():
            nll = experiments.next_token_nll(forward(model, maps, test), test)
        record(name(maps), "hybrid" if maps.window else maps.kind, nll, state_bytes(model, maps),
               train_s=train_s, transfer_loss=losses, finetune_loss=ft)

    log("softmax attention, then the MSRNN policies on the same chunks ...")
    record("softmax, full cache", "full", experiments.nll(model, test), msrnn.state_bytes(model, test.shape[1]))
    for size in sizes:
        for p in ("tova", "h2o", "sink"):
            record(f"{specs.named(p).label} {size}", p, experiments.nll(model, test, p, size),
                   msrnn.state_bytes(model, size))
    results.sort(key=lambda row: row["state_bytes"])
    return {"results": results, "collect_s": collect_s, "chunks": len(test), "tokens": test.shape[1],
            "dtype": str(model.dtype).removeprefix("torch."), "seconds": round(time.time() - t_start)}


def name(maps: FeatureMaps) -> str:
    plain = "ELU+1" if maps.kind == "elu" else f"T2R r={maps.r}"
    return f"hybrid: window {maps.window} + {plain}" if maps.window else plain


def table(data) -> str:
    lines = ["| method | state per sequence | perplexity | training |", "|---|---|---|---|"]
    for row in data["results"]:
        train_s = f"{row['train_s']} s" if row.get("transfer_loss") else ""
        lines.append(f"| {row['method']} | {row['state_bytes'] / 2**20:.2f} MiB | {row['ppl']:.2f} | {train_s} |")
    return "\n".join(lines + [f"{data['chunks']} chunks of {data['tokens']} tokens; {data['seconds']} s in all"])


def draw(plt, data):
    labels = {"relu": "T2R (ReLU map)", "elu": "ELU+1 (untrained)", "hybrid": "hybrid (window + T2R)",
              "full": "softmax, full cache"}
    for fam in ("tova", "h2o", "sink", "full", "relu", "elu", "hybrid"):
        pts = [(row["state_bytes"] / 2**20, row["ppl"]) for row in data["results"] if row["family"] == fam]
        if pts:
            plt.plot(*zip(*pts), marker="o", ls="-" if fam in ("tova", "h2o", "sink") else "",
                     label=labels.get(fam) or specs.named(fam).label)
    plt.xscale("log")
    plt.yscale("log")
    plt.xlabel(f"state per sequence at {data['tokens']:,} tokens (MiB, {data['dtype']})")
    plt.ylabel("perplexity")
    plt.title("Fold the past into one state (T2R) or keep a few rows (MSRNN)")
    plt.legend(fontsize=7)
