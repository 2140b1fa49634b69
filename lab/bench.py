"""Speed on a CPU: python -m lab.bench [--quick] [--threads 2]  ->  results/bench.json, .log, .png

1. decoding, batch 1, unbounded: ours vs transformers' generate (if installed) vs the weight-streaming
   limit (one token's matrix-vector products alone), and the three again on one thread; 1b. the same,
   compiled, unbounded and TOVA 256 (batch 1 and 16); 1c. the model's bytes at the bandwidth of a large
   copy, next to the limit; 1d. compile times, cold and warm, each in a fresh process; then a table of
   line 1 and 1b; 1e. what each guard (engine/guards.py) costs an eager step, and the step with all of
   them on and off;
2. time per token vs position t, unbounded vs bounded states (bounded must be flat);
3. batched decoding with a bounded state;
4. reading a text under a policy, as the perplexity experiments do: fast.prefill vs the masked
   transformer view vs token by token, prefill compiled, and prefill with the full cache.
Every time is harness.median_time's; Table 1 (memory at a budget) is `python demo.py memory`.
"""
import argparse
import contextlib
import dataclasses
import json
import os
import subprocess
import sys
import tempfile
import time

from engine import threads  # noqa: F401  (first of all: OpenMP's wait policy is set before torch loads it)

import torch
import torch.nn.functional as F

from lab import experiments
from engine import fast
from lab import harness
from engine import guards
import llama
import load_weights
import msrnn
import policies
from lab import specs

SETTINGS = {  # the full benchmark, and --quick: the same code on small sizes, for a smoke test
    "full": dict(transformers=True, compile=True, decode_steps=63, rounds=3, positions=[128, 512, 2048, 8192], curves=[("tova", 256), ("window", 256),
                 ("tova", 1024)], position_steps=15, batches=[1, 4, 16], batch_size=256, batch_steps=6,
                 read=(2, 4096, 256), read_steps=128),
    "quick": dict(transformers=False, compile=False, decode_steps=4, rounds=1, positions=[128, 512], curves=[("tova", 32), ("window", 32)],
                  position_steps=2, batches=[1, 2], batch_size=32, batch_steps=2, read=(2, 64, 16), read_steps=16),
}


def streamed(model) -> list:
    """The matrices a decode step reads for one token: every layer's, and the unembedding."""
    return [w for L in model.layers for w in (L.w_qkv, L.wo, L.w_gate_up, L.w_down)] + [model.lm_head]


def weight_limit(model, repeat=20) -> float:
    """Seconds for one token's matrix-vector products alone: every weight read once, nothing else."""
    ws = streamed(model)
    xs = {w.shape[1]: torch.randn(1, w.shape[1], dtype=model.dtype, device=model.device) for w in ws}
    return harness.median_time(lambda: [F.linear(xs[w.shape[1]], w) for w in ws], repeat)


def copy_floor(model, repeat=10) -> tuple[float, float]:
    """(tokens/s, bytes/s): the bandwidth of a large tensor copy here (256 MiB read and written: both
    count), and the tokens/s if a step cost nothing but reading the matrices the limit reads at it."""
    src = torch.ones(2 ** 26, dtype=torch.float32, device=model.device)
    dst = torch.empty_like(src)
    bandwidth = 2 * src.numel() * 4 / harness.median_time(lambda: dst.copy_(src), repeat)
    weights = sum(w.numel() * w.element_size() for w in streamed(model))  # the bytes the limit reads
    return bandwidth / weights, bandwidth


def transformers_decoder(folder, model):
    """A function giving transformers' greedy tokens/s on the same folder, dtype and device as `model`,
    or None if it is not installed."""
    try:
        import transformers
    except ImportError:
        return None
    hf = transformers.AutoModelForCausalLM.from_pretrained(folder, dtype=model.dtype).to(model.device).eval()

    @torch.no_grad()
    def decode(n):  # tokens/s after a 16-token prompt, the prompt's own cost taken out, as for ours
        x, kw = torch.arange(100, 116, device=model.device)[None], dict(do_sample=False, pad_token_id=0)
        t_prompt = harness.median_time(lambda: hf.generate(x, min_new_tokens=1, max_new_tokens=1, **kw), 3)
        t_all = harness.median_time(lambda: hf.generate(x, min_new_tokens=n, max_new_tokens=n, **kw), 3)
        return (n - 1) / (t_all - t_prompt)
    return decode


def decode(model, folder, s) -> dict:
    """1. Batch 1, unbounded, 16 rows held. The three are alternated and the best of each kept: this
    machine's speed drifts by ±20% over minutes, and the comparison should not ride on the drift."""
    hf_decode = transformers_decoder(folder, model) if s["transformers"] else None
    ours, hf, limit = 0.0, None, float("inf")
    for _ in range(s["rounds"]):
        limit = min(limit, weight_limit(model))
        ours = max(ours, experiments.decode_speed(model, 1, 16, steps=s["decode_steps"]))
        hf = max(hf or 0.0, hf_decode(s["decode_steps"])) if hf_decode else None
    print(f"1. decode, batch 1, unbounded: ours {ours:.1f} tokens/s, transformers {f'{hf:.1f}' if hf else 'not run'}, "
          f"weight-streaming limit {1 / limit:.1f} -> {ours * limit:.0%} of the limit"
          + (f", {ours / hf:.2f}x transformers" if hf else ""), flush=True)
    threads, one = torch.get_num_threads(), {}
    if threads > 1:  # the same on one thread: on a small virtual machine a second one can cost more than it gives
        torch.set_num_threads(1)
        one = {"ours": experiments.decode_speed(model, 1, 16, steps=s["decode_steps"]), "limit": 1 / weight_limit(model),
               "transformers": hf_decode(s["decode_steps"]) if hf_decode else None}
        torch.set_num_threads(threads)
        theirs = f"{one['transformers']:.1f}" if one["transformers"] else "not run"
        print(f"1. the same on one thread: ours {one['ours']:.1f} tokens/s, transformers {theirs}, "
              f"weight-streaming limit {one['limit']:.1f}", flush=True)
    return {"ours_tokens_per_s": ours, "transformers_tokens_per_s": hf, "limit_tokens_per_s": 1 / limit,
            "vs_transformers": ours / hf if hf else None, "share_of_limit": ours * limit, "one_thread": one}


def compiled(model, s, hf) -> dict:
    """1b. The same decode steps compiled (fast.compiled_step), next to eager ones from the same state:
    unbounded with 16 rows (line 1's setting) and a full TOVA 256 state, batch 1 and 16. The first
    steps of each compile (twice: then the position and row count are symbolic); 1d times that."""
    step, limit, out = fast.compiled_step(), weight_limit(model), {}
    for label, batch, size, policy in (("unbounded", 1, None, None), ("TOVA 256", 1, 256, policies.tova),
                                       ("TOVA 256, batch 16", 16, 256, policies.tova)):
        steps = min(s["decode_steps"], 60)  # an unbounded state has room for 64 more rows
        experiments.decode_speed(model, batch, 16, size, policy, steps=1, step=step, warmup=2)  # compiles
        best, eager = 0.0, 0.0
        for _ in range(s["rounds"]):  # alternated, the best of each, as in line 1
            best = max(best, experiments.decode_speed(model, batch, 16, size, policy, steps=steps, step=step))
            eager = max(eager, experiments.decode_speed(model, batch, 16, size, policy, steps=steps))
        out[label] = {"batch": batch, "compiled_tokens_per_s": best, "eager_tokens_per_s": eager,
                      "share_of_limit": best * limit if batch == 1 else None,
                      "vs_transformers": best / hf if hf and batch == 1 else None}
        vs = f" ({best * limit:.0%} of the limit" + (f", {best / hf:.2f}x transformers)" if hf else ")") if batch == 1 else ""
        print(f"1b. compiled decode, {label}: {best:.1f} tokens/s{vs}, eager {eager:.1f}", flush=True)
    floor, bandwidth = copy_floor(model)
    out |= {"copy_floor_tokens_per_s": floor, "copy_bytes_per_s": bandwidth}
    print(f"1c. a large copy moves {bandwidth / 1e9:.1f} GB/s; the model's bytes at that rate: {floor:.1f} tokens/s "
          f"(the weight-streaming limit: {1 / limit:.1f})", flush=True)
    return out


def compile_times(args) -> dict:
    """1d. Seconds of compiling, each in a fresh process (bench.py --compile-time): cold, with an empty
    inductor cache, then warm, with the on-disk cache the cold run left, which is what a second run of
    a command pays. In-process caches make any later compile in the same process cheaper still."""
    cmd = [sys.executable, "-m", "lab.bench", "--compile-time", "--threads", str(args.threads), "--dtype", args.dtype,
           "--device", args.device] + (["--model", args.model] if args.model else [])
    out = {}
    with tempfile.TemporaryDirectory() as cache:
        for kind in ("cold", "warm"):
            done = subprocess.run(cmd, cwd=harness.ROOT, env=os.environ | {"TORCHINDUCTOR_CACHE_DIR": cache}, capture_output=True, text=True)
            if done.returncode:
                raise RuntimeError(f"bench.py --compile-time failed:\n{done.stderr[-3000:]}")
            out[kind] = json.loads(done.stdout.splitlines()[-1])
    print("1d. compile time, cold / warm: " + ", ".join(f"{k} {out['cold'][k]:.0f} / {out['warm'][k]:.0f} s"
                                                        for k in out["cold"]), flush=True)
    return out


def first_compile(model) -> dict:
    """Seconds the first compiled calls take in this process, less what they cost once compiled."""
    step, out = fast.compiled_step(), {}
    for label, size, policy in (("decode unbounded", None, None), ("decode TOVA 256", 256, policies.tova)):
        t0 = time.time()
        experiments.decode_speed(model, 1, 16, size, policy, steps=1, step=step, warmup=2)  # 3 steps of ~25 ms
        out[label] = time.time() - t0
    ids = torch.randint(0, model.config.vocab_size, (1, 512), generator=torch.Generator().manual_seed(0))
    prefill = lambda: fast.prefill(model, ids, policies.tova, 256, compile=True)
    first = harness.median_time(prefill, 1, warmup=0)
    out["prefill TOVA 256"] = first - harness.median_time(prefill, 1, warmup=0)
    return out


def speed_table(data) -> str:
    """Lines 1 and 1b as one table (README's Speed section shows it): tokens/s, the given threads."""
    d, dash = data["decode"], "–"
    fmt = lambda x, spec: dash if x is None else format(x, spec)
    rows = ["| decoding | eager | compiled | transformers | weight-streaming limit | compiled / limit | compiled / transformers |",
            "|---|---|---|---|---|---|---|"]
    for label, r in data["compiled"].items():
        if not isinstance(r, dict):  # 1c's numbers
            continue
        one = r["batch"] == 1
        rows.append(f"| {label}{', batch 1' if one else ''} | {r['eager_tokens_per_s']:.1f} | {r['compiled_tokens_per_s']:.1f} | "
                    f"{fmt(d['transformers_tokens_per_s'] if one else None, '.1f')} | "
                    f"{fmt(d['limit_tokens_per_s'] if one else None, '.1f')} | {fmt(r['share_of_limit'], '.0%')} | "
                    f"{fmt(r['vs_transformers'], '.2f')}{'x' if r['vs_transformers'] else ''} |")
    return "\n".join(rows)


def guard_costs(model, s) -> dict:
    """1e. Milliseconds per eager step (batch 1) of each check a step runs, called alone on the step's own
    state, rows and logits, times the calls a step makes; then the whole step with every guard on and
    with every guard off (llama.step unwrapped, the policy called bare), alternated three times as often as line 1, in shorter runs."""
    out = {}
    for label, size, policy in (("unbounded", None, None), ("TOVA 32", 32, policies.tova)):
        state = experiments.synthetic_state(model, 1, 16 if size is None else 300, size)
        tokens = torch.zeros(1, dtype=torch.long, device=model.device)
        logits = llama.step(model, tokens, state, policy)
        ms, L = state.layers[0], len(state.layers)
        G, dev = model.config.n_heads // ms.k.shape[1], model.device
        rows = msrnn.Rows(attn=torch.rand(1, ms.k.shape[1], G, ms.n, device=dev).softmax(-1),
                          pos=ms.pos[:, :, :ms.n], score=ms.score[:, :, :ms.n], keys=ms.k[:, :, :ms.n], values=ms.v[:, :, :ms.n],
                          query=torch.rand(1, ms.k.shape[1], G, ms.k.shape[3], device=dev),
                          prev=ms.prev[:, :, :ms.n], t=state.t, size=ms.size, layer=0)
        timed = lambda fn, calls: calls * 1e3 * harness.median_time(fn, 200, warmup=5)
        plain = lambda: policy(dataclasses.replace(rows))
        def watched():
            shown = dataclasses.replace(rows)
            with guards.policy_call(policy, shown):
                return policy(shown)
        each = {"check_state (once a step)": timed(lambda: guards.check_state(model, state), 1),
                "check_step_tokens (once a step)": timed(lambda: guards.check_step_tokens(model, tokens, state), 1),
                "all_or_nothing's saves (each layer)": timed(lambda: [guards._save(m) for m in state.layers], 1),
                "check_logits (once a step, in the step's guard)": timed(lambda: guards.check_logits(logits), 1)}
        if policy is not None:  # a drop in every layer at every step
            scores = policy(rows)
            each |= {"policy_call: the watch and the copies it shows (each layer)": timed(watched, L) - timed(plain, L),
                     "check_scores (each layer)": timed(lambda: guards.check_scores(policy, rows, scores), L)}
        guarded = lambda: llama.step(model, tokens, state, policy)  # its guard checks the logits
        bare = lambda: llama.step.__wrapped__(model, tokens, state, policy)
        times = {"on": [], "off": [], "on again": []}  # "on again": the same step twice, the drift between runs
        # a few % between runs minutes apart on a small VM: many short alternations, the best of each kept
        for r in range(3 * s["rounds"]):
            for key in list(times)[r % 3:] + list(times)[:r % 3]:  # each first in turn: a round's first run is slower
                with unguarded() if key == "off" else contextlib.nullcontext():
                    times[key].append(1e3 * harness.median_time(guarded if key != "off" else bare, max(3, s["decode_steps"] // 3)))
        on, off, again = (min(v) for v in times.values())
        out[label] = {"ms_per_step": each, "step_ms_guarded": on, "step_ms_unguarded": off, "step_ms_guarded_again": again,
                      "sum_share": sum(each.values()) / on, "on_off_share": 1 - off / on, "on_on_share": 1 - again / on}
        print(f"1e. guards, {label}: " + ", ".join(f"{k} {v:.3f} ms" for k, v in each.items()) +
              f"; together {sum(each.values()):.2f} ms = {out[label]['sum_share']:.1%} of a {on:.1f} ms step. The step "
              f"with every guard on, off, on again: {on:.1f}, {off:.1f}, {again:.1f} ms (on vs off {out[label]['on_off_share']:+.1%}, "
              f"on vs on again {out[label]['on_on_share']:+.1%}: the drift)", flush=True)
    return out


@contextlib.contextmanager
def unguarded():
    """msrnn's calls to the policy checks made bare for a while (line 1e's "off")."""
    saved = guards.policy_call, guards.check_scores
    guards.policy_call, guards.check_scores = (lambda policy, rows: contextlib.nullcontext()), (lambda policy, rows, scores: scores)
    try:
        yield
    finally:
        guards.policy_call, guards.check_scores = saved


def per_position(model, s) -> dict:
    """2. ms per token at positions t: the unbounded state holds t rows, a bounded one `size`."""
    curves = {"full": []} | {f"{p} {size}": [] for p, size in s["curves"]}
    for t in s["positions"]:
        for key, ms in curves.items():
            name, size = key.split()[0], (int(key.split()[1]) if " " in key else None)
            policy = specs.named(name).fn
            ms.append(1e3 / experiments.decode_speed(model, 1, t, size, policy, steps=s["position_steps"]))
        print(f"2. t={t:5d}: " + ", ".join(f"{k} {v[-1]:.1f} ms" for k, v in curves.items()), flush=True)
    flat = {k: v[-1] / v[s["positions"].index(512)] - 1 for k, v in curves.items() if k != "full"}
    return {"positions": s["positions"], "ms_per_token": curves, "change_512_to_last": flat}


def batched(model, s) -> dict:
    """3. Tokens/s of batched decoding with a bounded TOVA state."""
    out = {}
    for b in s["batches"]:
        out[b] = experiments.decode_speed(model, b, 4096, s["batch_size"], policies.tova, steps=s["batch_steps"])
        print(f"3. batch {b:2d}, TOVA {s['batch_size']}: {out[b]:.1f} tokens/s", flush=True)
    return out


def reading(model, s) -> dict:
    """4. One setting of the perplexity sweep (B chunks of T tokens, TOVA `size`) read three ways that
    give the same logits, and the full cache's prefill. Token by token is timed on a prefix and scaled:
    a bounded step costs the same at every position."""
    B, T, size = s["read"]
    ids = torch.randint(0, model.config.vocab_size, (B, T), generator=torch.Generator().manual_seed(0))
    timed = lambda fn: harness.median_time(fn, 1, warmup=0)
    k = s["read_steps"]
    out = {"chunks": B, "tokens": T, "size": size,
           "full_prefill_s": timed(lambda: fast.prefill(model, ids)),
           "prefill_s": timed(lambda: fast.prefill(model, ids, policies.tova, size)),
           "masked_view_s": timed(lambda: msrnn.masked_forward(model, ids, policies.tova, size)),
           "token_by_token_s": timed(lambda: msrnn.run(model, ids[:, :k], policies.tova, size)) * T / k}
    if s["compile"]:  # timed after a first call, which compiles
        out["prefill_compiled_s"] = harness.median_time(lambda: fast.prefill(model, ids, policies.tova, size, compile=True), 1)
    compiled = f" (compiled {out['prefill_compiled_s']:.1f} s)" if s["compile"] else ""
    print(f"4. reading {B} chunks x {T} tokens: full cache {out['full_prefill_s']:.1f} s; TOVA {size}: prefill "
          f"{out['prefill_s']:.1f} s{compiled}, masked view {out['masked_view_s']:.1f} s, token by token "
          f"~{out['token_by_token_s']:.0f} s", flush=True)
    return out


def draw(plt, data):
    pos = data["per_position"]
    for key, ms in pos["ms_per_token"].items():
        plt.plot(pos["positions"], ms, "o-", label=key)
    plt.xscale("log", base=2)
    plt.xlabel("position t (rows held by the unbounded state)")
    plt.ylabel("ms per token (batch 1)")
    plt.title("decode step time vs position")
    plt.legend()


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", help="checkpoint folder (default SmolLM2-135M-Instruct)")
    ap.add_argument("--threads", type=harness.at_least(1, threads.cores()), default=2)
    ap.add_argument("--dtype", choices=list(load_weights.DTYPES), default="float32")
    ap.add_argument("--device", default="cpu", help="cpu (default), cuda, cuda:N, mps, or auto")
    ap.add_argument("--quick", action="store_true", help="small sizes, for a smoke test")
    ap.add_argument("--compile-time", action="store_true", help="only print, as JSON, the seconds the first compiled "
                    "calls take in this process (line 1d runs it in fresh processes)")
    ap.add_argument("--debug", action="store_true", help=harness.DEBUG_HELP)
    args = harness.parse(ap, argv)
    torch.set_num_threads(args.threads)
    if args.compile_time:
        model = load_weights.load_model(args.model, load_weights.DTYPES[args.dtype], load_weights.device(args.device))
        return print(json.dumps(first_compile(model)))
    s = SETTINGS["quick" if args.quick else "full"]
    # the published settings write results/bench.* (bench_quick.*); any other run, runs/ and a name of what differs
    name = harness.run_name("bench_quick" if args.quick else "bench", harness.changed_options(args, ap, ("quick", "debug")))
    harness.check_writable(name)  # before twenty minutes of timing, not after
    t0, version, load0 = time.time(), harness.code_version(), os.getloadavg()[0]  # was the machine idle when it began?
    with harness.transcript() as printed:
        model = load_weights.load_model(args.model, load_weights.DTYPES[args.dtype], load_weights.device(args.device))
        folder = load_weights.checkpoint_folder(args.model)
        data = {"threads": args.threads, "decode": decode(model, folder, s)}
        hf = data["decode"]["transformers_tokens_per_s"]
        if s["compile"]:
            data |= {"compiled": compiled(model, s, hf), "compile_seconds": compile_times(args)}
            print("\n" + speed_table(data) + "\n", flush=True)
        data["guards"] = guard_costs(model, s)
        data |= {"per_position": per_position(model, s), "batched": batched(model, s), "reading": reading(model, s)}
    about = {"code_version": version, "model": args.model or "SmolLM2-135M-Instruct (default)", "dtype": str(model.dtype).removeprefix("torch."),
             "seconds": round(time.time() - t0, 1), "load_1min_before": load0}
    path = harness.save(name, data, about, printed.getvalue(), draw)
    print(f"bench: {time.time() - t0:.0f} s; results in {path.with_suffix('.*')}")
    return data


if __name__ == "__main__":
    harness.command(main)
