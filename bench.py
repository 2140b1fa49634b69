"""Speed on a CPU: python bench.py [--quick] [--threads 2]  ->  results/bench.json (+ bench.png), a table.

1. decode speed, batch 1, unbounded: ours vs transformers' generate (if installed) vs the weight-streaming
   limit (one token's matrix-vector products alone);
2. time per token vs position t, unbounded vs bounded states (bounded must be flat);
3. batched decoding with a bounded state, and the Table-1 analogue at a fixed cache budget;
4. prefill of a long prompt: msrnn.prefill and the masked transformer view vs token by token;
5. the perplexity sweep's cost per setting (2 chunks): prefill vs masked view vs batched recurrent steps.
"""
import argparse
import time

import torch
import torch.nn.functional as F

import experiments
import llama
import load_weights
import msrnn
import policies


def best_of(fn, repeat):
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def weight_limit(model, repeat=20) -> float:
    """Seconds for one token's matrix-vector products alone: every weight read once, nothing else."""
    ws = [w for L in model.layers for w in (L.w_qkv, L.wo, L.w_gate_up, L.w_down)] + [model.lm_head]
    xs = {w.shape[1]: torch.randn(1, w.shape[1], dtype=model.dtype) for w in ws}
    return best_of(lambda: [F.linear(xs[w.shape[1]], w) for w in ws], repeat)


@torch.no_grad()
def ours_decode(model, prompt, n, repeat=3) -> float:
    """Tokens/s of greedy generation after `prompt`, batch 1, unbounded state (prompt fed first, not
    timed); the best of `repeat` runs of n tokens, each continuing the last, as for the limit."""
    state = msrnn.init_state(model)
    tok = msrnn.feed(model, prompt[None], state)[:, -1].argmax(-1)

    def decode():
        nonlocal tok
        for _ in range(n):
            logits = llama.step(model, tok, state)
            tok = logits.argmax(-1)
    return n / best_of(decode, repeat)


def transformers_decoder(folder):
    """A function timing transformers' greedy generate on the same folder, or None if it is not installed."""
    try:
        import transformers
    except ImportError:
        return None
    hf = transformers.AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()

    @torch.no_grad()
    def decode(prompt, n):  # tokens/s, the prompt's cost taken out, as for ours
        x = prompt[None]
        kw = dict(do_sample=False, pad_token_id=0)
        hf.generate(x, min_new_tokens=4, max_new_tokens=4, **kw)  # warm-up
        t_prompt = best_of(lambda: hf.generate(x, min_new_tokens=1, max_new_tokens=1, **kw), 2)
        t_all = best_of(lambda: hf.generate(x, min_new_tokens=n, max_new_tokens=n, **kw), 2)
        return (n - 1) / (t_all - t_prompt)
    return decode


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", help="checkpoint folder (default SmolLM2-135M-Instruct)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--quick", action="store_true", help="small sizes, for a smoke test")
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    q = args.quick
    model = load_weights.load_model(args.model)
    folder = load_weights.checkpoint_folder(args.model)
    out = {"threads": args.threads}

    # 1. decode speed, batch 1, unbounded
    n = 8 if q else 64
    prompt = torch.arange(100, 116)
    hf_decode = None if q else transformers_decoder(folder)
    limit, ours, hf = float("inf"), 0.0, None
    for _ in range(1 if q else 3):  # alternated, best of each: this machine's speed drifts by ±20% over minutes
        limit = min(limit, weight_limit(model, 3 if q else 20))
        ours = max(ours, ours_decode(model, prompt, n))
        hf = max(hf or 0.0, hf_decode(prompt, n)) if hf_decode else None
    out["decode"] = {"ours_tokens_per_s": ours, "transformers_tokens_per_s": hf, "limit_tokens_per_s": 1 / limit,
                     "vs_transformers": ours / hf if hf else None, "share_of_limit": ours * limit}
    print(f"1. decode, batch 1, unbounded, {n} tokens after {len(prompt)}: ours {ours:.1f} tokens/s, "
          f"transformers {f'{hf:.1f}' if hf else 'not installed'}, weight-streaming limit {1 / limit:.1f} "
          f"-> {ours * limit:.0%} of the limit" + (f", {ours / hf:.2f}x transformers" if hf else ""), flush=True)

    # 2. time per token vs position
    positions = [128, 512] if q else [128, 512, 2048, 8192]
    curves = {"full": []} | {f"{p} {s}": [] for p, s in (("tova", 32), ("window", 32)) if q} | \
        {f"{p} {s}": [] for p, s in (("tova", 256), ("window", 256), ("tova", 1024)) if not q}
    for t in positions:
        for key in curves:
            name, size = (key.split() + [None])[:2]
            size = None if size is None else int(size)
            tps = experiments.decode_speed(model, 1, t, size, policies.named(name).fn, steps=2 if q else 15)
            curves[key].append(1e3 / tps)
        print(f"2. t={t:5d}: " + ", ".join(f"{k} {v[-1]:.1f} ms" for k, v in curves.items()), flush=True)
    flat = {k: v[-1] / v[positions.index(512)] - 1 for k, v in curves.items() if k != "full"}
    out["per_position"] = {"positions": positions, "ms_per_token": curves, "change_512_to_last": flat}

    # 3. batched decoding with a bounded state; the Table-1 analogue
    size = 32 if q else 256
    out["batched"] = {}
    for b in ((1, 2) if q else (1, 4, 16)):
        tps = experiments.decode_speed(model, b, 4096, size, policies.tova, steps=2 if q else 6)
        out["batched"][b] = tps
        print(f"3. batch {b:2d}, TOVA {size}: {tps:.1f} tokens/s", flush=True)
    ctx = 128 if q else 4096
    out["table1"] = experiments.memory(model, context=ctx, sizes=(16,) if q else (ctx // 8,),
                                       budget_gib=0.05 if q else 1.0, steps=1 if q else 4, name=None)

    # 4. prefill: the stepped prefill and the masked transformer view vs token by token
    T = 128 if q else 4096
    ids = experiments.book_chunks(load_weights.load_tokenizer(args.model), 1, T, books=("alice29",))
    out["prefill"] = {"tokens": T}
    for key, fn, name, size in (("full", msrnn.prefill, "full", None), ("tova", msrnn.prefill, "tova", T // 8),
                                ("tova_masked_view", msrnn.masked_forward, "tova", T // 8)):
        t0 = time.perf_counter()
        fn(model, ids, policies.named(name).fn, size)
        out["prefill"][key] = T / (time.perf_counter() - t0)
    k = 32 if q else 256  # token by token: measured on a prefix (it does not get faster with length)
    t0 = time.perf_counter()
    msrnn.run(model, ids[:, :k], policies.tova, k // 2)
    out["prefill"]["token_by_token"] = k / (time.perf_counter() - t0)
    p = out["prefill"]
    print(f"4. prefill {T} tokens: full {p['full']:.0f} tokens/s; TOVA {T // 8}: prefill {p['tova']:.0f} tokens/s, "
          f"masked view {p['tova_masked_view']:.0f} tokens/s, token by token {p['token_by_token']:.1f} tokens/s", flush=True)

    # 5. one setting of the perplexity sweep, three ways, on the same chunks
    T, B, size = (64, 2, 16) if q else (4096, 2, 256)
    ids = torch.randint(0, model.config.vocab_size, (B, T), generator=torch.Generator().manual_seed(0))
    sweep = out["sweep_setting_s"] = {"chunks": B, "tokens": T, "size": size}
    for key, fn in (("prefill", msrnn.prefill), ("masked_view", msrnn.masked_forward)):
        t0 = time.perf_counter()
        fn(model, ids, policies.tova, size)
        sweep[key] = time.perf_counter() - t0
    steps = 16 if q else 128
    t0 = time.perf_counter()
    msrnn.run(model, ids[:, :steps], policies.tova, size)
    sweep["recurrent_batched_estimate"] = (time.perf_counter() - t0) * T / steps  # a bounded step's cost is flat
    print(f"5. one sweep setting ({B} chunks x {T} tokens, TOVA {size}): prefill {sweep['prefill']:.0f} s, "
          f"masked view {sweep['masked_view']:.0f} s, batched recurrent ~{sweep['recurrent_batched_estimate']:.0f} s",
          flush=True)

    def draw(plt):
        for key, ms in curves.items():
            plt.plot(positions, ms, "o-", label=key)
        plt.xscale("log", base=2)
        plt.xlabel("position t (rows held by the unbounded state)")
        plt.ylabel("ms per token (batch 1)")
        plt.title("decode step time vs position")
        plt.legend()
    experiments.save("bench_quick" if q else "bench", out, draw)
    return out


if __name__ == "__main__":
    main()
