"""The leaderboard: any set of policies on every measure at once (python demo.py board).

Per policy: perplexity at each size on the sweep's chunks (experiments.sweep), the share of the gap
from Window+4 to the better lookahead bound it closes, passkey keys found per step and one-shot, µs
per call, and the checker's verdicts. Every cell is cached by the policy's key (its source and
parameters), as the sweep's settings are, so adding a policy measures only its own cells.
"""
import json
import time

import check
import experiments
import harness
import specs

BOUNDS = ("lookahead", "lookahead:256")  # the gap is measured to the better of the two at each size
BASELINE = "sink"                        # Window+4, where the gap starts


def board(model, tok, names, sizes=(64, 256, 1024), n_chunks=4, chunk=4096, passkey_sizes=(128, 512), length=2048,
          jobs=2, compile=False, log=experiments.quiet) -> dict:
    named = list(dict.fromkeys(specs.named(n) for n in names))
    t0 = time.time()
    sweep = experiments.sweep(model, tok, sizes, names=[*dict.fromkeys([BASELINE, *names, *BOUNDS])], n_chunks=n_chunks,
                              chunk=chunk, jobs=jobs, compile=compile, log=log)
    depths, keys = (0.1, 0.5, 0.9), (71432, 50918)                 # experiments.passkey's prompts
    prompts = experiments.passkey_prompts(tok, length, depths, keys)
    answers = [str(k) for k in keys for _ in depths]
    cache = experiments.cache_dir("board", model, prompts)
    rows = {}
    for p in named:
        start = time.time()
        row = {"ppl": {s: sweep["ppl"][p.label][s]["ppl"] for s in sizes},
               "per_chunk": {s: sweep["ppl"][p.label][s]["per_chunk"] for s in sizes},
               "gap_closed": sweep["gap_closed"].get(f"{p.label} / best bound", {}),
               "passkey": {}}
        # the checker's own run (check.check): its verdicts, and its cost ("12 µs per call", or "fail")
        checked = cached(cache / f"{p.key}-checked.json",
                         lambda: {k: v[0] for k, v in check.check(p, log=experiments.quiet).items() if k != "seconds"})
        row["verdicts"] = {k: checked[k] for k in ("contract", "exact", "causal")}
        row["us_per_call"] = float(checked["cost"].split()[0]) if checked["cost"].endswith("per call") else None
        for size in passkey_sizes:
            for regime in ("step", "full"):
                def found():
                    got = experiments.answer(model, tok, prompts, p, size, regime=regime)
                    return sum(a in g for a, g in zip(answers, got))
                row["passkey"][f"{size} {regime}"] = cached(cache / f"{p.key}-passkey-{size}-{regime}.json", found)
        rows[p.label] = row
        log(f"  {p.label}: {time.time() - start:.0f} s for its passkey and verdict cells")
    return {"sizes": list(sizes), "n_chunks": n_chunks, "chunk": chunk, "passkey_sizes": list(passkey_sizes),
            "length": length, "policies": rows, "sweep": sweep, "seconds": time.time() - t0}


def cached(path, compute):
    """compute(), kept in `path` so that it is not measured again."""
    value = harness.read_cached(path)
    if value is None:
        value = compute()
        harness.atomic_write(path, json.dumps(value))
    return value


def table(data) -> str:
    sizes, ps = data["sizes"], data["passkey_sizes"]
    rows = data["policies"]
    width = max(8, *map(len, rows)) + 1
    head = (f"{'policy':<{width}}" + "".join(f"{f'ppl {s}':>10}" for s in sizes) + "".join(f"{f'gap {s}':>9}" for s in sizes)
            + "".join(f"{f'key {s} {r}':>14}" for s in ps for r in ("step", "full")) + f"{'µs':>6}  verdicts")
    lines = [head]
    for label, r in rows.items():
        gap = lambda s: "" if r["gap_closed"].get(s) is None else f"{r['gap_closed'][s]:.0%}"
        bad = [k for k, v in r["verdicts"].items() if v != "pass"]
        lines.append(f"{label:<{width}}" + "".join(f"{r['ppl'][s]:>10.2f}" for s in sizes)
                     + "".join(f"{gap(s):>9}" for s in sizes)
                     + "".join(f"{str(r['passkey'][f'{s} {g}']) + '/6':>14}" for s in ps for g in ("step", "full"))
                     + f"{r['us_per_call'] or 0:>6.0f}  " + ("pass" if not bad else "fails " + ", ".join(bad)))
    sweep = data["sweep"]["ppl"]
    bound = {s: min(sweep[specs.named(b).label][s]["ppl"] for b in BOUNDS) for s in sizes}
    lines.append(f"{'(bound)':<{width}}" + "".join(f"{bound[s]:>10.2f}" for s in sizes)
                 + f"   full cache {sweep['full cache'][data['chunk']]['ppl']:.2f}")
    return "\n".join(lines)


def draw(plt, data):
    experiments.draw_sweep(plt, data["sweep"])
