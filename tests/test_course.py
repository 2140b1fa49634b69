"""The course's grader (course/grade.py): the reference solutions pass every part, the untouched
skeletons fail every part with a hint, each common mistake fails its part with the hint the
instructor's page promises, and a folder that cannot be graded is named, not a traceback."""
import ast
import pathlib
import re
import shutil
import subprocess
import sys

import pytest

from course import grade

ROOT = pathlib.Path(__file__).resolve().parent.parent


def run(*args, timeout=600):
    done = subprocess.run([sys.executable, "-m", "course.grade", *map(str, args)], cwd=ROOT, capture_output=True,
                          text=True, timeout=timeout)
    print(done.stdout, done.stderr)
    return done.returncode, done.stdout + done.stderr


def run_side_by_side(*gradings, timeout=600):
    """run() for several gradings at once: [(exit status, output)]. A grading of one part keeps one
    core busy; two side by side keep two."""
    procs = [subprocess.Popen([sys.executable, "-m", "course.grade", *map(str, args)], cwd=ROOT, text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE) for args in gradings]
    try:
        said = [p.communicate(timeout=timeout) for p in procs]
    finally:
        for p in procs:
            p.kill()
    print(*(out + err for out, err in said))
    return [(p.returncode, out + err) for p, (out, err) in zip(procs, said)]


def lines_of(out):
    """{part number: (state, the hint or '')} from the grader's output."""
    parts, last = {}, None
    for line in out.splitlines():
        if m := re.match(r"(\d+)\. .*\s(pass|FAIL|skip)\s+\d+/\d+", line):
            last = int(m.group(1))
            parts[last] = (m.group(2), "")
        elif line.startswith("   hint: ") and last is not None:
            parts[last] = (parts[last][0], line.removeprefix("   hint: "))
    return parts


def test_the_reference_solutions_pass_every_part():
    code, out = run("--reference")
    assert code == 0, out
    parts = lines_of(out)
    assert sorted(parts) == [p.number for p in grade.PARTS] and all(s == "pass" for s, _ in parts.values()), out
    assert "Traceback" not in out


def test_the_untouched_skeletons_fail_every_part_with_a_hint():
    code, out = run(ROOT / "course" / "skeleton")
    assert code == 1, out
    parts = lines_of(out)
    assert sorted(parts) == [p.number for p in grade.PARTS], out
    for number, (state, hint) in parts.items():
        assert state == "FAIL" and hint.startswith("not written yet: "), (number, state, hint)
    assert "Traceback" not in out
    # course/INSTRUCTOR.md prints this run: its tests and hints as the grader says them now (part 1's count
    # depends on whether transformers is installed)
    shown = (ROOT / "course" / "INSTRUCTOR.md").read_text().split("$ python -m course.grade course/skeleton\n")[1].split("```")[0]
    graded = lambda text: [line for line in text.splitlines() if re.match(r"[2-8]\. |   hint: ", line)]
    assert graded(shown) == graded(out), "course/INSTRUCTOR.md's skeleton run is not what the grader prints now"
    # and its table of parts says each part's count of tests as the run does (part 7's said 10 when it had 16)
    table = dict(re.findall(r"^\| (\d) \| .* \| ([^|]*tests?[^|]*) \|$", (ROOT / "course" / "INSTRUCTOR.md").read_text(), re.M))
    counts = {n: c for n, c in re.findall(r"^(\d)\. .*\(0 of (\d+) tests?\)", out, re.M)}
    assert table.keys() == counts.keys(), (table, counts)
    for number, count in counts.items():
        assert count in re.findall(r"\d+", table[number]), f"INSTRUCTOR.md's table gives part {number} {table[number]}; it has {count}"


def copy_of_reference(tmp_path):
    for name in grade.FILES.values():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / name, tmp_path / name)
    return tmp_path


def test_a_folder_that_cannot_be_graded_is_named(tmp_path):
    code, out = run(tmp_path / "nowhere", "--only", 1)
    assert code == 1 and f"{tmp_path / 'nowhere'} is not a folder" in out and "Traceback" not in out
    folder = copy_of_reference(tmp_path / "work")
    (folder / "policies.py").unlink()
    code, out = run(folder, "--only", 4)
    assert code == 1 and "policies.py is missing" in out and "Traceback" not in out, out
    (folder / "policies.py").write_text("def window(rows)\n    return rows.pos\n")
    code, out = run(folder, "--only", 4)
    assert code == 1 and re.search(r"policies.py, line 1: .*", out) and "Traceback" not in out, out
    (folder / "policies.py").write_text("import numpyy\n")
    code, out = run(folder, "--only", 4)
    assert code == 1 and "your file does not load" in out and "No module named 'numpyy'" in out, out
    assert "Traceback" not in out


def test_a_comparison_changed_fails_the_part_by_name(tmp_path):
    """A wrong TOVA with one line that makes the tests' comparison pass anything (its code replaced):
    the part fails, and the hint says why, though the comparison is the same function object."""
    folder = copy_of_reference(tmp_path / "work")
    apply(folder, "TOVA decided per KV head")
    with open(folder / "policies.py", "a") as f:
        f.write("\nimport torch.testing\ntorch.testing.assert_close.__code__ = (lambda *a, **k: None).__code__\n")
    code, out = run(folder, "--only", 4)
    parts = lines_of(out)
    assert code == 1 and parts[4][0] == "FAIL" and parts[4][1].startswith(grade.TAMPERED), out


def test_the_comparison_guard_sees_every_change_and_puts_it_back():
    """course/student.py's guard, run after every graded test, against each way found to make the tests'
    comparison pass anything: the function replaced, its code replaced, the function it calls inside
    emptied, a method of its classes overridden, torch.isclose (which it calls) made always true. Each is
    named; what is torch.testing's is put back; the last is seen by value, on a known mismatch."""
    import torch
    import torch.testing._comparison as comparison
    from course import student
    isclose, nothing = torch.isclose, lambda *a, **k: None
    changes = {"the function": lambda: setattr(torch.testing, "assert_close", nothing),
               "its code": lambda: setattr(torch.testing.assert_close, "__code__", nothing.__code__),
               "what it calls": lambda: setattr(comparison, "not_close_error_metas", lambda *a, **k: []),
               "a method": lambda: setattr(comparison.TensorLikePair, "compare", nothing),
               "torch.isclose": lambda: setattr(torch, "isclose", lambda a, b, *r, **k: torch.ones_like(a, dtype=torch.bool))}
    assert student.changed_comparison() == []
    try:
        for how, change in changes.items():
            change()
            assert student.changed_comparison(), f"{how}: not seen"
            torch.isclose = isclose
            assert student.changed_comparison() == [] and student.compares(), f"{how}: not put back"
    finally:
        torch.isclose = isclose
        student.changed_comparison()


def test_a_file_python_cannot_read_is_named(tmp_path):
    """A file in another encoding, and one nested past the parser's depth, are named before any test runs."""
    folder = tmp_path / "work"
    folder.mkdir()
    (folder / "llama.py").write_bytes("# café\n".encode("latin-1"))
    (folder / "policies.py").write_text("x = " + "1 + " * 100_000 + "1\n")  # a sum too deep for ast
    said = grade.problems(folder, ["llama", "policies"])
    assert len(said) == 2 and "llama.py is not UTF-8 text" in said[0] and "nested too deeply" in said[1], said
    (folder / "policies.py").write_bytes(b"\xef\xbb\xbf" + (ROOT / "policies.py").read_bytes())  # "UTF-8 with BOM"
    assert grade.problems(folder, ["policies"]) == []  # Python runs it: round 9 found it graded 0 of 15
    (folder / "policies.py").write_bytes(b"# -*- coding: latin-1 -*-\n# caf\xe9\n" + (ROOT / "policies.py").read_bytes())
    assert grade.problems(folder, ["policies"]) == []  # a coding line, as Python reads it (round 12: 0 of 5)


def test_init_copies_the_skeletons_and_never_overwrites(tmp_path):
    code, out = run("--init", tmp_path / "mine")
    assert code == 0 and (tmp_path / "mine" / "llama.py").read_text() == (ROOT / "course/skeleton/llama.py").read_text()
    code, out = run("--init", tmp_path / "mine")
    assert code == 1 and "exists already" in out
    (tmp_path / "a file").write_text("")
    code, out = run("--init", tmp_path / "a file" / "mine")  # a folder inside a file: it cannot be made
    assert code == 1 and "cannot copy the skeletons to" in out and "Traceback" not in out, out


def definitions(path):
    """{qualified name: (the node, whether its body ends in `raise NotImplementedError`: left to the student)}
    for every function, class and method of a file, and its other top-level statements, in order."""
    tree = ast.parse(path.read_text())
    out, rest = {}, []
    def blank(node):
        body = node.body[1:] if ast.get_docstring(node) is not None else node.body
        return isinstance(body[-1], ast.Raise) and "NotImplementedError" in ast.unparse(body[-1])
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            out[node.name] = (node, isinstance(node, ast.FunctionDef) and blank(node))
            for sub in node.body if isinstance(node, ast.ClassDef) else ():
                if isinstance(sub, ast.FunctionDef):
                    out[f"{node.name}.{sub.name}"] = (sub, blank(sub))
        elif not (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)):  # the module docstring
            rest.append(ast.dump(node))
    return out, rest


def code(node):
    """A definition without its docstrings, and a class without its methods (compared one by one)."""
    node = ast.parse(ast.unparse(node)).body[0]
    if isinstance(node, ast.ClassDef):
        node.body = [n for n in node.body if not isinstance(n, ast.FunctionDef)]
    for n in ast.walk(node):
        if isinstance(n, (ast.FunctionDef, ast.ClassDef)) and ast.get_docstring(n) is not None:
            n.body = n.body[1:] or [ast.Pass()]
    return ast.dump(node)


@pytest.mark.parametrize("name", grade.FILES.values())
def test_the_skeletons_mirror_the_repository(name):
    """Every skeleton has the repository file's definitions, in order, with the same signatures; what
    it does not leave to the student (no `raise NotImplementedError`) is the repository's code itself."""
    skeleton, (ours, our_rest), (theirs, their_rest) = ROOT / "course" / "skeleton" / name, *map(
        definitions, (ROOT / "course" / "skeleton" / name, ROOT / name))
    assert list(ours) == list(theirs), f"{skeleton}: not the definitions of {name}"
    assert our_rest == their_rest, f"{skeleton}: its imports or constants are not those of {name}"
    blanks = [q for q, (_, b) in ours.items() if b]
    assert blanks, f"{skeleton} leaves nothing to write"
    for q, (node, is_blank) in ours.items():
        other = theirs[q][0]
        if is_blank:
            assert ast.dump(node.args) == ast.dump(other.args) and list(map(ast.dump, node.decorator_list)) == \
                list(map(ast.dump, other.decorator_list)), f"{skeleton}: {q}'s signature is not that of {name}"
            assert ast.get_docstring(node), f"{skeleton}: {q} must say what to write"
        else:
            assert code(node) == code(other), f"{skeleton}: {q} is not the code of {name}"


# ---------------------------------------------------------------- the common mistakes (course/INSTRUCTOR.md's table)

# name: (part, file, the repository's line(s), the mistake, what the hint must say); several lines, a
# tuple each, for a mistake made in more than one place. Each is introduced
# into a copy of the reference solutions. A round grades several at once, since a part takes only its
# own file from the folder: at most one mistake per part, and per file, but for part 6, whose test reads
# state_bytes alone, so that a mistake there cannot change another part's verdict, nor one elsewhere its.
HELD = ("        live = ms.pos[:, :, :ms.n]                                   # (B, Hkv, n): the rows kept after step i - 1\n"
        "        out[:, :, 0, i].scatter_(-1, live.where(live >= 0, T), True)\n"
        "        out[:, :, 0, i, i] = True                                    # and the current token\n")
KEEP = ("            self.score[:, :, :self.n] += attn.sum(2)\n"
        "            self.evict(attn, q, t, policy)\n")
ATTEND = "        ms.attend(q[:, :, :, i], k[:, :, 0, i], v[:, :, 0, i], i, policy)\n"
RING = ("self.K[:, :, :min(max(u + 1, 0), w)]], 2)  # (B, Hkv, n, hd)\n"
        "        V = torch.cat([self.Vs[:, :, :min(t + 1, sinks)], self.V[:, :, :min(max(u + 1, 0), w)]], 2)")
MISTAKES = {
    "RoPE at the number of rows held": (1, "llama.py", "cos, sin = rope_angles(model, torch.tensor(t))",
                                        "cos, sin = rope_angles(model, torch.tensor(state.n_rows))",
                                        "is RoPE applied at the token's position t"),
    "RoPE on interleaved pairs": (1, "llama.py", "x1, x2 = x.chunk(2, dim=-1)", "x1, x2 = x[..., 0::2], x[..., 1::2]",
                                  "your qkv differs from RoPE written with complex numbers"),
    "RoPE on the values too": (1, "llama.py", "qkv[..., c.n_heads + c.n_kv_heads:, :]\n",
                               "rope(qkv[..., c.n_heads + c.n_kv_heads:, :], cos[..., None, :], sin[..., None, :])\n",
                               "values are not rotated"),
    "no residual around the step's MLP": (1, "llama.py", "x = x + mlp(L, rms_norm(x, L.mlp_norm, c.norm_eps))",
                                          "x = mlp(L, rms_norm(x, L.mlp_norm, c.norm_eps))",
                                          "your step's logits differ from your forward's"),
    "scores not scaled by 1/√hd": (2, "msrnn.py", "self.attention(q / math.sqrt(q.shape[-1]) @ K.mT, pos, t)",
                                   "self.attention(q @ K.mT, pos, t)", "differs from the transformer"),
    "the sliding window one row too wide": (2, "msrnn.py", "(pos <= t - self.window)", "(pos < t - self.window)",
                                            "with Mistral's sliding window your multi-state differs"),
    "the current token protected": (3, "msrnn.py", "scores = policy(rows)  ",
                                    "scores = policy(rows).masked_fill(rows.pos[:, :1] == t, math.inf)  ",
                                    "the current token's row must be among those the policy scores"),
    "a reused slot keeps its score": (3, "msrnn.py", "self.score[slot], self.prev[slot] = 0.0, math.nan",
                                      "self.prev[slot] = math.nan", "a reused slot's starts at 0"),
    "the score added after the drop": (3, "msrnn.py", KEEP, "".join(reversed(KEEP.splitlines(True))),
                                       "before the policy scores the rows"),
    "every KV head drops the first head's row": (3, "msrnn.py", "self.free.copy_(lowest(scores, self.pos[:, :, :self.n]))",
                                                 "self.free.copy_(lowest(scores[:, :1], self.pos[:, :1, :self.n]))",
                                                 "each KV head frees its own slot"),
    "ties against the earlier slot": (3, "msrnn.py", "return pos.masked_fill(~tied, torch.iinfo(pos.dtype).max).argmin(-1)",
                                      "return scores.argmin(-1)", "of equal lowest scores the oldest row goes"),
    "the policies read attention in bfloat16": (3, "msrnn.py", "return scores.softmax(-1, dtype=llama.wide(scores.dtype))",
                                                "return scores.softmax(-1)", "float32 at least"),
    "query heads grouped h % Hkv": (1, "llama.py", "q = qk[..., :c.n_heads, :].unflatten(-2, (c.n_kv_heads, -1))",
                                    "q = qk[..., :c.n_heads, :].unflatten(-2, (-1, c.n_kv_heads)).transpose(-2, -3)",
                                    "query head h shares KV head h // G"),
    "H2O protects one recent row too many": (4, "policies.py", "latest = rows.pos[:, :1] > rows.t - int(rows.size * recent)",
                                             "latest = rows.pos[:, :1] >= rows.t - int(rows.size * recent)",
                                             "exactly int(size * recent) rows"),
    "the denominator plus EPS": (8, "t2r/linear.py", ("return (num / den.clamp_min(EPS))", "return num / den.clamp_min(EPS)"),
                                 ("return (num / (den + EPS))", "return num / (den + EPS)"), "your hybrid differs from LoLCATs'"),
    "the hybrid reads ring slots not yet written": (8, "t2r/linear.py", RING, RING.replace("self.K[:, :, :min(max(u + 1, 0), w)]]",
                                                    "self.K]").replace("self.V[:, :, :min(max(u + 1, 0), w)]]", "self.V]"), "are empty"),
    "H2O without its recent half": (4, "policies.py", "return rows.score.sum(1, keepdim=True).masked_fill(latest, math.inf)",
                                    "return rows.score.sum(1, keepdim=True)", "without them a new row"),
    "TOVA decided per KV head": (4, "policies.py", "return rows.attn.mean((1, 2))[:, None]", "return rows.attn.mean(2)",
                                  "averaged over every query head of the layer"),
    "TOVA averaged over the batch too": (4, "policies.py", "return rows.attn.mean((1, 2))[:, None]",
                                         "return rows.attn.mean((0, 1, 2))[None, None].expand(rows.attn.shape[0], 1, -1)",
                                         "never over B"),
    "Window+i keeps one sink too many": (4, "policies.py", "pos.masked_fill(pos < sinks, math.inf)",
                                         "pos.masked_fill(pos <= sinks, math.inf)", "positions 0 .. sinks-1 get inf"),
    "head-wise TOVA decided for the layer": (4, "policies.py", "return rows.attn.mean(2)  ",
                                             "return rows.attn.mean((1, 2))[:, None]  ", "each KV head averages its own"),
    "the mask of the first KV head for all": (5, "msrnn.py", "return out[:, :1] if out.device.type",
                                              "return out[:, :1] if True else out[:, :1] if out.device.type",
                                              "each KV head drops its own rows"),
    "the mask without the current token": (5, "msrnn.py", "out[:, :, 0, i, i] = True", "pass",
                                           "and the current token i itself"),
    "the mask recorded after the drop": (5, "msrnn.py", HELD + ATTEND, ATTEND + HELD, "before step i drops one"),
    "keys counted, values not": (6, "msrnn.py", "return 2 * c.n_layers", "return c.n_layers", "a key and a value"),
    "a row per query head": (6, "msrnn.py", "c.n_kv_heads * rows * c.head_dim", "c.n_heads * rows * c.head_dim",
                             "n_kv_heads heads, not n_heads"),
    "no denominator": (7, "t2r/linear.py", "return num / den.clamp_min(EPS)", "return num",
                       "your RNN view differs from your transformer view"),
    "z left out of state_bytes": (7, "t2r/linear.py", "maps.r * (c.head_dim + 1)", "maps.r * c.head_dim",
                                  "state_bytes is not what the state holds"),
    "r read from the key map's rows": (7, "t2r/linear.py", "window + maps.r * (c.head_dim + 1)",
                                       "window + maps.wk.shape[-2] * (c.head_dim + 1)", "state_bytes is not what the state holds"),
    "the sinks left out of state_bytes": (7, "t2r/linear.py", "window = 2 * (maps.window + maps.sinks) * c.head_dim",
                                          "window = 2 * maps.window * c.head_dim", "plus the sinks' and the window's rows"),
    "Hedgehog's features left in float32": (7, "t2r/linear.py", "(-u).softmax(-1)], -1).to(x.dtype)",
                                            "(-u).softmax(-1)], -1)", "φ returns x's dtype"),
    "Hedgehog's queries left in float32": (7, "t2r/linear.py", "(-u).softmax(-1)], -1).to(x.dtype)",
                                           "(-u).softmax(-1)], -1).to(x.dtype if which == \"k\" else u.dtype)",
                                           "of bfloat16 queries gave torch.float32"),
    "Hedgehog's keys without the negative half": (7, "t2r/linear.py", "f = torch.cat([u.softmax(-1), (-u).softmax(-1)], -1)",
                                                  "f = torch.cat([u.softmax(-1), (-u if which == \"q\" else u).softmax(-1)], -1)",
                                                  "Hedgehog's map differs from the paper's"),
    "the position advanced before the layers": (1, "llama.py", ("c, t = model.config, state.t\n",
                                                                "    state.t += 1\n    return output(model, x)"),
                                                ("state.t += 1\n    c, t = model.config, state.t\n",
                                                 "    return output(model, x)"),
                                                "does not put the token at its position (token 0 was given position 1"),
    "heads handed to wo in (G, Hkv) order": (1, "llama.py", "o.permute(0, 3, 1, 2, 4).flatten(2)",
                                             "o.permute(0, 3, 2, 1, 4).flatten(2)", "in (G, Hkv) order"),
    "the attention's digits in bfloat16": (3, "msrnn.py", "return scores.softmax(-1, dtype=llama.wide(scores.dtype))",
                                           "return scores.softmax(-1).to(llama.wide(scores.dtype))",
                                           "float32's dtype but bfloat16's digits"),
    "the freed slot not marked empty": (3, "msrnn.py", "        self.pos[self._slots()] = -1\n", "",
                                        "your evict does not mark the freed slot empty"),
    "H2O's recent share fixed at one half": (4, "policies.py",
                                             "latest = rows.pos[:, :1] > rows.t - int(rows.size * recent)",
                                             "latest = rows.pos[:, :1] > rows.t - rows.size // 2",
                                             "same logits with recent=0.25 as with 0.5"),
    "H2O's recent rows rounded, not floored": (4, "policies.py", "latest = rows.pos[:, :1] > rows.t - int(rows.size * recent)",
                                               "latest = rows.pos[:, :1] > rows.t - round(rows.size * recent)",
                                               "keep exactly int(size * recent) rows as recent"),
    "H2O (head)'s recent share fixed at one half": (4, "policies.py", "rows.pos > rows.t - int(rows.size * recent), math.inf)",
                                                    "rows.pos > rows.t - rows.size // 2, math.inf)",
                                                    "h2o (or h2o_head) gives the same logits with recent=0.25"),
    "the masked view without the model's sliding window": (5, "msrnn.py",
                                                           "held_mask(state.layers[i], q, k, v, policy) & causal)",
                                                           "held_mask(state.layers[i], q, k, v, policy))",
                                                           "the model's own window has left is not seen"),
    "2 bytes an element": (6, "msrnn.py", "rows * c.head_dim * model.embed.element_size()", "rows * c.head_dim * 2",
                           "an element takes 2 bytes in torch.float16, 8 in float64"),
    "ELU+1 as ELU(x + 1)": (7, "t2r/linear.py", "return F.elu(x) + 1", "return F.elu(x + 1)",
                            "φ(x) = ELU(x) + 1, that is x + 1 where x > 0"),
    # round 9: the two views share φ and may share a mistake, so only a test of each against its formula sees these
    "φ as softplus, not ReLU": (7, "t2r/linear.py", "return F.relu(u)", "return F.softplus(u)",
                                "your ReLU map differs from its formula"),
    "queries read through the key map": (7, "t2r/linear.py",
                                         'w, b = (self.wq, self.bq) if which == "q" and self.kind != "t2r" else (self.wk, self.bk)',
                                         "w, b = self.wk, self.bk", "the query map (wq, bq) for queries"),
    "no denominator in any view": (7, "t2r/linear.py", ("return A @ v / A.sum(-1, keepdim=True).clamp_min(EPS)",
                                                        "return (num / den.clamp_min(EPS)).flatten(3, 4)[:, :, :, :T]",
                                                        "return num / den.clamp_min(EPS)"),
                                   ("return A @ v", "return num.flatten(3, 4)[:, :, :, :T]", "return num"),
                                   "the denominator makes the weights sum to 1"),
}


ALSO = {"2 bytes an element": {3}}  # mistakes that fail another part too: test_which_tensor_is_kept_in_which_float
                                   # reads state_bytes's dtype


def rounds():
    """The mistakes in a few grader runs: in each, at most one per part, and one per file but for part 6
    (but for a part-6 mistake that fails another part too, ALSO)."""
    def apart(a, b):
        (pa, fa, *_), (pb, fb, *_) = MISTAKES[a], MISTAKES[b]
        return pa != pb and pa not in ALSO.get(b, ()) and pb not in ALSO.get(a, ()) and (fa != fb or 6 in (pa, pb))
    out = []
    for name in MISTAKES:
        for r in out:
            if all(apart(name, m) for m in r):
                r.append(name)
                break
        else:
            out.append([name])
    return out


def apply(folder, name):
    """Make the mistake `name` in the copy of the reference solutions in folder."""
    part, file, old, new, hint = MISTAKES[name]
    text = (folder / file).read_text()
    for old, new in zip(*((old, new) if isinstance(old, tuple) else ((old,), (new,)))):
        assert text.count(old) == 1, f"{name}: {old!r} is not once in {file}: update MISTAKES"
        text = text.replace(old, new)
    (folder / file).write_text(text)


def batches():
    """The rounds, side by side where that keeps two cores busy: a round grades one pytest process per
    file it changes (two at a time), so rounds that change one file each run two by two, the others alone."""
    out = []
    for names in rounds():
        files = len({MISTAKES[n][1] for n in names})
        if out and files + sum(len({MISTAKES[n][1] for n in r}) for r in out[-1]) <= 2:
            out[-1].append(names)
        else:
            out.append([names])
    return out


@pytest.mark.parametrize("batch", batches(), ids=lambda batch: " | ".join(" + ".join(names) for names in batch))
def test_each_common_mistake_fails_its_part_with_its_hint(batch, tmp_path):
    gradings = []
    for i, names in enumerate(batch):
        folder = copy_of_reference(tmp_path / str(i))
        for name in names:
            apply(folder, name)
        gradings.append((folder, "--only", *sorted({MISTAKES[n][0] for n in names})))
    instructor = (ROOT / "course" / "INSTRUCTOR.md").read_text()
    for names, (code, out) in zip(batch, run_side_by_side(*gradings)):
        parts = lines_of(out)
        for name in names:
            part, *_, hint = MISTAKES[name]
            assert parts[part][0] == "FAIL" and hint in parts[part][1], (name, parts[part])
            assert f"| {name} |" in instructor and hint in instructor, \
                f"course/INSTRUCTOR.md does not list {name!r} with its hint"


def test_the_skeletons_ask_only_for_what_is_graded():
    """T2R's decay is beyond the course: no graded test makes one, so a skeleton that asked for it would
    ask for code whose mistakes no part can see. Every sentence of a docstring the student writes to
    that names the decay says it is not graded."""
    for name in grade.FILES.values():
        for q, (node, is_blank) in definitions(ROOT / "course" / "skeleton" / name)[0].items():
            for sentence in re.split(r"(?<=\.)\s+", ast.get_docstring(node) or "") if is_blank else ():
                assert not re.search(r"decay|γ|gamma", sentence) or "not graded" in sentence, \
                    f"course/skeleton/{name}: {q} asks for what no graded test checks: {sentence!r}"


def test_the_students_page_gives_no_solution_away():
    """No line of a function the student writes appears on the student's page (README's excerpts of
    llama.step and the policies are for readers of the project, not for the course)."""
    page = (ROOT / "course" / "README.md").read_text()
    for name in grade.FILES.values():
        ours, _ = definitions(ROOT / "course" / "skeleton" / name)
        theirs, _ = definitions(ROOT / name)
        for q, (_, is_blank) in ours.items():
            if is_blank:
                body = ast.get_source_segment((ROOT / name).read_text(), theirs[q][0]).splitlines()[1:]
                for line in (line.split("#")[0].strip() for line in body):
                    assert len(line) < 20 or line not in page, f"course/README.md shows {name}'s {q}: {line!r}"


def test_a_part_that_cannot_start_counts_every_one_of_its_tests(tmp_path):
    """Round 11: a part stopped before pytest ran (a syntax error, a missing file) said "0 of 1 tests"."""
    folder = tmp_path / "work"
    folder.mkdir()
    (folder / "policies.py").write_text("def tova(rows:\n")
    part = next(p for p in grade.PARTS if p.modules == ("policies",))
    (got, passed, failed, _, why, _), = grade.grade(folder, [part], log=lambda line: None)
    assert passed == 0 and failed == len(part.tests) > 1 and "policies.py" in why


def test_a_helper_module_beside_the_students_files_is_imported(tmp_path):
    """Round 64: a student who put a function of policies.py in a module of their own beside it (as Python
    finds it when they run their file) got "your file does not load: No module named 'myhelp'"."""
    folder = copy_of_reference(tmp_path / "work")
    (folder / "myhelp.py").write_text("def over_heads(attn):\n    return attn.mean((1, 2))[:, None]\n")
    policies = (folder / "policies.py").read_text()
    assert policies.count("return rows.attn.mean((1, 2))[:, None]") == 1
    mine = policies.replace("return rows.attn.mean((1, 2))[:, None]", "return over_heads(rows.attn)")
    (folder / "policies.py").write_text(mine + "\nfrom myhelp import over_heads  # noqa: E402\n")
    part = next(p for p in grade.PARTS if p.modules == ("policies",))
    (got, passed, failed, _, why, _), = grade.grade(folder, [part], log=lambda line: None)
    assert failed == 0 and passed == len(part.tests), why
