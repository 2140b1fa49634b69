"""The paper's experiments on the default model. Each returns a dict, saves it as results/<name>.json,
draws results/<name>.png when matplotlib is installed, and prints a table. Run them with demo.py.
"""
import json
import math
import pathlib
import time

import torch
import torch.nn.functional as F

import llama
import msrnn
import policies
import texts

RESULTS = pathlib.Path("results")
# Oren et al. 2024, Table 3: LLaMA-2-7B on PG-19, 4,096-token chunks; 4096 is the full cache
PAPER_TABLE3 = {
    "sizes": [64, 128, 256, 512, 1024, 2048, 4096],
    "shorter": [17.65, 12.97, 10.39, 8.92, 8.04, 7.50, 7.16],
    "window": [4812, 4025, 3276, 2185, 1001, 240.2, 7.16],
    "sink": [10.28, 8.98, 8.19, 7.73, 7.46, 7.30, 7.16],
    "h2o": [10.20, 8.97, 8.22, 7.76, 7.50, 7.33, 7.16],
    "tova": [9.53, 8.32, 7.71, 7.41, 7.25, 7.17, 7.16],
}


def log(msg, end="\n"):
    print(msg, end=end, flush=True)


def save(name: str, data: dict, draw=None) -> dict:
    """results/<name>.json, and results/<name>.png via draw(plt) if matplotlib is installed."""
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"{name}.json").write_text(json.dumps(data, indent=1))
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return data
    if draw is not None:
        plt.figure(figsize=(6.4, 4.2))
        draw(plt)
        plt.tight_layout()
        plt.savefig(RESULTS / f"{name}.png", dpi=120)
        plt.close()
    return data


def book_chunks(tok, n: int, length: int = 4096, books=("plrabn12", "lcet10", "alice29", "asyoulik")) -> torch.Tensor:
    """n chunks (n, length) of real text: the first chunk of each book, then the second of each, ..."""
    per_book = [texts.chunks(tok.encode(texts.book(b)).ids, length) for b in books]
    out = [c[i] for i in range(max(map(len, per_book))) for c in per_book if i < len(c)][:n]
    if len(out) < n:
        raise ValueError(f"the books hold only {len(out)} chunks of {length} tokens")
    return torch.tensor(out)


@torch.no_grad()
def nll(model, ids: torch.Tensor, policy=None, size=None, oneshot=0) -> torch.Tensor:
    """Negative log-likelihood of every next token, (B, T - 1), for chunks ids (B, T).

    Runs msrnn.prefill, which gives the token-by-token MSRNN's logits (test_policies.py) several
    times faster (bench.py): projections and MLPs see all tokens at once. policy: a function, or
    a name or policies.Named (built for these chunks if it reads ahead). oneshot: see msrnn.init_state.
    """
    named = policies.named(policy) if policy is not None else policies.FULL
    return next_token_nll(msrnn.prefill(model, ids, named.on(model, ids), size, oneshot)[0], ids)


def next_token_nll(logits: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    """(B, T - 1) losses from logits (B, T, vocab). One sequence at a time, so the vocabulary
    stays the last, contiguous dimension: 7x faster than cross_entropy on the (B, vocab, T) view."""
    return torch.stack([F.cross_entropy(x[:-1], y[1:], reduction="none") for x, y in zip(logits, ids)])


def shorter_context_nll(model, ids: torch.Tensor, size: int) -> torch.Tensor:
    """The paper's 'shorter context, no compression' baseline: every chunk cut into independent
    pieces of `size` tokens, so no token sees more than `size` - 1 before it. (B, T - 1)."""
    B, T = ids.shape
    out = torch.full((B, T - 1), float("nan"))
    for start in range(0, T, size):
        piece = ids[:, start:start + size]
        if piece.shape[1] > 1:
            out[:, start:start + piece.shape[1] - 1] = next_token_nll(llama.forward(model, piece), piece)
    return out  # the first token of each piece has no prediction: NaN, left out of the mean


def perplexity(model, ids: torch.Tensor, policy=None, size=None, chunk=4096, progress=None, regime="step",
               prompt_len=0) -> dict:
    """Perplexity of a token sequence (T,) cut into chunks of `chunk` tokens (each read from scratch).

    prompt_len > 0 scores only the tokens after each chunk's first prompt_len, which are the prompt:
    read under the policy from the first token (regime "step") or with full attention and then cut
    to `size` once (regime "full", the one-shot regime)."""
    if regime not in ("step", "full"):
        raise ValueError(f"regime must be 'step' or 'full', got {regime!r}")
    if not 0 <= prompt_len < chunk:
        raise ValueError(f"the prompt ({prompt_len} tokens) must be shorter than a chunk ({chunk} tokens)")
    oneshot = prompt_len if regime == "full" and size is not None else 0
    pieces = [ids[i:i + chunk] for i in range(0, len(ids), chunk)]
    losses = []
    for i, p in enumerate(x for x in pieces if len(x) > max(1, prompt_len)):
        losses.append(nll(model, p[None], policy, size, oneshot)[0, max(0, prompt_len - 1):])
        if progress:
            progress(i + 1, len(pieces))
    loss = torch.cat(losses)
    return {"ppl": math.exp(loss.mean().item()), "tokens": len(loss), "chunks": len(losses),
            "ppl_per_chunk": [math.exp(x.mean().item()) for x in losses]}


# ---------------------------------------------------------------- perplexity vs multi-state size (Fig. 3, Table 3)

def sweep(model, tok, sizes=(64, 128, 256, 512, 1024, 2048),
          names=("window", "sink", "h2o", "tova", "lookahead", "lookahead:256"),
          n_chunks=4, chunk=4096, batch=4, jobs=1) -> dict:
    """Perplexity of every policy at every size on the same n_chunks chunks of real books.

    names: policies as demo.py takes them ('tova', 'sink:8', 'mine.py:fn') or functions. Each setting
    is saved as soon as it is measured (results/sweep/, named by the policy's source) and not measured
    again, so an interrupted sweep resumes. jobs=2 measures settings in two processes of one thread
    each, the costliest first: most operations of a bounded prefill are too small to gain from a
    second thread, so on 2 cores two single-threaded processes finish sooner than one with two threads.
    A lookahead reads its chunk ahead, so it is measured one chunk at a time to bound its memory.
    """
    ids = book_chunks(tok, n_chunks, chunk)
    named = [policies.named(n) for n in names]
    if len({p.label for p in named}) < len(named):
        raise ValueError(f"two policies share a display name: {[p.label for p in named]}")
    parts = RESULTS / "sweep" / f"{n_chunks}x{chunk}"
    parts.mkdir(parents=True, exist_ok=True)
    settings = [(policies.FULL, chunk, "full"), *[(None, s, "shorter") for s in sizes],
                *[(p, s, p.label) for p in named for s in sizes]]
    file = lambda p, s: parts / f"{'full' if p is policies.FULL else p.key if p else 'shorter'}-{s}.json"
    todo = [(p, s, file(p, s), 1 if p and p.reads_ahead else batch) for p, s, _ in settings if not file(p, s).exists()]
    log(f"perplexity sweep: {n_chunks} chunks of {chunk} tokens, sizes {list(sizes)}, "
        f"{', '.join(p.label for p in named)}; {len(todo)} of {len(settings)} settings to measure, {jobs} process(es)")
    start = time.time()
    in_pool = [(p.spec if p else None, s, f, b) for p, s, f, b in todo if p is None or p.spec]  # by name: picklable
    if jobs > 1 and in_pool:
        in_pool.sort(key=lambda job: -job[1])  # longest first, so neither process is left with a long one at the end
        ctx = torch.multiprocessing.get_context("spawn")  # tensors reach the workers through shared memory
        with ctx.Pool(jobs, initializer=_start_worker, initargs=(model, ids)) as pool:
            pool.starmap(_measure_in_worker, in_pool, chunksize=1)
    for job in todo:
        if not job[2].exists():
            _measure(model, ids, *job)
    rows = {}
    for p, s, name in settings:
        rows.setdefault(name, {})[s] = json.loads(file(p, s).read_text())
    labels = [p.label for p in named]
    data = {"n_chunks": n_chunks, "chunk": chunk, "sizes": list(sizes), "policies": labels, "ppl": rows,
            "gap_closed": gap_closed(rows, sizes, labels), "jobs": jobs,
            "seconds": sum(r["seconds"] for by_size in rows.values() for r in by_size.values()),
            "wall_seconds": time.time() - start}  # of this run: settings measured before are not counted

    def draw(plt):
        for name in ["shorter", *labels]:
            plt.plot(sizes, [rows[name][s]["ppl"] for s in sizes], "o-" if name != "shorter" else "o:",
                     label="shorter context" if name == "shorter" else name)
        plt.axhline(rows["full"][chunk]["ppl"], color="k", ls="--", label=f"full cache ({chunk})")
        plt.xscale("log", base=2)
        plt.yscale("log")
        plt.xlabel("multi-state size")
        plt.ylabel("perplexity")
        plt.title(f"SmolLM2-135M, {n_chunks} chunks of {chunk} tokens")
        plt.legend()
    save(f"sweep_{n_chunks}x{chunk}", data, draw)
    print_sweep(data)
    return data


def gap_closed(rows, sizes, labels, baseline="Window+4") -> dict:
    """For each lookahead bound L (and the best of them at each size, if several ran) and each other
    policy P: (baseline - P) / (baseline - L) at every size, the share of the distance from Window+4 to
    the bound that P covers (negative: worse than Window+4; None where the bound is not below Window+4)."""
    bounds = {b: {s: rows[b][s]["ppl"] for s in sizes} for b in labels if b.startswith("Lookahead")}
    if len(bounds) > 1:
        bounds["best bound"] = {s: min(b[s] for b in bounds.values()) for s in sizes}
    if baseline not in rows:
        return {}
    base = {s: rows[baseline][s]["ppl"] for s in sizes}
    out = {}
    for name, bound in bounds.items():
        for p in labels:
            if p != baseline and p not in bounds:
                out[f"{p} / {name}"] = {s: (base[s] - rows[p][s]["ppl"]) / (base[s] - bound[s])
                                        if bound[s] < base[s] else None for s in sizes}
    return out


def _measure(model, ids, named, size, file, batch):
    """One setting of the sweep: the mean loss over the chunks (batch at a time), saved to `file`.
    named: a policies.Named, or None for the shorter-context baseline."""
    start = time.time()
    if named is None:
        losses = [shorter_context_nll(model, x, size) for x in ids.split(batch)]
    else:
        losses = [nll(model, x, named, None if named is policies.FULL else size) for x in ids.split(batch)]
    losses = torch.cat(losses)                                       # (n_chunks, T - 1)
    row = {"ppl": math.exp(losses.nanmean().item()), "per_chunk": losses.nanmean(1).exp().tolist(),
           "seconds": time.time() - start}
    atomic_write(file, json.dumps(row))
    log(f"  {named.label if named else 'shorter':>12} {size:>5}: ppl {row['ppl']:9.2f}  (chunks {min(row['per_chunk']):.2f}-"
        f"{max(row['per_chunk']):.2f}, {row['seconds']:.0f} s)")


def atomic_write(path, text):
    """Write a whole file or nothing: an interrupted run must not leave half a result to be read back."""
    tmp = path.with_suffix(".tmp")
    tmp.write_text(text)
    tmp.replace(path)


_WORKER = {}  # a sweep worker process's model and chunks


def _start_worker(model, ids):
    torch.set_num_threads(1)
    _WORKER.update(model=model, ids=ids)


def _measure_in_worker(spec, size, file, batch):
    _measure(_WORKER["model"], _WORKER["ids"], spec and policies.named(spec), size, file, batch)


def print_sweep(data):
    sizes, rows = data["sizes"], data["ppl"]
    width = max(12, *map(len, data["policies"])) + 1
    log(f"\n{'policy':<{width}}" + "".join(f"{s:>9}" for s in sizes) + f"{'full':>9}")
    full = rows["full"][data["chunk"]]["ppl"]
    for name in ["shorter", *data["policies"]]:
        log(f"{name:<{width}}" + "".join(f"{rows[name][s]['ppl']:>9.2f}" for s in sizes) + f"{full:>9.2f}")
    if data["gap_closed"]:
        wide = max(map(len, data["gap_closed"])) + 1
        log(f"\nshare of the gap from Window+4 to a bound that a policy closes, (Window+4 - policy) / "
            f"(Window+4 - bound);\n'-' where the bound is not below Window+4\n{'policy / bound':<{wide}}"
            + "".join(f"{s:>9}" for s in sizes))
        for pair, by_size in data["gap_closed"].items():
            log(f"{pair:<{wide}}" + "".join(f"{by_size[s]:>9.0%}" if by_size[s] is not None else f"{'-':>9}"
                                             for s in sizes))


# ---------------------------------------------------------------- what TOVA keeps (Fig. 7-9, Table 2)

@torch.no_grad()
def retention(model, tok, size=256, length=2048, layer=15, book="alice29", picture=False, name="retention",
              policy="tova") -> dict:
    """Run a policy (TOVA by default) on one chunk and record which positions each layer's state holds
    at every step (the first KV head's, for a head-wise policy). picture=True adds the chosen layer's
    (T, T) held-rows matrix under "_held"; name=None saves nothing."""
    named = policies.named(policy)
    if named is policies.FULL:
        raise ValueError("retention needs a policy: with every row kept there is nothing to see")
    ids = book_chunks(tok, 1, length, books=(book,))
    T, L = ids.shape[1], model.config.n_layers
    held = torch.zeros(L, T, T, dtype=torch.bool)  # held[l, t, j]: row j is kept after step t
    scored = named.on(model, ids)

    def recording(rows):
        scores = scored(rows)
        n = rows.pos.shape[-1]
        keep = torch.ones(n, dtype=torch.bool)
        keep[msrnn.lowest(scores[:1, :1], n - rows.size)[0, 0]] = False  # what the state will drop
        held[rows.layer, rows.t, rows.pos[0, 0][keep]] = True
        return scores

    msrnn.prefill(model, ids, recording, size)
    for t in range(min(size, T)):  # before the state is full nothing is dropped
        held[:, t, : t + 1] = True
    lifetime = held.sum(1).float()                                   # (L, T) steps each token stayed
    steps_left = (T - torch.arange(T)).float()                       # steps it could have stayed
    recent = torch.tensor([held[:, t, max(0, t - size + 1): t + 1].sum().item() for t in range(size, T)]).sum()
    recent_share = (recent / held[:, size:].sum()).item()
    # tokens kept longest, on average over their occurrences (all layers; seen at least 5 times, early enough)
    stay = (lifetime / steps_left).mean(0)                           # (T,) share of its remaining steps
    eligible = torch.arange(T) < T - size
    by_token = {}
    for j in torch.nonzero(eligible).flatten().tolist():
        by_token.setdefault(ids[0, j].item(), []).append(stay[j].item())
    ranked = sorted(((sum(v) / len(v), k, len(v)) for k, v in by_token.items() if len(v) >= 5), reverse=True)
    data = {
        "policy": named.label, "size": size, "length": T, "layer": layer, "book": book,
        "recent_share": recent_share,
        "first_tokens_kept_to_end_per_layer": [int(held[l, -1, :4].sum()) for l in range(L)],
        "first_token_kept_to_end_layers": int(held[:, -1, 0].sum()),
        "longest_kept_tokens": [{"token": tok.decode([k]), "mean_share_kept": round(s, 3), "count": c}
                                for s, k, c in ranked[:15]],
        "shortest_kept_tokens": [{"token": tok.decode([k]), "mean_share_kept": round(s, 3), "count": c}
                                 for s, k, c in ranked[-5:]],
    }
    log(f"{named.label}, size {size}, {T} tokens of {book}: {recent_share:.0%} of kept rows are among the {size} most recent")
    log(f"  the first token is still held at the end in {data['first_token_kept_to_end_layers']}/{L} layers")
    log("  kept longest: " + ", ".join(repr(x["token"]) for x in data["longest_kept_tokens"]))

    def draw(plt):
        plt.imshow(held[layer].float().numpy(), aspect="auto", cmap="Greys", interpolation="nearest")
        plt.xlabel("token position")
        plt.ylabel("step t")
        plt.title(f"{named.label} size {size}: rows held by layer {layer}")
    if name:
        save(name, data, draw)
    return {**data, "_held": held[layer]} if picture else data


# ---------------------------------------------------------------- passkey retrieval (a stand-in for the paper's long QA)

FILLER = ("The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again. ")


def passkey_prompts(tok, length, depths, keys):
    """One prompt per (depth, key), all exactly `length` tokens: filler with the key sentence at `depth`."""
    head = tok.encode("There is a pass key hidden inside a lot of irrelevant text. Find it and memorize it.\n").ids
    tail = tok.encode("\nWhat is the pass key? The pass key is").ids
    filler = tok.encode(FILLER * (length // 10)).ids
    prompts = []
    for key in keys:
        needle = tok.encode(f" The pass key is {key}. Remember it. {key} is the pass key. ").ids
        room = length - len(head) - len(tail) - len(needle)
        for d in depths:
            cut = int(room * d)
            prompts.append(head + filler[:cut] + needle + filler[cut:room] + tail)
    return torch.tensor(prompts)


@torch.no_grad()
def answer(model, tok, prompts, policy=None, size=None, n=6, regime="step") -> list[str]:
    """Greedy continuations (n tokens) of prompts (B, T) under a policy: msrnn.prefill reads the
    prompt (regime "full": with full attention, then cut to `size` once) and hands over its state,
    from which generation goes on token by token. A lookahead is built on the prompt followed by
    the full-cache model's own answer: the future it reads is the one the full cache would see."""
    named = policies.named(policy) if policy is not None else policies.FULL
    text = prompts
    if named.reads_ahead:
        text = torch.cat([prompts, answer_ids(model, prompts, None, None, n)[:, :-1]], 1)
    return [tok.decode(seq) for seq in answer_ids(model, prompts, named.on(model, text), size, n, regime).tolist()]


def answer_ids(model, prompts, policy, size, n, regime="step"):
    oneshot = prompts.shape[1] if regime == "full" and size is not None else 0
    logits, state = msrnn.prefill(model, prompts, policy, size, oneshot)
    out = [logits[:, -1].argmax(-1)]
    out += list(msrnn.generate(model, out[0][:, None], n - 1, policy, state=state))
    return torch.stack(out, 1)                                       # (B, n)


@torch.no_grad()
def passkey(model, tok, sizes=(128, 512), names=("window", "sink", "h2o", "tova"), length=2048,
            depths=(0.1, 0.5, 0.9), keys=(71432, 50918), batch=6, regimes=("step",)) -> dict:
    """Accuracy of retrieving a 5-digit key from `length` tokens of filler, per policy, size and prompt
    regime ("step": evict while reading the prompt; "full": read it in full, then cut once).
    The prompt goes through msrnn.prefill, which hands over its state; 6 tokens are then generated."""
    prompts = passkey_prompts(tok, length, depths, keys)
    answers = [str(k) for k in keys for _ in depths]
    t0, acc = time.time(), {}
    settings = [(policies.FULL, None, "step")] + [(policies.named(p), s, r) for r in regimes for p in names for s in sizes]
    log(f"passkey: {len(prompts)} prompts of {length} tokens, key at depths {list(depths)}")
    for named, size, regime in settings:
        right = 0
        for i in range(0, len(prompts), batch):
            got = answer(model, tok, prompts[i:i + batch], named, size, regime=regime)
            right += sum(a in g for a, g in zip(answers[i:i + batch], got))
        key = "full cache" if size is None else f"{named.label}/{size}/{regime}"
        acc[key] = {"policy": named.label, "size": size, "regime": regime if size else None, "correct": right,
                    "total": len(prompts)}
        log(f"  {named.label:>12} {size or '':>5} {regime if size else '':>4}: {right}/{len(prompts)}  "
            f"[{time.time() - t0:.0f} s]")
    data = {"length": length, "depths": list(depths), "keys": list(keys), "results": acc, "seconds": time.time() - t0}
    save("passkey", data)
    return data


# ---------------------------------------------------------------- memory and throughput (Table 1)

def state_bytes(model, rows: int) -> int:
    """Bytes of keys and values one sequence holds with `rows` rows per layer (model dtype)."""
    c = model.config
    return 2 * c.n_layers * c.n_kv_heads * c.head_dim * rows * model.embed.element_size()


def synthetic_state(model, batch: int, rows: int, size=None) -> msrnn.State:
    """A state that already holds `rows` rows (random keys and values), as if `rows` tokens were read:
    a decode step's cost depends on how many rows there are, not on their content."""
    state = msrnn.init_state(model, batch, size)
    g = torch.Generator().manual_seed(0)
    for ms in state:
        cap = rows + 64 if size is None else size + 1  # room to decode without growing
        shape = (batch, ms.k.shape[1], cap, ms.k.shape[3])
        ms.k, ms.v = (torch.randn(shape, generator=g, dtype=model.dtype) * 0.1 for _ in range(2))
        ms.pos = torch.arange(cap).expand(shape[:3]).contiguous()
        ms.score = torch.zeros(shape[:3], dtype=model.dtype)
        ms.n = rows if size is None else size + 1  # a full bounded state: every slot used, slot 0 just freed
        ms.free.zero_()
    state.t = rows
    return state


@torch.no_grad()
def decode_speed(model, batch: int, rows: int, size=None, policy=None, steps=8) -> float:
    """Tokens per second of batched greedy decoding from a state holding `rows` rows. The median
    step: this machine's speed drifts, and a burst of other work should not decide the number."""
    state = synthetic_state(model, batch, rows, size)
    tok = torch.zeros(batch, dtype=torch.long)
    llama.step(model, tok, state, policy)  # warm-up
    times = []
    for i in range(steps):
        t0 = time.perf_counter()
        logits = llama.step(model, tok, state, policy)
        tok = logits.argmax(-1)
        times.append(time.perf_counter() - t0)
    return batch / sorted(times)[steps // 2]


def memory(model, context=4096, sizes=(256, 512, 1024, 2048), budget_gib=1.0, steps=8, name="memory") -> dict:
    """Table 1 on a CPU: cache bytes per sequence, the largest batch in a cache budget, and the
    tokens/s of decoding at that batch after `context` tokens, full cache against TOVA.
    Saved as results/<name>.json; name=None saves nothing."""
    budget = budget_gib * 2 ** 30
    rows_out = []
    log(f"memory and throughput: decoding after {context} tokens, cache budget {budget_gib} GiB")
    for size in list(sizes) + [None]:
        rows = context if size is None else size
        per_seq = state_bytes(model, rows if size is None else size + 1)  # a bounded state has size + 1 slots
        batch = int(budget // per_seq)
        tps = decode_speed(model, batch, rows, size, None if size is None else policies.tova, steps) if batch else 0.0
        rows_out.append({"size": size or context, "policy": "full" if size is None else "tova",
                         "cache_MiB_per_seq": per_seq / 2 ** 20, "max_batch": batch, "tokens_per_s": tps})
        log(f"  {('TOVA ' + str(size)) if size else 'full ' + str(context):>10}: {per_seq / 2**20:7.1f} MiB/seq, "
            f"batch {batch:4d}, {tps:7.1f} tokens/s")
    full = rows_out[-1]["tokens_per_s"]
    for r in rows_out:
        r["relative_throughput"] = r["tokens_per_s"] / full if full else None
    data = {"context": context, "budget_GiB": budget_gib, "rows": rows_out}
    return save(name, data) if name else data
