"""T2R's training, saving and the comparison `python demo.py t2r`; the method is t2r/linear.py.

Training is attention transfer as LoLCATs (arXiv 2410.10254) does it, an MSE between each layer's
linear and softmax outputs: only φ learns, so that each layer's linear attention reproduces its
softmax output on the frozen model's own q, k, v. Then a finetune: LoRA (LoLCATs') or every weight
(Kasai et al.'s T2R, arXiv 2103.13076, whose map is linear.py's kind "t2r").
"""
import copy
import dataclasses
import functools
import inspect
import json
import math
import os
import pathlib
import re
import sys
import time

import torch
import torch.nn.functional as F
from safetensors import safe_open
from safetensors.torch import load_file, save_file

import llama
import msrnn
from data import corpus
from engine import guards
from lab import checker, experiments, harness, specs
from t2r import linear
from t2r.linear import FeatureMaps, forward, state_bytes


def save(maps: FeatureMaps, path):
    meta = {"kind": maps.kind, "r": str(maps.r), "window": str(maps.window), "layers": ",".join(map(str, maps.layers)),
            "sinks": str(maps.sinks), "decay": str(int(maps.decay)), "rotated": str(int(maps.rotated))}
    with harness.atomic(pathlib.Path(path)) as tmp:
        save_file({n: p.detach().contiguous() for n, p in maps.named_parameters()}, str(tmp), metadata=meta)


def load(path, model: llama.Model) -> FeatureMaps:
    """Maps saved by `save`, checked against the model: every tensor present, no other, each shape right."""
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{path}: no saved maps (train them first: python demo.py t2r)")
    try:
        with safe_open(str(path), "pt") as f:
            meta, tensors = f.metadata() or {}, {n: f.get_tensor(n) for n in f.keys()}
    except Exception as e:  # safetensors reports a truncated or corrupt file in many ways
        raise ValueError(f"{path}: cannot read safetensors file ({e}); delete it and train again") from None
    if not {"kind", "r", "window", "layers"} <= meta.keys():
        raise ValueError(f"{path}: not a T2R maps file (its metadata lacks kind, r, window, layers)")
    if meta["kind"] not in FeatureMaps.KINDS:
        raise ValueError(f"{path}: field 'kind' is {meta['kind']!r}, not one of {', '.join(FeatureMaps.KINDS)}")
    number = lambda field, low: _field_int(path, field, meta[field], low)
    r, window = number("r", 1), number("window", 0)
    sinks = _field_int(path, "sinks", meta.get("sinks", "0"), 0)  # files saved before sinks and decay have neither
    decay = _field_int(path, "decay", meta.get("decay", "0"), 0)
    rotated = _field_int(path, "rotated", meta.get("rotated", "1"), 0)
    for field, value in (("decay", decay), ("rotated", rotated)):
        if value > 1:
            raise ValueError(f"{path}: field {field!r} is {value}, it must be 0 or 1")
    layers = [_field_int(path, "layers", i, 0) for i in meta["layers"].split(",") if i]
    if len(set(layers)) != len(layers):  # a layer twice would count its state twice (state_bytes)
        raise ValueError(f"{path}: field 'layers' names a layer twice: {meta['layers']!r}")
    if any(not 0 <= i < model.config.n_layers for i in layers):
        raise ValueError(f"{path}: field 'layers' swaps layers {layers}, the model has {model.config.n_layers}")
    try:  # FeatureMaps estimates its size and refuses an absurd r before allocating
        maps = FeatureMaps(model.config, r, meta["kind"], window, layers, dtype=model.dtype, sinks=sinks,
                           decay=bool(decay), rotated=bool(rotated)).to(model.device)
    except (MemoryError, ValueError) as e:
        raise ValueError(f"{path}: field 'r' = {r}: {e}") from None
    want = dict(maps.named_parameters())
    for name in sorted(want.keys() | tensors.keys()):
        if name not in tensors or name not in want:
            raise ValueError(f"{path}: tensor {name!r} is " + ("missing" if name in want else "not a T2R map"))
        if not tensors[name].is_floating_point():  # save writes floats; an integer or bool would be cast without a word
            raise ValueError(f"{path}: tensor {name!r} is {tensors[name].dtype}, not a float")
        if tensors[name].shape != want[name].shape:
            raise ValueError(f"{path}: tensor {name!r} has shape {tuple(tensors[name].shape)}, this model needs "
                             f"{tuple(want[name].shape)} (maps made for another model?)")
        if not torch.isfinite(tensors[name]).all():
            raise ValueError(f"{path}: tensor {name!r} holds NaN or infinite values")
        with torch.no_grad():
            want[name].copy_(tensors[name])
    return maps


def maps_from(model: llama.Model, spec: str | None = None, path=None) -> tuple[linear.FeatureMaps, str]:
    """A tail's maps for the command line, and a line saying which: the maps a training run saved
    (path, read by `load`), or untrained maps of spec 'kind:r' ('hedgehog:16', 'relu:16', 'elu')."""
    kind, _, r = (spec or "").partition(":")
    if path is not None:
        maps = load(path, model)
        if not maps.layers:  # its tail would fold nothing: the policy alone, under another name
            raise ValueError(f"{path} swaps no layer (its field 'layers' is empty): a tail of it is the policy alone")
        if spec and (maps.kind != kind or (r and maps.r != int(r))):
            raise ValueError(f"--tail {spec}, but {path} holds {maps.kind} maps of r={maps.r}")
        return maps, f"tail: {maps.kind} maps of r={maps.r} from {path}"
    if not kind or (r and (not r.isdigit() or int(r) < 1)):
        raise ValueError(f"a tail is kind:r with r >= 1 features, e.g. hedgehog:16, relu:16 or elu; got {spec!r}")
    maps = linear.FeatureMaps(model.config, int(r or 16), kind, dtype=model.dtype).to(model.device)
    return maps, (f"tail: UNTRAINED {maps.kind} maps of r={maps.r} (their initial values; python demo.py t2r "
                  f"trains a tail and saves results/t2r_tail_*-maps.safetensors: pass it with --tail-maps)")


def _field_int(path, field, text, low) -> int:
    try:
        value = int(text)
    except ValueError:
        raise ValueError(f"{path}: field {field!r} is {text!r}, not an integer") from None
    if value < low:
        raise ValueError(f"{path}: field {field!r} is {value}, it must be at least {low}")
    return value


# ---------------------------------------------------------------- the training text

LICENSES = pathlib.Path("/usr/share/common-licenses")  # Debian's base-files: prose on every Debian machine


def training_sources(books=("lcet10", "plrabn12"), licenses=LICENSES) -> list[str]:
    """Every training text: the two Canterbury books that are not evaluated on, and each distinct
    license text of `licenses` where that folder exists (links and copies read once). alice29 and
    asyoulik, the evaluation books, are never among them."""
    sources = [corpus.book(b) for b in books]
    if licenses is not None and licenses.is_dir():
        seen = {}
        for f in sorted(licenses.iterdir()):
            if f.is_file():
                seen.setdefault(f.read_bytes(), f)  # GPL -> GPL-3 and the like: one copy
        sources += [corpus.read(f) for f in seen.values()]
    return sources


def training_text(tok, length: int = 4096, books=("lcet10", "plrabn12"), licenses=LICENSES) -> torch.Tensor:
    """Chunks (N, length) of every training text (`training_sources`)."""
    ids = [c for t in training_sources(books, licenses) for c in corpus.chunks(tok.encode(t).ids, length)]
    if not ids:
        raise ValueError(f"the training texts hold no chunk of {length} tokens")
    return torch.tensor(ids)


# ---------------------------------------------------------------- resumable runs

def _save_run(path, params: dict, opt, meta: dict):
    """A run's trainable tensors, Adam's moments and step, and `meta` (JSON) in one safetensors file."""
    tensors = {f"param.{n}": p.detach().contiguous() for n, p in params.items()}
    for n, p in params.items():
        for key, value in opt.state.get(p, {}).items():  # step, exp_avg, exp_avg_sq
            tensors[f"adam.{key}.{n}"] = value.detach().contiguous()
    with harness.atomic(pathlib.Path(path)) as tmp:
        save_file(tensors, str(tmp), metadata={"run": json.dumps(meta)})


def _load_run(path, params: dict, opt, settings: dict) -> dict:
    """Restore what _save_run wrote into `params` and `opt`, if it was saved with `settings` (every tensor
    and the record checked first, so that a file refused changes nothing); returns its meta."""
    try:
        with safe_open(str(path), "pt") as f:
            meta, tensors = json.loads((f.metadata() or {})["run"]), {n: f.get_tensor(n) for n in f.keys()}
    except Exception as e:
        raise ValueError(f"{path}: cannot read this training checkpoint ({e}); delete it to start again") from None
    kinds = {"settings": dict, "step": int, "seconds": (int, float), "tokens": int, "losses": list, "curve": list}
    number = lambda x: isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)
    if not isinstance(meta, dict) or any(not isinstance(meta.get(k), t) or isinstance(meta.get(k), bool)
                                         for k, t in kinds.items()) or meta["step"] < 0 or meta["tokens"] < 0 \
            or not number(meta["seconds"]) or meta["seconds"] < 0 or len(meta["losses"]) != meta["step"] \
            or not all(number(x) or isinstance(x, list) and all(map(number, x)) for x in meta["losses"]):
        raise ValueError(f"{path}: its run record is damaged (it needs {', '.join(kinds)}, a loss per step, "
                         f"nothing negative); delete the file to start again")
    for key, value in settings.items():
        if meta["settings"].get(key) != value:
            raise ValueError(f"{path}: saved with {key}={meta['settings'].get(key)!r}, this run asks "
                             f"for {value!r}; delete the file or use another")
    per_step = settings["chunks"][-1] * settings.get("batch", 1) if "chunks" in settings else None  # chunks a step
    if per_step and meta["tokens"] != meta["step"] * per_step:
        raise ValueError(f"{path}: its run record says {meta['tokens']:,} tokens in {meta['step']} steps of "
                         f"{per_step}: damaged; delete the file to start again")
    adam = ("step", "exp_avg", "exp_avg_sq")
    for n, p in params.items():  # every tensor checked before any is loaded: a damaged file changes nothing
        t = tensors.get(f"param.{n}")
        if t is None or t.shape != p.shape:
            raise ValueError(f"{path}: tensor 'param.{n}' is " + ("missing" if t is None else
                             f"{tuple(t.shape)}, this run needs {tuple(p.shape)} (another model or setting?)"))
        if not torch.isfinite(t).all():
            raise ValueError(f"{path}: tensor 'param.{n}' holds NaN or infinite values")
        state = {k: tensors[f"adam.{k}.{n}"] for k in adam if f"adam.{k}.{n}" in tensors}
        if state and len(state) < len(adam):
            raise ValueError(f"{path}: Adam's {', '.join(k for k in adam if k not in state)} of {n!r} is missing; "
                             f"delete the file to start again")
        for k, t in state.items():  # moments a run could not have made: NaN, or a negative second moment
            if k != "step" and t.shape != p.shape or not torch.isfinite(t).all() or (k != "exp_avg" and (t < 0).any()):
                raise ValueError(f"{path}: Adam's {k} of {n!r} is damaged (NaN, infinite, negative or of another "
                                 f"shape); delete the file to start again")
    for n, p in params.items():
        with torch.no_grad():
            p.copy_(tensors[f"param.{n}"])
        if f"adam.step.{n}" in tensors:  # Adam keeps its step on the CPU
            opt.state[p] = {k: tensors[f"adam.{k}.{n}"].to("cpu" if k == "step" else p.device) for k in adam}
    return meta


def _resume(checkpoint, params, opt, settings: dict, log) -> dict:
    """The meta of a saved run of the same settings (its tensors restored), or a fresh one."""
    if checkpoint is None or not os.path.isfile(checkpoint):
        return {"settings": settings, "step": 0, "seconds": 0.0, "tokens": 0, "losses": [], "curve": []}
    meta = _load_run(checkpoint, params, opt, settings)
    log and log(f"   resuming {checkpoint} at step {meta['step']} ({meta['tokens']:,} tokens)")
    return meta


def _order(n: int, step: int, seed: int) -> int:
    """Chunk of global step `step`: a fresh permutation of the n chunks every epoch (so a resumed run
    reads exactly what one run through would)."""
    epoch, j = divmod(step, n)
    return int(torch.randperm(n, generator=torch.Generator().manual_seed(seed + epoch))[j])


class Teacher:
    """The frozen model's attention on training chunks (N, T), layer by layer: feed(c, learn) calls
    learn(i, q, k, v, o) for every layer i of chunk c in turn, with q (1, Hkv, G, T, hd), k, v (1, Hkv, 1,
    T, hd) detached and the softmax output o (1, Hkv, G, T, hd). Streamed (no folder): the model reads
    the chunk every time, o goes on to the next layer, nothing is kept. Cached (`Teacher.cached`): the
    first feed of a chunk also keeps it in folder/<c>.safetensors, and every later one (any epoch, map
    set or run) reads it back. A 1,024-token chunk of the default model is about 189 MB in float32."""

    def __init__(self, model, chunks, folder=None):
        self.model, self.chunks, self.folder = model, chunks, folder and pathlib.Path(folder)
        self.writing = self.folder is not None  # False once a write failed (a full disk): the rest is streamed

    @classmethod
    def cached(cls, model, chunks):
        """Kept in results/t2r_teacher/<key>/: keyed by the model (config and weights), the chunks, the decoder
        and linear.py (its softmax)."""
        key = harness.fingerprint(*experiments.identity(model), chunks, pathlib.Path(llama.__file__), pathlib.Path(linear.__file__))
        return cls(model, chunks, harness.RESULTS / "t2r_teacher" / key)

    def feed(self, c: int, learn):
        layers = self._read(c) if self.folder else None
        if layers is not None:
            for i, qkvo in enumerate(layers):
                learn(i, *qkvo)
            return
        kept = []  # the layers to save; streamed, none is kept

        def attend(i, q, k, v):
            qkvo = (q.detach(), k.detach(), v.detach(), linear.softmax(self.model, q, k, v))
            if self.writing:
                kept.append(qkvo)
            learn(i, *qkvo)
            return qkvo[3]
        with torch.no_grad():  # only the attention hooks matter: no vocabulary product
            llama.forward(self.model, self.chunks[c][None], attend, last=True)
        if self.writing:
            try:
                with harness.atomic(self.folder / f"{c}.safetensors") as tmp:  # a killed run leaves no half file
                    save_file({f"{i}.{n}": t.contiguous() for i, qkvo in enumerate(kept) for n, t in zip("qkvo", qkvo)}, tmp)
            except Exception as e:  # a full disk (safetensors' own error, or OSError): the cache is optional
                self.writing = False
                print(f"[msrnn] the teacher cache {self.folder} stops at chunk {c} ({type(e).__name__}: {e}); "
                      "the chunks not cached are streamed from the model", file=sys.stderr)

    def _read(self, c: int):
        """Chunk c's [(q, k, v, o)] per layer from its file (mapped, not copied), or None."""
        file = self.folder / f"{c}.safetensors"
        try:
            got = load_file(file, device=str(self.model.device))
            return [tuple(got[f"{i}.{n}"] for n in "qkvo") for i in range(len(self.model.layers))]
        except FileNotFoundError:
            return None
        except Exception as e:  # damaged by hand or by a full disk: computed again, as a missing file is
            print(f"[msrnn] ignoring the unreadable teacher cache {file} ({type(e).__name__}: {e}); "
                  "computing it again", file=sys.stderr)
            return None


# ---------------------------------------------------------------- stage 1: attention transfer

def student_of(maps: FeatureMaps):
    """The default student: layer i's linear attention (plain T2R, or the hybrid with maps.window, maps.sinks)."""
    return lambda i, q, k, v: linear.swapped(maps, i, q, k, v)


def transfer(model, maps, chunks, *, student=None, epochs=1, lr=1e-2, scale=1000.0, seed=0, minutes=None,
             checkpoint=None, save_every=20, evaluate=None, eval_every=50, teacher=None, log=print) -> dict:
    """Attention transfer (LoLCATs' stage 1: output MSE), streamed: the frozen model reads each chunk
    (N, T) once per epoch; inside every swapped layer the softmax output is computed (no grad), the
    student's output on the same detached q, k, v is regressed onto it (MSE x `scale`, LoLCATs'), its
    gradient taken at once and the graph freed, and the softmax output goes on to the next layer. So
    one layer's student graph is held at a time, and nothing is stored between chunks. One Adam step
    per chunk: a layer's maps get gradient only from that layer, so this is per-layer training.

    maps: FeatureMaps, or a list of them trained side by side on the same stream (one teacher pass);
    student(i, q, k, v) -> (B, Hkv, G, T, hd), differentiable in the maps (default student_of(maps));
    a list with a list of maps. Stops after `epochs` or `minutes`; with `checkpoint` (a path) it saves
    there every `save_every` steps and at the end, and a later call goes on from the saved step.
    evaluate() -> dict, every `eval_every` steps and at the end: the curve against tokens.
    teacher: a Teacher of these chunks (default: streamed); Teacher.cached reads them back instead of
    running the model again (the same q, k, v and outputs, so the same training: tests/test_t2r.py).
    Returns the run's meta: steps, tokens, seconds, tokens/s, per step the MSE of each maps set."""
    many = isinstance(maps, (list, tuple))
    maps_list = list(maps) if many else [maps]
    students = (list(student) if many else [student]) if student is not None else [None] * len(maps_list)
    students = [s or student_of(m) for s, m in zip(students, maps_list)]
    params = {f"{j}.{n}": p for j, m in enumerate(maps_list) for n, p in m.named_parameters()}
    opt = torch.optim.Adam(params.values(), lr=lr)
    settings = {"stage": "transfer", "lr": lr, "scale": scale, "seed": seed, "chunks": list(chunks.shape),
                "maps": [describe(m) for m in maps_list]}
    run, layer_loss = _resume(checkpoint, params, opt, settings, log), [0.0] * len(maps_list)
    teacher = teacher or Teacher(model, chunks)

    def learn(i, q, k, v, o):
        """Each student's gradient at layer i on the teacher's q, k, v (detached) and softmax output o."""
        for j, (m, s) in enumerate(zip(maps_list, students)):
            if i in m.layers:
                with torch.enable_grad():
                    loss = F.mse_loss(s(i, q, k, v), o)
                    (scale * loss).backward()
                layer_loss[j] += loss.item() / len(m.layers)

    def step(i):
        layer_loss[:] = [0.0] * len(maps_list)
        teacher.feed(_order(len(chunks), i, seed), learn)
        return chunks.shape[1], list(layer_loss)

    def report(run, last):
        if log and (run["step"] % 10 == 0 or run["step"] == 1 or last):
            log(f"   transfer step {run['step']}/{epochs * len(chunks)}: {run['tokens']:,} tokens, "
                f"{run['tokens'] / run['seconds']:.0f} tokens/s, MSE " + " ".join(f"{l:.4g}" for l in run["losses"][-1]))
    return _train(run, step, epochs * len(chunks), minutes, params, opt, report, evaluate, eval_every, checkpoint, save_every)


def _train(run, step, total, minutes, params, opt, report, evaluate, eval_every, checkpoint, save_every) -> dict:
    """The loop both stages share: step(i) takes step i's gradient and returns (its tokens, its loss);
    then Adam steps, the run's meta counts them and the seconds, report(run, last) logs, evaluate() ->
    dict goes on the curve every eval_every steps and at the end (not counted as training time), and the
    run is saved every save_every steps and at the end. Stops after `total` steps or `minutes`."""
    t0, done_s = time.time(), run["seconds"]
    while run["step"] < total and not (minutes and done_s + time.time() - t0 >= 60 * minutes):
        tokens, loss = step(run["step"])
        opt.step()
        opt.zero_grad(set_to_none=True)
        if not all(math.isfinite(x) for x in (loss if isinstance(loss, list) else [loss])) or \
                not all(torch.isfinite(p).all() for p in params.values()):  # not saved, so a rerun starts where it was sound
            raise ValueError(f"training diverged at step {run['step'] + 1}: the loss or the weights are NaN or infinite "
                             f"(nothing saved): " + (f"is {checkpoint} damaged, or " if checkpoint else "is ") +
                             "the learning rate too high?")
        run["step"] += 1
        run["tokens"] += tokens
        run["losses"].append(loss)
        run["seconds"] = done_s + time.time() - t0
        last = run["step"] == total or (minutes and run["seconds"] >= 60 * minutes)
        report(run, last)
        if evaluate and (run["step"] % eval_every == 0 or last):
            run["curve"].append({"step": run["step"], "tokens": run["tokens"], **evaluate()})
            t0, done_s = time.time(), run["seconds"]  # evaluation is not training time
        if checkpoint is not None and (run["step"] % save_every == 0 or last):
            _save_run(checkpoint, params, opt, run)
    run["tokens_per_s"] = run["tokens"] / max(run["seconds"], 1e-9)
    return run


def transfer_loss(model, maps: FeatureMaps, chunks, student=None) -> float:
    """The attention-transfer MSE of `maps` on chunks (N, T), averaged over chunks and swapped layers."""
    student, total, teacher = student or student_of(maps), [0.0], Teacher(model, chunks)

    def measure(i, q, k, v, o):
        if i in maps.layers:
            total[0] += F.mse_loss(student(i, q, k, v), o).item() / len(maps.layers) / len(chunks)
    for c in range(len(chunks)):
        teacher.feed(c, measure)
    return total[0]


def describe(maps: FeatureMaps) -> dict:
    return {"kind": maps.kind, "r": maps.r, "window": maps.window, "layers": maps.layers} | \
        ({"sinks": maps.sinks} if maps.sinks else {}) | ({"decay": True} if maps.decay else {}) | \
        ({} if maps.rotated else {"rotated": False})


def tail_check(spec):
    """The checker's "tail" check (`checker.check(..., more={"tail": tail_check(spec)})`): the policy with a
    T2R tail of feature map spec 'kind:r' (t2r/tail.py), random maps: its RNN view (llama.step) = its
    transformer view, and a tail of no features (r = 0) is the policy alone, bit for bit."""
    return functools.partial(_tail_check, spec=spec)


def _tail_check(named, deterministic, spec):
    from t2r import tail
    MODELS, SIZES, EXACT = checker.MODELS, checker.SIZES, checker.EXACT
    model = llama.random_model(MODELS["LLaMA"], seed=1)  # not Mistral: a tail cannot forget what its window would
    x = checker.tokens(2, 40, seed=2)
    policy = named.on(model, x)
    maps, _ = maps_from(model, spec)
    with torch.no_grad():  # random weights and biases, so that the tail matters and some features are off
        g = torch.Generator().manual_seed(3)
        for p in maps.parameters():
            p.copy_(torch.randn(p.shape, generator=g, dtype=p.dtype) * 0.5)
    none = linear.FeatureMaps(model.config, 0, dtype=model.dtype)  # a tail of no features
    worst, runs, refused = 0.0, 0, {}
    for size in SIZES:
        try:
            rnn = msrnn.feed(model, x, tail.init_state(model, maps, size, batch=2), policy)
            worst = max(worst, (tail.forward(model, maps, x, policy, size) - rnn).abs().max().item())
            if not torch.equal(msrnn.feed(model, x, tail.init_state(model, none, size, batch=2), policy),
                               msrnn.run(model, x, policy, size)):
                return "fail", f"size {size}: a tail of no features changed the policy's logits"
        except guards.PolicyError as e:
            if not isinstance(getattr(e, "original", None), ValueError):
                return "fail", str(e)
            refused[size] = str(e.original)
            continue
        runs += 1
    if not runs:
        return "fail", "the policy refused every size: " + next(iter(refused.values()))
    where = f"{runs} runs: LLaMA, sizes {SIZES[0]}-{SIZES[-1]}, random {maps.kind} maps of r={maps.r}"
    if worst > EXACT:
        return "fail", f"the tail's views differ by {worst:.1e} (bound {EXACT:.0e}, float64) in {where}" + \
            ("" if deterministic else "; it is not deterministic (see contract)")
    return "pass", (f"RNN view = transformer view to {worst:.0e} (bound {EXACT:.0e}, float64), {where}; "
                    "no features = the policy alone, bit for bit")



# ---------------------------------------------------------------- stage 2: swap, then finetune

LORA_ON = ("wq", "wk", "wv", "wo")  # LoLCATs' LoRA targets: the attention projections


def weights(model: llama.Model, mode: str, rank: int = 8, alpha: float = 16, seed: int = 0):
    """The finetune's trainable tensors (name -> leaf tensor) and build() -> the llama.Model they make.

    mode "full": every weight of the model (Kasai et al.): a copy of embeddings, norms and each layer's
    matrices. mode "lora": for q, k, v, o of every layer an A (rank, in) and a zero B (out, rank),
    W = W0 + alpha/rank B A (Hu et al. 2021, arXiv 2106.09685; LoLCATs' r=8, alpha=16). build() makes
    new Layers from the current tensors each step (Layer fuses wq, wk, wv on creation, so the fused
    matrix is rebuilt from them rather than edited in place)."""
    fields = [f.name for f in dataclasses.fields(llama.Layer)]
    tied = model.lm_head is model.embed
    if mode == "full":
        params = {f"layers.{i}.{f}": getattr(L, f).detach().clone() for i, L in enumerate(model.layers) for f in fields}
        params |= {n: getattr(model, n).detach().clone() for n in ("embed", "norm") + (() if tied else ("lm_head",))}

        def build():
            layers = [llama.Layer(**{f: params[f"layers.{i}.{f}"] for f in fields}) for i in range(len(model.layers))]
            return dataclasses.replace(model, embed=params["embed"], layers=layers, norm=params["norm"],
                                       lm_head=params["embed"] if tied else params["lm_head"])
    elif mode == "lora":
        g, params = torch.Generator().manual_seed(seed), {}
        for i, L in enumerate(model.layers):
            for w in LORA_ON:
                out, inp = getattr(L, w).shape
                bound = 1 / math.sqrt(inp)  # PEFT's start for A (Kaiming-uniform, a=√5); B = 0, so W = W0
                params[f"layers.{i}.{w}.A"] = ((torch.rand(rank, inp, generator=g, dtype=torch.float64) * 2 - 1)
                                               * bound).to(device=model.device, dtype=model.dtype)
                params[f"layers.{i}.{w}.B"] = torch.zeros(out, rank, device=model.device, dtype=model.dtype)

        def build():
            layers = [llama.Layer(**{f: getattr(L, f) + alpha / rank * params[f"layers.{i}.{f}.B"] @ params[f"layers.{i}.{f}.A"]
                                     if f in LORA_ON else getattr(L, f) for f in fields}) for i, L in enumerate(model.layers)]
            return dataclasses.replace(model, layers=layers)
    else:
        raise ValueError(f"finetune mode must be 'full' (every weight, Kasai et al.) or 'lora' (LoLCATs), got {mode!r}")
    for p in params.values():
        p.requires_grad_(True)
    return params, build


def finetune(model, maps: FeatureMaps, chunks, *, mode="lora", epochs=1, minutes=None, lr=None, maps_lr=1e-3,
             rank=8, alpha=16, seed=0, grad_checkpoint=True, checkpoint=None, save_every=10, evaluate=None,
             eval_every=25, log=print):
    """Swap, then finetune (Kasai et al.'s recipe: kind "t2r", mode "full"; LoLCATs' stage 2: LoRA):
    next-token loss with the linear attention in place, training the maps and the model's weights (mode "full") or LoRA
    adapters on q, k, v, o (mode "lora"). lr: the weights' (default 1e-4 for LoRA, LoLCATs'; 1e-5 for
    every weight); the maps learn at maps_lr. grad_checkpoint: each layer's attention is recomputed in
    the backward pass rather than kept (torch.utils.checkpoint). Resumable as `transfer` is.
    Returns (the finetuned llama.Model, detached; the run's meta)."""
    lr = lr if lr is not None else {"lora": 1e-4, "full": 1e-5}.get(mode, 0)
    params, build = weights(model, mode, rank, alpha, seed)
    params = {f"maps.{n}": p for n, p in maps.named_parameters()} | {f"model.{n}": p for n, p in params.items()}
    opt = torch.optim.Adam([{"params": [p for n, p in params.items() if n.startswith("maps.")], "lr": maps_lr},
                            {"params": [p for n, p in params.items() if n.startswith("model.")], "lr": lr}])
    settings = {"stage": "finetune", "mode": mode, "lr": lr, "maps_lr": maps_lr, "rank": rank, "alpha": alpha,
                "seed": seed, "chunks": list(chunks.shape), "maps": describe(maps)}
    run, total = _resume(checkpoint, params, opt, settings, log), epochs * len(chunks)
    student = student_of(maps)
    attend = lambda i, q, k, v: (linear.softmax(model, q, k, v) if i not in maps.layers else
                                 torch.utils.checkpoint.checkpoint(student, i, q, k, v, use_reentrant=False)
                                 if grad_checkpoint else student(i, q, k, v))

    def step(i):
        x = chunks[_order(len(chunks), i, seed)]                         # (T,)
        logits = llama.forward(build(), x[None], attend)[0, :-1]          # (T - 1, vocab)
        loss = F.cross_entropy(logits.to(llama.wide(logits.dtype)), x[1:].to(logits.device))
        loss.backward()
        return x.numel(), loss.item()

    def report(run, last):
        if log:
            log(f"   finetune ({mode}) step {run['step']}/{total}: {run['tokens']:,} tokens, "
                f"{run['tokens'] / run['seconds']:.0f} tokens/s, next-token loss {run['losses'][-1]:.3f}")
    run = _train(run, step, total, minutes, params, opt, report, evaluate and (lambda: evaluate(detached(build))),
                 eval_every, checkpoint, save_every)
    return detached(build), run


def detached(build) -> llama.Model:
    """The model build() makes, as plain tensors that later training steps do not touch."""
    with torch.no_grad():
        m = build()
        fields = [f.name for f in dataclasses.fields(llama.Layer)]
        layers = [llama.Layer(**{f: getattr(L, f).detach().clone() for f in fields}) for L in m.layers]
        embed = m.embed.detach().clone()
        return dataclasses.replace(m, embed=embed, layers=layers, norm=m.norm.detach().clone(),
                                   lm_head=embed if m.lm_head is m.embed else m.lm_head.detach().clone())


# ---------------------------------------------------------------- the comparison: python demo.py t2r

# what the papers spent, for the command that reaches their budget on a GPU (PAPERS.md): LoLCATs ~40 M
# tokens in all for 7-8B models, about half in each stage
PAPERS = {"transfer_tokens": 20_000_000, "finetune_tokens": 20_000_000}
TRAINING_CODE = [inspect.getsource(f) for f in (training_sources, training_text, _save_run, _load_run, _resume, _order, student_of,
                                                 transfer, _train, weights, finetune, detached)]  # read once, at import


def code_key(*extra) -> str:
    """A hash of the code that trains: the functions above, the method (t2r/linear.py), the decoder (llama.py)."""
    return harness.fingerprint(*TRAINING_CODE, pathlib.Path(linear.__file__), pathlib.Path(llama.__file__), *extra)


def zeroed(maps: FeatureMaps) -> FeatureMaps:
    """The same maps with every feature 0: S and z stay 0, so only the window (or the held rows) is left.
    A hybrid whose perplexity barely rises under this bypasses its linear part (arXiv 2510.05901)."""
    off = copy.copy(maps)
    off.phi = lambda layer, x, which, pos=None: x.new_zeros(*x.shape[:-1], maps.r)
    return off


def experiment(model, tok, r=64, kinds=("relu", "hedgehog"), window=64, length=4096, train_length=1024, epochs=2,
               minutes=20.0, finetune_mode="lora", finetune_minutes=7.0, finetune_epochs=1, sizes=(32, 64, 128, 256),
               tail_r=16, tail_size=64, tail_minutes=10.0, tail_length=None, eval_chunks=1, eval_every=20, curve_tokens=1024,
               transfer_tokens=None, finetune_tokens=None, tails=True, tail_sizes=None, log=None) -> dict:
    """Perplexity against bytes of state per sequence at `length` tokens, on the same held-out chunks of
    alice29 and asyoulik for every row: linear attention with each map kind of r features (both signs
    of Hedgehog's counted) after LoLCATs' attention transfer and after the finetune (LoRA, LoLCATs';
    or every weight); with the transfer first, no row is Kasai et al.'s recipe (t2r/mini.py runs it);
    the hybrid (`window` exact rows + Hedgehog r); ELU+1; TOVA, H2O and Window+4 at
    `sizes`; TOVA with a T2R tail (t2r/tail.py, where it exists); the full cache. The hybrid and the
    tail also with their features zeroed. Training reads chunks of `train_length` tokens (LoLCATs' 1,024);
    the tail's, chunks of `tail_length` (default `length`: a tail trained on 1,024 tokens weighs its folded
    rows as if there were no more than in 1,024, and at 4,096 they swamp the held ones, docs/t2r.md),
    for `epochs` or `minutes` per stage, whichever ends first; transfer_tokens and finetune_tokens, where
    given, set the epochs instead (PAPERS: the papers' budgets, for a GPU). Training runs once: its artefacts are cached in results/ under
    a key of the settings and the code, and an interrupted run goes on from its last checkpoint."""
    log, t_start = log or (lambda msg: None), time.time()
    sinks = inspect.signature(specs.POLICIES["sink"]).parameters["sinks"].default
    if min(sizes) <= sinks:  # checked before the training, not after it, when the Window+4 rows are measured
        raise ValueError(f"sizes {list(sizes)}: Window+{sinks}, a baseline at every size, needs a size above its {sinks} sinks")
    train_ids = training_text(tok, train_length)
    test = experiments.book_chunks(tok, eval_chunks, length, books=("alice29", "asyoulik"))
    if transfer_tokens:
        epochs = -(-transfer_tokens // train_ids.numel())
    if finetune_tokens:
        finetune_epochs = -(-finetune_tokens // train_ids.numel())
    log(f"training text: {len(train_ids)} chunks of {train_length} tokens ({train_ids.numel():,} tokens; {epochs} epochs); "
        f"held out: {len(test)} chunks")
    comp = Comparison(model, test, train_ids, epochs, curve_tokens, log)
    new = lambda kind, w=0, r=r: FeatureMaps(model.config, r, kind, w, dtype=model.dtype).to(model.device)
    plain, hybrid = [new(kind) for kind in kinds], new("hedgehog", window) if window else None
    stage1 = transferred(comp, plain, hybrid, minutes, eval_every, (r, kinds, window, minutes))
    elu = new("elu")
    comp.record(name(elu), "elu", elu, "")
    curves = {"transfer": stage1["curve"], "curve_tokens": comp.piece.shape[1],
              "full cache": math.exp(experiments.next_token_nll(llama.forward(model, comp.piece), comp.piece).mean().item())}
    for m in plain:  # stage 2: swap, then finetune each plain map set with the model (LoRA or every weight)
        curves[f"finetune {name(m)}"] = finetuned(comp, m, stage1, finetune_mode, finetune_minutes, finetune_epochs,
                                                  eval_every, (r, kinds, window, minutes))
    log("softmax attention, then the MSRNN policies on the same chunks ...")
    comp.rows += policy_rows(model, test, sizes, log)
    if tails:
        tail_rows(comp, training_text(tok, tail_length or length), tail_sizes or sizes, tail_r, tail_size, tail_minutes)
    comp.rows.sort(key=lambda row: row["state_bytes"])
    return {"results": comp.rows, "curves": curves, "bypass": comp.bypass, "chunks": len(test), "tokens": test.shape[1],
            "training_tokens": train_ids.numel(), "epochs": epochs, "dtype": str(model.dtype).removeprefix("torch."),
            "seconds": round(time.time() - t_start)}


class Comparison:
    """The rows of `experiment` as they are measured, on the same held-out chunks `test`; each kept in
    results/ under what computes it (measured_row), as each trained file is under its settings (cache)."""

    def __init__(self, model, test, train_ids, epochs, curve_tokens, log):
        self.model, self.test, self.train_ids, self.epochs, self.log = model, test, train_ids, epochs, log
        self.model_key, self.rows, self.bypass = harness.fingerprint(*experiments.identity(model)), [], {}
        self.piece = test[:1, :curve_tokens]  # the curve against training tokens: the first held-out chunk's start

    def cache(self, what, *settings):
        """Where a trained file is kept: keyed by the code, the model's weights, the training text and the settings."""
        key = code_key(self.model_key, self.train_ids, self.epochs, *settings)
        return harness.RESULTS / f"t2r_{what}_{key}.safetensors"

    def ppl(self, model, maps) -> float:
        """Perplexity of the first held-out tokens (self.piece), for the curves."""
        return math.exp(experiments.next_token_nll(forward(model, maps, self.piece), self.piece).mean().item())

    def measured(self, method, trained, nll, *code) -> dict:
        # a row is keyed on the code that computes it too: an edit of t2r/linear.py (ELU+1's, say) measures it again
        return measured_row(method, trained, nll, self.test, self.model_key, code_key(), *code)

    def record(self, method, family, maps, trained, model=None, **extra):
        """The row of `maps` (read by `model`, default the frozen one) on the held-out chunks."""
        nll = lambda: experiments.next_token_nll(forward(model or self.model, maps, self.test), self.test)
        self.rows.append(dict(method=method, family=family, state_bytes=state_bytes(self.model, maps),
                              **self.measured(method, trained, nll), **extra))
        self.log(f"   {method}: {self.rows[-1]['state_bytes'] / 2**20:.2f} MiB of state, perplexity {self.rows[-1]['ppl']:.2f}")


def cost(run) -> dict:
    return {"tokens": run["tokens"], "seconds": round(run["seconds"]), "tokens_per_s": run["tokens_per_s"]}


def transferred(comp: Comparison, plain: list, hybrid, minutes, eval_every, settings) -> dict:
    """Stage 1: every map set of the table learns side by side from one stream of the frozen model;
    then each is a row (the hybrid also with its features zeroed). Returns the run's meta."""
    maps = plain + ([hybrid] if hybrid else [])
    path = comp.cache("transfer", *settings)
    comp.log(f"stage 1, attention transfer of {', '.join(name(m) for m in maps)} -> {path.name}")
    run = transfer(comp.model, maps, comp.train_ids, epochs=comp.epochs, minutes=minutes, checkpoint=path, log=comp.log,
                   eval_every=eval_every, evaluate=lambda: {name(m): comp.ppl(comp.model, m) for m in maps})
    for m in plain:
        comp.record(f"{name(m)}, transfer", m.kind, m, path.name, stage="transfer", **cost(run))
    if hybrid:
        comp.record(f"{name(hybrid)}, transfer", "hybrid", hybrid, path.name, stage="transfer", **cost(run))
        comp.record(f"{name(hybrid)}, features zeroed", "hybrid zeroed", zeroed(hybrid), path.name)
        comp.bypass[name(hybrid)] = {"with": comp.rows[-2]["ppl"], "zeroed": comp.rows[-1]["ppl"]}
    return run


def finetuned(comp: Comparison, m: FeatureMaps, stage1, mode, minutes, epochs, eval_every, settings) -> list:
    """Stage 2 for one plain map set: swap, then finetune it with the model (LoRA or every weight); its
    row, whose cost is both stages'. Returns the finetune's curve."""
    path = comp.cache("finetune", name(m), mode, minutes, epochs, *settings)
    comp.log(f"stage 2, {mode} finetune of {name(m)} -> {path.name}")
    tuned, run = finetune(comp.model, m, comp.train_ids, mode=mode, minutes=minutes, epochs=epochs, checkpoint=path,
                          log=comp.log, eval_every=eval_every // 2, evaluate=lambda t: {name(m): comp.ppl(t, m)})
    comp.record(f"{name(m)}, finetuned", m.kind + " finetuned", m, path.name, model=tuned, stage=f"finetune ({mode})",
                tokens=stage1["tokens"] + run["tokens"], seconds=round(stage1["seconds"] + run["seconds"]),
                tokens_per_s=run["tokens_per_s"], finetune_tokens=run["tokens"], finetune_seconds=round(run["seconds"]))
    return run["curve"]


def measured_row(method, trained, nll, test, model_key, *code) -> dict:
    """Perplexity of one row (nll() -> losses (B, T - 1)), kept in results/t2r_rows/ under the row, what
    trained it, the chunks, the model and `code` (what computes it: code_key(), and a tail row's policy
    and tail.py), so a rerun with the same settings and code measures nothing again."""
    file = harness.RESULTS / "t2r_rows" / f"{harness.fingerprint(method, trained, test, model_key, *code)}.json"
    got = harness.read_cached(file, {"ppl": float, "ppl_per_chunk": [float]})
    if got is None:
        with torch.no_grad():
            losses = nll()
        got = {"ppl": math.exp(losses.mean().item()), "ppl_per_chunk": [math.exp(x) for x in losses.mean(1).tolist()]}
        harness.atomic_write(file, json.dumps(got))
    return got


def policy_rows(model, test, sizes, log=print) -> list:
    """The full cache, then TOVA, H2O and Window+4 at each size, on chunks `test`: each row measured
    once and kept in results/t2r_policies/<key>/ (experiments.cache_dir: keyed by the weights, the
    tokens and the code), so a second process can measure them while the maps train."""
    cache, rows = experiments.cache_dir("t2r_policies", model, test), []
    settings = [(specs.FULL, test.shape[1])] + [(specs.named(p), s) for s in sizes for p in ("tova", "h2o", "sink")]
    for p, size in settings:
        file = cache / f"{p.key}-{size}.json"
        got = harness.read_cached(file, experiments.MEASURED)
        if got is None:
            got = experiments.measure(model, test, p, size, batch=1)
            harness.atomic_write(file, json.dumps(got))
        full = p is specs.FULL
        rows.append(dict(method="softmax, full cache" if full else f"{p.label} {size}", family="full" if full else p.spec,
                         state_bytes=msrnn.state_bytes(model, size), ppl=got["ppl"], ppl_per_chunk=got["per_chunk"]))
        log(f"   {rows[-1]['method']}: {rows[-1]['state_bytes'] / 2**20:.2f} MiB of state, perplexity {got['ppl']:.2f} "
            f"({got['seconds']:.0f} s)")
    return rows


TAIL_GAIN = -5.0  # the tail's query gain starts at exp(-5): thousands of folded rows would outweigh the few held ones


def tail_rows(comp: Comparison, train_ids, sizes, tail_r, tail_size, minutes):
    """TOVA with a T2R tail at each size, where t2r/tail.py exists: one Hedgehog map of tail_r features
    trained by attention transfer under TOVA's own drops at tail_size rows on chunks train_ids, then
    read at every size.
    Its zeroed twin is the TOVA row itself: a tail of zero features is the policy alone, bit for bit
    (tests/test_tail.py), so it is not run twice."""
    try:
        from t2r import tail
    except ImportError:
        comp.log("   (no t2r/tail.py: no rows for TOVA with a tail)")
        return
    model, test, tova = comp.model, comp.test, specs.named("tova")
    maps = FeatureMaps(model.config, tail_r, "hedgehog", dtype=model.dtype).to(model.device)
    with torch.no_grad():
        maps.gq.fill_(TAIL_GAIN)
    path = comp.cache("tail", "tova", tail_size, tail_r, minutes, TAIL_GAIN, train_ids, pathlib.Path(tail.__file__))
    comp.log(f"TOVA {tail_size} + tail hedgehog {tail_r}: attention transfer under TOVA's drops -> {path.name}")
    run = transfer(model, maps, train_ids, student=tail.student(model, maps, tova.fn, tail_size), epochs=comp.epochs,
                   minutes=minutes, checkpoint=path, log=comp.log)
    save(maps, path.with_name(f"{path.stem}-maps.safetensors"))  # the maps alone, for demo.py ppl --tail-maps
    comp.log(f"   its maps: {path.stem}-maps.safetensors (python demo.py ppl --policy tova --size N --tail hedgehog:{tail_r} "
             f"--tail-maps results/{path.stem}-maps.safetensors)")
    for size in sizes:
        method = f"TOVA {size} + tail hedgehog {tail_r}"
        got = comp.measured(method, path.name, lambda: experiments.next_token_nll(tail.forward(model, maps, test, tova.fn, size), test),
                            tova.key, pathlib.Path(tail.__file__))  # an edit of policies.tova or the tail measures it again
        comp.rows.append(dict(method=method, family="tail", state_bytes=tail.state_bytes(model, maps, size), **got,
                              stage=f"transfer at {tail_size} rows", **cost(run)))
        comp.log(f"   {method}: {comp.rows[-1]['state_bytes'] / 2**20:.2f} MiB of state, perplexity {got['ppl']:.2f}")
        alone = next(x["ppl"] for x in comp.rows if x["method"] == f"{tova.label} {size}")
        comp.bypass[method] = {"with": got["ppl"], "zeroed": alone}


def name(maps: FeatureMaps) -> str:
    plain = "ELU+1 (untrained)" if maps.kind == "elu" else f"T2R {maps.kind} {maps.r}"
    return f"hybrid: window {maps.window} + {plain}" if maps.window else plain


MAP_NAMES = {"t2r": "Kasai's tied ReLU map", "relu": "ReLU query and key maps", "hedgehog": "Hedgehog map"}
FINETUNES = {"finetune (lora)": "LoLCATs' transfer + LoRA", "finetune (full)": "LoLCATs' transfer + every weight"}


def maps_named(method: str) -> str:
    """'T2R hedgehog 64' -> 'Hedgehog map r=64', 'tail relu 16' -> 'tail: ReLU query and key maps r=16'."""
    return re.sub(r"(T2R|tail) (t2r|relu|hedgehog) (\d+)",
                  lambda m: ("tail: " if m[1] == "tail" else "") + f"{MAP_NAMES[m[2]]} r={m[3]}", method)


def recipe(row) -> str:
    """A row's name as its recipe: the map, its training, its finetune. The rows keep the names they
    were measured and cached under (`name`); this is how they are printed."""
    method = maps_named(row["method"]).replace(", transfer", ", LoLCATs' transfer")
    method = method.replace(", finetuned", ", " + FINETUNES.get(row.get("stage"), "finetuned"))
    return method + (", LoLCATs' transfer" if row["family"] == "tail" else "")


def table(data) -> str:
    lines = ["| method | state per sequence | perplexity | training tokens | training time | tokens/s |",
             "|---|---|---|---|---|---|"]
    for row in data["results"]:
        cost = (f"{row['tokens']:,} | {row['seconds']} s | {row['tokens_per_s']:.0f}" if "tokens" in row else " | | ")
        lines.append(f"| {recipe(row)} | {row['state_bytes'] / 2**20:.2f} MiB | {row['ppl']:.2f} | {cost} |")
    full = next(row["ppl"] for row in data["results"] if row["family"] == "full")
    notes = [f"{data['chunks']} held-out chunks of {data['tokens']} tokens; training text {data['training_tokens']:,} "
             f"tokens x {data['epochs']} epochs; this run {data['seconds']} s (what results/ held was read back, not "
             f"trained or measured again). Full cache: {full:.2f}.",
             "r counts every feature of a map (Hedgehog's r/2 of Wx and r/2 of -Wx together). LoLCATs' transfer: "
             "each layer's linear output regressed onto its softmax output (MSE). No row runs Kasai et al.'s recipe "
             "(one tied ReLU map per head swapped in, every weight finetuned): python -m t2r.mini does."]
    for k, v in data["bypass"].items():
        notes.append(f"{maps_named(k)}: zeroing its linear part takes perplexity from {v['with']:.2f} to {v['zeroed']:.2f} "
                     f"({100 * (v['zeroed'] / v['with'] - 1):+.1f}%; the target is at least +10%)")
    return "\n".join(lines + notes)


def draw(plt, data):
    """Left: perplexity against state bytes; right: perplexity against training tokens."""
    plt.gcf().set_size_inches(12, 4.6)
    plt.subplot(1, 2, 1)
    labels = {"relu": "ReLU maps, transfer", "hedgehog": "Hedgehog map, transfer", "relu finetuned": "ReLU maps, transfer + finetune",
              "hedgehog finetuned": "Hedgehog map, transfer + finetune", "elu": "ELU+1 (untrained)", "hybrid": "hybrid (window + Hedgehog)",
              "hybrid zeroed": "hybrid, features zeroed", "tail": "TOVA + tail", "tail zeroed": "TOVA + tail, zeroed",
              "full": "softmax, full cache"}
    for fam in ("tova", "h2o", "sink", "tail", "tail zeroed", "full", "relu", "hedgehog", "relu finetuned",
                "hedgehog finetuned", "elu", "hybrid", "hybrid zeroed"):
        pts = [(row["state_bytes"] / 2**20, row["ppl"]) for row in data["results"] if row["family"] == fam]
        if pts:
            line = fam in ("tova", "h2o", "sink", "tail", "tail zeroed")  # the MSRNNs: a line over sizes
            plt.plot(*zip(*pts), marker="o" if line else "s", ls="-" if line else "",
                     label=labels.get(fam) or specs.named(fam).label)
    plt.xscale("log")
    plt.yscale("log")
    plt.xlabel(f"state per sequence at {data['tokens']:,} tokens (MiB, {data['dtype']})")
    plt.ylabel("perplexity (held out)")
    plt.title("Fold the past into one state (T2R) or keep rows (MSRNN)", fontsize=9)
    plt.legend(fontsize=6)
    plt.subplot(1, 2, 2)
    offset = 0
    for stage, curve in data["curves"].items():
        if stage in ("curve_tokens", "full cache") or not curve:
            continue
        start = 0 if stage == "transfer" else data["curves"]["transfer"][-1]["tokens"]
        for method in [k for k in curve[0] if k not in ("step", "tokens")]:
            plt.plot([start + c["tokens"] for c in curve], [c[method] for c in curve], marker=".",
                     label=f"{method} ({stage.split()[0]})")
    full = data["curves"]["full cache"]
    plt.axhline(full, color="k", lw=0.8, ls=":", label="full cache")
    plt.axhline(2 * full, color="k", lw=0.8, ls="--", label="2x full cache (target)")
    plt.yscale("log")
    plt.xlabel("training tokens (transfer, then finetune)")
    plt.ylabel(f"perplexity (first {data['curves']['curve_tokens']:,} held-out tokens)")
    plt.title("Against training tokens", fontsize=9)
    plt.legend(fontsize=6)
