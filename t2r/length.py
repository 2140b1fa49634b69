"""Quality against length for the linear state: python -m t2r.length  ->  results/t2r_length.{json,log,png}

Hybrids of 64 exact rows per layer, trained side by side by attention transfer on one stream of
the frozen default model (maps only): window 64 (the hybrid of `demo.py t2r`), sinks 4 + window 60,
and sinks 4 + window 60 with a learned decay per KV head (t2r/linear.py), two sets per starting horizon
(`--horizons`: the horizon learns slowly, so where it starts is most of what it ends at): φ after RoPE, and
φ before it (rotated=False: the linear part is one function at every position, so what it learned on
1,024-token chunks it applies unchanged at 16,384). `--sets plain` trains plain T2R instead (no exact
row: undecayed, and decayed with φ after and before RoPE) into results/t2r_length_plain.*, without the
policies' rows, which the hybrids' run already has. `--sets tails` trains a tail for TOVA (t2r/tail.py:
the rows TOVA drops folded into a decayed linear state, φ before RoPE) under TOVA's own drops, one
chunk at each of `--sizes` in turn, and reads it at every size beside TOVA alone, into
results/t2r_length_tails.*. Each hybrid is
measured with its linear part and with it zeroed (its twin: the exact rows alone), beside Window+4 and TOVA at 63 rows
(64 attended, the same exact rows) and the full cache, on the first 1,024, 4,096 and 16,384 tokens of
the evaluation books read as one text (alice29, then asyoulik; never a training book).
"""
import argparse
import math
import pathlib
import time

from engine import threads  # noqa: F401  (first of all: OpenMP's wait policy is set before torch loads it)

import torch

import load_weights
import msrnn
from data import corpus
from lab import experiments, harness, specs
from t2r import linear, tail, train

HYBRIDS = {"window 64": dict(window=64), "sinks 4 + window 60": dict(window=60, sinks=4)}


PLAIN = {"plain T2R": {}}


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


def by_length(nll, lengths) -> dict:
    """Perplexity of the first n tokens for each n, from one pass over the longest (a causal model's
    loss on the first n tokens does not read the tokens after them)."""
    return {n: math.exp(nll[:n - 1].mean().item()) for n in lengths}


def linear_rows(model, text, lengths, maps: dict, args, log) -> list:
    """Each set of maps at every length, a hybrid beside its zeroed twin; with the hybrids, Window+4, TOVA at
    63 rows and the full cache."""
    rows = []
    for n in lengths:
        x = text[:, :n]
        ppl = lambda logits: math.exp(experiments.next_token_nll(logits, x).mean().item())
        zeroed = {}  # (window, sinks) -> the exact rows alone: one twin for every set that holds those rows
        with torch.no_grad():
            for name, m in maps.items():
                exact = m.window + m.sinks
                row = dict(method=f"{name} + linear" if exact else name, size=exact or None,
                           state_bytes=linear.state_bytes(model, m), tokens=n, ppl=ppl(linear.forward(model, m, x)))
                if exact:  # plain T2R has no twin: zeroed, it attends to nothing
                    if (m.window, m.sinks) not in zeroed:
                        zeroed[m.window, m.sinks] = ppl(linear.forward(model, train.zeroed(m), x))
                    row["zeroed_ppl"] = zeroed[m.window, m.sinks]
                rows.append(row)
                log(f"   {n:6,} tokens, {row['method']}: {row['ppl']:.2f}" +
                    (f" (zeroed {row['zeroed_ppl']:.2f})" if exact else ""))
            for spec in ("sink", "tova", "full") if args.sets == "hybrids" else ():
                named = specs.named(spec)
                size = None if named is specs.FULL else 63
                got = math.exp(experiments.nll(model, x, named, size).mean().item())
                rows.append(dict(method=f"{named.label}" + (f" {size}" if size else ""), size=size, tokens=n, ppl=got,
                                 state_bytes=None if size is None else msrnn.state_bytes(model, size)))
                log(f"   {n:6,} tokens, {rows[-1]['method']}: {got:.2f}")
    return rows


def tail_rows(model, text, lengths, maps: dict, args, log) -> list:
    """TOVA at each size alone and with each tail (its zeroed twin is TOVA alone: a tail of no features is
    the policy alone, bit for bit, tests/test_tail.py), and the full cache, at every length."""
    tova, rows = specs.named("tova"), []
    def add(method, size, state_bytes, ppl, zeroed=None):
        for n in lengths:
            rows.append(dict(method=method, size=size, state_bytes=state_bytes, tokens=n, ppl=ppl[n]) |
                        ({} if zeroed is None else {"zeroed_ppl": zeroed[n]}))
        log(f"   {method}: " + ", ".join(f"{ppl[n]:.2f}" for n in lengths) + f" at {', '.join(map(str, lengths))} tokens")
    with torch.no_grad():
        for size in args.sizes:
            alone = by_length(experiments.nll(model, text, tova, size)[0], lengths)
            add(f"TOVA {size}", size, msrnn.state_bytes(model, size), alone)
            for name, m in maps.items():
                got = experiments.next_token_nll(tail.forward(model, m, text, tova.fn, size), text)[0]
                add(f"TOVA {size} {name}", size, tail.state_bytes(model, m, size), by_length(got, lengths), alone)
        add("full cache", None, None, by_length(experiments.nll(model, text, specs.FULL, None)[0], lengths))
    return rows


def held_out(tok, length: int) -> torch.Tensor:
    """The first `length` tokens of the evaluation books, one after the other, (1, length)."""
    ids = [i for b in ("alice29", "asyoulik") for i in tok.encode(corpus.book(b)).ids]
    if len(ids) < length:
        raise ValueError(f"the evaluation books hold {len(ids):,} tokens, fewer than {length:,}")
    return torch.tensor(ids[:length])[None]


def horizons(maps) -> list:
    """The learned decay's horizon 1 / (1 - γ) in tokens, per layer and KV head."""
    return [[round(1 / (1 - g), 1) if g < 1 else math.inf for g in maps.gamma(i).tolist()] for i in maps.layers]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--minutes", type=harness.positive, default=9.0, help="attention transfer budget (default 9)")
    ap.add_argument("--r", type=harness.at_least(2), default=64, help="Hedgehog features (default 64)")
    ap.add_argument("--lengths", type=harness.at_least(2), nargs="+", default=[1024, 4096, 16384])
    ap.add_argument("--train-length", type=harness.at_least(2), default=1024, help="tokens per training chunk")
    ap.add_argument("--horizons", type=harness.at_least(2), nargs="+", default=[32],
                    help="the decayed sets' starting horizons in tokens, two sets each (default 32)")
    ap.add_argument("--sets", choices=("hybrids", "plain", "tails"), default="hybrids",
                    help="hybrids of 64 exact rows, beside the policies (default), plain T2R alone, or TOVA's tails")
    ap.add_argument("--sizes", type=harness.at_least(1), nargs="+", default=[32, 64, 128, 256],
                    help="--sets tails: TOVA's sizes, trained in turn and read (default 32 64 128 256)")
    ap.add_argument("--tail-r", type=harness.at_least(2), default=16, help="--sets tails: Hedgehog features (default 16)")
    ap.add_argument("--name", help="results/<name>.* (default t2r_length, or t2r_length_<sets>)")
    args = ap.parse_args(argv)
    args.name = args.name or ("t2r_length" if args.sets == "hybrids" else f"t2r_length_{args.sets}")
    t0, version = time.time(), harness.code_version()
    with harness.transcript() as printed:
        log = lambda s: print(s, flush=True)
        model, tok = load_weights.load_model(), load_weights.load_tokenizer()
        chunks = train.training_text(tok, args.train_length)
        if args.sets == "tails":
            maps, tova = tail_sets(model.config, args.tail_r, args.horizons), specs.named("tova")
            students = [tail.student(model, m, tova.fn, args.sizes) for m in maps.values()]
            described = [sorted(maps), tova.key, args.sizes, args.tail_r, pathlib.Path(tail.__file__)]
        else:
            sets = map_sets(args.sets, args.horizons)
            maps = {name: linear.FeatureMaps(model.config, args.r, "hedgehog", **kw) for name, kw in sets.items()}
            students, described = None, [sorted(sets)]
        key = train.code_key(harness.fingerprint(*experiments.weights(model)), chunks, args.r, args.minutes, *described)
        path = harness.RESULTS / f"t2r_length_{key}.safetensors"
        log(f"attention transfer of {', '.join(maps)} ({args.minutes} min, {len(chunks)} chunks of {args.train_length}) -> {path.name}")
        run = train.transfer(model, list(maps.values()), chunks, student=students, epochs=1, minutes=args.minutes,
                             checkpoint=path, log=None)
        log(f"   {run['tokens']:,} tokens in {run['seconds']:.0f} s ({run['tokens_per_s']:.0f} tokens/s)")
        text = held_out(tok, max(args.lengths))
        rows = (tail_rows if args.sets == "tails" else linear_rows)(model, text, sorted(args.lengths), maps, args, log)
        data = {"rows": rows, "training": {k: run[k] for k in ("tokens", "seconds", "tokens_per_s")},
                "horizons": {n: horizons(m) for n, m in maps.items() if m.decay},
                "r": args.tail_r if args.sets == "tails" else args.r, "train_length": args.train_length}
        print("\n" + table(data))
    path = harness.save(args.name, data, {"code_version": version, "seconds": round(time.time() - t0, 1)}, printed.getvalue(), draw)
    print(f"t2r.length: {time.time() - t0:.0f} s; results in {path.with_suffix('.*')}")


def table(data) -> str:
    lengths = sorted({r["tokens"] for r in data["rows"]})
    methods = list(dict.fromkeys(r["method"] for r in data["rows"]))
    cell = {(r["method"], r["tokens"]): r for r in data["rows"]}
    twins = " (zeroed)" if any("zeroed_ppl" in r for r in data["rows"]) else ""
    lines = ["| method | " + " | ".join(f"{n:,} tokens{twins}" for n in lengths) + " |", "|---|" + "---|" * len(lengths)]
    for m in methods:
        lines.append(f"| {m} | " + " | ".join(f"{cell[m, n]['ppl']:.2f}" + (f" ({cell[m, n]['zeroed_ppl']:.2f})"
                                               if "zeroed_ppl" in cell[m, n] else "") for n in lengths) + " |")
    return "\n".join(lines)


def draw(plt, data):
    for m in dict.fromkeys(r["method"] for r in data["rows"]):
        pts = sorted((r["tokens"], r["ppl"]) for r in data["rows"] if r["method"] == m)
        plt.plot(*zip(*pts), "o-", label=m)
    plt.xscale("log", base=2)
    plt.yscale("log")  # perplexities from 18 to 1,600 on one plot
    plt.xlabel("tokens of held-out text read")
    plt.ylabel("perplexity")
    methods = " ".join(r["method"] for r in data["rows"])
    plt.title("TOVA with and without a tail, against length" if "tail" in methods else
              "64 exact rows and a linear state, against length" if "linear" in methods else
              "plain T2R (no exact row), against length")
    plt.legend(fontsize=7)


if __name__ == "__main__":
    main()
