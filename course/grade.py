"""Grade the course: the project's own tests and references, pointed at a student's files.

    python -m course.grade --init         copy the skeletons to course/work/, where you write the paper
    python -m course.grade                grade course/work/
    python -m course.grade FOLDER         grade another folder (it holds llama.py, msrnn.py, policies.py, t2r/linear.py)
    python -m course.grade --reference    grade the repository's own files, the reference solutions: all pass
    python -m course.grade --only 1 4     some parts;  --model: also the checks on the real default model

Each part names the student's files it grades and the project's tests that grade them; those files
replace the repository's (course/student.py), the others stay the repository's, so a part is graded
on its own. Per part: pass or fail, points, and on a failure a hint that says what differs.
Offline, on the tests' tiny random models; the exit status is 0 only when every part passes.
"""
import argparse
import ast
import concurrent.futures
import importlib.machinery
import importlib.util
import json
import os
import pathlib
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
import tokenize
from dataclasses import dataclass, replace

if not __package__:  # run as `python course/grade.py`: the repository's folders are found from its root, as with -m
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
from engine import threads  # noqa: F401  (the tests it starts inherit OpenMP's wait policy)
from lab import harness

ROOT = pathlib.Path(__file__).resolve().parent.parent
SKELETON, WORK = ROOT / "course" / "skeleton", ROOT / "course" / "work"
FILES = {"llama": "llama.py", "msrnn": "msrnn.py", "policies": "policies.py", "t2r.linear": "t2r/linear.py"}
TIMEOUT = 300  # seconds for one group's offline tests: a loop that never ends is a failure, not a hang
MODEL_TIMEOUT = 1200  # seconds for one part's tests on the real model, run alone (107 s for parts 2-6 on idle cores)


@dataclass
class Part:
    number: int
    title: str
    modules: tuple      # the student's modules it grades; the others stay the repository's
    tests: tuple        # pytest node ids of the project's tests (a bare test name takes all its parameters)
    points: int
    hints: tuple = ()   # (test name part, regex on the failure's message, hint): the first that matches is shown
    model: tuple = ()   # tests on the real default model: only with --model
    writes: tuple = ()  # (file, function) the part asks for, named while still blank though no test reached it


def details(message):
    """What a failed comparison says, for a hint: 'by 3e-02 at token 5 (name='tova', size=1)', from
    torch.testing.assert_close's report on logits (..., T, vocab) and the case the test names after it."""
    d = re.search(r"Greatest absolute difference: (\S+) at index \(([\d, ]+)\)", message or "")
    if not d:
        return ""
    index = [int(i) for i in d.group(2).split(",") if i.strip()]
    report = ("Tensor-likes", "Scalars", "Mismatched", "Greatest")  # assert_close's own lines; the test's msg follows
    case = [line for line in message.splitlines()[1:] if line.strip() and not line.startswith(report)]
    return (f"by {float(d.group(1)):.0e}" + (f" at token {index[-2]}" if len(index) >= 2 else "")
            + (f" ({case[0]})" if case else ""))


# ---------------------------------------------------------------- the parts, in the paper's order

EQ, POL, T2R, DEV, HF = "test_equivalence.py::", "tests/test_policies.py::", "tests/test_t2r.py::", \
    "tests/test_devices.py::", "tests/test_transformers.py::"
LIST = [f"{POL}test_every_policy_is_the_list_reference[{p}]" for p in ("window", "sink", "h2o", "h2o_head", "tova", "tova_head")]

T2R_WRITES = tuple(("t2r/linear.py", f) for f in ("phi", "attention", "attend", "fold", "state_bytes"))
FREED = ("your evict does not mark the freed slot empty ({says}): once the policy's lowest row is dropped, "
         "its slot's pos is -1 until the next token's row is written there; the tie rule, held_mask and the "
         "policies read pos, and would take the dropped row for a held one")
EMPTIES = ("your state holds more than one empty slot between steps ({says}): evict drops a row only once the state "
           "holds size + 1 rows (n > size, so `if self.n <= self.size: return`), and the next token's row is written "
           "into the slot it freed, not into a new one: one row evicted early leaves two slots at -1")
ROW_I = ("your masked view differs from the token-by-token run {diff}: row i of the mask is the rows held "
         "when query i attends: those kept after step i - 1 (before step i drops one) and the current token i itself")

PARTS = [
    Part(1, "the decoder layer as the RNN step (llama.py)", ("llama",), points=20, tests=(
        *(f"{EQ}test_unbounded_msrnn_equals_transformer[{c}]" for c in ("llama-gqa", "mistral-window5", "head-dim-16")),
        EQ + "test_identical_greedy_tokens[llama-gqa]",
        POL + "test_window_is_mistral_sliding_window_plus_one", POL + "test_sink_is_a_static_mask",
        EQ + "test_queries_and_keys_are_rotated_pairs_and_values_are_not", EQ + "test_query_head_h_reads_kv_head_h_over_g",
        EQ + "test_a_step_writes_its_row_at_its_position", EQ + "test_forward_hands_the_heads_to_wo_in_order",
        HF + "test_logits_match_transformers[False-llama-gqa]"),
        model=(EQ + "test_default_model_knows_paris", EQ + "test_default_model_perplexity_on_gpl3"),
        writes=tuple(("llama.py", f) for f in ("rope", "qkv", "step", "forward")),
        hints=(
            ("test_a_step_writes_its_row", "", "your step does not put the token at its position ({says}): the "
             "token a step reads is at position t = state.t, for its RoPE angle and its row's pos; advance state.t "
             "once the layers are done (RoPE sees only distances, so a shifted position passes the tests that "
             "compare logits, but not a policy that reads pos)"),
            ("test_forward_hands_the_heads", r"\(G, Hkv\) order", "your forward hands the heads to the output "
             "projection in (G, Hkv) order: attention returns o (B, Hkv, G, T, hd), and query head h = jG + g is "
             "KV head j's g-th (as qkv split them), so wo reads o as (B, T, Hkv, G, hd) flattened to (B, T, H*hd), "
             "as step's o.flatten(1) does"),
            ("test_forward_hands_the_heads", "", "your forward, given the attention's output o, differs from the "
             "layers written out by hand {diff}: x + o·woᵀ with o (B, Hkv, G, T, hd) as (B, T, H*hd), head "
             "h = jG + g, then x + MLP(RMSNorm(x)), then the final norm and lm_head"),
            ("[llama-gqa]", "", "your step's logits differ from your forward's {diff}: do both views share qkv and mlp, "
             "with RoPE at each token's absolute position (t in step, 0 .. T-1 in forward), and a residual around "
             "attention and around the MLP?"),
            ("[mistral-window5]", "", "with Mistral's sliding window your two views differ {diff}: does forward, "
             "given no attention, mask with llama.causal_mask(T, sliding_window)?"),
            ("[head-dim-16]", "", "with head_dim * heads != dim your views differ {diff}: split the heads by the "
             "config's head_dim, not by dim // n_heads"),
            ("test_window_is_mistral", "", "with a bounded state your step differs from the transformer {diff}, "
             "though the unbounded one agrees: is RoPE applied at the token's position t (state.t), not at the "
             "number of rows the state holds?"),
            ("test_sink_is_a_static_mask", "", "your forward, given an attention, differs from the MSRNN {diff}: does "
             "it call attention(i, q, k, v) in every layer i, with q (B, Hkv, G, T, hd) and k, v (B, Hkv, 1, T, hd), "
             "and use what it returns?"),
            ("test_query_head_h_reads", "but its place", "your queries are in their groups, but out of order inside "
             "one {diff}: query head h = jG + g is KV head j's g-th, so keep each group's heads in order (no flip or "
             "permute after the split)"),
            ("test_query_head_h_reads", "not in group", "your queries are grouped wrongly {diff}: query head h "
             "shares KV head h // G, so the G query heads of KV head j are heads jG .. jG + G - 1: unflatten the H "
             "heads as (Hkv, G), not (G, Hkv), with no reordering of the heads or the groups before or after"),
            ("test_queries_and_keys_are_rotated", r"\nkeys\s*\Z", "your queries are right, but your keys differ from "
             "RoPE on wk's projection {diff}: keys come from wk and are turned as the queries are (dimensions i and "
             "i + hd/2 together), values from wv and are not: keys and values swapped, or the fused projection split "
             "in the wrong places?"),
            ("test_queries_and_keys_are_rotated", r"\nvalues: no RoPE\s*\Z", "your queries and keys are right, but your "
             "values differ from wv's projection {diff}: values are not rotated (RoPE turns queries and keys only), "
             "and are the fused projection's last Hkv heads"),
            ("test_queries_and_keys_are_rotated", "", "your qkv differs from RoPE written with complex numbers "
             "{diff}: RMSNorm, the fused projection, then in each query and key head dimensions i and i + hd/2 "
             "turned together by position * theta^(-2i/hd) (rotate-half); values are not rotated"),
            ("test_logits_match_transformers", "", "your two views agree, but their logits differ from the "
             "transformers library's Llama {diff}: a mistake both views share. RMSNorm before the projections, "
             "RoPE on queries and keys only, the pairs (x_i, x_(i + hd/2)) rotated (rotate-half), the final norm "
             "before lm_head?"),
        )),
    Part(2, "the unbounded multi-state (msrnn.py)", ("msrnn",), points=15, tests=(
        *(f"{EQ}test_unbounded_msrnn_equals_transformer[{c}]" for c in ("llama-gqa", "mistral-window5", "llama-mha")),
        EQ + "test_identical_greedy_tokens[llama-gqa]", EQ + "test_sampling_is_seeded_and_continues_a_state",
        EQ + "test_parallel_views_unbounded_hand_over_the_state[prefill]"),
        model=(EQ + "test_default_model_views_agree",),
        hints=(
            ("[llama-gqa]", "", "msrnn.run with your multi-state differs from the transformer {diff}: append the row, "
             "then softmax(q·k/√hd) over every held row, then the weights times the values?"),
            ("[llama-mha]", "", "with one query head per KV head (G = 1) your multi-state differs {diff}: q is "
             "(B, Hkv, G, hd), K (B, Hkv, n, hd), so q @ K.mT is (B, Hkv, G, n)"),
            ("[mistral-window5]", "", "with Mistral's sliding window your multi-state differs {diff}: rows with "
             "pos <= t - window get no attention"),
            ("test_parallel_views_unbounded", "", "a state filled by fast.prefill does not continue exactly in your "
             "append {diff}: the next row goes to slot n, the rows are slots 0 .. n-1, and n counts them"),
        )),
    Part(3, "a bounded multi-state: eviction (msrnn.py)", ("msrnn",), points=20, tests=(
        *LIST, POL + "test_tova_and_h2o_match_a_naive_reference", POL + "test_window_is_mistral_sliding_window_plus_one",
        POL + "test_bounded_state_is_fixed_slots_never_copied", POL + "test_batch_sequences_drop_their_own_rows",
        *(f"{POL}test_ties_go_against_the_oldest_row_in_every_view[{c}]" for c in ("4-constant", "6-tied")),
        POL + "test_a_freed_slot_is_marked_empty", DEV + "test_which_tensor_is_kept_in_which_float",
        DEV + "test_the_attention_the_policies_read_sums_to_one_in_bfloat16"),
        hints=(
            ("test_a_freed_slot", "slots are marked -1, not one", EMPTIES),
            ("test_a_freed_slot", "", FREED),
            ("test_which_tensor_is_kept_in_which_float", "", "with a bfloat16 model the attention your policies read "
             "is not float32: the softmax runs in float32 at least, whatever the model's dtype "
             "(softmax(-1, dtype=llama.wide(scores.dtype))); keys and values stay in the model's dtype"),
            ("test_the_attention_the_policies_read_sums", "", "with a bfloat16 model the attention your policies "
             "read has float32's dtype but bfloat16's digits ({says}): softmax(-1, dtype=llama.wide(scores.dtype)) "
             "computes in float32, while softmax(-1).to(float32) rounds to bfloat16 first and widens the result"),
            ("test_ties_go_against", "", "with tied scores your finite MSRNN drops another row than the list reference "
             "{diff}: of equal lowest scores the oldest row goes (the smallest pos), not the earliest slot: once "
             "rows have been dropped a slot says nothing about age, and a constant score must be Window"),
            ("test_window_is_mistral", "", "Window with size k must equal Mistral's sliding window of k + 1, and "
             "yours does not {diff}: does the query attend over size + 1 rows (append, attend, then drop)?"),
            ("test_bounded_state_is_fixed_slots", "", "your bounded state reallocates or copies its buffers: "
             "once full, the new row goes into the slot the policy freed (self.free), nothing moves"),
            ("[tova]", "", "with TOVA your finite MSRNN differs from the list reference {diff}: the current token's "
             "row must be among those the policy scores and may be the one dropped"),
            ("[window]", "", "with Window your finite MSRNN differs from the list reference {diff}: drop the "
             "lowest-scored row, and write the next row into its slot"),
            ("[h2o]", "", "with H2O your finite MSRNN differs from the list reference {diff}, though TOVA agrees: "
             "each row's score adds the attention it receives at every step, before the policy scores the rows (keep: "
             "add, then evict), and a reused slot's starts at 0"),
            ("test_batch_sequences", "", "a sequence's drops depend on the other sequences of its batch {diff}: "
             "drop per sequence"),
            ("_head]", "", "with a head-wise policy your finite MSRNN differs from the list reference {diff}: "
             "with scores (B, Hkv, n) each KV head frees its own slot"),
        )),
    Part(4, "the paper's policies (policies.py)", ("policies",), points=15, tests=(
        POL + "test_tova_and_h2o_match_a_naive_reference", POL + "test_head_wise_policies_match_a_naive_reference",
        POL + "test_window_is_mistral_sliding_window_plus_one", POL + "test_sink_is_a_static_mask",
        POL + "test_bad_arguments", *LIST, "tests/test_zoo.py::test_h2o_recent_share_is_a_parameter",
        *(f"{POL}test_the_paper_policies_score_each_sequence_alone[{p}]" for p in ("tova", "tova_head", "h2o", "h2o_head"))),
        model=(POL + "test_default_model_tova_beats_sinks_beats_window",),
        hints=(
            ("test_window_is_mistral", "", "window: the newest rows must be kept {diff}: the row of the latest "
             "position (rows.pos, not its slot) scores highest, the lowest is dropped"),
            ("test_sink_is_a_static_mask", "", "sink (Window+i) differs from a static mask of the first `sinks` "
             "tokens and the latest {diff}: positions 0 .. sinks-1 get inf, the rest their position"),
            ("test_bad_arguments", "sinks=4|DID NOT RAISE", "sink must refuse sinks >= size with ValueError('sink: sinks=4 must be "
             "smaller than the multi-state size ...')"),
            ("test_tova_and_h2o", "tova", "tova differs from a naive TOVA {diff}: the current query's attention "
             "averaged over every query head of the layer (KV heads and their groups), shape (B, 1, n)"),
            ("test_tova_and_h2o", "h2o", "h2o differs from a naive H2O {diff}: keep exactly int(size * recent) rows "
             "as recent (score inf: pos > t - int(size * recent)), not one more; without them a new row, whose "
             "accumulated score is 0, is dropped at once"),
            ("test_head_wise", "tova_head", "tova_head differs from a naive head-wise TOVA {diff}: each KV head "
             "averages its own G queries' attention, shape (B, Hkv, n)"),
            ("test_h2o_recent_share", r"> 0\.001", "h2o (or h2o_head) gives the same logits with recent=0.25 as with "
             "0.5: keep int(size * recent) rows as recent for the `recent` it is given, not always half of the size"),
            ("test_the_paper_policies_score_each", "", "a policy's scores for one sequence depend on the other "
             "sequences of the batch {diff}: rows.attn is (B, Hkv, G, n); average over the heads (and queries), never "
             "over B"),
            ("test_head_wise", "h2o_head", "h2o_head differs from a naive head-wise H2O {diff}: each KV head's own "
             "accumulated score, its newest rows protected, shape (B, Hkv, n)"),
        )),
    Part(5, "the masked transformer view (msrnn.py)", ("msrnn",), points=10, tests=(
        *(f"{POL}test_recurrent_equals_masked_view[{p}]" for p in ("window", "tova", "h2o_head")),
        POL + "test_identical_greedy_tokens[tova]", POL + "test_masked_prefill_hands_over_the_recurrent_state[tova]",
        EQ + "test_parallel_views_unbounded_hand_over_the_state[masked_forward]",
        POL + "test_recurrent_equals_masked_view_with_a_sliding_window", POL + "test_a_freed_slot_is_marked_empty"),
        hints=(
            ("test_a_freed_slot", "slots are marked -1, not one", EMPTIES),
            ("test_a_freed_slot", "", FREED),
            ("masked_view[window]", "", ROW_I),
            ("masked_view[tova]", "", ROW_I),
            ("test_recurrent_equals_masked_view[h2o_head]", "", "with a head-wise policy your masked view differs "
             "from the token-by-token run {diff}: each KV head drops its own rows, so held_mask gives one mask per "
             "KV head, (B, Hkv, 1, T, T), unless all of them are the same"),
            ("hand_over", "", "the state your masked view returns does not continue exactly {diff}: it must be the "
             "state the recurrence reached (the one held_mask ran), with state.t = T"),
            ("with_a_sliding_window", "", "with Mistral's sliding window your masked view differs from the "
             "token-by-token run {diff}: a row the policy still holds but the model's own window has left is not "
             "seen, so the mask is held_mask's and the model's (llama.causal_mask(T, sliding_window)) together"),
        )),
    Part(6, "Table 1: the memory arithmetic (msrnn.py)", ("msrnn",), points=5, tests=(
        DEV + "test_table1_counts_the_bytes_of_the_models_dtype", DEV + "test_table1_arithmetic"),
        hints=(
            ("test_table1_counts_the_bytes", "", "state_bytes: {says}"),
            ("test_table1", "", "state_bytes: {says}"),
        )),
    Part(7, "T2R: the linear state, two views (t2r/linear.py)", ("t2r.linear",), points=15, tests=(
        *(f"{T2R}test_recurrent_equals_parallel[{m}]" for m in ("relu", "elu", "hedgehog")),
        T2R + "test_hedgehog_map_is_two_softmaxes", T2R + "test_elu_map_is_elu_plus_one",
        *(f"{T2R}test_relu_maps_are_relu_of_their_own_projections[{k}]" for k in ("t2r", "relu")),
        T2R + "test_linear_attention_is_normalised_as_the_paper_writes[attention]",
        *(f"{T2R}test_state_size_is_constant[{k}]" for k in ("relu", "hedgehog", "elu")),
        T2R + "test_state_bytes_counts_the_sinks_too[sinks-3]",
        *(f"{T2R}test_features_come_in_the_dtype_of_x[{k}]" for k in ("relu", "t2r", "hedgehog", "elu")),
        T2R + "test_swap_and_swap_back"), writes=T2R_WRITES,
        hints=(
            ("test_elu_map", "", "your ELU+1 map differs from its formula {diff}: φ(x) = ELU(x) + 1, that is x + 1 "
             "where x > 0 and exp(x) elsewhere, so that every feature is positive"),
            ("test_relu_maps", "", "your ReLU map differs from its formula {diff}: φ(x) = ReLU(W x + b), the query "
             "map (wq, bq) for queries and the key map (wk, bk) for keys; Kasai's tied kind `t2r` uses the key map for both"),
            ("test_recurrent_equals_parallel[relu]", "", "your RNN view differs from your transformer view {diff}: "
             "out = φ(q)ᵀS / φ(q)·z, with the token's own φ(k) vᵀ in S, z before its query reads them (query i "
             "sees keys 0 .. i)?"),
            ("test_recurrent_equals_parallel[elu]", "", "with ELU+1 your two views differ {diff}: φ(x) = ELU(x) + 1"),
            ("test_hedgehog_map", "", "Hedgehog's map differs from the paper's, written out by hand {diff}: the "
             "softmax over the r/2 features of W x + b, then that of -(W x + b), and the queries' times exp(gq)"),
            ("test_state_", "", "state_bytes is not what the state holds: S is (Hkv, r, hd) and z (Hkv, r) in every "
             "swapped layer, plus the sinks' and the window's rows (a key and a value of hd each); the test: {says}"),
            ("test_features_come_in_the_dtype", "", "{says}: φ returns x's dtype (Hedgehog's softmaxes are taken in "
             "float32 at least, llama.wide, and the features cast back to x's dtype)"),
            ("test_swap_and_swap_back", "", "swapping layers: {says}"),
            ("test_linear_attention_is_normalised", "", "your linear attention differs from the paper's, written out "
             "by hand {diff}: out_i = Σ_j φ(q_i)·φ(k_j) v_j / Σ_j φ(q_i)·φ(k_j) over the keys j ≤ i (the denominator "
             "makes the weights sum to 1)"),
        )),
    Part(8, "extra: T2R's hybrid window (t2r/linear.py)", ("t2r.linear",), points=5, tests=(
        *(f"{T2R}test_recurrent_equals_parallel[{m}]" for m in ("hybrid-1", "hybrid-3", "hybrid-9", "hedgehog-3")),
        T2R + "test_hybrid_with_features_off_is_the_sliding_window_transformer", T2R + "test_state_size_is_constant[hybrid-3]",
        T2R + "test_the_hybrid_shares_one_denominator_as_written[attention]",
        T2R + "test_hybrid_shorter_than_its_window_is_the_transformer"), writes=T2R_WRITES,
        hints=(
            ("test_the_hybrid_shares_one_denominator", "", "your hybrid differs from LoLCATs' written out by hand {diff}: "
             "the window's exp(q·k/√hd - m) and the older keys' φ(q)·φ(k) are divided by one sum, theirs together"),
            ("test_hybrid_shorter_than_its_window", "", "with fewer tokens than its window your hybrid is not softmax "
             "attention {diff}: at step t only slots 0 .. t of the ring are written; the others are empty (zero keys "
             "would still get weight exp(0 - m)) and must not be attended"),
            ("features_off", "", "with every feature off your hybrid is not Mistral's sliding window {diff}: the "
             "window's keys weighed by exp(q·k/√hd - m), the newest `window` of them, the query's own included"),
            ("test_recurrent_equals_parallel", "", "your hybrid's two views differ {diff}: row t - window is folded "
             "into S, z when row t takes its slot, and both parts share one denominator"),
        )),
]


# ---------------------------------------------------------------- running the tests

def run_tests(folder: pathlib.Path, modules, tests, timeout=TIMEOUT, what="tests"):
    """The records course/student.py wrote for these tests, with `modules` taken from folder."""
    with tempfile.TemporaryDirectory() as tmp:
        report = pathlib.Path(tmp) / "report.jsonl"
        env = dict(os.environ, MSRNN_STUDENT=str(folder), MSRNN_MODULES=",".join(modules), MSRNN_REPORT=str(report),
                   OMP_NUM_THREADS="1", PYTHONDONTWRITEBYTECODE="1")
        cmd = [sys.executable, "-m", "pytest", "-p", "course.student", "-p", "no:cacheprovider", "-q", "--tb=no",
               "--no-header", "-o", "addopts=", "-W", "ignore::pytest.PytestUnknownMarkWarning", *tests]
        try:
            done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return [{"timeout": timeout, "what": what}]
        records = [json.loads(line) for line in report.read_text().splitlines()] if report.exists() else []
        said = (done.stdout + done.stderr).strip()
        if done.returncode == 4 and "ERROR: not found:" in said:  # pytest's usage error, 4 (a student's file printing
            # the words does not make it): a test renamed or removed is the grader's fault; a test the repository's own
            # files make and the student's do not (a parametrization read from their module) is the student's
            files = sorted({t.split("[")[0] for t in tests})  # the test functions, each with all its parameters
            made = lambda e: {line for line in subprocess.run(
                [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *files], cwd=ROOT,
                env=e, capture_output=True, text=True).stdout.splitlines() if "::" in line}  # pytest names no parameters
            theirs = made({k: v for k, v in env.items() if k != "MSRNN_REPORT"} | {"PYTEST_ADDOPTS": "-p course.student"})
            gone = [t for t in tests if t not in theirs]
            ours = made({k: v for k, v in env.items() if not k.startswith("MSRNN_")})
            if not gone or not set(gone) <= ours:
                raise SystemExit(f"course/grade.py is out of date, its PARTS name a test that does not exist:\n{said[-600:]}")
            found = run_tests(folder, modules, [t for t in tests if t not in gone], timeout, what) if len(gone) < len(tests) else []
            return found + [{"test": t, "when": "collect", "outcome": "failed", "error": "NotFound", "cause": "NotFound",
                             "where": None, "printed": "", "message": f"with your {', '.join(FILES[m] for m in modules)} "
                             "this test is not made: its parameters are read from your module (a policy, a name or a "
                             "label that the repository's file has is missing)"} for t in gone]
        if not records:  # pytest stopped before any test: say what it said
            records = [{"crash": said[-1500:], "status": done.returncode}]
        elif done.returncode not in (0, 1):  # a test process that exited early (os._exit, sys.exit, killed)
            records.append({"died": done.returncode, "said": said[-1500:]})
        return records


def owned(record, test):
    """Whether a record is of the node id `test` (a bare id takes every parameter)."""
    name = record.get("test", "")
    return name == test or name.startswith(test + "[")


def verdict(part: Part, records, tests, folder=None):
    """(passed, failed, skipped, hint, what the checks on the real model printed) for one part."""
    for r in records:  # the folder could not be loaded, or pytest never ran: none of the part's tests passed
        if "load_error" in r:
            return 0, len(tests), 0, load_hint(r, folder), []
        if "timeout" in r:
            return 0, len(tests), 0, (f"its {r.get('what', 'tests')} did not finish in {r['timeout']} s and were stopped: a loop "
                             f"that never ends, or cores too busy (the reference passes every part offline in about a "
                             f"minute on 2 idle cores; `--only {part.number}` grades this part alone)"), []
        if "collect_error" in r and any(t.startswith(r["collect_error"]) for t in tests):
            whose = "your code" if r["mine"] else "the repository's code, not yours"
            return 0, len(tests), 0, f"{r['collect_error']} does not import ({whose}): {r['message']}", []
        if "crash" in r:
            last = (r["crash"].strip().splitlines() or [""])[-1]
            return 0, len(tests), 0, ("the tests did not start: " + last if last else
                             f"the test process ended without a word (exit status {r.get('status')}): does your code "
                             f"call os._exit or sys.exit, or was the process killed?"), []
        if "died" in r:
            return 0, len(tests), 0, (f"the test process stopped before its tests were done (exit status {r['died']}): does "
                             f"your code call os._exit or sys.exit, or was the process killed?"), []
    mine = [r for r in records if any(owned(r, t) for t in tests)]
    missing = [t for t in tests if not any(owned(r, t) for r in mine)]
    if missing:  # pytest said nothing was "not found" (run_tests checks), so the process ended before them
        return passed_of(mine), len(missing) + sum(r["outcome"] == "failed" for r in mine), 0, (
            f"the test process stopped before {len(missing)} of this part's tests ran ({missing[0].split('::')[-1]} "
            f"first): does your code call os._exit or sys.exit, or was the process killed?"), []
    failed = [r for r in mine if r["outcome"] == "failed"]
    passed = passed_of(mine)
    skipped = sum(r["outcome"] == "skipped" for r in mine)
    printed = [f"{r['test'].split('::')[-1]} printed: {r['printed']}" for r in mine  # the real model's outputs
               if r["outcome"] == "passed" and r.get("printed") and any(owned(r, t) for t in part.model)]
    return passed, len(failed), skipped, hint(part, failed, folder) if failed else None, printed


def passed_of(records) -> int:
    return sum(r["outcome"] == "passed" and r["when"] == "call" for r in records)


def load_hint(r, folder=None):
    where = r.get("where")
    at = f" ({where[0]}, line {where[1]})" if where else (f" (line {r['line']})" if r.get("line") else "")
    said = r['load_error'].splitlines()[0]
    return f"your file does not load{at}: {said}" + shadowed(r.get("module"), folder, said)


def shadowed(name, folder, said="") -> str:
    """What to add where a module the student's code could not use is a helper of theirs by its name, and Python loaded
    another file of that name (not theirs with a typo in a name, nor a course file, nor a circular import)."""
    name = (name if isinstance(name, str) else "").split(".")[0]
    loaded = re.search(rf"from '{re.escape(name)}' \((.*)\)", said)  # "cannot import name 'x' from 'data' (its file)"
    top, inner = (folder and (pathlib.Path(folder) / p / f"{name}.py").is_file() for p in (".", "t2r"))
    mine = {pathlib.Path.cwd().resolve(), pathlib.Path(folder or ".").resolve()}  # graded from inside their folder,
    # the current folder finds theirs here; the tests' process finds the repository's and Python's first
    homes = [str(ROOT)] + [p for p in sys.path if pathlib.Path(p or ".").resolve() not in mine]
    try:  # found before theirs, which is last on the tests' path: the repository's data/, Python's profile
        other = top and name.isidentifier() and (name in sys.builtin_module_names
                                                 or importlib.machinery.PathFinder.find_spec(name, homes))
    except (ImportError, ValueError):
        other = None
    if not (name and (other or inner and not top)) or name in {m.split(".")[0] for m in FILES} \
            or "partially initialized" in said \
            or loaded and os.path.isabs(loaded.group(1)) \
            and pathlib.Path(loaded.group(1)).resolve().is_relative_to(pathlib.Path(folder).resolve()):  # not "(unknown
        # location)", the repository's data/ read from inside their folder
        return ""
    return (f" (your {name}.py: the grader finds a helper at the top of your folder only, and after the repository's "
            "modules and Python's own: a helper named like one of those, or kept in t2r/, is not yours there; give it "
            "another name, at the top of your folder)")


def blank(folder, file, name) -> int | None:
    """The line of `name` in folder/file if its body is still the skeleton's (`raise NotImplementedError`,
    after a guard the skeleton gives), else None: a written function that raises it for a case it does
    not cover is written."""
    def bodies(path):  # each function's statements but its docstring, as the parser reads them
        tree = ast.parse(path.read_bytes())  # decoded by its coding line, as Python imports it
        return [(n, [ast.dump(b) for b in n.body[isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant):]])
                for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == name.split(".")[-1]]
    try:
        given = [b for n, b in bodies(SKELETON / file) if isinstance(n.body[-1], ast.Raise)]  # its blanks, not its given code
        mine = bodies(folder / file)
    except (OSError, SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    # of several functions of that name (t2r's forward has its own attend), one left as the skeleton gives it
    return next((node.lineno for node, body in mine if body in given), None)


TAMPERED = "your code changed the tests' comparison"  # course/student.py's message


def hint(part: Part, failed, folder=None):
    """What to tell the student: a function not written yet; else the first of the part's hints that
    matches a failed test that their code did not raise in (a hint with no pattern is for a failed comparison);
    else where the student's code raised; else what the first failure says."""
    tampered = next((r["message"] for r in failed if (r["message"] or "").startswith(TAMPERED)), None)
    if tampered:  # no other failure's hint means anything once the comparison itself was replaced
        return tampered
    todo = {tuple(r["where"]) for r in failed if r.get("cause") == "NotImplementedError" and r["where"]}
    if todo and folder is not None:  # a written function raising it for a case it leaves out is written; and those
        todo = {w for w in todo if blank(folder, w[0], w[2])}  # a test reaches only once the first are (rope, from qkv)
        todo |= {(file, line, name) for file, name in part.writes if todo and (line := blank(folder, file, name))}
    if todo:  # the functions the failed tests reached, in the file's order
        first = {}  # each function once, at its first line named
        for file, line, fn in sorted(todo):
            first.setdefault((file, fn), line)
        return "not written yet: " + ", ".join(f"{fn} ({file}, line {line})" for (file, fn), line in
                                               sorted(first.items(), key=lambda item: (item[0][0], item[1])))
    gaps = [re.search(r"Greatest absolute difference: (\S+) at", r["message"] or "") for r in failed]
    if failed and all(g and float(g.group(1)) < 1e-6 for g in gaps):  # each failure under 1e-6: rounding, or a tiny
        r = failed[0]  # constant the method lacks (den + EPS); a hint of the part's would send them to change what is right
        return (f"{r['test'].split('::')[-1]}: your numbers differ from the reference's {details(r['message'])} only: "
                "the tests compute in float64, so a gap this small is rounding to float32 somewhere (.float(), a "
                "float32 tensor or constant) or a tiny constant added where the method has none (den + EPS where "
                "the paper floors the denominator, max(den, EPS))")
    small = " (a gap this small may also be a constant other than the reference's: an eps of your own where the " \
        "config has one, config.norm_eps; or one added where the method has none, den + EPS where the paper floors the " \
        "denominator)" if any(g and float(g.group(1)) < 1e-4 for g in gaps) else ""  # (an eps of 1e-6 for the
    # config's 1e-5 is a gap of 1e-5 at most, which a layout or a step's hint alone does not explain; den + 1e-8 grows
    # to 6e-3 in one test of T2R's, and stays small in the others)
    for name, says, text in part.hints:
        for r in failed:
            message = r["message"] or ""
            crashed = r.get("where") and r.get("cause") not in (None, "AssertionError")  # their code raised: "policy
            # tova raised AttributeError" holds "tova", and is no comparison that failed
            if name in r["test"] and not crashed and (re.search(says, f"{r['error']}: {message}", re.S | re.I) if says
                                                      else r["error"] == "AssertionError"):
                return text.format(diff=details(message), test=r["test"].split("::")[-1],
                                   says=first_line(message)) + small
    r = next((r for r in failed if r["where"]), failed[0])
    at = f", raised in your {r['where'][0]} line {r['where'][1]} ({r['where'][2]})" if r["where"] else ""
    module = re.search(r"module '([\w.]+)' has no attribute", r["message"] or "")  # Python's profile.py, not theirs
    return f"{r['test'].split('::')[-1]}: {r['error']}: {first_line(r['message'])}{at}" + \
        shadowed(module and module.group(1), folder, r["message"] or "") + small


def first_line(message):
    lines = (message or "").strip().splitlines()
    return lines[0][:200] if lines else ""


# ---------------------------------------------------------------- checking the folder first

def _unreadable(path, encoding):
    """Why Python cannot read the file at all, as import says it (its coding line or byte-order mark), or None."""
    try:
        if b"#\n".decode(encoding) != "#\n":  # a codec that reads ASCII as something else (utf-16): the whole is mojibake
            return f"encoding problem: {encoding}"
        ast.parse(path.read_bytes(), str(path))
    except LookupError as e:  # a codec that is no text encoding (rot13, base64)
        return str(e)
    except UnicodeError as e:  # 'undefined': a codec that reads nothing
        return f"encoding problem: {encoding} ({e})"
    except SyntaxError as e:  # at line 0: the decoding (a byte-order mark beside another coding line)
        return None if e.lineno else e.msg
    except (RecursionError, MemoryError):  # the parse in problems says so
        return None


def problems(folder: pathlib.Path, modules):
    """What stops a folder from being graded at all, named: a missing folder or file, a syntax error."""
    if not folder.is_dir():
        hint = " (run `python -m course.grade --init` to copy the skeletons there)" if folder == WORK else ""
        return [f"{folder} is not a folder{hint}"]
    out = []
    for m in modules:
        path = folder / FILES[m]
        if path.exists() and not path.is_file():
            out.append(f"{path} is " + ("a folder" if path.is_dir() else "a device, a pipe or a socket") +
                       f", not a file: the part's code goes in that file (copy it from {SKELETON / FILES[m]})")
        elif path.parent.exists() and not path.parent.is_dir():
            out.append(f"{path.parent} is " + ("a file" if path.parent.is_file() else "a device, a pipe or a socket") +
                       f", not a folder: {FILES[m]} goes inside a folder of that name")
        elif not path.is_file():
            out.append(f"{path} is missing (copy it from {SKELETON / FILES[m]})")
        if not path.is_file():
            continue
        try:  # decoded as Python decodes it: a byte-order mark, a coding line (PEP 263), else UTF-8
            with open(path, "rb") as fh:
                encoding = tokenize.detect_encoding(fh.readline)[0]
        except SyntaxError:  # not UTF-8 in its first lines, and no coding line: the decoding below names the byte
            encoding = "utf-8"
        cannot = _unreadable(path, encoding)
        if cannot:
            out.append(f"{path}: Python cannot read it ({cannot}): save it as UTF-8, without a coding line")
            continue
        try:
            ast.parse(path.read_bytes().decode(encoding), str(path))
        except SyntaxError as e:  # no line where the decoded text holds a NUL (a coding's escape made one)
            out.append(f"{path}, line {e.lineno}: {e.msg}" if e.lineno else
                       f"{path}: {e.msg} once decoded as {encoding}: save it as UTF-8, without a coding line")
        except UnicodeDecodeError as e:
            said = "UTF-8" if encoding.startswith("utf-8") else encoding
            out.append(f"{path} is not {said} text (byte {e.start} is {e.object[e.start:e.start + 1]!r}): save it as UTF-8")
        except (RecursionError, MemoryError):
            out.append(f"{path} is nested too deeply for Python to parse")
    return out


# tests that compare with an optional library (not in requirements.txt): graded only where it is installed
ORACLES = {HF: "transformers"}


def without_missing_oracles(parts, log=print):
    """`parts` less the tests whose oracle library is not installed, each left-out library said once."""
    import importlib.util
    missing = {prefix: lib for prefix, lib in ORACLES.items() if importlib.util.find_spec(lib) is None}
    out = []
    for p in parts:
        gone = [t for t in p.tests if any(t.startswith(prefix) for prefix in missing)]
        for t in gone:
            lib = next(lib for prefix, lib in missing.items() if t.startswith(prefix))
            log(f"part {p.number}: {t.split('::')[-1]} not graded: it compares with {lib}, which is not installed "
                f"(optional: pip install {lib})")
        out.append(replace(p, tests=tuple(t for t in p.tests if t not in gone)))
    return out


def grade(folder: pathlib.Path, parts, model=False, jobs=2, log=print):
    """Grade `parts` on folder and print the verdicts: [(part, passed, failed, skipped, hint, printed)]."""
    t0 = time.time()
    parts = without_missing_oracles(parts, log)
    groups = {}  # parts that take the same student modules share one pytest process
    for p in parts:
        groups.setdefault(p.modules, []).append(p)
    runs, results = {}, {}
    with concurrent.futures.ThreadPoolExecutor(jobs) as pool:
        for modules, ps in groups.items():
            bad = problems(folder, modules)
            if bad:
                for p in ps:
                    results[p.number] = (p, 0, len(p.tests + (p.model if model else ())), 0, "; ".join(bad), [])  # none ran
                continue
            tests = list(dict.fromkeys(t for p in ps for t in p.tests))
            runs[modules] = pool.submit(run_tests, folder, modules, tests)
        offline = {modules: future.result() for modules, future in runs.items()}
    for modules, records in offline.items():
        for p in groups[modules]:
            # the real model's tests: each part's alone, one process at a time (side by side they only take
            # turns on the cores), so that a part never fails for another's, nor for the offline group's time
            extra = run_tests(folder, modules, p.model, MODEL_TIMEOUT, "tests on the real model") if model and p.model else []
            results[p.number] = (p, *verdict(p, records + extra, p.tests + (p.model if model else ()), folder))
    out = [results[p.number] for p in parts]
    total = 0
    for p, passed, failed, skipped, why, printed in out:
        got = round(p.points * passed / (passed + failed)) if passed + failed else 0
        total += got
        state = "pass" if not failed and passed else ("skip" if not failed else "FAIL")
        log(f"{p.number}. {p.title:<50} {state:4}  {got:3d}/{p.points:<3d} ({passed} of {passed + failed} tests"
            + (f", {skipped} skipped" if skipped else "") + ")")
        if why:
            log(f"   hint: {why}")
        for line in printed:
            log(f"   {line}")
    log(f"total {total}/{sum(p.points for p in parts)} in {time.time() - t0:.0f} s")
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("folder", nargs="?", type=harness.path, help=f"the student's files (default {WORK.relative_to(ROOT)})")
    ap.add_argument("--reference", action="store_true", help="grade the repository's own files instead")
    ap.add_argument("--init", action="store_true", help=f"copy the skeletons to the folder (default {WORK.relative_to(ROOT)})")
    ap.add_argument("--only", type=int, nargs="+", metavar="PART", help="grade only these parts")
    ap.add_argument("--model", action="store_true", help="also the checks on the real default model (downloaded once)")
    args = harness.parse(ap, argv)
    if args.reference and args.folder:
        ap.error("--reference grades the repository itself: give no folder")
    if args.init and (args.reference or args.only or args.model):  # dropped without a word, or "exists already"
        ap.error("--init copies the skeletons and grades nothing: run it alone, then grade (--only, --model)")
    given = ROOT if args.reference else args.folder or WORK
    try:
        folder = given.resolve()
    except (RuntimeError, OSError) as e:  # a link that leads back to itself
        raise SystemExit(f"{given}: {e}: give a folder") from None
    if args.init:
        if dangling := next((p for p in (given, *given.parents) if p.is_symlink() and not p.exists()), None):
            raise SystemExit(f"{dangling} is a link to nothing: give a folder to copy the skeletons to")  # went where it
        if folder.is_relative_to(SKELETON.resolve()):  # pointed; into the skeletons themselves, for ever
            raise SystemExit(f"{folder} is inside the skeletons' own folder: give a folder of your own")
        if folder.exists():
            raise SystemExit(f"{folder} exists already: your work is not overwritten (remove it to start again)")
        try:
            shutil.copytree(SKELETON, folder)
        except KeyboardInterrupt:  # half a copy would be "your work", never overwritten
            shutil.rmtree(folder, ignore_errors=True)
            raise SystemExit("interrupted: nothing copied") from None
        except OSError as e:
            raise SystemExit(f"cannot copy the skeletons to {folder}: {e.strerror or e} (choose a folder you can write)")
        print(f"copied the skeletons to {folder}: write the paper there, then run python -m course.grade"
              + (f" {shlex.quote(str(args.folder))}" if args.folder else ""))  # a folder's space, pasted back
        return 0
    known = {p.number for p in PARTS}
    if args.only and set(args.only) - known:
        ap.error(f"--only: no part {sorted(set(args.only) - known)}; the parts are {sorted(known)}")
    parts = [p for p in PARTS if not args.only or p.number in args.only]
    if not folder.is_dir():
        raise SystemExit(problems(folder, ())[0])
    print(f"grading {folder}" + (" (the reference solutions)" if args.reference else ""), flush=True)
    try:
        out = grade(folder, parts, args.model)
    except KeyboardInterrupt:  # a teacher's Ctrl-C (the students' pytest processes get it too): no traceback
        raise SystemExit("interrupted: no grade given") from None
    return 0 if all(failed == 0 and passed > 0 for _, passed, failed, *_ in out) else 1  # a part all skipped passed nothing


if __name__ == "__main__":
    raise SystemExit(main())
