# The comparison assembled from what the runs of this session cached: the training files and T2R rows
# (keyed by settings and training code, unchanged), and the MSRNN rows as measured while the maps trained.
# Other sessions changed engine/ and msrnn.py meanwhile, so those rows sit under two code keys
# (experiments.cache_dir); each row records the key it was measured under.
import json, sys
import torch
torch.set_num_threads(1)
import load_weights
import msrnn
from lab import experiments, harness, specs
from t2r import train
tail_sizes = tuple(int(x) for x in sys.argv[1:]) or None
MEASURED_UNDER = [harness.RESULTS / "t2r_policies" / k for k in ("4a7b4df2ce2e", "8de6fae11c2d")]

def policy_rows(model, test, sizes, log=print):
    rows = []
    for p, size in [(specs.FULL, test.shape[1])] + [(specs.named(p), s) for s in sizes for p in ("tova", "h2o", "sink")]:
        for d in [experiments.cache_dir("t2r_policies", model, test), *MEASURED_UNDER]:
            got = harness.read_cached(d / f"{p.key}-{size}.json", experiments.MEASURED)
            if got is not None:
                break
        else:
            d, got = experiments.cache_dir("t2r_policies", model, test), experiments.measure(model, test, p, size, batch=1)
            harness.atomic_write(d / f"{p.key}-{size}.json", json.dumps(got))
        full = p is specs.FULL
        rows.append(dict(method="softmax, full cache" if full else f"{p.label} {size}", family="full" if full else p.spec,
                         state_bytes=msrnn.state_bytes(model, size), ppl=got["ppl"], ppl_per_chunk=got["per_chunk"],
                         measured_under=d.name))
        log(f"   {rows[-1]['method']}: perplexity {got['ppl']:.2f} ({got['seconds']:.0f} s, code key {d.name})")
    return rows

train.policy_rows = policy_rows
model, tok = load_weights.load_model(), load_weights.load_tokenizer()
with harness.transcript() as out:
    print(f"assembled from the cached runs (python demo.py t2r's defaults; the tail rows: {tail_sizes or 'none'})")
    data = train.experiment(model, tok, tails=bool(tail_sizes), tail_sizes=tail_sizes, log=lambda m: print(m, flush=True))
    print("\n" + train.table(data))
harness.save("t2r", data, {"code": harness.code_version(), "model": "SmolLM2-135M-Instruct", "dtype": "float32",
                           "seconds": data["seconds"]}, out.getvalue(), train.draw)
