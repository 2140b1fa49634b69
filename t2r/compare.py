"""The comparison `python demo.py t2r`: SmolLM2 with its attention swapped for each feature map of
t2r/linear.py, trained by t2r/train.py (LoLCATs' attention transfer, then LoRA or every weight), every
row beside TOVA, H2O and Window+4 at equal bytes of state, and TOVA with a T2R tail; each row named by
its recipe.
"""

import inspect
import math
import os
import pathlib
import re
import shlex
import time

import torch

import llama
import msrnn
from engine import guards
from lab import experiments, harness, specs
from t2r.linear import FeatureMaps, forward, state_bytes
from t2r.train import TAIL_GAIN, code_key, finetune, save, training_text, transfer, zeroed

# what the papers spent, for the command that reaches their budget on a GPU (PAPERS.md): LoLCATs ~40 M
# tokens in all for 7-8B models, about half in each stage
PAPERS = {"transfer_tokens": 20_000_000, "finetune_tokens": 20_000_000}


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
    rows as if there were no more than in 1,024, and at 4,096 they swamp the held ones: TOVA 32's read 39.75
    against TOVA alone's 33.88 in the run of `git show 8c339ed`),
    for `epochs` or `minutes` per stage, whichever ends first; transfer_tokens and finetune_tokens, where
    given, set the epochs instead (PAPERS: the papers' budgets, for a GPU). Training runs once: its artefacts are cached in results/ under
    a key of the settings and the code, and an interrupted run goes on from its last checkpoint."""
    log, t_start = log or (lambda msg: None), time.time()
    guards.check_flags(tails=tails)  # "no" is true to Python: the tails were trained and measured
    kinds = tuple(guards.listed(kinds, "kinds is a list of map kinds (one kind: ['relu'])"))
    sizes = tuple(guards.whole_numbers(sizes, "sizes"))
    tail_sizes = None if tail_sizes is None else tuple(guards.whole_numbers(tail_sizes, "tail sizes"))
    given = {k: v for k, v in locals().items() if k.startswith("tail_") and k != "tail_sizes"}
    unread = [k for k, v in given.items() if v != inspect.signature(experiment).parameters[k].default]
    if unread and not tails:  # ignored without a word, where tail_sizes was refused
        raise ValueError(f"{', '.join(unread)} set with tails=False: there is no tail to train or read")
    sinks = inspect.signature(specs.POLICIES["sink"]).parameters["sinks"].default
    if len(set(kinds)) < len(kinds) or not kinds and not window:  # a kind twice: two rows, the second finetune the first's
        raise ValueError(f"kinds {list(kinds)} and window {window}: name each map kind once, and at least one kind or a window")
    for what, x, low in (("length", length, 2), ("train_length", train_length, 2), ("eval_every", eval_every, 1),
                         ("tail_length", 2 if tail_length is None else tail_length, 2),
                         ("transfer_tokens", 1 if transfer_tokens is None else transfer_tokens, 1),
                         ("finetune_tokens", 1 if finetune_tokens is None else finetune_tokens, 1)):  # 0 was "not given"
        if not (guards.integer(x) and x >= low):  # True read as 1, 0 as "not given", -5 as 0 epochs
            raise ValueError(f"{what} is a whole number >= {low}, got {x!r}")
    if finetune_mode not in ("lora", "full") or not (guards.integer(eval_chunks) and eval_chunks >= 1):  # before training
        raise ValueError(f"finetune_mode is 'lora' or 'full' (got {finetune_mode!r}) and eval_chunks a whole number >= 1 "
                         f"(got {eval_chunks!r})")
    if tails:  # the tail's Hedgehog map checks its r (even, at least 4) before the training, not after it
        try:
            FeatureMaps(model.config, tail_r, "hedgehog", dtype=model.dtype)
        except ValueError as e:
            raise ValueError(f"tail_r {tail_r!r}: {e}") from None
    for stage_epochs, stage_minutes in ((epochs, minutes), (finetune_epochs, finetune_minutes), (1, tail_minutes if tails else None)):
        guards.check_training(stage_epochs, stage_minutes)  # a budget of 0 or -1 was refused after the other stages ran
    if min(sizes) <= sinks:  # checked before the training, not after it, when the Window+4 rows are measured
        raise ValueError(f"sizes {list(sizes)}: Window+{sinks}, a baseline at every size, needs a size above its {sinks} sinks")
    experiments.drops_nothing(sizes, length, f"the {length}-token chunks it is read on")  # else TOVA's row is the full cache's
    if not (guards.integer(curve_tokens) and curve_tokens >= 2):  # one token has no next token: every point NaN
        raise ValueError(f"curve_tokens {curve_tokens!r}: the curves' perplexity needs at least 2 tokens")
    if tail_sizes and not set(tail_sizes) <= set(sizes):  # each tail row sits beside TOVA's row of its size
        raise ValueError(f"tail sizes {list(tail_sizes)}: each is read beside TOVA at that size, so each must be one of "
                         f"the sizes {list(sizes)}")
    if tail_sizes and not tails:  # dropped without a word
        raise ValueError(f"tail sizes {list(tail_sizes)} with tails=False: there is no tail to read at them")
    if tails and not (guards.integer(tail_size) and tail_size >= 1):
        raise ValueError(f"--tail-size {tail_size!r}: TOVA's size under which the tail trains is a whole number >= 1")
    if tails and tail_size >= (tail_length or length) - 1:  # TOVA s first drops a row position s + 1 reads
        n = tail_length or length  # chunks of 2 tokens: no size is below 1, the chunks are what is short
        raise ValueError(f"--tail-size {tail_size}: TOVA drops no row a later position reads in chunks of {n} tokens, so "
                         "its tail would learn from no folded row; give " +
                         (f"a size below {n - 1}" if n > 2 else f"--tail-length above {tail_size + 1}"))
    if window >= length - 1:  # the first folded row is read at position `window`; the last predicts nothing
        raise ValueError(f"window {window}: the hybrid keeps its newest {window} rows exact, so no scored position of the "
                         f"{length} tokens it is read on reads its linear state (the full cache under its name); give a "
                         f"window below {length - 1}")
    if window >= train_length:  # no row ever folded while training: its maps would get no gradient, and stay as made
        raise ValueError(f"window {window}: the hybrid's linear part learns from rows older than its window, and chunks of "
                         f"--train-length {train_length} tokens hold none; give a longer --train-length or a shorter --window")
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
        # the curve's piece too: the checkpoint holds the curve measured on it
        key = code_key(self.model_key, self.train_ids, self.epochs, self.piece, *settings)
        return harness.RESULTS / f"t2r_{what}_{key}.safetensors"

    def ppl(self, model, maps) -> float:
        """Perplexity of the first held-out tokens (self.piece), for the curves."""
        return math.exp(experiments.next_token_nll(forward(model, maps, self.piece), self.piece).mean().item())

    def measured(self, method, trained, nll, *code) -> dict:
        # a row is keyed on the code that computes it too: an edit of t2r/linear.py (ELU+1's, say) measures it again
        return measured_row(method, trained, nll, self.test, self.model_key, code_key(pathlib.Path(__file__)), *code)

    def trained(self, file, maps, model=None) -> str:
        """What a row's numbers come from, for its key: the trained file and the maps' (and a finetuned model's)
        weights as they are. A minutes budget stops where the machine's speed says: trained again, a file of the
        same name can hold other maps."""
        return harness.fingerprint(file, *maps.state_dict().values(), *(experiments.weights(model) if model is not None else []))

    def record(self, method, family, maps, trained, model=None, **extra):
        """The row of `maps` (read by `model`, default the frozen one) on the held-out chunks."""
        nll = lambda: experiments.next_token_nll(forward(model or self.model, maps, self.test), self.test)
        self.rows.append(dict(method=method, family=family, state_bytes=state_bytes(self.model, maps),
                              **self.measured(method, self.trained(trained, maps, model), nll), **extra))
        self.log(f"   {method}: {mib(self.rows[-1]['state_bytes'])} of state, perplexity {self.rows[-1]['ppl']:.2f}")


def mib(n: int) -> str:
    """A state's size as the table shows it: in KiB under a hundredth of a MiB (a tiny model's states all read
    "0.00 MiB")."""
    return f"{n / 2**20:.2f} MiB" if n >= 2**20 / 100 else f"{n / 2**10:.2f} KiB"


def cost(run) -> dict:
    return {"tokens": run["tokens"], "seconds": round(run["seconds"]), "tokens_per_s": run["tokens_per_s"]}


def transferred(comp: Comparison, plain: list, hybrid, minutes, eval_every, settings) -> dict:
    """Stage 1: every map set of the table learns side by side from one stream of the frozen model;
    then each is a row (the hybrid also with its features zeroed). Returns the run's meta."""
    maps = plain + ([hybrid] if hybrid else [])
    path = comp.cache("transfer", *settings, eval_every)
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
    path = comp.cache("finetune", name(m), mode, minutes, epochs, *settings, eval_every)
    comp.log(f"stage 2, {mode} finetune of {name(m)} -> {path.name}")
    tuned, run = finetune(comp.model, m, comp.train_ids, mode=mode, minutes=minutes, epochs=epochs, checkpoint=path,
                          log=comp.log, eval_every=max(1, eval_every // 2), evaluate=lambda t: {name(m): comp.ppl(t, m)})
    seconds = stage1["tokens"] / stage1["tokens_per_s"] + run["seconds"]  # both stages', as its tokens and time are
    comp.record(f"{name(m)}, finetuned", m.kind + " finetuned", m, path.name, model=tuned, stage=f"finetune ({mode})",
                tokens=stage1["tokens"] + run["tokens"], seconds=round(seconds),
                tokens_per_s=(stage1["tokens"] + run["tokens"]) / seconds, finetune_tokens=run["tokens"],
                finetune_seconds=round(run["seconds"]))
    return run["curve"]


def measured_row(method, trained, nll, test, model_key, *code) -> dict:
    """Perplexity of one row (nll() -> losses (B, T - 1)), kept in results/t2r_rows/ under the row, what
    trained it, the chunks, the model and `code` (what computes it: code_key(), and a tail row's policy
    and tail.py), so a rerun with the same settings and code measures nothing again."""
    # keyed by what measures it too: experiments.py's next_token_nll, as the policy rows beside it are
    measuring = harness.sources(pathlib.Path(experiments.__file__))
    file = harness.RESULTS / "t2r_rows" / f"{harness.fingerprint(method, trained, test, model_key, *code, *measuring)}.json"
    got = harness.read_cached(file, {"ppl": (float, 1), "ppl_per_chunk": [(float, 1)]})
    if got is None:
        with torch.no_grad():
            losses = nll()
        got = {"ppl": math.exp(losses.mean().item()), "ppl_per_chunk": [math.exp(x) for x in losses.mean(1).tolist()]}
        harness.write_cached(file, got)
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
            harness.write_cached(file, got)
        full = p is specs.FULL
        rows.append(dict(method="softmax, full cache" if full else f"{p.label} {size}", family="full" if full else p.spec,
                         state_bytes=msrnn.state_bytes(model, size), ppl=got["ppl"], ppl_per_chunk=got["per_chunk"]))
        log(f"   {rows[-1]['method']}: {mib(rows[-1]['state_bytes'])} of state, perplexity {got['ppl']:.2f} "
            f"({got['seconds']:.0f} s)")
    return rows


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
    path = comp.cache("tail", tova.key, tail_size, tail_r, minutes, TAIL_GAIN, train_ids,  # trained under TOVA as it is,
                      *harness.sources(pathlib.Path(tail.__file__)))  # by the tail and what it imports (msrnn.lowest)
    comp.log(f"TOVA {tail_size} + tail hedgehog {tail_r}: attention transfer under TOVA's drops -> {path.name}")
    run = transfer(model, maps, train_ids, student=tail.student(model, maps, tova.fn, tail_size), epochs=comp.epochs,
                   minutes=minutes, checkpoint=path, log=comp.log)
    kept = path.with_name(f"{path.stem}-maps.safetensors")
    save(maps, kept, model)  # the maps alone, for demo.py ppl --tail-maps; named where they are (MSRNN_RESULTS too)
    shown = os.path.relpath(kept) if kept.resolve().is_relative_to(pathlib.Path.cwd()) else kept
    comp.log(f"   its maps: {kept.name} (python demo.py ppl --policy tova --size N --tail hedgehog:{tail_r} "
             f"--tail-maps {shlex.quote(str(shown))}, with this run's --model)")
    for size in sizes:
        method = f"TOVA {size} + tail hedgehog {tail_r}"
        got = comp.measured(method, comp.trained(path.name, maps), lambda: experiments.next_token_nll(tail.forward(model, maps, test, tova.fn, size), test),
                            tova.key, *harness.sources(pathlib.Path(tail.__file__)))  # an edit of policies.tova, the tail or msrnn measures it again
        comp.rows.append(dict(method=method, family="tail", state_bytes=tail.state_bytes(model, maps, size), **got,
                              stage=f"transfer at {tail_size} rows", **cost(run)))
        comp.log(f"   {method}: {mib(comp.rows[-1]['state_bytes'])} of state, perplexity {got['ppl']:.2f}")
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


def named_as(family: str, method: str) -> bool:
    """Whether a row's method is a name its family's rows take (a ReLU row renamed Hedgehog, a tail renamed H2O's
    would show its numbers under another's name): the names `experiment` gives."""
    kind, _, stage = family.partition(" ")
    if stage not in {"hybrid": ("", "zeroed"), **dict.fromkeys(("tova", "h2o", "sink", "tail", "full", "elu"), ("",))}.get(
            kind, ("", "finetuned")):  # 'tail zeroed', 'elu finetuned': a stage no row of that family has
        return False
    n = "[1-9][0-9]*"  # a size or r as `experiment` writes it (not 064)
    pattern = {"tova": rf"TOVA {n}", "h2o": rf"H2O {n}", "sink": rf"Window\+4 {n}", "tail": rf"TOVA {n} \+ tail hedgehog {n}",
               "full": r"softmax, full cache", "elu": r"ELU\+1 \(untrained\)", "hybrid": rf"hybrid: .+ \+ T2R \w+ {n}, "
               + ("features zeroed" if stage == "zeroed" else "transfer")}.get(kind, rf"T2R {re.escape(kind)} {n}, " + (stage or "transfer"))
    return re.fullmatch(pattern, method) is not None


def state_bytes_agree(results, row_bytes):
    """Each row's bytes as its name says (a row given another size's bytes by hand would show them beside its
    perplexity): the exact rows it holds (its size, the hybrid's window) at the full cache's bytes a row, and one
    linear state for every row of a map's r."""
    linear = {}  # the linear part's bytes, by its map and r ('T2R 64', 'tail 16')
    for row in results:
        method, family = row["method"], row["family"].split()[0]
        rows = re.search(r"window (\d+)" if family == "hybrid" else r" (\d+)", method)
        held = int(rows[1]) if rows and family in ("tova", "h2o", "sink", "tail", "hybrid") else 0
        rest = 0 if family == "full" else row["state_bytes"] - held * row_bytes  # the linear part's
        part = re.search(r"(tail|T2R) \w+ (\d+)", method)
        if rest != 0 if not part and family != "elu" else rest <= 0:
            raise ValueError(f"{method}: {row['state_bytes']:,} bytes, not what its {held} rows hold at {row_bytes:,.0f} "
                             "bytes a row (the full cache's)" + (" and a linear state" if part or family == "elu" else ""))
        other, before = linear.setdefault(f"{part[1]} {part[2]}", (row, rest)) if part else (row, rest)
        if before != rest:  # which of the two is wrong, the file does not say
            raise ValueError(f"{other['method']} and {method}: {other['state_bytes']:,} and {row['state_bytes']:,} bytes, "
                             f"with {before:,.0f} and {rest:,.0f} bytes of linear state: one map's r holds one state")


def table(data) -> str:
    lines = ["| method | state per sequence | perplexity | training tokens | training time | tokens/s |",
             "|---|---|---|---|---|---|"]
    harness.cells(data["results"], lambda row: row["method"], "method")  # a method twice: two numbers under one name
    for row in data["results"]:
        if "tokens" in row and not (guards.integer(row["tokens"]) and row["tokens"] > 0 and guards.number(row["tokens_per_s"])
                                    and row["tokens_per_s"] > 0 and guards.number(row.get("seconds")) and row["seconds"] >= 0):
            raise ValueError(f"{row['method']}: {row['tokens']!r} tokens in {row.get('seconds')!r} s at {row['tokens_per_s']!r} "
                             "tokens/s; a trained row read some tokens (a whole number) in some seconds (rounded: 0 for a "
                             "tiny run) at a finite speed")
        if not (guards.number(row["ppl"]) and row["ppl"] >= 1):  # NaN, 0.5, -3 published
            raise ValueError(f"{row['method']}: perplexity {row['ppl']!r}; a perplexity is a finite number of at least 1")
        if not (guards.integer(row["state_bytes"]) and row["state_bytes"] >= 1):  # published as "0.00 MiB"
            raise ValueError(f"{row['method']}: a state of {row['state_bytes']!r} bytes; every row holds a state")
        if not named_as(row["family"], row["method"]):
            raise ValueError(f"{row['method']!r} is a row of the {row['family']} family, under another's name")
        cost = " | | "
        if "tokens" in row:  # tokens/s as its cells say (a finetuned row's stored speed was the finetune's alone before
            speed = row["tokens"] / row["seconds"] if guards.number(row.get("seconds")) and row["seconds"] >= 60 else \
                row["tokens_per_s"]  # round 18); under a
            cost = f"{row['tokens']:,} | {row['seconds']} s | {speed:.0f}"  # minute, its rounded seconds would not say
        lines.append(f"| {recipe(row)} | {mib(row['state_bytes'])} | {row['ppl']:.2f} | {cost} |")
    full = [row for row in data["results"] if row["family"] == "full"]
    if len(full) != 1:
        raise ValueError(f"{len(full)} full-cache rows: the table's gaps are measured against one")
    state_bytes_agree(data["results"], full[0]["state_bytes"] / data["tokens"])
    full = full[0]["ppl"]
    notes = [f"{data['chunks']} held-out chunks of {data['tokens']} tokens; training text {data['training_tokens']:,} "
             f"tokens x {data['epochs']} epochs; this run {data['seconds']} s (what results/ held was read back, not "
             f"trained or measured again). Full cache: {full:.2f}.",
             "r counts every feature of a map (Hedgehog's r/2 of Wx and r/2 of -Wx together). LoLCATs' transfer: "
             "each layer's linear output regressed onto its softmax output (MSE). No row runs Kasai et al.'s recipe "
             "(one tied ReLU map per head swapped in, every weight finetuned): python -m t2r.mini does."]
    ppl = {row["method"]: row["ppl"] for row in data["results"]}
    if not isinstance(data["bypass"], dict):
        raise ValueError(f"bypass is {type(data['bypass']).__name__}; it maps a hybrid or a tail to two perplexities")
    for k, v in data["bypass"].items():  # a hybrid's rows, or a tail's beside TOVA alone: the numbers of rows shown
        pair = (ppl.get(f"{k}, transfer"), ppl.get(f"{k}, features zeroed")) if k.startswith("hybrid") else \
            (ppl.get(k), ppl.get(k.split(" + ")[0])) if " + tail " in k else (None, None)
        if None in pair:  # 'TOVA 64' beside itself: +0.0%, a note of no bypass
            raise ValueError(f"bypass {k}: names no hybrid, or tail beside its policy, among the table's rows")
        if not isinstance(v, dict) or (v.get("with"), v.get("zeroed")) != pair:
            raise ValueError(f"bypass {k}: {v!r}, not its rows' perplexities {pair}")
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
              "full": "softmax, full cache", "t2r": "Kasai's tied map, transfer", "t2r finetuned": "Kasai's tied map, transfer + finetune"}
    order = ("tova", "h2o", "sink", "tail", "tail zeroed", "full", "relu", "hedgehog", "relu finetuned", "hedgehog finetuned",
             "elu", "hybrid", "hybrid zeroed")
    for fam in [*order, *dict.fromkeys(r["family"] for r in data["results"] if r["family"] not in order)]:  # every row
        pts = [(row["state_bytes"] / 2**20, row["ppl"]) for row in data["results"] if row["family"] == fam]
        if pts:
            line = fam in ("tova", "h2o", "sink", "tail", "tail zeroed")  # the MSRNNs: a line over sizes
            plt.plot(*zip(*pts), marker="o" if line else "s", ls="-" if line else "",
                     label=labels.get(fam) or (specs.named(fam).label if fam in specs.POLICIES else fam))
    plt.xscale("log")
    plt.yscale("log")
    plt.xlabel(f"state per sequence at {data['tokens']:,} tokens (MiB, {data['dtype']})")
    plt.ylabel("perplexity (held out)")
    plt.title("Fold the past into one state (T2R) or keep rows (MSRNN)", fontsize=9)
    plt.legend(fontsize=6)
    plt.subplot(1, 2, 2)
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
