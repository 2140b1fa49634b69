"""The leaderboard: any set of policies on every measure at once (python demo.py board).

Per policy: perplexity at each size on the sweep's chunks (experiments.sweep), the share of the gap
from Window+4 to the better lookahead bound it closes, passkey keys found per step and one-shot, µs
per call, and the checker's verdicts. Every cell is cached by the policy's key (its source and
parameters), as the sweep's settings are, so adding a policy measures only its own cells.
"""
import re
import time

from engine import guards, threads
from lab import checker
from lab import experiments
from lab import harness
from lab import specs

BOUNDS = ("lookahead", "lookahead:256")  # the gap is measured to the better of the two at each size
BASELINE = "sink"                        # Window+4, where the gap starts


def board(model, tok, names, sizes=(64, 256, 1024), n_chunks=4, chunk=4096, passkey_sizes=(128, 512), length=2048,
          jobs=2, compile=False, log=experiments.quiet) -> dict:
    names = guards.listed(names, "the board takes a list of policies' names")
    if not names:  # a board of no policy ranks nothing
        raise ValueError("the board takes one or more policies' names, got none")
    named = specs.distinct(list(dict.fromkeys(specs.named(n) for n in names)), taken=("(bound)",))  # the table's own row
    sizes, passkey_sizes = guards.whole_numbers(sizes, "sizes"), guards.whole_numbers(passkey_sizes, "passkey sizes")
    if specs.FULL in named:
        raise ValueError("the board ranks policies against the full cache, which every sweep measures: leave 'full' out")
    if any(p.reads_ahead for p in named):
        raise ValueError(f"the board ranks policies against its own bounds ({', '.join(BOUNDS)}); "
                         f"{', '.join(p.label for p in named if p.reads_ahead)} reads ahead")
    t0 = time.time()
    prompts = experiments.passkey_prompts(tok, length, DEPTHS, KEYS)  # a length too short for the key, named first
    experiments.drops_nothing(sizes, chunk, f"{chunk}-token chunks", least=2)  # before the sweep, not after it
    experiments.drops_nothing(passkey_sizes, length, f"{length}-token prompts", scored=False)
    experiments.refused_sizes(named, passkey_sizes)  # the sweep checks its own sizes, but not by the board's name:
    try:
        experiments.refused_sizes([specs.named(BASELINE)], sizes)
    except ValueError as e:
        raise ValueError(f"the board measures each policy from its baseline, Window+4, and {e}") from None
    experiments.says_keys(tok, KEYS)
    cache = experiments.cache_dir("board", model, prompts, code=(__file__,), tok=tok)
    file = lambda p, what: cache / f"{p.key}-{what}.json"
    missing = lambda p, what: harness.read_cached(file(p, what), CELLS[what.split("-")[-1]]) is None
    # the cells not measured yet go to the sweep's processes after its settings, the longest first:
    # every one-shot cut in one job (they share the reading of the prompts, experiments.oneshot_answer_ids),
    # then each policy's per-step pass-key cells and its checker run
    send = lambda p: specs.sent(p, min(jobs, threads.cores()))       # a name a worker can load, else the function
    cuts = [(p, s) for p in named for s in passkey_sizes if missing(p, f"passkey-{s}-full")]
    more = [(oneshot_cells, tuple(send(p) for p, _ in cuts), tuple(s for _, s in cuts), prompts, tok,
             tuple(file(p, f"passkey-{s}-full") for p, s in cuts))] if cuts else []
    more += [(step_cell, send(p), s, prompts, tok, compile, file(p, f"passkey-{s}-step"))
             for s in sorted(passkey_sizes, reverse=True) for p in named if missing(p, f"passkey-{s}-step")]
    more += [(check_cell, send(p), file(p, "checked")) for p in named if missing(p, "checked")]
    given = {p.spec for p in named}  # the policies as keyed here, not their names read again (a file may change)
    sweep = experiments.sweep(model, tok, sizes, names=[*(n for n in [BASELINE] if n not in given), *named,
                                                        *(n for n in BOUNDS if n not in given)], n_chunks=n_chunks,
                              chunk=chunk, jobs=jobs, compile=compile, more=more, log=log)
    rows = {}
    for p in named:
        checked = harness.read_cached(file(p, "checked"), CELLS["checked"], fresh=False)  # measured by the sweep's jobs
        rows[p.label] = {"ppl": {s: sweep["ppl"][p.label][s]["ppl"] for s in sizes},
                         "per_chunk": {s: sweep["ppl"][p.label][s]["per_chunk"] for s in sizes},
                         "gap_closed": sweep["gap_closed"].get(f"{p.label} / best bound", {}),
                         "passkey": {f"{s} {r}": harness.read_cached(file(p, f"passkey-{s}-{r}"), CELLS[r], fresh=False)["found"]
                                     for s in passkey_sizes for r in ("step", "full")},
                         "verdicts": {k: checked[k] for k in ("contract", "exact", "causal")},
                         # the checker's cost ("12 µs per call", or "fail")
                         "us_per_call": float(checked["cost"].split()[0]) if checked["cost"].endswith("per call") else None}
    return {"sizes": list(sizes), "n_chunks": n_chunks, "chunk": chunk, "passkey_sizes": list(passkey_sizes),
            "length": length, "policies": rows, "sweep": sweep, "seconds": time.time() - t0}


DEPTHS, KEYS = (0.1, 0.5, 0.9), (71432, 50918)  # experiments.passkey's prompts
PROMPTS = len(DEPTHS) * len(KEYS)
CELLS = {"step": {"found": (int, 0, PROMPTS)}, "full": {"found": (int, 0, PROMPTS)},  # what each cell holds (harness.read_cached checks it)
         "checked": {**dict.fromkeys(("contract", "exact", "causal"), re.compile(r"pass|fail|cannot tell|lookahead \(not a policy\)")),
                     "cost": re.compile(r"fail|\d+ µs per call")}}  # the checker's verdicts, nothing else


def found(tok, ids) -> int:
    """How many of the continuations ids (6, n) hold their prompt's key."""
    answers = [str(k) for k in KEYS for _ in DEPTHS]
    return sum(a in tok.decode(g) for a, g in zip(answers, ids.tolist()))


def step_cell(model, ids, policy, size, prompts, tok, compile, path):
    """Keys found when the prompts are read under the policy at `size` rows, evicting at every step."""
    start, p = time.time(), specs.named(policy)
    k = found(tok, experiments.answer_ids(model, prompts, p.on(model, prompts), size, 6, compile=compile))
    harness.write_cached(path, {"found": k, "seconds": time.time() - start})
    return f"  {p.label:>12} {size:>5}: {k}/{PROMPTS} keys per step  ({time.time() - start:.0f} s)"


def oneshot_cells(model, ids, policies, sizes, prompts, tok, paths):
    """Keys found when the prompts are read in full and cut once, for each (policy, size)."""
    start, named = time.time(), [specs.named(p) for p in policies]
    got = experiments.oneshot_answer_ids(model, prompts, [(p.on(model, prompts), s) for p, s in zip(named, sizes)])
    for path, answer in zip(paths, got):
        harness.write_cached(path, {"found": found(tok, answer)})
    return f"  {len(paths)} one-shot cuts: {', '.join(f'{p.label} {s}' for p, s in zip(named, sizes))}  ({time.time() - start:.0f} s)"


def check_cell(model, ids, policy, path):
    """The checker's verdicts (checker.check) and its cost."""
    start, p = time.time(), specs.named(policy)
    verdicts = {k: v[0] for k, v in checker.check(p, log=experiments.quiet).items() if k != "seconds"}
    harness.write_cached(path, verdicts)
    return f"  {p.label:>12}: checked, {verdicts['cost']}  ({time.time() - start:.0f} s)"


def table(data) -> str:
    sizes, ps = data["sizes"], data["passkey_sizes"]
    rows = data["policies"]
    width = max(8, *map(len, rows)) + 1
    sweep = data["sweep"]["ppl"]
    bound = {s: min(sweep[specs.named(b).label][s]["ppl"] for b in BOUNDS) for s in sizes}
    col = experiments.column([*bound.values(), *(r["ppl"][s] for r in rows.values() for s in sizes)], ".2f", 10)
    gcol = experiments.column([r["gap_closed"].get(s) for r in rows.values() for s in sizes], ".0%", 9)
    head = (f"{'policy':<{width}}" + "".join(f"{f'ppl {s}':>{col}}" for s in sizes) + "".join(f"{f'gap {s}':>{gcol}}" for s in sizes)
            + "".join(f"{f'key {s} {r}':>14}" for s in ps for r in ("step", "full")) + f"{'µs':>6}  verdicts")
    lines = [head]
    for label, r in rows.items():
        gap = lambda s: "" if r["gap_closed"].get(s) is None else f"{r['gap_closed'][s]:.0%}"
        bad = [k for k, v in r["verdicts"].items() if v != "pass"] + (["cost"] if r["us_per_call"] is None else [])
        lines.append(f"{label:<{width}}" + "".join(f"{r['ppl'][s]:>{col}.2f}" for s in sizes)
                     + "".join(f"{gap(s):>{gcol}}" for s in sizes)
                     + "".join(f"{str(r['passkey'][f'{s} {g}']) + f'/{PROMPTS}':>14}" for s in ps for g in ("step", "full"))
                     + f"{'–' if r['us_per_call'] is None else round(r['us_per_call']):>6}  " + ("pass" if not bad else "fails " + ", ".join(bad)))
    lines.append(f"{'(bound)':<{width}}" + "".join(f"{bound[s]:>{col}.2f}" for s in sizes)
                 + f"   full cache {sweep['full cache'][data['chunk']]['ppl']:.2f}")
    return "\n".join(lines)


def draw(plt, data):
    experiments.draw_sweep(plt, data["sweep"])
