"""T2R's other two claims, measured: a state that stays the same size, and a decode step whose cost
stays flat, however many tokens were read; for T2R, the hybrid of t2r/length.py (sinks 4 + window 60 +
a decayed Hedgehog state, φ before RoPE), TOVA, TOVA with a T2R tail and the full cache.

    python -m t2r.speed        # results/t2r_speed.json, .log and .png

A decode step's cost depends on the state, not on the text that made it. So each state is built as it
stands after n tokens, without reading them: random keys and values in the rows it would hold (n for
the full cache, size + 1 slots for TOVA, with or without a tail) and random S, z (T2R, the hybrid, the tail), at
position n. Its bytes are counted from its tensors (`held_bytes`; tests/test_tail.py checks them
against a state that read the tokens), and the steps timed are real steps of the real model
(llama.step): `measure` says how.
Positions past the model's 8,192 are past its training, which changes what it says, not what a step costs.
"""
import argparse
import os
import statistics
import time

from engine import threads  # noqa: F401  (first of all: OpenMP's wait policy is set before torch loads it)

import torch

import llama
import load_weights
import msrnn
import policies
from engine import guards
from lab import experiments, harness
from t2r import linear, tail


def maps_from(spec: str, model) -> linear.FeatureMaps:
    """'relu:64', 'hedgehog:16', 'elu': untrained maps (a step costs the same whatever their values)."""
    if not isinstance(spec, str):
        raise ValueError(f"maps are given as kind:r, e.g. relu:64 or elu; got {spec!r}")
    try:
        kind, _, r = map_spec(spec).partition(":")  # the command line's checks: no default r, none for elu
    except argparse.ArgumentTypeError as e:
        raise ValueError(str(e)) from None
    return linear.FeatureMaps(model.config, int(r) if r else 0, kind, dtype=model.dtype).to(model.device)


def held_bytes(state: msrnn.State) -> int:
    """Bytes of what a state holds for attention: the keys and values of the rows in use, and S, z where
    there is a linear state (the slots' positions and scores, 16 bytes a row, are bookkeeping, left out)."""
    total = 0
    for ms in state:
        if isinstance(ms, linear.LinearState):
            total += sum(x.nbytes for x in (ms.S, ms.z, ms.K, ms.V, ms.Ks, ms.Vs))
            continue
        total += ms.k[:, :, :ms.n].nbytes + ms.v[:, :, :ms.n].nbytes
        if isinstance(ms, tail.TailState):
            total += ms.S.nbytes + ms.z.nbytes
    return total


SINKS, WINDOW = 4, 60  # the hybrid's exact rows


def hybrid_maps(model) -> linear.FeatureMaps:
    """The maps of t2r/length.py's best hybrid, untrained: sinks 4 + window 60 + Hedgehog 64, decayed, before RoPE."""
    return linear.FeatureMaps(model.config, 64, "hedgehog", WINDOW, dtype=model.dtype, sinks=SINKS, decay=True,
                              horizon=32.0, rotated=False).to(model.device)


def check_lengths(lengths, size) -> None:
    """The lengths a state is built at (`built`), as the command line checks them: whole, each once, and past
    what TOVA and the hybrid hold exactly (a state built as after fewer tokens would hold rows it never read)."""
    if not (guards.integer(size) and size >= 1):
        raise ValueError(f"size is TOVA's rows, a whole number >= 1; got {size!r}")
    exact = max(size, SINKS + WINDOW)
    if isinstance(lengths, (set, frozenset)):  # its order is the hash's: "not in increasing order" would blame the user
        raise ValueError(f"lengths are a list of whole numbers of tokens in increasing order, not a set (a set has no order); got {lengths!r}")
    lengths = guards.listed(lengths, "lengths are a list of whole numbers of tokens")
    if not lengths or not all(guards.integer(n) for n in lengths) or len(set(lengths)) < len(lengths) or lengths != sorted(lengths):
        raise ValueError(f"lengths are whole numbers of tokens, each named once, in increasing order; got {list(lengths)}")
    if min(lengths) <= exact + 1:  # at size + 1 tokens TOVA's size + 1 slots hold every row: the full cache's bytes
        raise ValueError(f"every length must exceed {exact + 1}: TOVA {size} holds {size + 1} rows and the hybrid "
                         f"{SINKS + WINDOW} exact rows, so at fewer tokens than that each is the full cache; got {min(lengths)}")


def built(model, kind: str, n: int, size: int, t2r_maps, tail_maps, hybrid=None) -> msrnn.State:
    """The state of `kind` ('full', 'tova', 'tail', 't2r', 'hybrid': t2r_maps, or hybrid's) as it stands
    after n tokens (see the top)."""
    if kind not in ("full", "tova", "tail", "t2r", "hybrid"):  # else it would build TOVA's state under that name
        raise ValueError(f"kind is one of 'full', 'tova', 'tail', 't2r', 'hybrid', not {kind!r}")
    if not (guards.integer(n) and n >= 0):
        raise ValueError(f"n is the tokens the state has read, a whole number from 0; got {n!r}")
    maps = {"t2r": t2r_maps, "tail": tail_maps, "hybrid": hybrid}
    if kind in maps and not isinstance(maps[kind], linear.FeatureMaps):
        raise ValueError(f"kind {kind!r} needs its feature maps (a linear.FeatureMaps: "
                         f"{'hybrid_maps' if kind == 'hybrid' else 'maps_from'}'s); got {maps[kind]!r:.60}")
    if kind in ("t2r", "tail") and (maps[kind].window or maps[kind].sinks) or kind == "hybrid" and not hybrid.window:
        raise ValueError(f"kind {kind!r} got maps with window {maps[kind].window} and sinks {maps[kind].sinks}: a hybrid's "
                         "maps (hybrid_maps') have a window, T2R's and a tail's (maps_from's) none")
    if kind in ("tova", "tail") and not (guards.integer(size) and size >= 1):  # else the full cache, named TOVA's
        raise ValueError(f"kind {kind!r} keeps `size` rows, a whole number from 1; got {size!r}")
    g = torch.Generator().manual_seed(0)
    rand = lambda like: (torch.rand(like.shape, generator=g, dtype=like.dtype) * 0.1).to(like.device)
    if kind in ("t2r", "hybrid"):
        state = linear.init_state(model, t2r_maps if kind == "t2r" else hybrid)
        for ls in state:
            ls.S, ls.z = rand(ls.S), rand(ls.z)
    else:
        state = experiments.synthetic_state(model, 1, n, None if kind == "full" else size)
    if kind == "tail":
        fresh = tail.init_state(model, tail_maps, size)
        for i, (ms, empty) in enumerate(zip(state, fresh)):
            state.layers[i] = tail.TailState(**{**vars(ms), "maps": tail_maps, "S": rand(empty.S), "z": rand(empty.z)})
    state.t = n
    return state


def labels(size, t2r, tail_spec) -> dict:
    """Each kind's label in the tables and the plot."""
    return {"t2r": f"T2R {t2r}", "hybrid": f"sinks {SINKS} + window {WINDOW} + hedgehog:64", "tova": f"TOVA {size}",
            "tail": f"TOVA {size} + tail {tail_spec}", "full": "full cache"}


@torch.no_grad()
def measure(model, lengths=(1024, 4096, 16384, 32768), size=256, t2r="relu:64", tail_spec="relu:16", steps=15, log=print) -> dict:
    """Every state built first, then `steps` rounds of one step from each, so that a change in the
    machine's load falls on every cell alike; each cell's figure is the median of its rounds, in CPU
    seconds of this thread (what other processes on shared cores take is not counted) and in wall seconds."""
    if not (guards.integer(steps) and steps >= 1):
        raise ValueError(f"steps must be a whole number >= 1, got {steps!r}")
    log = log or (lambda *a: None)  # as the other T2R functions take it
    lengths = guards.listed(lengths, "lengths are a list of whole numbers of tokens")
    lengths = sorted(lengths) if all(guards.integer(n) for n in lengths) else lengths  # the columns, the plot: in order
    t2r_maps, tail_maps, hybrid = maps_from(t2r, model), maps_from(tail_spec, model), hybrid_maps(model)
    check_lengths(lengths, size)
    kinds = labels(size, t2r, tail_spec)
    token = torch.zeros(1, dtype=torch.long, device=model.device)   # a step costs the same whatever the token
    cells = [(n, kind) for n in lengths for kind in kinds]
    states = {cell: built(model, cell[1], cell[0], size, t2r_maps, tail_maps, hybrid) for cell in cells}
    bytes_ = {cell: held_bytes(state) for cell, state in states.items()}  # before any step: as after n tokens
    cpu, wall = {cell: [] for cell in cells}, {cell: [] for cell in cells}
    for rnd in range(steps + 1):  # round 0 is the warm-up
        for (n, kind), state in states.items():
            c0, w0 = time.thread_time(), time.perf_counter()
            llama.step(model, token, state, policies.tova if kind in ("tova", "tail") else None)
            if rnd:
                cpu[n, kind].append(time.thread_time() - c0)
                wall[n, kind].append(time.perf_counter() - w0)
    results = []
    for n, kind in cells:
        results.append({"kind": kind, "label": kinds[kind], "tokens_read": n, "state_bytes": bytes_[n, kind],
                        "tokens_per_s": 1 / statistics.median(cpu[n, kind]),
                        "tokens_per_wall_s": 1 / statistics.median(wall[n, kind])})
        log(f"{n:>7,} tokens read  {kinds[kind]:<34} {bytes_[n, kind] / 2**20:9.2f} MiB   "
            f"{results[-1]['tokens_per_s']:7.2f} tokens/s ({results[-1]['tokens_per_wall_s']:.2f} by the wall clock)")
    return {"lengths": list(lengths), "size": size, "t2r": t2r, "tail": tail_spec, "steps": steps,
            "threads": torch.get_num_threads(), "dtype": str(model.dtype).removeprefix("torch."), "results": results}


def table(data) -> str:
    """One row per kind: MiB of state and tokens/s at each length, and the last length's speed against the first's."""
    lengths, rows = data["lengths"], {}
    check_lengths(lengths, data["size"])  # as `measure` refuses them
    if not data["results"]:  # a table of no row is a header
        raise ValueError(f"lengths {lengths} and no rows at them")
    named = labels(data["size"], data["t2r"], data["tail"])
    for (label, n), r in harness.cells(data["results"], lambda r: (r["label"], r["tokens_read"]), "(label, tokens read)").items():
        rows.setdefault(label, {})[n] = r
        if named.get(r["kind"]) != label:  # a row shown under another kind's label: its bytes and speed under that name
            raise ValueError(f"a {r['kind']!r} row is labelled {label!r}; this run's is {named.get(r['kind'])!r}")
        if not (guards.integer(r["state_bytes"]) and r["state_bytes"] >= 1):  # every state holds some whole bytes
            raise ValueError(f"{label} at {n:,} tokens: state_bytes is {r['state_bytes']!r}; a state holds a whole number of bytes")
        if not (guards.number(r["tokens_per_s"]) and r["tokens_per_s"] > 0):  # no step in no time, nor forever (inf)
            raise ValueError(f"{label} at {n:,} tokens: tokens_per_s is {r['tokens_per_s']!r}, and a step takes some time")
    head = "| | " + " | ".join(f"MiB at {n:,}" for n in lengths) + " | " + " | ".join(f"tokens/s at {n:,}" for n in lengths)
    lines = [head + f" | {lengths[-1]:,} vs {lengths[0]:,} |", "|---" * (2 * len(lengths) + 2) + "|"]
    for label, by_n in rows.items():
        if set(by_n) != set(lengths):  # a cell missing failed as a bare KeyError
            raise ValueError(f"{label} has rows at {sorted(by_n)}, not at every length {lengths}")
        mib = " | ".join(f"{by_n[n]['state_bytes'] / 2**20:.2f}" for n in lengths)
        tps = " | ".join(f"{by_n[n]['tokens_per_s']:.2f}" for n in lengths)
        ratio = by_n[lengths[-1]]["tokens_per_s"] / by_n[lengths[0]]["tokens_per_s"]
        lines.append(f"| {label} | {mib} | {tps} | {ratio:.2f}x |")
    return "\n".join(lines)


def draw(plt, data):
    plt.gcf().set_size_inches(11, 4.2)
    for panel, (key, scale, ylabel) in enumerate((("state_bytes", 2**-20, "state per sequence (MiB)"),
                                                  ("tokens_per_s", 1, "decoding speed (tokens/s)"))):
        plt.subplot(1, 2, panel + 1)
        for label in dict.fromkeys(r["label"] for r in data["results"]):
            pts = [(r["tokens_read"], r[key] * scale) for r in data["results"] if r["label"] == label]
            plt.plot(*zip(*pts), marker="o", label=label)
        plt.xscale("log")
        plt.yscale("log")
        plt.xlabel("tokens read")
        plt.ylabel(ylabel)
        plt.legend(fontsize=7)
    plt.suptitle(f"A constant state and a flat cost (T2R, the hybrid, TOVA, TOVA + tail) against a growing cache; "
                 f"{data['dtype']}, {data['threads']} thread(s)", fontsize=9)


def map_spec(text: str) -> str:
    """argparse type: a feature map kind:r (relu:64, hedgehog:16, t2r:32) or elu, checked before any work."""
    kind, colon, r = text.partition(":")
    r = r.lstrip("0") or r[:1]  # 'relu:064' is relu:64; 5,000 zeros before a 4 are no number Python refuses to read
    if kind not in linear.FeatureMaps.KINDS or (colon and not r) or (r and (not (r.isascii() and r.isdigit()) or len(r) > 9 or int(r) < 1)) or (kind == "hedgehog" and r and (int(r) % 2 or int(r) < 4)):
        raise argparse.ArgumentTypeError(f"a feature map is kind:r, kind one of {', '.join(linear.FeatureMaps.KINDS)} and "
                                         f"r >= 1 features (even and >= 4 for hedgehog), e.g. relu:64; got {text!r}")
    if kind != "elu" and not r:  # no default r: it was 64 here, 16 in demo.py ppl's --tail, under one label
        raise argparse.ArgumentTypeError(f"{kind} needs its features: {kind}:r, e.g. {kind}:64; got {text!r}")
    if kind == "elu" and r:  # ELU(x) + 1 has the head's own features: a row labelled elu:5 would hold 64
        raise argparse.ArgumentTypeError(f"elu takes no r: its features are x's own (r = head_dim); got {text!r}")
    return f"{kind}:{int(r)}" if r else kind  # 'relu:064' is relu:64: one label and one run name


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lengths", type=harness.at_least(1), nargs="+", default=[1024, 4096, 16384, 32768],
                    help="tokens read before the steps timed (default 1024 4096 16384 32768: t2r.length's and 32k)")
    ap.add_argument("--size", type=harness.at_least(1), default=256, help="TOVA's multi-state size (default 256)")
    ap.add_argument("--t2r", type=map_spec, default="relu:64", help="T2R's feature map, kind:r (default relu:64)")
    ap.add_argument("--tail", type=map_spec, default="relu:16", help="the tail's feature map, kind:r (default relu:16)")
    ap.add_argument("--steps", type=harness.at_least(1), default=15, help="decode steps timed per cell (default 15)")
    ap.add_argument("--threads", type=harness.at_least(1, threads.cores()), default=1,
                    help="torch threads (default 1: a step is ~2,000 small operations, and on 2 shared cores "
                         "waking a second thread for each cost more than it saved; OMP_NUM_THREADS is not read)")
    ap.add_argument("--debug", action="store_true", help=harness.DEBUG_HELP)
    args = harness.parse(ap, argv)
    args.lengths = sorted(args.lengths)  # the columns and the plot in order, one run name for any order
    try:  # before the model loads
        check_lengths(args.lengths, args.size)
    except ValueError as e:
        ap.error(f"--lengths: {e}")
    name = harness.run_name("t2r_speed", harness.changed_options(args, ap, ("debug",)))  # published settings, else runs/
    harness.check_writable(name)
    torch.set_num_threads(args.threads)
    t0, version = time.time(), harness.code_version()
    with harness.transcript() as printed:
        omp = os.environ.get("OMP_NUM_THREADS")
        print(f"t2r.speed: timing {args.threads} torch thread(s) (--threads)" + (
            f"; OMP_NUM_THREADS={omp} is not read" if omp and omp != str(args.threads) else ""), flush=True)
        model = load_weights.load_model()
        data = measure(model, args.lengths, args.size, args.t2r, args.tail, args.steps)
        print("\n" + table(data))
    about = {"code_version": version, "model": "SmolLM2-135M-Instruct (default)", "seconds": round(time.time() - t0, 1),
             "dtype": data["dtype"]}
    path = harness.save(name, data, about, printed.getvalue(), draw)
    print(f"t2r.speed: {time.time() - t0:.0f} s; results in {path.with_suffix('.*')}")


if __name__ == "__main__":
    harness.command(main)
