"""msrnn demo: a transformer is a multi-state RNN; bound its state and a policy decides what to forget.

python demo.py                    the tour (the two views agree; generation with a growing state)
python demo.py ppl --policy tova --size 256 --text FILE     perplexity under a policy
python demo.py --help             every subcommand
"""
import argparse
import functools
import sys
import time

import torch

import llama
import load_weights
import msrnn
import policies


def policy_by_name(name: str, sinks: int = 4):
    """'full' (no policy) or one of policies.POLICIES; a clear error for anything else."""
    if name == "full":
        return None
    if name not in policies.POLICIES:
        raise SystemExit(f"error: unknown policy {name!r}; choose from full, {', '.join(policies.POLICIES)}")
    p = policies.POLICIES[name]
    return functools.partial(p, sinks=sinks) if p is policies.sink else p


def load(args):
    t0 = time.time()
    model = load_weights.load_model(args.model, torch.float64 if getattr(args, "float64", False) else torch.float32)
    tok = load_weights.load_tokenizer(args.model)
    c = model.config
    print(f"model: {args.model or 'SmolLM2-135M-Instruct (default)'} - {c.n_layers} layers, {c.n_heads} query / "
          f"{c.n_kv_heads} KV heads of {c.head_dim}, loaded in {time.time() - t0:.1f} s")
    return model, tok


def intro(model, tok):
    text = ("The quick brown fox jumps over the lazy dog. A multi-state RNN keeps one key and one value "
            "for every token it has read, and attends over all of them at each step.")
    ids = torch.tensor(tok.encode(text).ids)
    t0 = time.time()
    parallel = llama.forward(model, ids)
    t1 = time.time()
    recurrent = msrnn.run(model, ids)
    t2 = time.time()
    print(f"\n1. Two views, one function. A paragraph of {len(ids)} tokens:")
    print(f"   transformer view (all positions at once): {t1 - t0:.2f} s")
    print(f"   RNN view (one token at a time, x, (K, V) = f(x, (K, V))): {t2 - t1:.2f} s")
    print(f"   max |logit difference| = {(parallel - recurrent).abs().max().item():.1e}  (float32 rounding)")

    prompt = "The capital of France is"
    print(f"\n2. Greedy generation token by token; the multi-state gains one row per token in each of "
          f"{model.config.n_layers} layers:\n   {prompt!r}")
    state = msrnn.init_state(model)
    ids = torch.tensor(tok.encode(prompt).ids)
    for tok_id in msrnn.generate(model, ids, 12, state=state):
        k_bytes = 2 * sum(ms.n for ms in state) * model.config.n_kv_heads * model.config.head_dim * 4
        print(f"   + {tok.decode([tok_id.item()])!r:12}  rows per layer: {state.rows:3d}   "
              f"K,V bytes: {k_bytes / 1024:.0f} KiB")


def cmd_tour(args):
    model, tok = load(args)
    intro(model, tok)


def cmd_ppl(args):
    import experiments
    import texts
    if args.size is not None and args.size < 1:
        raise SystemExit(f"error: --size must be at least 1, got {args.size}")
    policy = policy_by_name(args.policy, args.sinks)
    if (policy is None) != (args.size is None):
        raise SystemExit("error: --policy full takes no --size; every other policy needs --size")
    if args.policy == "sink" and args.sinks >= args.size:
        raise SystemExit(f"error: --sinks {args.sinks} must be smaller than --size {args.size}")
    text = texts.read(args.text) if args.text else texts.book(args.book)
    model, tok = load(args)
    ids = torch.tensor(tok.encode(text).ids)[: args.tokens]
    t0 = time.time()
    r = experiments.perplexity(model, ids, policy, args.size, args.chunk,
                               progress=lambda i, n: print(f"\r   chunk {i}/{n}", end="", file=sys.stderr))
    print(f"\rperplexity {r['ppl']:.3f} over {r['tokens']} tokens in {r['chunks']} chunk(s) of up to {args.chunk}; "
          f"policy {args.policy}, size {args.size or 'unbounded'}; {time.time() - t0:.1f} s")


def main(argv=None):
    model_help = "a Hugging Face checkpoint folder (default: SmolLM2-135M-Instruct, prepared on first use)"
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", help=model_help)
    common = argparse.ArgumentParser(add_help=False)  # --model after the subcommand works too
    common.add_argument("--model", default=argparse.SUPPRESS, help=model_help)
    sub = ap.add_subparsers(dest="cmd")
    sub.add_parser("tour", parents=[common], help="the guided tour (the default)")
    p = sub.add_parser("ppl", parents=[common], help="perplexity of a text under a policy and multi-state size")
    p.add_argument("--policy", default="tova", help=f"full, {', '.join(policies.POLICIES)} (default tova)")
    p.add_argument("--size", type=int, help="multi-state size: rows kept per layer (omit for --policy full)")
    p.add_argument("--sinks", type=int, default=4, help="first tokens the sink policy keeps (default 4)")
    p.add_argument("--text", help="a UTF-8 text file (default: a Canterbury-corpus book, see --book)")
    p.add_argument("--book", default="alice29", help="alice29, asyoulik, lcet10 or plrabn12 (default alice29)")
    p.add_argument("--tokens", type=int, default=None, help="use only the first N tokens of the text")
    p.add_argument("--chunk", type=int, default=4096, help="tokens per chunk, each read from scratch (default 4096)")
    args = ap.parse_args(argv)
    if args.model is not None:  # check the folder before any work, with the loader's own message
        load_weights._folder(args.model)
    {"ppl": cmd_ppl}.get(args.cmd, cmd_tour)(args)


if __name__ == "__main__":
    try:
        main()
    except (load_weights.CheckpointError, FileNotFoundError, ValueError) as e:
        raise SystemExit(f"error: {e}")
