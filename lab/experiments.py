"""The paper's experiments on the default model. Each returns its data (a dict that can be saved as
JSON), and has a `*_table(data)` that formats it for printing and a `draw_*(plt, data)` for its
figure; demo.py runs them, prints the table and saves everything under results/. Progress goes to
`log` when one is given.
"""
import itertools
import math
import os
import sys
import time

import torch
import torch.nn.functional as F

from engine import guards
from engine import fast, oneshot, threads
from lab import harness
import llama
import msrnn
import policies
from lab import specs
from data import corpus

quiet = lambda msg: None  # the default `log`: an experiment prints nothing on its own


def check_tokenizer(tok, longest: int = 471_162):
    """Refuse what is not a tokenizer whose encode(text).ids are the ids (None failed as 'NoneType' object has no
    attribute 'encode'; a transformers tokenizer, whose encode gives a list, as 'list' object has no attribute 'ids'),
    or one that truncates or pads a text of up to `longest` characters (default: the longest book here)."""
    # a path has an encode too (str.encode("") fails on an unknown encoding), and so has the class; a tokenizer's own
    # error in the probe is its own (a normaliser's bug), not "not a tokenizer"
    plain = isinstance(tok, (str, bytes, os.PathLike, type)) or not callable(getattr(tok, "encode", None))
    if plain or not hasattr(tok.encode(""), "ids"):
        raise ValueError(f"reading text takes a tokenizer whose encode(text).ids are the ids (load_weights.load_tokenizer(); "
                         f"of a transformers tokenizer, its .backend_tokenizer), got {tok!r:.100}")
    if not (guards.integer(longest) and 0 <= longest <= 2 * 10**6):  # its probe is a text of `longest` words: 2 s
        raise ValueError(f"longest is the longest text's length in characters, 0 to 2,000,000, got {longest!r}")  # and 1 GB
    # past a text of `longest` characters however many ids a character makes: a word ("a ", 1 id) per character of
    # a text that is not a book here (training_text's licences); past the books' 132,044 ids and 471,162 characters
    words = (1, 2, 1200, 250_000 if longest <= 471_162 else longest + 1)
    ids = [tok.encode("a " * n).ids for n in words]
    bad = [x for x in ids if not isinstance(x, list)] or [i for x in ids for i in x if not (type(i) is int and 0 <= i < 2**62)]
    if bad:  # a bool is no id
        raise ValueError(f"the tokenizer's encode(text).ids are not a list of ids from 0 to 2**62: got {bad[0]!r:.60}")
    # what it does, not its settings' names (a wrapper hides them): each word as many more ids, or a book is cut
    # short (truncation) or lengthened (padding, to a multiple of 8 too); a limit past the last probe is not seen
    (n1, L1), step = (1, len(ids[0])), len(ids[1]) - len(ids[0])
    if step < 1 or any(len(x) != L1 + (n - n1) * step for n, x in zip(words, ids)) or \
            any(isinstance(getattr(tok, a, None), dict) for a in ("truncation", "padding")):
        raise ValueError("the tokenizer truncates or pads what it encodes (its tokenizer.json turns it on): a text would be "
                         "cut or padded; call tok.no_truncation() and tok.no_padding() first")


def book_chunks(tok, n: int, length: int = 4096, books=("plrabn12", "lcet10", "alice29", "asyoulik")) -> torch.Tensor:
    """n chunks (n, length) of real text: the first chunk of each book, then the second of each, ..."""
    check_tokenizer(tok)
    per_book = [corpus.chunks(tok.encode(corpus.book(b)).ids, length) for b in books]
    out = [c[i] for i in range(max(map(len, per_book))) for c in per_book if i < len(c)][:n]
    if len(out) < n:
        raise ValueError(f"the books hold only {len(out)} chunks of {length} tokens")
    return torch.tensor(out)


@torch.no_grad()
def nll(model, ids: torch.Tensor, policy=None, size=None, oneshot=0, compile=False, last_chunk=False) -> torch.Tensor:
    """Negative log-likelihood of every next token, (B, T - 1), for chunks ids (B, T).

    Runs fast.prefill, which gives the token-by-token MSRNN's logits (test_policies.py) several
    times faster (bench.py): projections and MLPs see all tokens at once. policy: a function, or
    a name or specs.Named (built for these chunks if it reads ahead). oneshot: see msrnn.init_state.
    compile: prefill's steps compiled (fast.compiled), except for a bound that reads ahead: its table
    lookup runs outside the graph and splits every step in two, which made it slower compiled (a
    lookahead setting of the sweep took 290-320 s compiled, 210-270 s not). A size or a one-shot prompt
    that changes no scored logit is refused (its losses would be the full cache's), except in a text's
    shorter last chunk (last_chunk: `perplexity` counts it whatever it drops, so every policy scores the
    same tokens).
    """
    if not isinstance(ids, torch.Tensor) or ids.dim() != 2:  # one text (T,) failed deep in the slicing
        raise ValueError(f"nll reads chunks ids (B, T) (one text: ids[None]); got "
                         f"{tuple(ids.shape) if isinstance(ids, torch.Tensor) else type(ids).__name__}")
    guards.check_flags(compile=compile, last_chunk=last_chunk)  # "no" compiled, and skipped the checks below
    T = ids.shape[1]
    if oneshot > T - 2 and not last_chunk:  # the cut, after position oneshot - 1 attends, is first read at oneshot,
        raise ValueError(f"a one-shot prompt of {oneshot} tokens is cut after its last token, so chunks of {T} tokens "
                         f"score nothing read after the cut: give chunks of at least {oneshot + 2} tokens")
    if size is not None and not last_chunk:  # which the last scored position, T - 2, must be
        drops_nothing([size], T, f"chunks of {T} tokens")
    named = specs.named(policy) if policy is not None else specs.FULL
    compile = compile and not named.reads_ahead
    return next_token_nll(fast.prefill(model, ids, named.on(model, ids), size, oneshot, compile)[0], ids)


def next_token_nll(logits: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    """(B, T - 1) losses, on the CPU, from logits (B, T, vocab) on any device, in float32 at least. One
    sequence at a time, so the vocabulary stays the last, contiguous dimension: 7x faster than
    cross_entropy on the (B, vocab, T) view."""
    ids, wide = ids.to(logits.device, torch.long), llama.wide(logits.dtype)  # cross_entropy takes int64 targets only
    loss = torch.stack([F.cross_entropy(x[:-1].to(wide), y[1:], reduction="none") for x, y in zip(logits, ids)]).cpu()
    if logits.device.type != "meta" and not loss.isfinite().all():  # NaN or infinite logits: named, not averaged
        exp_loss(loss[~loss.isfinite()][0].item(), logits.dtype)
    return loss


def shorter_context_nll(model, ids: torch.Tensor, size: int) -> torch.Tensor:
    """The paper's 'shorter context, no compression' baseline: every chunk cut into independent
    pieces of `size` tokens, so no token sees more than `size` - 1 before it. (B, T - 1)."""
    if not (guards.integer(size) and size >= 2):  # pieces of 1 token predict nothing (range(0, T, 0) fails raw)
        raise ValueError(f"the shorter-context baseline at size {size!r}: its pieces are a whole number of tokens, at "
                         "least 2 (one predicts nothing)")
    B, T = ids.shape
    out = torch.full((B, T - 1), float("nan"))
    for start in range(0, T, size):
        piece = ids[:, start:start + size]
        if piece.shape[1] > 1:
            out[:, start:start + piece.shape[1] - 1] = next_token_nll(llama.forward(model, piece), piece)
    return out  # the first token of each piece has no prediction: NaN, left out of the mean


def perplexity(model, ids: torch.Tensor, policy=None, size=None, chunk=4096, progress=None, regime="step",
               prompt_len=0, compile=False) -> dict:
    """Perplexity of a token sequence (T,) cut into chunks of `chunk` tokens (each read from scratch).

    prompt_len > 0 scores only the tokens after each chunk's first prompt_len, which are the prompt:
    read under the policy from the first token (regime "step") or with full attention and then cut
    to `size` once (regime "full", the one-shot regime)."""
    if regime not in ("step", "full"):
        raise ValueError(f"regime must be 'step' or 'full', got {regime!r}")
    if regime == "full" and size is not None and prompt_len == 0:  # no prompt to read in full: the per-step regime
        raise ValueError("the 'full' regime reads a prompt in full and cuts it once: give prompt_len >= 1")
    if not isinstance(ids, torch.Tensor) or ids.dim() != 1:
        raise ValueError(f"perplexity reads one text, token ids (T,), got {tuple(ids.shape) if isinstance(ids, torch.Tensor) else type(ids).__name__}")
    if not (guards.integer(chunk) and guards.integer(prompt_len)):
        raise ValueError(f"chunk and prompt_len are numbers of tokens, integers: got {chunk!r} and {prompt_len!r}")
    if not 0 <= prompt_len < chunk:
        raise ValueError(f"the prompt ({prompt_len} tokens) must be " + ("0 or more tokens" if prompt_len < 0 else
                                                                         f"shorter than a chunk ({chunk} tokens)"))
    oneshot = prompt_len if regime == "full" and size is not None else 0
    pieces = [ids[i:i + chunk] for i in range(0, len(ids), chunk)]
    if size is not None and pieces and len(pieces[0]) > max(1, prompt_len):  # as `ppl` checks it (a shorter last
        # chunk is the policy's own number there)
        drops_nothing([size], len(pieces[0]), f"chunks of {len(pieces[0])} tokens")
    if oneshot and size < prompt_len and len(pieces[0]) < prompt_len + 2:  # the cut is first read at position prompt_len
        raise ValueError(f"read in full and cut once, a {prompt_len}-token prompt's cut is first read at position "
                         f"{prompt_len}, which chunks of {len(pieces[0])} tokens never score (the full cache's number "
                         f"under the policy's name): give chunks of at least {prompt_len + 2} tokens")
    losses = []
    for i, p in enumerate(x for x in pieces if len(x) > max(1, prompt_len)):
        losses.append(nll(model, p[None], policy, size, oneshot, compile, last_chunk=len(p) < chunk)[0, max(0, prompt_len - 1):])
        if progress:
            progress(i + 1, len(pieces))
    if not losses:  # a text of one token has nothing to predict
        raise ValueError(f"the text has {len(ids)} token(s): perplexity needs a chunk of at least "
                         f"{max(1, prompt_len) + 1} (the tokens read first, then one to predict)")
    loss = torch.cat(losses)
    return {"ppl": exp_loss(loss.mean().item(), model.dtype), "tokens": len(loss), "chunks": len(losses),
            "ppl_per_chunk": [exp_loss(x.mean().item(), model.dtype) for x in losses]}


def exp_loss(loss: float, dtype) -> float:
    """A perplexity, exp(mean loss), or an error naming the dtype: a loss that is NaN, infinite or
    past exp's range means the logits were not finite, never a number to print."""
    if math.isfinite(loss) and loss < 700:
        return math.exp(loss)
    half = dtype in (torch.float16, torch.bfloat16)
    raise ValueError(f"a loss of {loss:.4g}, with the model in {str(dtype).removeprefix('torch.')}: its logits "
                     "are not finite (or too large for a perplexity)" + ("; half precision overflows sooner "
                     "(float16 past 65,504): try --dtype float32" if half else "; the weights may be too large"))


# ---------------------------------------------------------------- perplexity vs multi-state size (Fig. 3, Table 3)

def sweep(model, tok, sizes=(64, 128, 256, 512, 1024, 2048),
          names=("window", "sink", "h2o", "tova", "lookahead", "lookahead:256"),
          n_chunks=4, chunk=4096, batch=4, jobs=1, compile=False, more=(), log=quiet) -> dict:
    """Perplexity of every policy at every size on the same n_chunks chunks of real books, next to the
    full cache and the shorter-context baseline.

    names: policies as demo.py takes them ('tova', 'sink:8', 'mine.py:fn') or functions. Each setting
    is saved as soon as it is measured (cache_dir) and not measured again, so an interrupted sweep
    resumes. jobs=2 measures settings in two single-threaded processes (harness.pool_map), the
    costliest first. compile: prefill's steps compiled (the same numbers, to float32 rounding, faster).
    more: other jobs for the same processes, after the settings: (fn, *args) runs fn(model, ids, *args),
    which keeps its own result and returns a line for the log (board.py's cells).
    """
    names = guards.listed(names, "sweep takes a list of policies' names (one policy: ['tova'])")
    if not names or not (guards.integer(batch) and batch >= 1) or not (guards.integer(n_chunks) and n_chunks >= 1):
        raise ValueError(f"sweep takes a list of one or more policies' names, and a batch and n_chunks of at least 1; got "
                         f"{names!r}, {batch!r}, {n_chunks!r}")
    guards.check_flags(compile=compile)
    named = [specs.named(n) for n in names]
    if specs.FULL in named:  # "two policies share a display name (full cache)" for one the user named once
        raise ValueError("the sweep measures the full cache in every run, as its reference: leave 'full' out of its policies")
    named = specs.distinct(named, taken=("shorter", specs.FULL.label))  # before the books are read
    sizes = guards.whole_numbers(sizes, "sizes")
    if not sizes or min(sizes) < 2:  # before any setting is measured: the shorter-context baseline needs pieces of 2 tokens
        raise ValueError(f"sizes {list(sizes)}: the shorter-context baseline beside each size reads pieces of that many "
                         "tokens, and a piece of 1 predicts nothing; give sizes of at least 2")
    drops_nothing(sizes, chunk, f"{chunk}-token chunks", least=2)
    refused_sizes(named, sizes)
    ids = book_chunks(tok, n_chunks, chunk)
    cache = cache_dir("sweep", model, ids)
    settings = [(specs.FULL, chunk), *[(None, s) for s in sizes], *[(p, s) for p in named for s in sizes]]
    file = lambda p, s: cache / f"{'shorter' if p is None else 'full' if p is specs.FULL else p.key}-{s}.json"
    done = {(p, s): row for p, s in settings if (row := harness.read_cached(file(p, s), MEASURED)) is not None}
    todo = [setting for setting in settings if setting not in done]
    log(f"perplexity sweep: {n_chunks} chunks of {chunk} tokens, sizes {list(sizes)}, "
        f"{', '.join(p.label for p in named)}; {len(todo)} of {len(settings)} settings to measure, {jobs} process(es)")
    start = time.time()
    # a job is `measure` and its arguments; a policy named by a string can go to a worker process, a
    # function defined on the fly cannot and is measured here
    processes = min(jobs, threads.cores(), len(todo) + len(more))  # as harness.pool_map counts them: 1 runs here
    args = {(measure, specs.sent(p, processes), s, batch, compile): (p, s)
            for p, s in sorted(todo, key=lambda setting: -setting[1])}  # the longest first
    by_name = lambda a: all(p is None or isinstance(p, str) for p in (a[1] if isinstance(a[1], tuple) else [a[1]]))
    sendable = [a for a in [*args, *more] if by_name(a)]  # the job's policies (a[1]): a name, or names
    results = itertools.chain(harness.pool_map(call, (model, ids), sendable, jobs),
                              ((a, call(model, ids, *a)) for a in [*args, *more] if a not in sendable))
    for a, row in results:
        if a not in args:
            log(row)
            continue
        p, s = args[a]
        harness.write_cached(file(p, s), row)
        done[p, s] = row
        log(f"  {p.label if p else 'shorter':>12} {s:>5}: ppl {row['ppl']:9.2f}  (chunks {min(row['per_chunk']):.2f}-"
            f"{max(row['per_chunk']):.2f}, {row['seconds']:.0f} s)")
    ppl = {}  # display name -> size -> the setting's result
    for p, s in settings:
        ppl.setdefault("shorter" if p is None else p.label, {})[s] = done[p, s]
    labels = [p.label for p in named]
    # the gaps' baseline is policies.sink with 4 sinks by what it is: an edited copy labelled Window+4 is not it
    window4 = lambda fn: getattr(fn, "func", fn) is policies.sink and getattr(fn, "keywords", {}).get("sinks", 4) == 4
    base = next((p.label for p in named if p.label == "Window+4" and window4(p.fn)), None)
    return {"n_chunks": n_chunks, "chunk": chunk, "sizes": list(sizes), "policies": labels, "ppl": ppl,
            "gap_closed": gap_closed(ppl, sizes, labels, [p.label for p in named if p.reads_ahead], base), "jobs": jobs, "compile": compile, "cache": cache.name,
            "seconds": sum(r["seconds"] for by_size in ppl.values() for r in by_size.values()),
            "wall_seconds": time.time() - start}  # of this run: settings measured before are not counted


def call(model, ids, fn, *args):
    return fn(model, ids, *args)


def cache_dir(kind: str, model, ids, code=(__file__,), tok=None):
    """results/<kind>/<key>/: measured settings, keyed by everything that changes their numbers: the
    model (identity: its config and weights), the tokens, the tokenizer where the numbers decode text
    (tok), and the content of every module of the project that `code` (this file, or the caller's)
    imports, transitively (harness.sources). Each file in it is named by the policy's key (its file,
    data files and parameters, specs.Named.key) and the size."""
    told = [tok.to_str()] if tok is not None else []  # tokenizer.json: what decodes an answer
    return harness.RESULTS / kind / harness.fingerprint(*identity(model), ids, *told, *harness.sources(*code))


def weights(model) -> list:
    """Every weight tensor of a model once (the named q/k/v and gate/up are views of fused ones)."""
    per_layer = [w for L in model.layers for w in (L.attn_norm, L.w_qkv, L.wo, L.mlp_norm, L.w_gate_up, L.w_down)]
    return [model.embed, *per_layer, model.norm, model.lm_head]


def identity(model) -> list:
    """What makes a model's numbers, for a cache key: its config (config.json: rope_theta, norm_eps,
    rope_scaling, sliding_window change every number with the same weights), every weight, and the RoPE
    frequencies the model holds (made from the config, but a model of replaced frequencies is another model)."""
    return [repr(model.config), *weights(model), model.inv_freq]


MEASURED = {"ppl": (float, 1), "per_chunk": [(float, 1)], "seconds": (float, 0)}  # what `measure` returns, as read_cached checks it


def measure(model, ids, policy, size, batch, compile=False) -> dict:
    """One setting of the sweep: perplexity over the chunks ids (n, T), `batch` chunks at a time.
    policy: a name or specs.Named, or None for the shorter-context baseline. compile: see nll."""
    if not (guards.integer(batch) and batch >= 1):  # ids.split(0) fails in torch's words
        raise ValueError(f"batch is a number of chunks measured at once, 1 or more: got {batch!r}")
    start = time.time()
    named = policy and specs.named(policy)
    if named is None:
        losses = [shorter_context_nll(model, x, size) for x in ids.split(batch)]
    else:
        losses = [nll(model, x, named, None if named is specs.FULL else size, compile=compile) for x in ids.split(batch)]
    losses = torch.cat(losses)                                       # (n_chunks, T - 1)
    return {"ppl": exp_loss(losses.nanmean().item(), model.dtype),
            "per_chunk": [exp_loss(x, model.dtype) for x in losses.nanmean(1).tolist()], "seconds": time.time() - start}


def gap_closed(ppl, sizes, labels, bound_labels, baseline="Window+4") -> dict:
    """For each lookahead bound L (`bound_labels`: the policies that read ahead, not a label's first word;
    and the best of them at each size, if several ran) and each other
    policy P: (baseline - P) / (baseline - L) at every size, the share of the distance from Window+4 to
    the bound that P covers (negative: worse than Window+4; None where the bound is not below Window+4)."""
    bounds = {b: {s: ppl[b][s]["ppl"] for s in sizes} for b in bound_labels}
    if len(bounds) > 1:
        bounds["best bound"] = {s: min(b[s] for b in bounds.values()) for s in sizes}
    if baseline not in ppl:
        return {}
    base = {s: ppl[baseline][s]["ppl"] for s in sizes}
    out = {}
    for name, bound in bounds.items():
        for p in labels:
            if p != baseline and p not in bounds:
                out[f"{p} / {name}"] = {s: (base[s] - ppl[p][s]["ppl"]) / (base[s] - bound[s])
                                        if bound[s] < base[s] else None for s in sizes}
    return out


def refused_sizes(named: list, sizes) -> None:
    """Each policy called once at each size on random rows (2 KV heads of 8), before the work: a size a
    policy refuses with its own ValueError (sink's 4 sinks at size 4) is named now, not after the other
    settings were measured; a size asked for, and only where the policy takes another size (or a larger one: twice
    the largest, or 4, ... 64 times it): one it refuses at every size refuses these rows (made for the model's heads),
    and the run, on its rows, says. A bound that reads ahead is built per text, and is not called here."""
    def refusal(p, size):
        rows = random_rows(size)
        try:
            with guards.policy_call(p.fn, rows):  # watched as in the run: sys.exit() is the policy's failure
                p.fn(rows)
        except guards.PolicyError as e:
            if isinstance(getattr(e, "original", None), ValueError):
                return e.original
            # anything else is the run's to name, with the rows it is really given
    for p in (p for p in named if p.fn is not None and not p.reads_ahead):
        refused = {size: e for size in dict.fromkeys(sizes) if (e := refusal(p, size)) is not None}
        spares = (2 ** i * max(sizes) for i in range(1, 7))  # sink:4 at size 2 refuses 4 too, and takes 8
        if refused and (len(refused) < len(set(sizes)) or any(refusal(p, s) is None for s in spares)):
            size = next(iter(refused))  # one it takes: a size it refuses, not the rows
            raise ValueError(f"{p.label} refuses size {size}: {refused[size]}")


def random_rows(size: int) -> msrnn.Rows:
    """Seeded random float64 rows of a size-`size` state with its new row: 2 KV heads of 8, 3 queries each."""
    g, n = torch.Generator().manual_seed(0), size + 1
    r = lambda *shape: torch.randn(*shape, generator=g, dtype=torch.float64)
    return msrnn.Rows(attn=r(1, 2, 3, n).softmax(-1), pos=torch.arange(n).expand(1, 2, n), score=r(1, 2, n).abs(),
                      keys=r(1, 2, n, 8), values=r(1, 2, n, 8), query=r(1, 2, 3, 8),
                      prev=torch.full((1, 2, n), math.nan, dtype=torch.float64), t=size, size=size, layer=0)


def drops_nothing(sizes, longest: int, where: str, scored: bool = True, least: int = 1):
    """Refuse a size whose multi-state changes nothing that is measured, so that its figures would be the
    full cache's printed under the policy's name. A size-s state first drops a row after attending at
    position s, so position s + 1's logits are the first it changes; a perplexity scores positions up to
    longest - 2 (the last token predicts nothing), so sizes from longest - 2 change no scored logit.
    scored=False (a prompt whose answer is generated after it): sizes from `longest` hold the whole prompt.
    least: the smallest size the caller takes (the sweep's shorter-context baseline needs 2)."""
    limit = longest - 2 if scored else longest
    if sizes and limit <= least:  # "give sizes below -1" named no size a user could give, "below 2" none the sweep takes
        raise ValueError(f"{where} are too short for any multi-state{f' of {least} rows or more' if least > 1 else ''} to "
                         f"drop a row a scored position reads: they need {least + 1 + longest - limit} tokens at least")
    if sizes and max(sizes) >= limit:
        raise ValueError(f"a multi-state of {max(sizes)} rows drops nothing that is scored in {where}, so its numbers would "
                         f"be the full cache's under the policy's name: give sizes below {limit}")


def column(values, fmt: str, least: int) -> int:
    """A table column's width: `least`, or wider, so that its widest value keeps a space before it (a
    perplexity of 295396.59 fused with the next column's number)."""
    return max([least, *(len(format(v, fmt)) + 1 for v in values if v is not None)])


def sweep_table(data) -> str:
    sizes, ppl = data["sizes"], data["ppl"]
    width = max(12, *map(len, data["policies"])) + 1
    full = ppl["full cache"][data["chunk"]]["ppl"]
    col = column([full, *(ppl[n][s]["ppl"] for n in ["shorter", *data["policies"]] for s in sizes)], ".2f", 9)
    lines = [f"{'policy':<{width}}" + "".join(f"{s:>{col}}" for s in sizes) + f"{'full':>{col}}"]
    for name in ["shorter", *data["policies"]]:
        lines.append(f"{name:<{width}}" + "".join(f"{ppl[name][s]['ppl']:>{col}.2f}" for s in sizes) + f"{full:>{col}.2f}")
    if data["gap_closed"]:
        wide = max(map(len, data["gap_closed"])) + 1
        col = column([x for by_size in data["gap_closed"].values() for x in by_size.values()], ".0%", 9)
        lines += ["", "share of the gap from Window+4 to a bound that a policy closes, (Window+4 - policy) / "
                  "(Window+4 - bound);", "'-' where the bound is not below Window+4",
                  f"{'policy / bound':<{wide}}" + "".join(f"{s:>{col}}" for s in sizes)]
        for pair, by_size in data["gap_closed"].items():
            lines.append(f"{pair:<{wide}}" + "".join(f"{by_size[s]:>{col}.0%}" if by_size[s] is not None else f"{'-':>{col}}"
                                                     for s in sizes))
    return "\n".join(lines)


def draw_sweep(plt, data):
    sizes, ppl = data["sizes"], data["ppl"]
    for name in ["shorter", *data["policies"]]:
        plt.plot(sizes, [ppl[name][s]["ppl"] for s in sizes], "o-" if name != "shorter" else "o:",
                 label="shorter context" if name == "shorter" else name)
    plt.axhline(ppl["full cache"][data["chunk"]]["ppl"], color="k", ls="--", label=f"full cache ({data['chunk']})")
    plt.xscale("log", base=2)
    plt.yscale("log")
    plt.xlabel("multi-state size")
    plt.ylabel("perplexity")
    plt.title(f"{data['n_chunks']} chunks of {data['chunk']} tokens")
    plt.legend()


# ---------------------------------------------------------------- what TOVA keeps (Fig. 7-9, Table 2)

@torch.no_grad()
def retention(model, tok, size=256, length=2048, layer=15, book="alice29", policy="tova") -> dict:
    """Run a policy (TOVA by default) on one chunk and record, in every layer, when each position is
    dropped. Returns the paper's statistics over all layers, and `dropped_at` of the chosen layer,
    for its picture."""
    named = specs.named(policy)
    if named is specs.FULL:
        raise ValueError("retention needs a policy: with every row kept there is nothing to see")
    if not (guards.integer(layer) and 0 <= layer < model.config.n_layers):  # True ran as layer 1, 1.0 failed in torch
        raise ValueError(f"layer {layer!r}: the model has layers 0 to {model.config.n_layers - 1}")
    if not (guards.integer(size) and size >= 1):
        raise ValueError(f"retention's size is the rows each layer keeps, a whole number >= 1; got {size!r}")
    ids = book_chunks(tok, 1, length, books=(book,))
    if size >= ids.shape[1]:  # no share of kept rows to report, and no "kept longest"
        raise ValueError(f"retention: a multi-state of {size} rows never drops a row of a {ids.shape[1]}-token text; "
                         "give a size below the length")
    dropped_at, _ = drops(model, ids, named, size)
    return {"policy": named.label, "size": size, "length": ids.shape[1], "layer": layer, "book": book,
            **retention_stats(dropped_at, ids[0], size, tok), "dropped_at": dropped_at[layer].tolist()}


def drops(model, ids, named, size):
    """Run a policy on one sequence ids (1, T) and record, in every layer, the step that drops each
    position (T: held to the end) and the score the policy gave it then: (n_layers, T) each. For a
    head-wise policy, the first KV head's. A row never comes back, so one step per position says
    which rows are held at every step (held_rows)."""
    T, n_layers = ids.shape[1], model.config.n_layers
    dropped_at = torch.full((n_layers, T), T)
    score = torch.full((n_layers, T), math.nan, dtype=torch.float64)
    scored = named.on(model, ids)

    @guards.wraps(scored)  # what the policy raises or returns wrong is named as the policy's, at its own line
    def recording(rows):
        scores = guards.check_scores(scored, rows, scored(rows))
        gone = oneshot.lowest(scores[:1, :1], rows.pos[:1, :1], rows.pos.shape[-1] - rows.size)[0, 0]  # slots the state will drop
        where = (rows.layer, rows.pos[0, 0, gone].cpu())
        dropped_at[where], score[where] = rows.t, scores[0, 0, gone].double().cpu()
        return scores

    fast.prefill(model, ids, recording, size)
    return dropped_at, score


def retention_stats(dropped_at, ids, size, tok) -> dict:
    """The paper's statistics of what a policy keeps (Fig. 7-9, Table 2), over all layers, from
    dropped_at (n_layers, T) of the token ids (T,): how many held rows are among the `size` most
    recent, whether the first tokens stay to the end, and which tokens stay longest."""
    n_layers, T = dropped_at.shape
    guards.check_memory(2 * n_layers * T * T, f"the ({n_layers}, {T}, {T}) retention statistics")  # held, and a sum
    held = held_rows(dropped_at)                                     # (n_layers, T, T)
    lifetime = held.sum(1).float()                                   # (n_layers, T) steps each token stayed
    steps_left = (T - torch.arange(T)).float()                       # steps it could have stayed
    recent = sum(held[:, t, max(0, t - size + 1): t + 1].sum().item() for t in range(size, T))
    recent_share = recent / max(1, held[:, size:].sum().item())
    # tokens kept longest, on average over their occurrences (all layers; seen at least 5 times, early enough)
    stay = (lifetime / steps_left).mean(0)                           # (T,) share of its remaining steps
    by_token = {}
    for j in range(T - size):
        by_token.setdefault(ids[j].item(), []).append(stay[j].item())
    ranked = sorted(((sum(v) / len(v), k, len(v)) for k, v in by_token.items() if len(v) >= 5), reverse=True)
    tokens = lambda part: [{"token": tok.decode([k]), "mean_share_kept": round(s, 3), "count": c} for s, k, c in part]
    return {"recent_share": recent_share,
            "first_tokens_kept_to_end_per_layer": [int(held[l, -1, :4].sum()) for l in range(n_layers)],
            "first_token_kept_to_end_layers": int(held[:, -1, 0].sum()),
            "longest_kept_tokens": tokens(ranked[:15]), "shortest_kept_tokens": tokens(ranked[-5:])}


def view(model, tok, ids, names=("sink", "tova"), size=64) -> dict:
    """What each policy holds in every layer at every step of one text ids (T,), and the score that
    decided each drop: the data of the page viewer.html draws (demo.py view), with the same
    statistics `retention` prints."""
    if not isinstance(ids, torch.Tensor) or ids.dim() != 1:  # a (2, T) batch was joined into one text of 2T
        raise ValueError(f"view reads one text, ids (T,); got {tuple(ids.shape) if isinstance(ids, torch.Tensor) else type(ids).__name__}")
    ids = ids.view(1, -1)
    if not (guards.integer(size) and size >= 1):
        raise ValueError(f"view's size is the rows each layer keeps, a whole number >= 1; got {size!r}")
    if ids.shape[1] <= size:
        raise ValueError(f"the text has {ids.shape[1]} tokens: with a multi-state of {size} rows nothing is dropped")
    names = guards.listed(names, "view takes a list of policies' names (one policy: ['tova'])")
    if not names:  # a page of no policy shows nothing
        raise ValueError(f"view needs one or more policies' names, got {names!r}")
    data = {"tokens": [tok.decode([i]) for i in ids[0].tolist()], "size": size, "n_layers": model.config.n_layers,
            "policies": []}
    for named in specs.distinct([specs.named(name) for name in names]):  # the page shows them by name
        if named is specs.FULL:
            raise ValueError("view shows the rows each policy drops: 'full' keeps every row and drops none, so it "
                             "has nothing to show; leave it out and name the policies")
        dropped_at, score = drops(model, ids, named, size)
        data["policies"].append({
            "label": named.label, "dropped_at": dropped_at.tolist(),  # (n_layers, T); T: held to the end
            "score": [[float(f"{x:.4g}") if math.isfinite(x) else None for x in layer] for layer in score.tolist()],
            "summary": retention_stats(dropped_at, ids[0], size, tok)})
    return data


def held_rows(dropped_at) -> torch.Tensor:
    """held[..., t, j]: row j is in the state after step t, from dropped_at (..., T)."""
    dropped_at = torch.as_tensor(dropped_at)
    T = dropped_at.shape[-1]
    t, j = torch.arange(T)[:, None], torch.arange(T)
    return (j <= t) & (t < dropped_at[..., None, :])


def percent(share: float) -> str:
    """A share as a whole percent, halves rounded up as the viewer page's Math.round does (format's
    `.0%` rounds them to even: 0.625 would print 62% beside the page's 63%)."""
    if not 0 <= share <= 1:  # NaN too
        raise ValueError(f"a share is a number from 0 to 1, got {share!r}")
    return f"{math.floor(100 * share + 0.5):.0f}%"


def retention_table(data) -> str:
    n_layers, held = len(data["first_tokens_kept_to_end_per_layer"]), data["first_token_kept_to_end_layers"]
    some = sum(n >= 1 for n in data["first_tokens_kept_to_end_per_layer"])  # layers holding any of the first 4 tokens
    if not 0 <= held <= some or n_layers < 1:
        raise ValueError(f"first_token_kept_to_end_layers is {held} of {n_layers} layers, of which {some} hold any of "
                         "the first 4 tokens at the end")
    if not isinstance(data["policy"], str) or not data["policy"].strip():  # null was published as "None"
        raise ValueError(f"the policy's label is {data['policy']!r}")
    if data["size"] >= data["length"]:  # retention refuses such a run: it never drops a row
        raise ValueError(f"size {data['size']} of a {data['length']}-token text: such a multi-state drops no row")
    return (f"{data['policy']}, size {data['size']}, {data['length']} tokens of {data['book']}: "
            f"{percent(data['recent_share'])} of kept rows are among the {data['size']} most recent\n"
            f"the first token is still held at the end in {data['first_token_kept_to_end_layers']}/{n_layers} layers\n"
            "kept longest: " + ", ".join(repr(x["token"]) for x in data["longest_kept_tokens"]))


def draw_retention(plt, data):
    plt.imshow(held_rows(data["dropped_at"]).float().numpy(), aspect="auto", cmap="Greys", interpolation="nearest")
    plt.xlabel("token position")
    plt.ylabel("step t")
    plt.title(f"{data['policy']} size {data['size']}: rows held by layer {data['layer']}")


# ---------------------------------------------------------------- passkey retrieval (a stand-in for the paper's long QA)

FILLER = ("The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again. ")


def passkey_prompts(tok, length, depths, keys):
    """One prompt per (depth, key), all exactly `length` tokens: filler with the key sentence at `depth`."""
    check_tokenizer(tok)
    head = tok.encode("There is a pass key hidden inside a lot of irrelevant text. Find it and memorize it.\n").ids
    tail = tok.encode("\nWhat is the pass key? The pass key is").ids
    if not all(guards.number(d) and 0 <= d <= 1 for d in depths):  # 1.5 made a longer prompt, -0.5 a shorter one
        raise ValueError(f"depths are shares of the prompt, from 0 to 1; got {list(depths)}")
    filler = tok.encode(FILLER * (length // 10)).ids
    prompts = []
    for key in keys:
        needle = tok.encode(f" The pass key is {key}. Remember it. {key} is the pass key. ").ids
        room = length - len(head) - len(tail) - len(needle)
        if room < 0:
            raise ValueError(f"a pass-key prompt needs at least {length - room} tokens, got a length of {length}")
        for d in depths:
            cut = int(room * d)
            prompts.append(head + filler[:cut] + needle + filler[cut:room] + tail)
    return torch.tensor(prompts)


@torch.no_grad()
def answer(model, tok, prompts, policy=None, size=None, n=6, regime="step") -> list[str]:
    """Greedy continuations (n tokens) of prompts (B, T) under a policy: fast.prefill reads the
    prompt (regime "full": with full attention, then cut to `size` once) and hands over its state,
    from which generation goes on token by token. A lookahead is built on the prompt followed by
    the full-cache model's own answer: the future it reads is the one the full cache would see."""
    named = specs.named(policy) if policy is not None else specs.FULL
    text = prompts = check_answer(model, prompts, n)
    if named.reads_ahead:
        text = torch.cat([prompts, answer_ids(model, prompts, None, None, n)[:, :-1]], 1)
    return [tok.decode(seq) for seq in answer_ids(model, prompts, named.on(model, text), size, n, regime).tolist()]


def check_regimes(regimes) -> None:
    """Prompt regimes, each "step" or "full" (a string was read as its letters, "Full" as the per-step one)."""
    if isinstance(regimes, str) or not regimes or not all(r in ("step", "full") for r in regimes):
        raise ValueError(f"regimes are a list of 'step' and 'full', got {regimes!r}")


def check_answer(model, prompts, n) -> torch.Tensor:
    """Prompts (B, T) of token ids (one prompt: prompts[None]) and n >= 1 tokens to answer with."""
    if not (guards.integer(n) and n >= 1):  # n - 1 tokens are generated after the first
        raise ValueError(f"n is the tokens to answer with, a whole number >= 1; got {n!r}")
    return guards.check_tokens(model, prompts, dims=(2,))


def answer_ids(model, prompts, policy, size, n, regime="step", compile=False):
    check_regimes([regime])
    prompts = check_answer(model, prompts, n)
    oneshot = prompts.shape[1] if regime == "full" and size is not None else 0
    logits, state = fast.prefill(model, prompts, policy, size, oneshot, compile, last=True)
    return greedy(model, logits[:, -1].argmax(-1), n, policy, state)


def greedy(model, first, n, policy, state):
    """first (B,), then n - 1 greedy tokens from `state`: (B, n) on the CPU."""
    return torch.stack([first, *msrnn.generate(model, first[:, None], n - 1, policy, state=state)], 1).cpu()


@torch.no_grad()
def oneshot_answer_ids(model, prompts, cuts, n=6) -> list:
    """answer_ids(model, prompts, policy, size, n, "full") for each (policy, size) in cuts, with the
    prompt read once. In the one-shot regime the prompt is read with full attention whatever the
    policy and size; only the cut at its last token differs. So one prefill keeps, per layer, the rows
    that cut sees (a state of T - 1 rows makes it call the policy there), and each cut is then made
    from them by OneShot.evict, as fill makes it (test_experiments.py: the same tokens)."""
    prompts, cuts = check_answer(model, prompts, n), list(cuts)  # a generator was used up by the checks below
    if not all(isinstance(c, (tuple, list)) and len(c) == 2 for c in cuts):
        raise ValueError(f"cuts are (policy, size) pairs, got {cuts!r}")
    T = prompts.shape[1]
    if T < 2:  # the prompt is read by a state of T - 1 rows, which cuts at its last token
        raise ValueError(f"a one-shot cut needs a prompt of at least 2 tokens, got {T}")
    for policy, size in cuts:
        if size is None:  # check_state_args would blame the prompt's length: the unbounded state cuts nothing
            raise ValueError(f"a cut keeps a number of the prompt's rows: each cut's size is a whole number >= 1, got {size!r}")
        guards.check_policy(policy, size)
        guards.check_state_args(prompts.shape[0], size, T)  # a cut keeps `size` rows of the prompt's T
    seen = []  # per layer: what its cut reads (msrnn.Rows)

    def keep_rows(rows):
        seen.append({f: getattr(rows, f).clone() for f in ("attn", "query", "keys", "values", "pos", "score", "prev")})
        return rows.pos[:, :1].double()                             # any scores: this state is not used
    logits, _ = fast.prefill(model, prompts, keep_rows, T - 1, T, last=True)
    first = logits[:, -1].argmax(-1)                                 # (B,) the full-attention prompt's next token
    out = []
    for policy, size in cuts:
        state = oneshot.init_state(model, prompts.shape[0], size, T)
        for ms, r in zip(state, seen):                               # the state fill leaves just before its cut
            # copies: the cut and the steps after it write into the state in place
            ms.k, ms.v, ms.pos, ms.score, ms.prev = (r[f].clone() for f in ("keys", "values", "pos", "score", "prev"))
            ms.n = T
            ms.evict(r["attn"], r["query"], T - 1, policy)
        state.t = T
        out.append(greedy(model, first, n, policy, state))
    return out                                                       # (B, n) each


@torch.no_grad()
def passkey(model, tok, sizes=(128, 512), names=("window", "sink", "h2o", "tova"), length=2048,
            depths=(0.1, 0.5, 0.9), keys=(71432, 50918), batch=6, regimes=("step",), log=quiet) -> dict:
    """Accuracy of retrieving a 5-digit key from `length` tokens of filler, per policy, size and prompt
    regime ("step": evict while reading the prompt; "full": read it in full, then cut once).
    The prompt goes through fast.prefill, which hands over its state; 6 tokens are then generated."""
    names = guards.listed(names, "passkey takes a list of policies' names (one policy: ['tova'])")
    if not names or not guards.integer(length):
        raise ValueError(f"passkey takes a list of one or more policies' names and a whole length; got "
                         f"{names!r}, {length!r}")
    sizes = guards.whole_numbers(sizes, "passkey's sizes")  # a generator was used up by the first check
    depths = guards.listed(depths, "depths are a list of shares of the prompt")
    regimes = guards.listed(regimes, "regimes are a list of 'step' and 'full'")
    chosen = specs.distinct([specs.named(p) for p in names])  # before the prompts are made
    if specs.FULL in chosen:
        raise ValueError("passkey reads the full cache first whatever it is given: name the policies to compare with it")
    check_regimes(regimes)
    if not depths or not (guards.integer(batch) and batch >= 1):  # 0/0 was saved as an accuracy
        raise ValueError(f"passkey needs one or more depths and a batch of at least 1; got depths {list(depths)}, batch {batch!r}")
    keys = guards.listed(keys, "pass keys are a list of 5-digit numbers")
    if not keys or not all(guards.integer(k) and 10_000 <= k <= 99_999 for k in keys):  # "1" is
        # in most answers
        raise ValueError(f"pass keys are 5-digit numbers, as the prompt says (a short key is found inside any number); "
                         f"got {list(keys)}")
    prompts = passkey_prompts(tok, length, depths, keys)  # a length too short for the key, named first
    drops_nothing(sizes, length, f"{length}-token prompts", scored=False)
    refused_sizes(chosen, sizes)
    says_keys(tok, keys)
    answers = [str(k) for k in keys for _ in depths]
    t0, acc = time.time(), {}
    settings = [(specs.FULL, None, "step")] + [(p, s, r) for r in regimes for p in chosen for s in sizes]
    log(f"passkey: {len(prompts)} prompts of {length} tokens, key at depths {list(depths)}")
    for named, size, regime in settings:
        right = 0
        for i in range(0, len(prompts), batch):
            got = answer(model, tok, prompts[i:i + batch], named, size, regime=regime)
            right += sum(a in g for a, g in zip(answers[i:i + batch], got))
        key = "full cache" if size is None else f"{named.label}/{size}/{regime}"
        acc[key] = {"policy": named.label, "size": size, "regime": regime if size else None, "correct": right,
                    "total": len(prompts)}
        log(f"{passkey_table({'results': {key: acc[key]}})}  [{time.time() - t0:.0f} s]")
    return {"length": length, "depths": list(depths), "keys": list(keys), "results": acc, "seconds": time.time() - t0}


def says_keys(tok, keys):
    """Refuse a tokenizer that cannot give a pass key back (its digits unknown, or spaces between its tokens): no answer
    could hold the key, so every policy and the full cache would read 0/N, the tokenizer's doing and not the memory's."""
    for key in keys:
        if str(key) not in (back := tok.decode(tok.encode(f" {key}.").ids)):
            raise ValueError(f"the tokenizer cannot give the pass key back: ' {key}.' encodes and decodes as {back!r}, "
                             "so no answer could hold it (its numbers unknown, or spaces between tokens)")


def passkey_table(data) -> str:
    return "\n".join(f"  {r['policy']:>12} {r['size'] or '':>5} {r['regime'] or '':>4}: {r['correct']}/{r['total']}"
                     for r in data["results"].values())


# ---------------------------------------------------------------- memory and throughput (Table 1)

def synthetic_state(model, batch: int, n_rows: int, size=None) -> msrnn.State:
    """A state that already holds `n_rows` rows (random keys and values), as if `n_rows` tokens were read:
    a decode step's cost depends on how many rows there are, not on their content."""
    if not (guards.integer(n_rows) and n_rows >= 0):  # a count of -3 made a state of n = -3
        raise ValueError(f"n_rows is the rows the state has read, a whole number >= 0; got {n_rows!r}")
    state = msrnn.init_state(model, batch, size)
    g = torch.Generator().manual_seed(0)
    guards.check_memory(msrnn.state_bytes(model, n_rows + 64 if size is None else size + 1) * batch,
                       f"a state of {batch} sequences")
    held = n_rows if size is None else min(n_rows, size + 1)  # a bounded state still filling holds what it read
    for ms in state:
        cap = n_rows + 64 if size is None else size + 1  # room to decode without growing
        shape = (batch, ms.k.shape[1], cap, ms.k.shape[3])
        ms.k, ms.v = ((torch.randn(shape, generator=g, dtype=model.dtype) * 0.1).to(model.device) for _ in range(2))
        ms.pos = torch.arange(cap, device=model.device).masked_fill(torch.arange(cap, device=model.device) >= held, -1)
        ms.pos = ms.pos.expand(shape[:3]).contiguous()
        ms.score = torch.zeros(shape[:3], dtype=ms.score.dtype, device=model.device)
        ms.prev = torch.full(shape[:3], math.nan, dtype=ms.score.dtype, device=model.device)
        ms.n = held  # full (bounded): every slot used, slot 0 just freed; else slots [0, held), the next at held
        ms.free.zero_()
    state.t = n_rows
    return state


@torch.no_grad()
def decode_speed(model, batch: int, n_rows: int, size=None, policy=None, steps=8, step=llama.step, warmup=1) -> float:
    """Tokens per second of batched decoding from a state holding `n_rows` rows: the median of `steps`
    steps after `warmup` untimed ones (at most 63 in all for an unbounded state, which has room for 64
    more rows). step: llama.step, or fast.compiled_step()."""
    state = synthetic_state(model, batch, n_rows, size)
    tokens = torch.zeros(batch, dtype=torch.long, device=model.device)  # a step costs the same whatever the token
    return batch / harness.median_time(lambda: step(model, tokens, state, policy), steps, warmup)


def memory(model, context=4096, sizes=(256, 512, 1024, 2048), budget_gib=1.0, steps=8, log=quiet) -> dict:
    """Table 1 on a CPU: cache bytes per sequence, the largest batch in a cache budget, and the
    tokens/s of decoding at that batch after `context` tokens, full cache against TOVA."""
    budget, results = budget_gib * 2 ** 30, []
    if not (guards.integer(steps) and steps >= 1 and guards.integer(context) and context >= 1):
        raise ValueError(f"steps (decode steps timed) and context (tokens read first) are whole numbers >= 1; got "
                         f"{steps!r} and {context!r}")
    if not (guards.number(budget_gib) and 0 < budget_gib < 2 ** 60):  # 1e300 GiB: bytes past float's range, a NaN batch
        raise ValueError(f"the cache budget is a number of GiB above 0 (and below 2**60), got {budget_gib!r}")
    sizes = guards.whole_numbers(sizes, "memory's TOVA sizes, set beside the full cache,")
    if max(sizes) >= context:  # its size + 1 slots would be counted, but it holds at most the context's rows
        raise ValueError(f"memory: TOVA {max(sizes)} drops nothing after {context} tokens, so it is the full cache, not "
                         f"a smaller one: give sizes below the context (--context {context})")
    least = msrnn.state_bytes(model, min(sizes) + 1)
    if budget < least:  # a table of batch 0 everywhere says nothing
        raise ValueError(f"a cache budget of {budget_gib:g} GiB holds not one sequence: TOVA {min(sizes)} needs "
                         f"{least / 2**20:.3g} MiB per sequence")
    log(f"memory and throughput: decoding after {context} tokens, cache budget {budget_gib} GiB")
    for size in list(sizes) + [None]:
        per_seq = msrnn.state_bytes(model, context if size is None else size + 1)  # a bounded state has size + 1 slots
        batch = int(budget // per_seq)
        # a step's activations beside the cache: the (batch, vocab) logits, the one the budget does not count
        guards.check_memory(batch * model.config.vocab_size * model.embed.element_size() * 2, f"the logits of a batch of {batch:,}")
        if batch > 10_000:  # a small model's rows fill the budget slowly: say why the next line is long in coming
            print(f"[msrnn] memory: {'the full cache' if size is None else f'TOVA {size}'} fits a batch of {batch:,} in "
                  f"{budget_gib:g} GiB, decoded {steps + 1} steps: this takes a while (--budget smaller: sooner)",
                  file=sys.stderr, flush=True)
        tps = decode_speed(model, batch, context, size, None if size is None else policies.tova, steps) if batch else None  # none fits
        results.append({"size": size or context, "policy": "full" if size is None else "tova",
                     "cache_MiB_per_seq": per_seq / 2 ** 20, "max_batch": batch, "tokens_per_s": tps})
        log(memory_table({"results": results[-1:]}, whole=False))
    full = results[-1]["tokens_per_s"]
    for r in results:
        r["relative_throughput"] = r["tokens_per_s"] / full if full else None
    return {"context": context, "budget_GiB": budget_gib, "dtype": str(model.dtype).removeprefix("torch."),
            "results": results}


def memory_table(data, whole=True) -> str:
    """The run's table; whole=False: the rows of a run still going (`memory` logs each as it ends), with no
    run-level checks. A whole run's file must say its context and budget, which its rows are checked against."""
    rows, context, budget = data["results"], *((data["context"], data["budget_GiB"]) if whole else (None, None))
    harness.cells([r for r in rows if r["policy"] == "tova"], lambda r: r["size"], "TOVA size")  # one speed a size
    if whole and (len(rows) < 2 or [r["policy"] for r in rows].count("full") != 1):  # a whole run
        raise ValueError(f"{len(rows)} rows, {[r['policy'] for r in rows].count('full')} of the full cache: a run is "
                         "TOVA at one or more sizes and the full cache once")
    for r in rows:  # a speed is measured only for a batch that fits, and a batch that fits has a speed
        if r["policy"] not in ("tova", "full"):  # any other was printed as "full"
            raise ValueError(f"a row of policy {r['policy']!r}: memory measures TOVA and the full cache")
        if (r["max_batch"] == 0) != (r["tokens_per_s"] is None) or r["tokens_per_s"] is not None and not r["tokens_per_s"] > 0:
            raise ValueError(f"{r['policy']} {r['size']}: batch {r['max_batch']} with tokens_per_s {r['tokens_per_s']}; "
                             "a batch of 0 is not measured, and one that fits is, above 0")
        if context is not None and r["policy"] == "tova" and r["size"] >= context:  # as memory() refuses it
            raise ValueError(f"TOVA {r['size']} after {context} tokens drops nothing: it is the full cache")
        if whole and r["policy"] == "full" and r["size"] != context:
            raise ValueError(f"the full cache's row has size {r['size']}, the run read {context} tokens")
        full = next(x["cache_MiB_per_seq"] for x in rows if x["policy"] == "full") if whole else None
        if whole and r["policy"] == "tova" and not math.isclose(r["cache_MiB_per_seq"], full * (r["size"] + 1) / context,
                                                               rel_tol=1e-9):  # state_bytes: so many bytes a row
            raise ValueError(f"TOVA {r['size']} holds {r['cache_MiB_per_seq']:.1f} MiB, not the full cache's {full:.1f} MiB "
                             f"for {context} rows times {r['size'] + 1} rows")
        if budget is not None and r["max_batch"] != int(budget * 2 ** 30 // (r["cache_MiB_per_seq"] * 2 ** 20)):
            raise ValueError(f"{r['policy']} {r['size']}: a batch of {r['max_batch']} at {r['cache_MiB_per_seq']:.1f} MiB "
                             f"each is not what a {budget} GiB budget holds")
    return "\n".join(f"{('TOVA ' if r['policy'] == 'tova' else 'full ') + str(r['size']):>10}: "
                     f"{r['cache_MiB_per_seq']:7.1f} MiB/seq, batch {r['max_batch']:4d}, " +
                     (f"{r['tokens_per_s']:7.1f} tokens/s" if r["tokens_per_s"] is not None else "no sequence fits: not measured")
                     for r in data["results"])
