"""Quality against length for the linear state: python -m t2r.length  ->  results/t2r_length.{json,log,png}

Six families of maps, each trained by LoLCATs' attention transfer on the frozen default model (maps
only, Hedgehog's; the teacher read from train.Teacher's cache), each row measured on the first 1,024, 4,096 and
16,384 tokens of the test text (TEST: As You Like It, never a training book; the settings below were chosen
on Alice, the dev text, in earlier runs):
- hybrids: 64 exact rows per layer, side by side: window 64 (the hybrid of `demo.py t2r`), sinks 4 +
  window 60, and that with a learned decay per KV head (t2r/linear.py), two sets per starting horizon
  (`--horizons`: where a horizon starts is most of where it ends): φ after RoPE, and φ before it
  (rotated=False: the linear part is one function at every position, so what it learned on 1,024-token
  chunks it applies unchanged at 16,384); beside Window+4 and TOVA at 63 rows (64 attended) and the
  full cache;
- plain: linear only (no exact row), undecayed and decayed with φ after and before RoPE;
- lora: the best hybrid (sinks, decay, φ before RoPE) alone, then finetuned with LoRA and its maps
  (LoLCATs' stage 2), read after each stage;
- tails: a tail for TOVA (t2r/tail.py: the rows TOVA drops folded into a decayed linear state, φ before
  RoPE), trained under TOVA's own drops, one chunk at each of `--sizes` in turn, then given one gain per
  size (`calibrate`, on training text the transfer did not read) and read at every size beside TOVA alone;
- sinks: 4 exact sinks, no window, a decay per layer and KV head started at the teacher's own attention
  distance (`attention_profile`, on training chunks), φ before RoPE; then LoRA, beside the sinks alone
  given LoRA on their own (the control);
- control: the lora family's hybrid with its maps zeroed (its 64 exact rows alone), then LoRA on its own
  for as many tokens as the lora family's stage read: what LoRA gives without a linear part.
Each row with a linear part is measured beside its zeroed twin (the exact rows alone). `--sets F` runs
one family into results/t2r_length_F.*; its rows are kept in results/t2r_rows/, so the default run,
which writes every family into results/t2r_length.*, reads back what a family's own run measured.
"""
import argparse
import collections.abc
import copy
import itertools
import json
import math
import pathlib
import statistics
import sys
import time

from engine import threads  # noqa: F401  (first of all: OpenMP's wait policy is set before torch loads it)

import numpy as np
import torch

import load_weights
import msrnn
from data import corpus
from engine import guards
from lab import experiments, harness, specs
from t2r import linear, tail, train

HYBRIDS = {"window 64": dict(window=64), "sinks 4 + window 60": dict(window=60, sinks=4)}


PLAIN = {"plain T2R": {}}  # printed "linear only" (recipe): the name its published rows were measured under
SINKS = 4  # the sinks family's exact rows: token 0 alone takes about 28% of SmolLM2's attention (attention_profile)
PROFILED = "4 sinks, no window, decay from the teacher's profile, φ before RoPE"  # the sinks family's set


def map_sets(which: str, starts) -> dict:
    """The sets to train, name -> FeatureMaps' keywords: HYBRIDS (or PLAIN, no exact row), then per starting
    horizon the last of them decayed, with φ after RoPE and with φ before it."""
    sets = dict(HYBRIDS if which == "hybrids" else PLAIN)
    name, exact = list(sets.items())[-1]
    for h in starts:
        decayed = exact | dict(decay=True, horizon=h)
        sets |= {f"{name}, decay from {h:g}": decayed, f"{name}, decay from {h:g}, φ before RoPE": decayed | dict(rotated=False)}
    return sets


def tail_sets(cfg, r: int, starts) -> dict:
    """The tails to train, name -> FeatureMaps: Hedgehog's r features, decayed from each starting horizon,
    φ before RoPE, the query gain started low (train.TAIL_GAIN: thousands of folded rows would outweigh
    the held ones)."""
    sets = {}
    for h in starts:
        sets[f"+ tail hedgehog {r}, decay from {h:g}, φ before RoPE"] = m = \
            linear.FeatureMaps(cfg, r, "hedgehog", decay=True, horizon=h, rotated=False)
        with torch.no_grad():
            m.gq.fill_(train.TAIL_GAIN)
    return sets


GAINS = (-1.0, 0.0)  # a tail's query-gain offsets (log scale) tried at each size, beside no tail


def gained(maps, offset):
    """The maps with every query gain times exp(offset); offset None: no tail (the maps zeroed)."""
    if offset is None:
        return train.zeroed(maps)
    m = copy.deepcopy(maps)
    with torch.no_grad():
        m.gq.add_(offset)
    return m


def calibrate(model, maps, text, sizes, log) -> dict:
    """One gain per size: the offset of GAINS, or None (no tail), whose tail gives TOVA at that size the
    lowest next-token loss on `text` (B, T), training text the transfer did not read. A tail trained at
    every size may weigh its folded rows right at one and too much at another; where none helps, the
    size keeps TOVA alone. Returns {size: {"offset": chosen, "nll": {offset: mean loss}}}."""
    tova, got = specs.named("tova"), {}
    with torch.no_grad():
        for size in sizes:
            nll = {g: experiments.next_token_nll(tail.forward(model, gained(maps, g), text, tova.fn, size), text).mean().item()
                   for g in (None, *GAINS)}
            got[size] = {"offset": min(nll, key=nll.get), "nll": {str(g): round(x, 5) for g, x in nll.items()}}
            log(f"   TOVA {size}: next-token loss " + ", ".join(f"{x:.4f} ({'no tail' if g is None else f'gain {g:+g}'})"
                                                          for g, x in nll.items()) + f" -> {got[size]['offset']}")
    return got


def by_length(nll, lengths) -> dict:
    """Perplexity of the first n tokens for each n, from one pass over the longest (a causal model's
    loss on the first n tokens does not read the tokens after them)."""
    if isinstance(lengths, (str, bytes, bytearray, memoryview, collections.abc.Mapping, torch.Tensor, np.ndarray)) \
            and not (isinstance(lengths, (torch.Tensor, np.ndarray)) and lengths.ndim == 1) \
            or not isinstance(lengths, collections.abc.Iterable):
        raise ValueError(f"lengths: a list of whole numbers of tokens, got {type(lengths).__name__}")
    lengths = list(itertools.islice(lengths, 10_001))  # a generator, read once; an endless one stops here
    if len(lengths) > 10_000:
        raise ValueError("lengths: more than 10,000 of them (an endless iterator?)")
    if not (isinstance(nll, torch.Tensor) and nll.layout == torch.strided and not nll.is_nested and nll.dim() == 1
            and nll.dtype in (torch.float16, torch.bfloat16, torch.float32, torch.float64) and not nll.is_meta):
        raise ValueError(f"by_length reads one text's losses, a 1-D float tensor; got {getattr(nll, 'shape', type(nll).__name__)}")
    if not (nll.isfinite().all() and (nll >= 0).all()):  # a loss is -log p: finite, never below 0
        raise ValueError("by_length reads losses, finite and at least 0; these hold NaN, inf or a negative")
    try:
        lengths = [_whole(n) for n in lengths]  # numpy's and 0-d tensors' whole numbers too
    except (TypeError, ValueError, RuntimeError):  # RuntimeError: a tensor on the meta device holds no number
        raise ValueError(f"lengths {', '.join(map(guards.shown, lengths))}: whole numbers of tokens") from None
    if any(not 2 <= n <= len(nll) + 1 for n in lengths):  # n tokens make n - 1 predictions
        raise ValueError(f"lengths {list(lengths)}: each must be from 2 to the text's {len(nll) + 1} tokens")
    mean = {n: nll[:n - 1].mean().item() for n in lengths}
    if any(m > LOG_MAX for m in mean.values()):  # exp past float64
        raise ValueError(f"by_length: a mean loss of {max(mean.values()):.1f} nats is a perplexity past float64")
    return {n: math.exp(m) for n, m in mean.items()}


def perplexities(model, maps, text, lengths) -> dict:
    """The model with `maps` swapped in, read over `text` once: length -> perplexity (by_length)."""
    return by_length(experiments.next_token_nll(linear.forward(model, maps, text), text)[0], lengths)


def at_lengths(method, size, state_bytes, ppl: dict, log, zeroed: dict | None = None) -> list:
    """One row per length of `ppl` (length -> perplexity), beside its zeroed twin's where there is one."""
    log(f"   {method}: " + ", ".join(f"{p:.2f}" for p in ppl.values()) + (" (zeroed " + ", ".join(
        f"{p:.2f}" for p in zeroed.values()) + ")" if zeroed else "") + f" at {', '.join(map(str, ppl))} tokens")
    return [dict(method=method, size=size, state_bytes=state_bytes, tokens=n, ppl=p) |
            ({} if zeroed is None else {"zeroed_ppl": zeroed[n]}) for n, p in ppl.items()]


def linear_rows(model, text, lengths, maps: dict, log, policies=False) -> list:
    """Each set of maps at every length, a hybrid beside its zeroed twin; with `policies`, Window+4, TOVA at
    63 rows and the full cache. Every length from one pass over the longest (by_length)."""
    rows, zeroed = [], {}  # (window, sinks) -> the exact rows alone: one twin for every set that holds those rows
    with torch.no_grad():
        for name, m in maps.items():
            exact = m.window + m.sinks  # linear only has no twin: zeroed, it attends to nothing
            if exact and (m.window, m.sinks) not in zeroed:
                zeroed[m.window, m.sinks] = perplexities(model, train.zeroed(m), text, lengths)
            rows += at_lengths(f"{name} + linear" if exact else name, exact or None, linear.state_bytes(model, m),
                               perplexities(model, m, text, lengths), log, zeroed.get((m.window, m.sinks)))
        for spec in ("sink", "tova", "full") if policies else ():
            named = specs.named(spec)
            size = None if named is specs.FULL else 63
            state = None if size is None else msrnn.state_bytes(model, size)
            rows += at_lengths(named.label + (f" {size}" if size else ""), size, state,
                               by_length(experiments.nll(model, text, named, size)[0], lengths), log)
    return rows


def tail_rows(model, text, lengths, maps: dict, log, gains, sizes) -> list:
    """TOVA at each size alone and with each tail at its gain for that size (gains[name][size]["offset"],
    `calibrate`): its zeroed twin is TOVA alone (a tail of no features is the policy alone, bit for bit,
    tests/test_tail.py), so where no tail was chosen the row is TOVA's. Every length from one pass over
    the longest (by_length)."""
    tova, rows = specs.named("tova"), []
    with torch.no_grad():
        for size in sizes:
            alone = by_length(experiments.nll(model, text, tova, size)[0], lengths)
            rows += at_lengths(f"TOVA {size}", size, msrnn.state_bytes(model, size), alone, log)
            for name, m in maps.items():
                offset = gains[name][size]["offset"]
                got = alone if offset is None else by_length(experiments.next_token_nll(
                    tail.forward(model, gained(m, offset), text, tova.fn, size), text)[0], lengths)
                rows += at_lengths(f"TOVA {size} {name}, gain per size", size, tail.state_bytes(model, m, size), got, log, alone)
    return rows


def attention_profile(teacher, n: int, sinks: int = SINKS) -> dict:
    """Where the frozen model's attention goes, per layer and KV head (its G query heads together), on the
    teacher's first n chunks (train.Teacher: a cached one keeps them for the transfer), over the queries
    of each chunk's second half, which can all look T/2 tokens back: the share of the mass on the first
    `sinks` keys, and the mean distance (query - key, tokens) of the rest. That distance starts the sinks
    family's decay: a state whose rows fade as exp(-d/h) weighs them at a mean distance of about h, so a
    local layer starts short and a layer whose mass is far back starts long.
    Returns {"sink_share", "distance"}, each (n_layers, Hkv) as lists."""
    if not isinstance(teacher, train.Teacher):
        raise ValueError(f"the attention profile reads a train.Teacher of the training chunks, got {type(teacher).__name__}")
    if teacher.model.config.sliding_window:  # it reads full causal attention: a window's would be measured past it
        raise ValueError("the attention profile reads full causal attention; this model has a sliding window "
                         f"({teacher.model.config.sliding_window})")
    L, H = teacher.model.config.n_layers, teacher.model.config.n_kv_heads
    if not (guards.integer(n) and 1 <= n <= len(teacher.chunks) and guards.integer(sinks) and sinks >= 0):
        raise ValueError(f"the attention profile reads the first n of the teacher's {len(teacher.chunks)} chunks (n from 1) "
                         f"and sets `sinks` (a whole number >= 0) apart; got n={n!r}, sinks={sinks!r}")
    if teacher.chunks.shape[1] // 2 < sinks:  # the first query read would see the sinks alone: a distance of 0/0
        raise ValueError(f"the attention profile reads queries from each chunk's middle on, which must see a key past the "
                         f"{sinks} sinks: chunks of at least {2 * sinks} tokens (--train-length), got {teacher.chunks.shape[1]}")
    share, dist = torch.zeros(L, H, dtype=torch.float64), torch.zeros(L, H, dtype=torch.float64)

    def learn(i, q, k, v, o):                                        # q (1, Hkv, G, T, hd); k (1, Hkv, 1, T, hd)
        T = q.shape[3]
        d = torch.arange(T // 2, T)[:, None] - torch.arange(T)      # (T/2, T) query position - key position
        s = (q[:, :, :, T // 2:] @ k.transpose(-1, -2)).double() / math.sqrt(q.shape[-1])  # (1, Hkv, G, T/2, T)
        a = s.masked_fill(d < 0, float("-inf")).softmax(-1)
        rest = a[..., sinks:]
        share[i] += a[..., :sinks].sum(-1).mean((0, 2, 3)) / n
        dist[i] += ((rest * d[:, sinks:]).sum(-1) / rest.sum(-1)).mean((0, 2, 3)) / n
    for c in range(n):
        teacher.feed(c, learn)
    return {"sink_share": share.tolist(), "distance": dist.tolist()}


# Chosen on one text, reported on another: the best hybrid was picked from these rows measured on alice29 (the
# dev text; `git show 01e9306:results/t2r_length.json`), so the rows are now measured on asyoulik (39,915
# tokens), which picked nothing, with alice29 after it.
TEST = ("asyoulik", "alice29")


def held_out(tok, length: int) -> torch.Tensor:
    """The first `length` tokens of the test books (TEST), one after the other, (1, length)."""
    ids = [i for b in TEST for i in tok.encode(corpus.book(b)).ids]
    if len(ids) < length:
        raise ValueError(f"the evaluation books hold {len(ids):,} tokens, fewer than {length:,}")
    return torch.tensor(ids[:length])[None]


def horizons(maps) -> list:
    """The learned decay's horizon 1 / (1 - γ) in tokens, per layer and KV head."""
    if not getattr(maps, "decay", False):
        raise ValueError("horizons are a decay's: these maps have none (decay=False)")
    return [[round(1 / (1 - g), 1) if g < 1 else math.inf for g in maps.gamma(i).tolist()] for i in maps.layers]


FAMILIES = ("hybrids", "plain", "lora", "tails", "sinks", "control")
# each family's transfer budget (--minutes: all); "control" trains no map
MINUTES = {"hybrids": 9.0, "plain": 9.0, "lora": 6.0, "tails": 12.0, "sinks": 9.0, "control": 0.0}
ALONE = ("sinks", "control")  # the families the pages cite from their own run's file (results/t2r_length_<family>.*)
FINETUNE_MINUTES = {"lora": 8.0, "sinks": 20.0}  # the LoRA stage's budget (--finetune-minutes: both); sinks: its control too


def family(which: str, model, tok, text, args, log, done=None) -> dict:
    """One family's maps trained (or read back from their checkpoint) and its rows at every length (or
    read back from results/t2r_rows/, keyed by the checkpoint, the text and the code that measures), so
    that the families can run as processes of their own and `--sets all` collects them. done: the
    families this run measured before (the control matches the lora family's LoRA tokens).
    Returns {"rows", "training", "horizons"} and, by family, "gains" or "finetune"."""
    minutes, lengths = args.minutes or MINUTES[which], sorted(args.lengths)
    chunks = train.training_text(tok, args.train_length)
    if which == "tails":
        maps, tova = tail_sets(model.config, args.tail_r, args.horizons), specs.named("tova")
        students = [tail.student(model, m, tova.fn, args.sizes) for m in maps.values()]
        described = [sorted(maps), train.TAIL_GAIN, tova.key, args.sizes, args.tail_r, *harness.sources(pathlib.Path(tail.__file__))]
    elif which in ("sinks", "control"):
        profile = attention_profile(train.Teacher.cached(model, chunks), 2) if which == "sinks" else None
        if profile:
            log("the teacher's attention per layer (its KV heads' mean): share on the first 4 tokens " +
                " ".join(f"{statistics.mean(x):.2f}" for x in profile["sink_share"]) + "; mean distance of the rest " +
                " ".join(f"{statistics.mean(x):.0f}" for x in profile["distance"]))
        start = [[max(d, 1.5) for d in layer] for layer in profile["distance"]] if profile else None  # a local head's
        # mean distance can be under a token, and a decay starts above 1 (γ = exp(-1/h) > 0): the published run's were 12-481
        sets = {PROFILED: dict(sinks=SINKS, decay=True, horizon=start, rotated=False)} if profile else \
            dict([list(map_sets("hybrids", args.horizons).items())[-1]])  # control: the lora family's hybrid
        maps = {name: linear.FeatureMaps(model.config, args.r, "hedgehog", **kw) for name, kw in sets.items()}
        budget = control_budget(chunks, args, (done or {}).get("lora")) if which == "control" else None
        spent = budget and (budget.get("minutes") or sum(c.numel() for c in budget["chunks"]))  # the control's, keyed
        students, described = None, [sorted(sets.items())] + ([spent] if budget else [])
    else:
        sets = map_sets("plain" if which == "plain" else "hybrids", args.horizons)
        sets = dict([list(sets.items())[-1]]) if which == "lora" else sets  # the best hybrid alone
        maps = {name: linear.FeatureMaps(model.config, args.r, "hedgehog", **kw) for name, kw in sets.items()}
        students, described = None, [sorted(sets.items())]  # each set's settings, not only its name
    path, measured = cache_files(which, model, chunks, text, args, minutes, described)
    ft_minutes = args.finetune_minutes or FINETUNE_MINUTES.get(which, 0.0)
    lora = path.with_name(f"{path.stem}-lora{ft_minutes:g}.safetensors")
    got = harness.read_cached(measured, {"rows": [{"ppl": (float, 1), "zeroed_ppl?": (float, 1), "tokens": (int, 2), "method": str}],
                                         "training": dict, "horizons": dict, "methods": [str]})  # a damaged row: measured again
    if got is not None and sorted((r["method"], r["tokens"]) for r in got["rows"]) != \
            sorted((m, n) for m in got["methods"] for n in lengths):  # a length or a method missing, or one too many
        log(f"{which}: results/t2r_rows/{measured.name} holds other rows than its methods at {sorted(lengths)}; measuring again")
        got = None
    if got is not None:
        log(f"{which}: {len(got['rows'])} rows read back from results/t2r_rows/{measured.name}")
        return got
    if which == "control":
        return kept(controlled(model, maps, chunks, text, lengths, budget, log, lora), which, measured)
    log(f"{which}: attention transfer of {', '.join(maps)} ({minutes} min, {len(chunks)} chunks of {args.train_length}) -> {path.name}")
    run = train.transfer(model, list(maps.values()), chunks, student=students, epochs=1, minutes=minutes,
                         checkpoint=path, teacher=train.Teacher.cached(model, chunks), log=None)
    log(f"   {run['tokens']:,} tokens in {run['seconds']:.0f} s ({run['tokens_per_s']:.0f} tokens/s)")
    got = {"training": {k: run[k] for k in ("tokens", "seconds", "tokens_per_s")},
           "horizons": {n: horizons(m) for n, m in maps.items() if m.decay}}
    if which == "tails":  # the two chunks the transfer would have read next, one text: training text it did not read
        unseen = torch.cat([chunks[train._order(len(chunks), run["step"] + j, 0)] for j in range(2)])[None]
        fresh = run["step"] + 2 <= len(chunks)  # else the transfer went through every chunk
        log(f"one gain per size, on {unseen.numel():,} tokens of training text the transfer {'did not read' if fresh else 'read'}")
        got["gains"] = {name: calibrate(model, m, unseen, args.sizes, log) for name, m in maps.items()}
        got["rows"] = tail_rows(model, text, lengths, maps, log, got["gains"], args.sizes)
    else:
        got["rows"] = linear_rows(model, text, lengths, maps, log, policies=which == "hybrids")
    if which == "sinks":
        got["profile"] = profile
    if which in ("lora", "sinks"):  # stage 2: LoRA with the linear attention in place (LoLCATs), the maps learning too
        (name, m), = maps.items()
        tuned_maps = copy.deepcopy(m)
        log(f"LoRA finetune of {name} ({ft_minutes:g} min) -> {lora.name}")
        tuned, ft = train.finetune(model, tuned_maps, chunks, mode="lora", minutes=ft_minutes, checkpoint=lora, log=None)
        log(f"   {ft['tokens']:,} tokens in {ft['seconds']:.0f} s ({ft['tokens_per_s']:.0f} tokens/s)")
        got["finetune"] = {k: ft[k] for k in ("tokens", "seconds", "tokens_per_s")}
        got["rows"] += linear_rows(tuned, text, lengths, {f"{name}, then LoRA": tuned_maps}, log)
    if which == "sinks":  # the control: the sinks alone (the maps zeroed), finetuned with LoRA on their own
        got["control"], rows = lora_alone(model, m, chunks, text, lengths, lora.with_name(f"{lora.stem}-control.safetensors"),
                                          f"the {SINKS} sinks alone", dict(minutes=ft_minutes), log)
        got["rows"] += rows
    return kept(got, which, measured)


def kept(got: dict, which: str, measured) -> dict:
    """A family's measurements, each row labelled with the family, kept in `measured` for the next run."""
    for row in got["rows"]:
        row["family"] = which
    got["methods"] = sorted({r["method"] for r in got["rows"]})  # what a read back must hold, every one at every length
    harness.write_cached(measured, got)
    return got


def lora_alone(model, maps, chunks, text, lengths, checkpoint, name, budget: dict, log):
    """A credited gain's control: the exact rows alone (`maps` zeroed: no linear part) finetuned with LoRA on
    their own, for `budget` (minutes=, or the chunks to read once), so that "LoRA helps the linear part" is
    a difference of differences. Returns (the finetune's cost, its row at every length)."""
    zero = train.zeroed(maps)
    size = f"{budget['minutes']:g} min" if "minutes" in budget else f"{sum(c.numel() for c in budget['chunks']):,} tokens"
    log(f"LoRA finetune of {name}, the control ({size}) -> {checkpoint.name}")
    tuned, ft = train.finetune(model, zero, budget.get("chunks", chunks), mode="lora", minutes=budget.get("minutes"),
                               checkpoint=checkpoint, log=None)
    log(f"   {ft['tokens']:,} tokens in {ft['seconds']:.0f} s ({ft['tokens_per_s']:.0f} tokens/s)")
    with torch.no_grad():
        after = perplexities(tuned, zero, text, lengths)
    return ({k: ft[k] for k in ("tokens", "seconds", "tokens_per_s")},
            at_lengths(f"{name}, then LoRA on their own (control)", maps.sinks + maps.window,
                       msrnn.state_bytes(model, maps.sinks + maps.window), after, log))


def control_budget(chunks, args, lora=None) -> dict:
    """The control family's LoRA budget: the chunks of as many tokens as the lora family's LoRA stage read,
    in this run (`lora`, its measurements), else --finetune-minutes where given, else the lora family's own run
    (results/t2r_length_lora.json, as its run wrote it), else the lora family's minutes."""
    if lora is None and args.finetune_minutes:  # asked for, and no LoRA stage in this run to match: used
        return {"minutes": args.finetune_minutes}
    path = harness.RESULTS / "t2r_length_lora.json"
    if lora is None and not path.exists():  # no lora run here yet
        return {"minutes": FINETUNE_MINUTES["lora"]}
    try:
        if lora is None:  # the lora family's own run: as it wrote it, on this run's chunks and r
            run = harness.sealed(json.loads(path.read_text()), "t2r_length_lora")
            if (run.get("train_length"), run.get("r")) != (chunks.shape[1], getattr(args, "r", run.get("r"))):
                raise ValueError(f"it trained r={run.get('r')} on {run.get('train_length')}-token chunks, this run r="
                                 f"{getattr(args, 'r', '?')} on {chunks.shape[1]}: not a budget to match")
            lora = run["families"]["lora"]
        tokens = lora["finetune"]["tokens"]
    except (OSError, ValueError, LookupError, TypeError, RecursionError) as e:  # typed by hand, another run's, damaged
        raise ValueError(f"{path}: {type(e).__name__}: {e}; run --sets lora again, or give --finetune-minutes") from None
    if not (type(tokens) is int and chunks.shape[1] <= tokens <= chunks.numel()):  # a count no LoRA stage here read
        raise ValueError(f"results/t2r_length_lora.json says the lora family's LoRA read {tokens!r} tokens: not a run of "
                         f"{chunks.shape[1]}-token chunks (1 to {len(chunks)} of them); run --sets lora again, or give --finetune-minutes")
    return {"chunks": chunks[:tokens // chunks.shape[1]]}


def controlled(model, maps, chunks, text, lengths, budget, log, checkpoint) -> dict:
    """The "control" family: the lora family's hybrid with its maps zeroed (its 64 exact rows alone), before
    and after LoRA on its own, for `budget` (control_budget)."""
    (name, m), = maps.items()
    with torch.no_grad():
        before = perplexities(model, train.zeroed(m), text, lengths)
    rows = at_lengths(f"{name}, its 64 exact rows alone", m.sinks + m.window, msrnn.state_bytes(model, m.sinks + m.window), before, log)
    cost, after = lora_alone(model, m, chunks, text, lengths, checkpoint, f"{name}, its 64 exact rows alone", budget, log)
    return {"rows": rows + after, "training": {"tokens": 0, "seconds": 0.0, "tokens_per_s": 0.0}, "horizons": {}, "finetune": cost}


def cache_files(which, model, chunks, text, args, minutes, described):
    """(the family's maps, its rows): the maps keyed by the training code, the model (config and weights),
    the chunks and the sets' settings (`described`); the rows by those maps, the text and what measures
    them (`measuring`)."""
    key = train.code_key(harness.fingerprint(*experiments.identity(model)), chunks, args.r, minutes, *described)
    path = harness.RESULTS / f"t2r_length_{key}.safetensors"
    measured = harness.RESULTS / "t2r_rows" / ("length-" + harness.fingerprint(
        which, path.name, text, sorted(args.lengths), args.sizes if which == "tails" else None,  # the sizes only a tail reads
        (args.finetune_minutes or FINETUNE_MINUTES.get(which)) if which in ("lora", "sinks") else None,
        *measuring(), *harness.sources(pathlib.Path(tail.__file__), pathlib.Path(experiments.__file__))) + ".json")
    return path, measured


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sets", choices=("all",) + FAMILIES, default="all",
                    help="every family into results/t2r_length.* (default), or one into results/t2r_length_<sets>.*: "
                         "hybrids of 64 exact rows beside Window+4, TOVA and the full cache; linear only; the best hybrid, "
                         "then LoRA-finetuned; TOVA's tails beside TOVA alone")
    ap.add_argument("--minutes", type=harness.positive, help="attention transfer budget of every family "
                    "(default: " + ", ".join(f"{k} {v:g}" for k, v in MINUTES.items()) + ")")
    ap.add_argument("--r", type=harness.at_least(2), default=64, help="Hedgehog features (default 64)")
    ap.add_argument("--lengths", type=harness.at_least(2), nargs="+", default=[1024, 4096, 16384])
    ap.add_argument("--train-length", type=harness.at_least(2), default=1024, help="tokens per training chunk")
    ap.add_argument("--horizons", type=harness.at_least(2), nargs="+", default=[32],
                    help="the decayed sets' starting horizons in tokens, two sets each (default 32)")
    ap.add_argument("--finetune-minutes", type=harness.positive, help="the LoRA stage of lora and of sinks, and the "
                    "sinks' control (default: " + ", ".join(f"{k} {v:g}" for k, v in FINETUNE_MINUTES.items()) + ")")
    ap.add_argument("--sizes", type=harness.at_least(1), nargs="+", default=[32, 64, 128, 256],
                    help="tails: TOVA's sizes, trained in turn and read (default 32 64 128 256)")
    ap.add_argument("--tail-r", type=harness.at_least(2), default=16, help="tails: Hedgehog features (default 16)")
    ap.add_argument("--name", help="results/<name>.* (default t2r_length, or t2r_length_<sets>, for the published "
                    "settings; with others, results/runs/ and a name that says what differs)")
    ap.add_argument("--debug", action="store_true", help=harness.DEBUG_HELP)
    args = harness.parse(ap, argv)
    for flag, r in (("--r", args.r), ("--tail-r", args.tail_r)):
        if r % 2 or r < 4:  # every family is Hedgehog's: r/2 features of Wx, r/2 of -Wx, each a softmax
            ap.error(f"{flag}: Hedgehog's features need an even r of at least 4, got {r}")
    held = {"hybrids": 64, "lora": 64, "control": 64, "tails": max(args.sizes) + 1, "sinks": SINKS, "plain": 0}  # TOVA s: s + 1
    most = max(held[f] for f in (FAMILIES if args.sets == "all" else [args.sets]))
    # the first position that reads a dropped or folded row is `most`, and a perplexity scores positions up to length - 2
    if len(set(args.lengths)) < len(args.lengths) or min(args.lengths) <= most + 1:  # before the training, not after
        ap.error(f"--lengths must be distinct and each exceed {most + 1}: these families hold {most} rows exact, and a "
                 f"perplexity scores no later position at fewer tokens (every row would be the full cache's), got {args.lengths}")
    if twice := harness.repeated(args):  # each trained, calibrated and measured twice, every row stored twice
        ap.error(twice)
    # rows a chunk must pass: a transfer's loss reads every position, and TOVA s first drops a row position s + 1 reads;
    # the sinks' profile reads queries from the chunk's middle on, each of which must see a key past the sinks
    trains = {"hybrids": 64, "lora": 64, "control": 64, "tails": max(args.sizes) + 1, "sinks": 2 * SINKS - 1, "plain": 1}
    run = FAMILIES if args.sets == "all" else [args.sets]
    if any(trains.get(f, 0) >= args.train_length for f in run):
        ap.error(f"--train-length {args.train_length}: chunks no longer than the {max(trains.get(f, 0) for f in run)} rows these families "
                 "keep exact fold nothing, so their linear parts (the tails: TOVA drops nothing) would learn from no row")
    uses = {"horizons": set(FAMILIES) - {"sinks"}, "sizes": {"tails"}, "tail_r": {"tails"}, "r": set(FAMILIES) - {"tails"},
            "minutes": set(FAMILIES) - {"control"}, "finetune_minutes": {"lora", "sinks", "control"}}
    for option, _ in harness.changed_options(args, ap):  # a setting no family of this run reads: said, not ignored
        if option in uses and args.sets != "all" and args.sets not in uses[option]:
            ap.error(f"--{option.replace('_', '-')} does not apply to --sets {args.sets} (it sets "
                     f"{', '.join(sorted(uses[option]))})")
    # other settings than the published ones never overwrite the files the pages show, by default or by --name
    published = "t2r_length" if args.sets == "all" else f"t2r_length_{args.sets}"
    args.name = harness.own_name(args.name, harness.run_name(published, harness.changed_options(args, ap, ("sets", "name", "debug"))),
                                 ["t2r_length", *(f"t2r_length_{f}" for f in FAMILIES)])
    harness.check_writable(args.name)  # before an hour of training, not after
    speed_rows = speed()  # read before the work too: a damaged file is named now, not after the hour
    t0, version = time.time(), harness.code_version()
    with harness.transcript() as printed:
        log = lambda s: print(s, flush=True)
        model, tok = load_weights.load_model(), load_weights.load_tokenizer()
        text = held_out(tok, max(args.lengths))
        data = {"rows": [], "families": {}}
        for which in FAMILIES if args.sets == "all" else [args.sets]:
            got = family(which, model, tok, text, args, log, data["families"])
            data["rows"] += named_apart(data["rows"], got.pop("rows"), which)
            data["families"][which] = got
        data |= {"r": args.r, "tail_r": args.tail_r, "train_length": args.train_length, "speed": speed_rows}
        print("\n" + table(data) + "\n\n" + costs(data))
    path = harness.save(args.name, data, {"code_version": version, "seconds": round(time.time() - t0, 1)}, printed.getvalue(), draw)
    print(f"t2r.length: {time.time() - t0:.0f} s; results in {path.with_suffix('.*')}")


def named_apart(rows: list, new: list, which: str) -> list:
    """Family `which`'s rows to add to the earlier families' `rows`, a row named as an earlier one (the lora
    family's first stage is the hybrids' best set, trained again on its own budget) with its run named after it."""
    seen = {r["method"] for r in rows}
    return [r | {"method": f"{r['method']} ({which} run)"} if r["method"] in seen else r for r in new]


def measuring() -> list:
    """What measures a family's rows, in its cache key beside the modules they call (a change measures them
    again): this file's code and the constants it reads, the gains tried and the sets' settings."""
    return [pathlib.Path(__file__), repr((GAINS, HYBRIDS, PLAIN, train.TAIL_GAIN))]  # this whole file: a list of its functions missed family()


def speed() -> dict | None:
    """t2r.speed's tokens/s by length (results/t2r_speed.json), with its command, for the plot beside the quality."""
    file = harness.RESULTS / "t2r_speed.json"
    if not file.exists():
        return None
    try:
        got = harness.sealed(json.loads(file.read_text()), "t2r_speed")
        rows = got["results"]
        if not all(isinstance(r, dict) and isinstance(r.get("label"), str) and type(r.get("tokens_read")) is int
                   and type(r.get("tokens_per_s")) in (int, float) for r in rows):
            raise TypeError("a row without a label, an integer tokens_read and a number tokens_per_s")
        return {"command": got["about"]["command"], "rows": rows}
    except (OSError, ValueError, LookupError, TypeError, RecursionError) as e:
        raise ValueError(f"{file} is not t2r.speed's results ({type(e).__name__}: {e}): run python -m t2r.speed, "
                         "or move the file") from None


def recipe(row, r: int, tail_r: int) -> str:
    """A row's name as its recipe: its exact rows, then its map and how that was trained (every map here is
    Hedgehog's, r counting both signs, trained by LoLCATs' attention transfer; none is Kasai's T2R, which only
    t2r.mini runs). The rows keep the names they were measured and cached under; this is how they are printed."""
    m = row["method"]
    how = "LoLCATs' transfer" + (", then LoRA" if ", then LoRA + linear" in m else "")
    m = m.replace(", then LoRA + linear", " + linear")
    if m.startswith("plain T2R"):
        return m.replace("plain T2R", f"linear only (Hedgehog r={r}, {how})", 1)
    if " + linear" in m:
        return m.replace(" + linear", f" + linear (Hedgehog r={r}, {how})", 1)
    return m.replace(f" + tail hedgehog {tail_r}", f" + tail (Hedgehog r={tail_r}, {how} under TOVA's drops)", 1)


def table(data, family: str | None = None) -> str:
    """The rows of one family (default: every row), with the full cache beside them, at every length."""
    full = [r for r in data["rows"] if r["method"] == "full cache"]
    rows = [r for r in data["rows"] if family in (None, r.get("family")) and r not in full]
    if not rows:  # a table of the full cache alone, under a family's heading, would say the family was measured
        raise ValueError(f"holds no rows of the family {family!r}" if family else "holds no rows")
    rows += full
    lengths = sorted({r["tokens"] for r in rows})
    methods = list(dict.fromkeys(r["method"] for r in rows))
    cell = harness.cells(rows, lambda r: (r["method"], r["tokens"]), "(method, tokens)")
    for m in methods:  # every method at every length, its zeroed twin at all of them or none
        have = [(m, n) in cell for n in lengths]
        twin = {"zeroed_ppl" in cell[m, n] for n in lengths if (m, n) in cell}
        if not all(have) or len(twin) > 1:
            raise ValueError(f"{m!r} has rows at {[n for n, h in zip(lengths, have) if h]} of the lengths {lengths}"
                             + (", its zeroed twin at some only" if len(twin) > 1 else "") + ": a table shows every cell")
    if lengths[0] < 2:  # a prefix of one token holds no prediction
        raise ValueError(f"a row at {lengths[0]} token(s): a perplexity needs a prefix of at least 2")
    for key in ("r", "tail_r"):  # every map here is Hedgehog's: r/2 features of Wx and r/2 of -Wx
        if not (guards.integer(data[key]) and data[key] >= 4 and data[key] % 2 == 0):
            raise ValueError(f"{key} is {data[key]!r}: Hedgehog's features are an even number, at least 4")
    twins = " (zeroed)" if any("zeroed_ppl" in r for r in rows) else ""
    spans = list(zip(lengths, lengths[1:]))  # the segment each longer prefix adds
    head = ["method", *(f"{n:,} tokens{twins}" for n in lengths), *(f"tokens {a:,}–{b:,} alone" for a, b in spans)]
    lines = ["| " + " | ".join(head) + " |", "|---|" + "---|" * (len(head) - 1)]
    both = lambda r, key: f"{r[key]:.2f}" + (f" ({r['zeroed_' + key]:.2f})" if "zeroed_" + key in r else "")
    for m in methods:
        seg = [{"ppl": segment(cell[m, a]["ppl"], a, cell[m, b]["ppl"], b)} | (
            {"zeroed_ppl": segment(cell[m, a]["zeroed_ppl"], a, cell[m, b]["zeroed_ppl"], b)}
            if "zeroed_ppl" in cell[m, a] else {}) for a, b in spans]
        if not all(v >= 1 for x in seg for v in x.values()):  # each prefix plausible alone, the two inconsistent
            raise ValueError(f"{m!r}: a segment's perplexity comes out below 1 from its prefixes' ({[x['ppl'] for x in seg]})")
        cells = [recipe(cell[m, lengths[0]], data['r'], data['tail_r']), *(both(cell[m, n], "ppl") for n in lengths),
                 *(both(x, "ppl") for x in seg)]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _element(x, kinds: str):
    """A 0-d array's or tensor's one element, if numpy's kind letter for its dtype is in `kinds` (None if not), or x
    itself; their own classes only: a masked array's item() is its hidden value."""
    if type(x) not in (torch.Tensor, np.ndarray):
        return x
    kind = x.dtype.kind if type(x) is np.ndarray else "b" if x.dtype == torch.bool else "c" if x.dtype.is_complex \
        else "f" if x.dtype.is_floating_point else "i"
    return x.item() if x.ndim == 0 and kind in kinds else None


def _whole(n) -> int:
    """A count: Python's, numpy's or a 0-d integer tensor's whole number (not a bool, a text or a buffer)."""
    n = _element(n, "iu")
    if int in type(n).__mro__ and bool not in type(n).__mro__:
        return int.__index__(n)  # int's own: a subclass's __index__ could say another number
    if np.integer not in type(n).__mro__ or np.timedelta64 in type(n).__mro__:  # a time span is no count
        raise TypeError("a count is a whole number: not a bool, a text or an array of more than one")
    return guards.numpy_value(n)  # numpy's own reading: a subclass's __int__ could say another number


def _real(x) -> float:
    """A perplexity: Python's, numpy's or a 0-d real tensor's number (not a bool, complex, a text or a buffer)."""
    x = _element(x, "fiu")
    mro = type(x).__mro__
    if bool in mro or np.timedelta64 in mro:  # numpy counts a time span among its integers
        raise TypeError("a perplexity is a real number: not a bool or a time span")
    if float in mro or int in mro:
        return float.__float__(x) if float in mro else float(int.__index__(x))  # Python's own: a subclass's
        # __float__ could say another number
    if np.integer not in mro and np.floating not in mro:
        raise TypeError("a perplexity is a real number: not a bool, complex, a text or an array of more than one")
    return float(guards.numpy_value(x))  # numpy's own reading: a subclass's __float__ could say another


LOG_MAX = math.log(sys.float_info.max)  # 709.78: the largest log a float64 exp can take


def segment(ppl_a: float, a: int, ppl_b: float, b: int) -> float:
    """The perplexity of tokens a .. b-1 alone, from those of the prefixes of a and b tokens (each the
    mean loss of its n - 1 predictions, by_length): the long end shown apart from the start it follows."""
    try:  # numpy's numbers and 0-d tensors are numbers too; a bool or a text is not
        a, b, ppl_a, ppl_b = _whole(a), _whole(b), _real(ppl_a), _real(ppl_b)
    except (TypeError, ValueError, OverflowError, RuntimeError):
        ppl_a, a, ppl_b, b = map(guards.shown, (ppl_a, a, ppl_b, b))  # a numpy object's own repr kills the process
        raise ValueError(f"a segment is read from two perplexities and two whole numbers of tokens; got {ppl_a} at {a}, "
                         f"{ppl_b} at {b}") from None
    if not 1 <= a < b < 2**62:  # positions end at 2**62
        raise ValueError(f"a segment runs from a >= 1 to b > a tokens, whole numbers, got {a!r} to {b!r}")
    if not all(math.isfinite(p) and p >= 1 for p in (ppl_a, ppl_b)):  # a perplexity is a finite number of at least 1
        raise ValueError(f"a segment is read from two prefixes' perplexities, finite and at least 1; got {ppl_a!r}, {ppl_b!r}")
    log_a, log_b = math.log(ppl_a), math.log(ppl_b)
    log = log_b + (a - 1) / (b - a) * (log_b - log_a)  # ((b-1) log_b - (a-1) log_a) / (b-a), without two huge products
    if log > LOG_MAX:  # past float64
        raise ValueError(f"prefixes of perplexity {ppl_a} ({a} tokens) and {ppl_b} ({b}) give the tokens between them a "
                         "perplexity past float64: they are not one text's")
    got = math.exp(log)
    if got < 1 - 1e-9:  # each loss is >= 0: prefixes that give less are not one text's
        raise ValueError(f"prefixes of perplexity {ppl_a} ({a} tokens) and {ppl_b} ({b}) give the tokens between them "
                         f"{got:.3g}, below 1: they are not one text's")
    return got


def costs(data) -> str:
    """What each family's training cost, and the horizons its decayed sets learned (1 / (1 - γ), tokens)."""
    lines = ["| family | stage | tokens | seconds | tokens/s | learned horizons: min–max (median) |", "|---|---|---|---|---|---|"]
    for which, got in data["families"].items():
        spans = {n: sorted(x for layer in h for x in layer) for n, h in got["horizons"].items()}
        if not all(v and all(guards.number(x) and x >= 1 for x in v) for v in spans.values()):  # 1 / (1 - γ), γ in [0, 1)
            raise ValueError(f"{which}: a learned horizon is missing or below 1 token ({', '.join(spans)})")
        learned = "; ".join(f"{n}: {v[0]:.1f}–{v[-1]:.1f} ({statistics.median(v):.1f})" for n, v in spans.items())
        for stage, what in (("training", "attention transfer"), ("finetune", "LoRA finetune"), ("control", "LoRA finetune, control")):
            if got.get(stage, {}).get("tokens"):  # the control family trains no map
                c = got[stage]
                lines.append(f"| {which} | {what} | "
                             f"{c['tokens']:,} | {c['seconds']:.0f} | {c['tokens_per_s']:.0f} | {learned if stage == 'training' else ''} |")
    if len(lines) == 2:  # a table of its header: no family trained anything
        raise ValueError("no family's training cost: its families hold no stage that read tokens")
    return "\n".join(lines)


def draw(plt, data):
    """Perplexity against length for every row (left), and t2r.speed's tokens/s against length (right)."""
    plt.gcf().set_size_inches(12, 5)
    left = plt.subplot(1, 2, 1)
    style = {"hybrids": "o-", "plain": "s--", "lora": "D-", "tails": "^:", "sinks": "v-", "control": "x:"}
    for m in dict.fromkeys(r["method"] for r in data["rows"]):
        pts = sorted((r["tokens"], r["ppl"], r.get("family")) for r in data["rows"] if r["method"] == m)
        name = recipe(next(r for r in data["rows"] if r["method"] == m), data["r"], data["tail_r"])
        left.plot([p[0] for p in pts], [p[1] for p in pts], style.get(pts[0][2], "o-"), label=name, markersize=3)
    left.set(xscale="log", yscale="log", xlabel="tokens of held-out text read", ylabel="perplexity of the prefix",
             title="quality against length")  # perplexities from 18 to 1,600 on one plot
    left.set_xscale("log", base=2)
    left.legend(fontsize=5)
    if data.get("speed"):
        right = plt.subplot(1, 2, 2)
        for label in dict.fromkeys(r["label"] for r in data["speed"]["rows"]):
            pts = sorted((r["tokens_read"], r["tokens_per_s"]) for r in data["speed"]["rows"] if r["label"] == label)
            right.plot(*zip(*pts), "o-", label=label)
        right.set(xlabel="tokens read before the step", ylabel="tokens/s (one thread)", title="decoding speed (t2r.speed)")
        right.set_xscale("log", base=2)
        right.legend(fontsize=6)


if __name__ == "__main__":
    harness.command(main)
