"""T2R: the pretrained transformer turned into an RNN with a constant-size state.

Softmax attention weighs key j by exp(q·k_j/√d). Linear attention weighs it by φ(q)·φ(k_j)
(Katharopoulos et al. 2020, arXiv 2006.16236), so the sums over the past collapse into a state that
never grows:  S_t = S_{t-1} + φ(k_t) v_tᵀ,  z_t = z_{t-1} + φ(k_t),  out_t = φ(q_t)ᵀS_t / φ(q_t)·z_t.
φ is T2R's learned ReLU(W x + b) with r features (Kasai et al. 2021, arXiv 2103.13076), or the untrained
ELU(x)+1 of Katharopoulos et al. The hybrid keeps the `window` newest rows exact (softmax) and folds each
older row into S, z: a finite MSRNN of w rows plus one linear state (the sliding window + linear
attention of LoLCATs, Zhang et al. 2024, arXiv 2410.10254).

The maps plug into llama.py's two hooks, no copy of the decoder: LinearState.attend is a layer state
for llama.step (RNN view); `forward` hands linear attention to llama.forward (transformer view).
Training is attention transfer (Hedgehog, Zhang et al. 2024, arXiv 2402.04347; LoLCATs): only φ learns,
so that each layer's linear attention reproduces its softmax output on the frozen model's own q, k, v.
"""
import math
import os
import pathlib
import time
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

import experiments
import harness
import llama
import msrnn
import specs

EPS = 1e-6  # floor of the denominator: φ(q)·z is 0 when all of a query's ReLU features are off


class FeatureMaps(nn.Module):
    """φ of every layer, applied after RoPE (as Hedgehog and LoLCATs do on RoPE models).

    Keys get one map per KV head, queries one per query head (LoLCATs learns separate query and key
    maps; T2R ties them). The state depends only on the key map, so it is kept per KV head: with
    grouped-query attention G query heads read one S. `layers` are the layers swapped out.
    """
    def __init__(self, cfg: llama.Config, r: int = 64, kind: str = "relu", window: int = 0,
                 layers=None, seed: int = 0, dtype=torch.float32):
        super().__init__()
        if kind not in ("relu", "elu"):
            raise ValueError(f"feature map kind must be 'relu' (T2R) or 'elu' (ELU+1), got {kind!r}")
        n_layers, H, G, d = cfg.n_layers, cfg.n_kv_heads, cfg.n_heads // cfg.n_kv_heads, cfg.head_dim
        self.kind, self.window, self.r = kind, window, r if kind == "relu" else d  # ELU+1 keeps d features
        self.layers = list(range(n_layers)) if layers is None else sorted(layers)
        if kind == "relu":
            # small: φ(q)·φ(k) starts near 0, so the hybrid starts as its window alone (only the scale
            # differs for plain T2R, and ReLU's positive homogeneity makes the scale cancel there)
            g = torch.Generator().manual_seed(seed)
            w = lambda *s: nn.Parameter((torch.randn(*s, generator=g, dtype=torch.float64) * 0.1 / d**0.5).to(dtype))
            self.wq, self.bq = w(n_layers, H, G, r, d), nn.Parameter(torch.zeros(n_layers, H, G, r, dtype=dtype))
            self.wk, self.bk = w(n_layers, H, 1, r, d), nn.Parameter(torch.zeros(n_layers, H, 1, r, dtype=dtype))

    def phi(self, layer: int, x, which: str):
        """x (B, Hkv, G for queries or 1 for keys, T, hd) -> features (B, Hkv, G or 1, T, r)."""
        if self.kind == "elu":
            return F.elu(x) + 1
        w, b = (self.wq, self.bq) if which == "q" else (self.wk, self.bk)
        return F.relu(torch.einsum("bhgtd,hgrd->bhgtr", x, w[layer]) + b[layer][:, :, None])


# ---------------------------------------------------------------- transformer view

def attention(q, k, v, fq, fk, window: int = 0, block: int = 64):
    """Causal linear attention (window 0) or the hybrid, for all positions at once.

    q (B, Hkv, G, T, hd), fq its features (.., r); k, v (B, Hkv, 1, T, hd), fk (.., r) -> (B, Hkv, G, T, hd).
    Query i weighs key j by φ(q_i)·φ(k_j) if i - j >= window, by exp(q_i·k_j/√d - m_i) if it is one of
    the `window` newest (m_i: the window's largest score, LoLCATs' shift), and divides by the sum of all
    weights: one normalisation for both parts. No mixing factor: ReLU(W x + b) is positively
    homogeneous, so the scale of W, b is the learned weight of the linear part.
    Queries go in blocks of m >= window: a block sees its own and the previous block's keys one by one,
    older blocks through their running sums (S, z), so time and memory are O(T m) rather than O(T²).
    """
    T, m = q.shape[3], max(block, window)
    n = -(-T // m)                                                   # blocks
    blocks = lambda x, front: F.pad(x, (0, 0, front * m, n * m - T)).unflatten(3, (front + n, m))
    qb, fqb = blocks(q, 0), blocks(fq, 0)                            # (B, Hkv, G, n, m, hd or r)
    kb, vb, fkb = blocks(k, 1), blocks(v, 1), blocks(fk, 1)          # (B, Hkv, 1, n+1, m, ..): a zero block first
    two = lambda x: torch.cat([x[:, :, :, :-1], x[:, :, :, 1:]], 4)  # (B, Hkv, 1, n, 2m, ..): previous + own block
    pos = lambda n: torch.arange(n, device=q.device)
    dist = pos(m)[:, None] + m - pos(2 * m)                          # (m, 2m) query position - key position
    A = (fqb @ two(fkb).transpose(-1, -2)) * (dist >= window)        # (B, Hkv, G, n, m, 2m) linear weights
    if window:
        key_pos = (pos(n)[:, None] - 1) * m + pos(2 * m)             # (n, 2m); < 0 in the zero block
        seen = (dist >= 0) & (dist < window) & (key_pos >= 0)[:, None]      # (n, m, 2m) the window
        s = (qb @ two(kb).transpose(-1, -2) / math.sqrt(q.shape[-1])).masked_fill(~seen, float("-inf"))
        A = A + (s - s.amax(-1, keepdim=True)).exp()                 # the query's own key is always seen
    # blocks up to b-2 enter through the state the RNN would hold: S = Σ φ(k) vᵀ, z = Σ φ(k)
    P = fkb[:, :, :, 1:].transpose(-1, -2) @ vb[:, :, :, 1:]         # (B, Hkv, 1, n, r, hd) each block's sum
    S = F.pad(P.cumsum(3), (0, 0, 0, 0, 2, 0))[:, :, :, :n]          # shifted by two blocks
    z = F.pad(fkb[:, :, :, 1:].sum(4).cumsum(3), (0, 0, 2, 0))[:, :, :, :n, :, None]  # (B, Hkv, 1, n, r, 1)
    num = A @ two(vb) + fqb @ S                                      # (B, Hkv, G, n, m, hd)
    den = A.sum(-1, keepdim=True) + fqb @ z                          # (B, Hkv, G, n, m, 1)
    return (num / den.clamp_min(EPS)).flatten(3, 4)[:, :, :, :T]     # (B, Hkv, G, T, hd)


def forward(model: llama.Model, maps: FeatureMaps, tokens):
    """llama.forward with linear attention in the swapped layers, softmax in the others."""
    def attend(i, q, k, v):
        if i not in maps.layers:
            return softmax(model, q, k, v)
        return attention(q, k, v, maps.phi(i, q, "q"), maps.phi(i, k, "k"), maps.window)
    return llama.forward(model, tokens, attend)


def softmax(model, q, k, v):
    """The layer's own causal softmax attention, as llama.forward computes it."""
    c = model.config
    return llama.softmax_attention(q, k, v, None if c.sliding_window is None else
                                   llama.causal_mask(q.shape[3], c.sliding_window, q.device))


# ---------------------------------------------------------------- RNN view

@dataclass
class LinearState:
    """One swapped layer's state: S, z over the folded rows, and the `window` newest rows kept exact
    in a ring of slots (row t in slot t % window). Its size never changes with t."""
    maps: FeatureMaps
    layer: int
    S: torch.Tensor  # (B, Hkv, r, hd) Σ φ(k) vᵀ
    z: torch.Tensor  # (B, Hkv, r)     Σ φ(k)
    K: torch.Tensor  # (B, Hkv, window, hd) the hybrid's exact rows; window 0 for plain T2R
    V: torch.Tensor  # (B, Hkv, window, hd)

    def attend(self, q, k, v, t, policy=None):
        """The hook llama.step calls: q (B, Hkv, G, hd), k, v (B, Hkv, hd) -> (B, Hkv, G, hd)."""
        w = self.K.shape[2]
        if w == 0:  # plain linear attention: the token joins the sums before its query reads them
            self.fold(k, v)
        else:  # row t - w leaves the window: fold it into S, z; row t takes its slot
            if t >= w:
                self.fold(self.K[:, :, t % w], self.V[:, :, t % w])
            self.K[:, :, t % w], self.V[:, :, t % w] = k, v
        fq = self.maps.phi(self.layer, q[:, :, :, None], "q")[:, :, :, 0]  # (B, Hkv, G, r)
        num, den = fq @ self.S, fq @ self.z[..., None]               # (B, Hkv, G, hd), (B, Hkv, G, 1)
        if w:
            n = min(t + 1, w)
            s = q @ self.K[:, :, :n].transpose(-1, -2) / math.sqrt(q.shape[-1])  # (B, Hkv, G, n)
            e = (s - s.amax(-1, keepdim=True)).exp()
            num, den = num + e @ self.V[:, :, :n], den + e.sum(-1, keepdim=True)
        return num / den.clamp_min(EPS)

    def fold(self, k, v):
        fk = self.maps.phi(self.layer, k[:, :, None, None], "k")[:, :, 0, 0]  # (B, Hkv, r)
        self.S += fk[..., None] * v[..., None, :]                    # outer product φ(k) vᵀ
        self.z += fk


def init_state(model: llama.Model, maps: FeatureMaps, batch: int = 1) -> msrnn.State:
    """Per layer: a LinearState where attention is swapped out, the unbounded multi-state elsewhere."""
    c, w = model.config, maps.window
    zeros = lambda *s: torch.zeros(batch, c.n_kv_heads, *s, dtype=model.dtype, device=model.device)
    multi = msrnn.init_state(model, batch).layers
    return msrnn.State([LinearState(maps, i, zeros(maps.r, c.head_dim), zeros(maps.r), zeros(w, c.head_dim),
                                    zeros(w, c.head_dim)) if i in maps.layers else multi[i] for i in range(c.n_layers)])


@torch.no_grad()
def run(model: llama.Model, maps: FeatureMaps, tokens):
    """The RNN view on tokens (B, T), one step at a time: logits (B, T, vocab)."""
    state = init_state(model, maps, tokens.shape[0])
    return torch.stack([llama.step(model, tokens[:, t], state) for t in range(tokens.shape[1])], 1)


# ---------------------------------------------------------------- saving

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
        o = softmax(model, q, k, v)
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
        loss = F.mse_loss(attention(q, k, v, maps.phi(i, q, "q"), maps.phi(i, k, "k"), maps.window), o)
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

def state_bytes(model: llama.Model, maps: FeatureMaps) -> int:
    """Bytes one sequence's state holds: the hybrid's window of key/value rows (msrnn.state_bytes),
    plus S and z of maps.r features per KV head in every swapped layer."""
    c = model.config
    return msrnn.state_bytes(model, maps.window) + len(maps.layers) * c.n_kv_heads * maps.r * (c.head_dim + 1) * \
        model.embed.element_size()


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
