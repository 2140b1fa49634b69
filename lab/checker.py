"""The policy checker: is a policy exact, causal and well-formed, what does a call cost, how good is it?

    python demo.py check mine.py:fn            (or any built-in name: tova, sink:8, lookahead, ...)

exact     token by token = prefill = the masked transformer view, float64, on tiny random LLaMA and
          Mistral (sliding window) models, sizes 1 to 16, both prompt regimes
causal    the drops before step t do not change when the tokens after t do
contract  a float score per row, (B, 1, n) or (B, Hkv, n), no NaN; the same drops twice; a sequence's
          drops do not depend on the other sequences of its batch
cost      microseconds per call with 257 rows of the default model's shape, next to TOVA's
quality   perplexity on the default model and a real book, next to Window+4 and TOVA, both regimes
"""
import dataclasses
import itertools
import sys
import time

import torch

from engine import guards
from lab import experiments
from engine import fast, oneshot
from lab import harness
import llama
import msrnn
import policies
from lab import specs

EXACT = 1e-10
SIZES = (1, 2, 3, 5, 8, 16)
MODELS = {  # 3 layers, dim 32, 6 query heads sharing 2 KV heads; the second with Mistral's sliding window
    "LLaMA": llama.Config(vocab_size=61, dim=32, n_layers=3, n_heads=6, n_kv_heads=2, head_dim=8, ffn_dim=48),
    "Mistral": llama.Config(vocab_size=61, dim=32, n_layers=3, n_heads=6, n_kv_heads=2, head_dim=8, ffn_dim=48,
                            sliding_window=7),
}


def tokens(B, T, seed):
    return torch.randint(0, 61, (B, T), generator=torch.Generator().manual_seed(seed))


LIMIT = 0.05  # seconds one call may take on these tiny models (TOVA takes 10 µs); the checks make about 7,000


class Watch:
    """The policy of `named`, checked at every call as no run can afford: that it changes nothing it is
    shown, even through .data or .numpy(), which the version counters of guards.score_rows cannot see
    (the contents are compared, bit for bit; in a run such a write reaches only a copy), and that a
    call takes less than LIMIT on average (a slow policy stops the check). Every 5 s a progress line
    goes to stderr."""

    def __init__(self, named):
        self.named, self.calls, self.took, self.start, self.shown, self.stopped = named, 0, 0.0, time.time(), time.time(), None
        self.nan = None  # (layer, step) of the first NaN score in any check's run: the contract's own run is short
        on = (lambda model, x: self.watch(named.fn(model, x))) if named.reads_ahead else self.watch(named.fn)
        self.checked = dataclasses.replace(named, fn=on)

    def watch(self, policy):
        @guards.wraps(policy)
        def watching(rows):
            before = {f: getattr(rows, f).clone() for f in guards.ROWS_FIELDS}
            t0 = time.perf_counter()
            scores = policy(rows)
            self.took, self.calls = self.took + time.perf_counter() - t0, self.calls + 1
            if (self.nan is None and torch.is_tensor(scores) and not scores.is_nested and scores.layout == torch.strided
                    and scores.device.type != "meta" and scores.is_floating_point() and scores.isnan().any()):
                self.nan = (rows.layer, rows.t)
            if time.time() - self.shown > 5:
                self.shown = time.time()
                print(f"  ... {self.calls:,} calls in {self.shown - self.start:.0f} s", file=sys.stderr, flush=True)
            bits = lambda x: x.contiguous().view(torch.uint8)         # NaN equals NaN, bit for bit
            changed = [f for f, x in before.items() if not torch.equal(bits(x), bits(getattr(rows, f)))]
            if changed:
                raise guards.PolicyError(f"policy {guards.policy_name(policy)} wrote into rows.{changed[0]} (the contents "
                                         "changed, through .data, .numpy() or the like): a policy must change nothing it is shown")
            if self.calls >= 3 and self.took > LIMIT * self.calls:  # on average: one stall of the machine is not the policy's
                self.stopped = (f"stopped after {self.calls} calls of {self.took / self.calls * 1e3:.0f} ms on average "
                                f"on the checker's tiny models (limit {LIMIT * 1e3:.0f} ms; the checks make about 7,000 calls)")
                raise guards.PolicyError(f"policy {guards.policy_name(policy)} is too slow: {self.stopped}")
            return scores
        watching.__name__ = guards.policy_name(policy)  # wraps copies no name from a partial or a callable instance
        return watching


def recorded(policy, log):
    """policy, also appending (layer, t, dropped positions (B, Hkv, k), scores per layer or head, NaN?)
    to `log` at each call."""
    @guards.wraps(policy)
    def recording(rows):
        scores = policy(rows)
        if isinstance(scores, torch.Tensor) and scores.is_floating_point() and scores.dim() == 3:
            drop = oneshot.lowest(scores, rows.pos, rows.pos.shape[-1] - rows.size)  # (B, Hkv, k)
            dropped = rows.pos.gather(-1, drop)                                    # (B, Hkv, k)
            log.append((rows.layer, rows.t, dropped.tolist(), scores.shape[1], bool(scores.isnan().any())))
        return scores
    recording.__name__ = guards.policy_name(policy)
    return recording


def drops(named, model, x, size):
    """The drop history of a prefill, as `recorded` logs it."""
    log = []
    fast.prefill(model, x, recorded(named.on(model, x), log), size)
    return log


# ---------------------------------------------------------------- the checks; each returns (verdict, detail)

def refuses(e: guards.PolicyError) -> bool:
    """Whether the policy refused the size it was run at, with its own ValueError (sink:8 at size 5): a
    limit it states, not a failure; the checks use the sizes it accepts."""
    return isinstance(getattr(e, "original", None), ValueError)


def exact(named, deterministic=True):
    worst, refused, runs = 0.0, {}, 0
    for cfg in MODELS.values():
        model = llama.random_model(cfg, seed=1)
        x = tokens(2, 40, seed=2)
        policy = named.on(model, x)
        for size in SIZES:
            for prompt in (0, 24):
                try:
                    views = [oneshot.run(model, x, policy, size, prompt),
                             fast.prefill(model, x, policy, size, prompt)[0],
                             oneshot.masked_forward(model, x, policy, size, prompt)[0]]
                except guards.PolicyError as e:
                    if not refuses(e):
                        return "fail", str(e)
                    refused[size] = str(e.original)
                    continue
                worst = max(worst, *[(v - views[0]).abs().max().item() for v in views[1:]])
                runs += 1
    if not runs:
        return "fail", "the policy refused every size: " + next(iter(refused.values()))
    where = f"{runs} runs: LLaMA and Mistral (sliding window), sizes {SIZES[0]}-{SIZES[-1]}, both regimes"
    note = f"; sizes {', '.join(map(str, sorted(refused)))} refused: {next(iter(refused.values()))}" if refused else ""
    if worst > EXACT:  # a deterministic policy: most often scores equal up to rounding, which the views round differently
        why = ("; look for ties that rounding decides, e.g. scores that depend only on the token: break them by "
               "position") if deterministic else "; it is not deterministic (see contract)"
        return "fail", f"the views differ by {worst:.1e} (bound {EXACT:.0e}, float64) in {where}{why}"
    return "pass", f"token by token = prefill = masked view to {worst:.0e} (bound {EXACT:.0e}, float64), {where}{note}"


CAUSAL_SIZES, CONTRACT_SIZES = (5, 8, 12, 16, 20), (6, 12, 16, 20)  # below the 24 and 30 tokens they read


def causal(named, deterministic=True, t=24):
    if not deterministic:
        return "cannot tell", "not deterministic (see contract), so a change after step t proves nothing"
    model = llama.random_model(MODELS["LLaMA"], seed=1)
    a = tokens(1, 48, seed=3)
    b = torch.cat([a[:, :t], tokens(1, 48 - t, seed=4)], 1)          # the same first t tokens, then others
    sizes, refusal = [], None
    for size in CAUSAL_SIZES:  # each drops rows before step t; a policy that refuses the small ones (sink:12) has the others
        try:
            before = [[d for d in drops(named, model, x, size) if d[1] < t] for x in (a, b)]
        except guards.PolicyError as e:
            if not refuses(e):
                return "fail", str(e)
            refusal = e.original
            continue
        sizes.append(size)
        if before[0] != before[1]:
            # the same tokens twice more (a state that flips at every run matches the first run every other time)
            if any([d for d in drops(named, model, a, size) if d[1] < t] != before[0] for _ in range(2)):
                return "fail", (f"not deterministic: at size {size} a second run on the same tokens dropped other rows "
                                "(state kept between calls, e.g. a global counter?), so a change after step t proves nothing")
            layer, step = next(p or q for p, q in itertools.zip_longest(*before) if p != q)[:2]
            return "lookahead (not a policy)", (f"size {size}: its drops before step {t} change with the tokens after "
                                                f"it (first at layer {layer}, step {step})")
    if not sizes:
        return "fail", f"the policy refused sizes {', '.join(map(str, CAUSAL_SIZES))}: {refusal}"
    return "pass", f"drops before step {t} are the same whatever follows (sizes {', '.join(map(str, sizes))})"


def contract(named):
    model = llama.random_model(MODELS["LLaMA"], seed=1)
    x = tokens(3, 30, seed=5)
    for size in CONTRACT_SIZES:  # the first the policy accepts
        try:
            first, again = drops(named, model, x, size), drops(named, model, x, size)
            alone = [drops(named, model, x[b:b + 1], size) for b in range(3)]
            break
        except guards.PolicyError as e:
            if not refuses(e) or size == CONTRACT_SIZES[-1]:
                return "fail", str(e)
    nan = next((d for d in first if d[4]), None)
    if nan:
        return "fail", f"NaN scores (layer {nan[0]}, step {nan[1]}): NaN cannot be ranked, so which row goes is arbitrary"
    if first != again:
        return "fail", "not deterministic: two runs on the same input dropped different rows"
    for b in range(3):
        if [(d[0], d[1], d[2][b]) for d in first] != [(d[0], d[1], d[2][0]) for d in alone[b]]:
            return "fail", f"not batch-independent: sequence {b} drops other rows when run alone than in a batch of 3"
    kind = "per layer (B, 1, n)" if first[0][3] == 1 else "per KV head (B, Hkv, n)"
    return "pass", f"float scores {kind}, no NaN; deterministic; each sequence's drops independent of its batch"


def cost(named, size=256, calls=200):
    """Microseconds per call on rows shaped like the default model's (3 KV heads of 3 queries, head_dim 64)."""
    g = torch.Generator().manual_seed(0)
    n, t = size + 1, 2 * size
    pos = torch.randperm(t + 1, generator=g)[:n].sort().values.expand(1, 3, n)
    rows = msrnn.Rows(attn=torch.randn(1, 3, 3, n, generator=g).softmax(-1), pos=pos, score=torch.rand(1, 3, n, generator=g),
                      keys=torch.randn(1, 3, n, 64, generator=g), values=torch.randn(1, 3, n, 64, generator=g),
                      query=torch.randn(1, 3, 3, 64, generator=g), prev=torch.rand(1, 3, n, generator=g),
                      t=t, size=size, layer=0)

    def micros(policy):  # as the state calls it, with its checks
        return harness.median_time(lambda: guards.score_rows(policy, rows), calls, warmup=5) * 1e6
    try:
        mine = micros(named.on(llama.random_model(MODELS["LLaMA"], seed=1), tokens(1, 2 * t, seed=6)))
    except guards.PolicyError as e:
        return "fail", str(e)
    return f"{mine:.0f} µs per call", f"size {size}; TOVA {micros(policies.tova):.0f} µs, Window {micros(policies.window):.0f} µs"


def quality(named, model, tok, sizes=(64, 256), length=2048, book="alice29", cache=None, log=lambda line: None):
    """Perplexity of the second half of the first `length` tokens of a book, after its first half as the
    prompt, read per step or in full then cut once; next to Window+4 and TOVA (cached, as the sweep's
    settings are, by experiments.cache_dir). {(column, size, regime): perplexity}: a column per policy,
    by what it is (its key), not its label: a copy of TOVA edited and still labelled "TOVA" is a column
    of its own, beside "TOVA (built-in)". Each setting measured is logged as it ends (a slow policy shows
    its pace rather than minutes of nothing)."""
    ids = experiments.book_chunks(tok, 1, length, books=(book,))[0]
    cache = cache or experiments.cache_dir("check", model, ids, code=(__file__,))  # this file measures: its code is in the key
    table, columns = {}, {}  # policy key -> its column
    for p in (named, specs.named("sink"), specs.named("tova")):
        if p.key in columns:  # the policy checked is one of the references
            continue
        column = columns[p.key] = p.label if p.label not in columns.values() else f"{p.label} (built-in)"
        for size in sizes:
            for regime in ("step", "full"):
                file = cache / f"{book}-{length}-{p.key}-{size}-{regime}.json"
                ppl = harness.read_cached(file, (float, 1))  # a perplexity below 1 is no run's
                if ppl is None:
                    t0 = time.time()
                    ppl = experiments.perplexity(model, ids, p, size, chunk=length, regime=regime,
                                                 prompt_len=length // 2)["ppl"]
                    harness.write_cached(file, ppl)
                    log(f"  quality   {column} {size} {regime}: {ppl:.2f} ({time.time() - t0:.0f} s)")
                table[column, size, regime] = ppl
    return table


# ---------------------------------------------------------------- the verdict table

def check(policy, model=None, tok=None, log=print, more=None) -> dict:
    """Run every check on a policy (a name, 'file.py:fn', or a function) and print the verdict table.
    With the default model and tokenizer given, also its quality on a real book; more: checks of
    another folder's, name -> fn(named, deterministic) -> (verdict, detail), e.g. t2r.train.tail_check's
    "tail" (lab/ stands below t2r/, so the checker cannot import it)."""
    named = specs.named(policy)
    if named is specs.FULL:  # as the command line says: every check would fail on calling None
        raise ValueError("check takes policies; 'full' keeps every row and has nothing to check")
    t0 = time.time()
    log(f"policy {named.spec or named.label} ({named.label})")
    out, watch = {}, Watch(named)
    out["contract"] = contract(watch.checked)
    deterministic = "not deterministic" not in out["contract"][1]
    out["exact"] = exact(watch.checked, deterministic)
    out["causal"] = causal(watch.checked, deterministic)
    out["cost"] = ("fail", watch.stopped) if watch.stopped else cost(named)
    if out["contract"][0] == "pass" and watch.nan:  # NaN only past the contract's 30 steps
        out["contract"] = ("fail", f"NaN scores (layer {watch.nan[0]}, step {watch.nan[1]}, in the other checks' runs, past "
                                   "the contract's 30 steps): NaN cannot be ranked, so which row goes is arbitrary")
    for name, fn in (more or {}).items():
        out[name] = fn(named, deterministic)
    for name in ("exact", "causal", "contract", "cost", *(more or {})):
        log(f"  {name:<9} {out[name][0]:<26} {out[name][1]}")
    if model is not None:
        length = 2048
        table = out["quality"] = quality(named, model, tok, length=length, log=log)
        labels = list(dict.fromkeys(label for label, _, _ in table))
        log(f"  quality   perplexity of tokens {length // 2:,}-{length - 1:,} of alice29 after the first {length // 2:,} "
            f"as the prompt; 'step' evicts while reading it, 'full' reads it in full then cuts once")
        width = max(14, *(len(label) + 2 for label in labels))  # a label past 13 characters ("TOVA (built-in)")
        log("            " + f"{'size':>6} {'prompt':>7}" + "".join(f"{label:>{width}}" for label in labels))
        for size, regime in dict.fromkeys((s, r) for _, s, r in table):
            log("            " + f"{size:>6} {regime:>7}" + "".join(f"{table[label, size, regime]:>{width}.2f}"
                                                                     for label in labels))
    out["seconds"] = time.time() - t0
    log(f"  checked in {out['seconds']:.0f} s")
    return out



def failed(named, out) -> list[str]:
    """The checks a result fails: exact and contract must pass, and causal too unless the policy is
    declared to read ahead (a lookahead, for which "lookahead (not a policy)" is the expected verdict)."""
    bad = [what for what in ("exact", "contract", "tail") if what in out and out[what][0] != "pass"]
    if out.get("cost", ("",))[0] == "fail":  # NaN scores, or too slow, on the cost check's rows: its exit was 0
        bad.append("cost")
    if out["causal"][0] != "pass" and not (named.reads_ahead and out["causal"][0] == "lookahead (not a policy)"):
        bad.append("causal")
    return bad


def summary(named, results, log=print):
    """One line per policy: the verdicts, the cost, and the quality numbers if they were measured."""
    cols = [k[1:] for k in results[0].get("quality", {}) if k[0] == named[0].label]
    width = max(len(p.label) for p in named) + 2
    log(f"\n{'policy':<{width}}{'exact':>7}{'causal':>13}{'contract':>10}{'µs/call':>9}"  # "cannot tell": 11
        + "".join(f"{f'{s} {r}':>10}" for s, r in cols))
    for p, out in zip(named, results):
        causal = "lookahead" if out["causal"][0].startswith("lookahead") else out["causal"][0]
        log(f"{p.label:<{width}}{out['exact'][0]:>7}{causal:>13}{out['contract'][0]:>10}"
            f"{out['cost'][0].split()[0]:>9}" + "".join(f"{out['quality'][p.label, s, r]:>10.2f}" for s, r in cols))
