"""README and the docs cannot drift from the code: the file tour's line counts (docs/files.md), README's code
excerpt, its test command, and the reading path (its ranges, its total, and that it leaves out nothing
the path calls); on every page, each cited file, `module.function` and line range, and each results
table, which must be what `python demo.py report` writes from results/*.json."""
import ast
import pathlib
import re

import pytest

from conftest import sealed

ROOT = pathlib.Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()
CORE = {"llama": "llama.py", "msrnn": "msrnn.py", "policies": "policies.py"}


def lines(path):
    return len(path.read_text().splitlines())


FILES = (ROOT / "docs" / "files.md").read_text()


def section(title, page=README):
    return page.split(f"## {title}\n", 1)[1].split("\n## ", 1)[0]


def test_file_tour_lists_every_file_with_its_line_count():
    tour = dict(re.findall(r"^\| `([\w*./]+)` \| (\d+) \|", section("Tour of the files", FILES), re.M))
    tests = sorted((ROOT / "tests").glob("test_*.py"))
    files = {}
    for p in [*ROOT.rglob("*.py"), *ROOT.rglob("*.html")]:
        rel = p.relative_to(ROOT)
        if rel.parts[0] not in ("tests", "docs", "results") and not rel.parts[0].startswith(".") \
                and rel.parts[:2] != ("course", "work"):
            files[str(rel)] = lines(p)
    files["tests/test_*.py"] = sum(map(lines, tests))
    assert {name: int(n) for name, n in tour.items()} == files, "update the tour of the files (docs/files.md)"
    assert f"{len(tests)} test files" in section("Tour of the files", FILES)


def test_how_it_reads_is_the_code():
    excerpt = section("How it reads").split("```python\n", 1)[1].split("```", 1)[0]
    code = [line.strip() for line in (ROOT / "llama.py").read_text().splitlines()]
    for line in excerpt.strip().splitlines():
        assert line.strip() in code, f"README's excerpt is not in llama.py: {line.strip()!r}"


def test_readme_test_command_is_what_ci_runs():
    command = re.search(r"&& (python -m pytest)\b", README).group(1)
    assert command in (ROOT / ".ci" / "run").read_text()


def cited(text):
    """(file, [(first, last), ...], names) for every '`file.py` a–b, c–d' citation followed by the
    `names` it says those lines hold (up to the end of the table cell or sentence)."""
    for file, spans, rest in re.findall(r"`([\w/]+\.py)` (\d+–\d+(?:, \d+–\d+)*)([^|\n]*)", text):
        yield file, [tuple(map(int, s.split("–"))) for s in spans.split(", ")], re.findall(r"`(\w+)`", rest)


def holds(file, spans, names):
    """The lines of `file` in spans, after checking that each span starts and ends at the border of a
    definition (the lines before and after are blank, a definition, a decorator or a comment, or at
    the top level), and that it holds every name."""
    code = (ROOT / file).read_text().splitlines()
    border = lambda line: not line[:1].isspace() or line.strip().startswith(("def ", "class ", "@", "#"))
    for a, b in spans:
        after = next((line for line in code[b:] if line.strip()), "")
        assert border(code[a - 1]) and border(after), f"{file} {a}–{b} cuts a definition"
    shown = [line for a, b in spans for line in code[a - 1:b]]
    for name in names:
        assert any(re.match(rf"\s*(def|class) {name}\b", line) for line in shown), f"{file} {spans}: no {name}"
    return len(shown)


def reading_path():
    """({file: the cited line numbers}, the section) of README's "Read in this order", after checking
    each row's count and names and the total."""
    table = section("Read in this order")
    rows = re.findall(r"^\| \d \| (`[\w/]+\.py` [\d–, ]+) \| (\d+) \| (.*) \|$", table, re.M)
    path, total = {}, 0
    for where, n, what in rows:
        (file, spans, _), = cited(where)
        assert holds(file, spans, re.findall(r"`(\w+)`", what)) == int(n), f"{where}: not {n} lines"
        path.setdefault(file, set()).update(i for a, b in spans for i in range(a, b + 1))
        total += int(n)
    assert len(rows) >= 6 and f"Total: {total} lines" in table
    return path, table


def test_reading_order_holds_what_it_names():
    _, table = reading_path()
    for file, spans, names in cited(table.split("Total:", 1)[1]):  # what to read next
        holds(file, spans, names)


def test_reading_path_is_the_whole_path():
    """Every function or class of llama.py, msrnn.py and policies.py that a cited definition calls
    (`f(...)`, `llama.f(...)`, `self.f(...)`) is cited too, so the path leaves out nothing it runs.
    The input checks (`guards.*`, engine/'s) are left out on purpose, and README says so; so are the
    definitions its "Left out:" names, each of which must be one the path calls."""
    path, table = reading_path()
    left_out = re.findall(r"`(\w+)`", table.split("Left out:", 1)[1].split("\n\n", 1)[0])
    where, called = {}, set()  # (file, name) -> the lines of each definition of that name, methods and inner functions included
    for file in CORE.values():
        for node in ast.walk(ast.parse((ROOT / file).read_text())):
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                first = min([node.lineno] + [d.lineno for d in node.decorator_list])
                where.setdefault((file, node.name), []).append(set(range(first, node.end_lineno + 1)))
    # a definition is read whole when every line of it is cited but blank lines, comments and what "Left out:" names
    gone = {file: {i for i, line in enumerate((ROOT / file).read_text().splitlines(), 1)
                   if not line.strip() or line.strip().startswith("#")}
            | {i for (f, name), ds in where.items() if f == file and name in left_out for d in ds for i in d}
            for file in CORE.values()}
    for file, cited_lines in path.items():
        own = file in CORE.values()
        for node in ast.walk(ast.parse((ROOT / file).read_text())):
            if not isinstance(node, (ast.FunctionDef, ast.ClassDef)) or not (
                    node.lineno in cited_lines or own and node.name in left_out):  # what it leaves out runs too
                continue
            for f in (c.func for c in ast.walk(node) if isinstance(c, ast.Call)):
                if isinstance(f, ast.Name) and own:
                    target = file, f.id
                elif isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id in CORE:
                    target = CORE[f.value.id], f.attr
                elif isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id == "self" and own:
                    target = file, f.attr
                else:
                    continue
                called.add(target[1])
                if target in where and target[1] not in left_out:  # one of its definitions is read whole
                    assert any(d - gone[target[0]] <= path.get(target[0], set()) for d in where[target]), \
                        f"{file}: {node.name} calls {target[1]} ({target[0]}), which the reading path leaves out"
    assert left_out and set(left_out) <= called, f"README's 'Left out:' names what the path never calls: {set(left_out) - called}"


# ---------------------------------------------------------------- every page: citations and results tables

PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), ROOT / "course" / "README.md",
         ROOT / "course" / "INSTRUCTOR.md"]


def modules() -> dict:
    """The project's modules, by their dotted name and by their last part (`guards` is engine.guards)."""
    out = {}
    for p in ROOT.rglob("*.py"):
        rel = p.relative_to(ROOT)
        if rel.parts[0] in ("results", "tests") or rel.parts[0].startswith(".") or "skeleton" in rel.parts \
                or rel.parts[:2] == ("course", "work"):
            continue
        dotted = ".".join(rel.with_suffix("").parts)
        out[dotted] = dotted
        out.setdefault(rel.stem, dotted)
    return out


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_cited_file_and_name_exists(page):
    """A `path/file.py` (or any `path/with/slashes.ext`) a page cites exists; a `module.name` or
    `module.Class.method` it cites resolves in the project's code."""
    import importlib
    text, mods, missing = page.read_text(), modules(), []
    for f in re.findall(r"`((?:[\w.-]+/)*[\w-]+\.(?:py|md|json|log|png|html))`", text):
        if (f.endswith(".py") or "/" in f) and not f.startswith(("results/runs/", "course/work/")) \
                and not any((base / f).exists() for base in (ROOT, page.parent, ROOT / "course", ROOT / "tests")):
            missing.append(f)
    for name in re.findall(r"`([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+)(?:\(|`)", text):
        parts = name.split(".")
        if parts[-1] in ("py", "md", "json", "log", "png", "html", "txt"):
            continue
        for i in range(len(parts), 0, -1):
            if ".".join(parts[:i]) in mods:
                obj = importlib.import_module(mods[".".join(parts[:i])])
                for attr in parts[i:]:
                    obj = getattr(obj, attr, None)
                if obj is None:
                    missing.append(name)
                break
    assert not missing, f"{page.relative_to(ROOT)} cites what does not exist: {', '.join(missing)}"


@pytest.mark.parametrize("page", [p for p in PAGES if p.name != "README.md" or p.parent == ROOT],
                         ids=lambda p: str(p.relative_to(ROOT)))
def test_cited_line_ranges_hold_what_they_name(page):
    for file, spans, names in cited(page.read_text()):
        holds(file, spans, names)


def test_results_tables_are_what_the_results_give():
    import demo
    stale = [str(p.relative_to(ROOT)) for p in PAGES if demo.reported(p.read_text()) != p.read_text()]
    assert not stale, f"results tables differ from results/*.json in {stale}: python demo.py report"


def test_a_hand_typed_figure_is_caught():
    """Any figure edited inside a results block is written back by the report, so the test above fails."""
    import demo
    text = (ROOT / "docs" / "t2r.md").read_text()
    block = demo.BLOCK.search(text)
    assert block, "docs/t2r.md has no results block"
    figure = re.search(r"\d+\.\d\d", block.group(3)).group(0)
    edited = text[:block.start(3)] + block.group(3).replace(figure, f"{float(figure) + 0.01:.2f}", 1) + text[block.end(3):]
    assert demo.reported(edited) == text != edited


def test_a_command_is_spelled_the_same_from_any_checkout():
    """Results name commands as a user types them, whichever folder the run or the report ran in."""
    from lab import harness
    for root in (str(ROOT), "/somewhere/else/msrnn"):
        assert harness.spelled(f"python {root}/t2r/speed.py --tokens 8") == "python -m t2r.speed --tokens 8"
        assert harness.spelled(f"python {root}/demo.py ppl") == "python demo.py ppl"
    assert harness.spelled("python /elsewhere/not_ours.py") == "python /elsewhere/not_ours.py"


# ---------------------------------------------------------------- issue 49: what a page cites can be run and read

CITING = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


@pytest.mark.parametrize("page", CITING, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_cited_command_exists(page):
    """Each `python -m X` a page cites is a module of the repository or an installed one (pytest), and
    each `demo.py CMD` a command of demo.py with the options it is given."""
    import importlib.util
    import demo
    _, sub = demo.parser()
    text, missing = page.read_text(), []
    for cmd, rest in re.findall(r"\bdemo\.py ([a-z]\w*)([^`\n]*)", text):
        if cmd == "grade":  # the course's grader, with options of its own (course/grade.py)
            continue
        if cmd not in sub.choices:
            missing.append(f"demo.py {cmd}")
            continue
        known = sub.choices[cmd]._option_string_actions
        missing += [f"demo.py {cmd} {o}" for o in re.findall(r"(?<![\w-])(--[a-z][\w-]*)", rest.split("#")[0]) if o not in known]
    for module in re.findall(r"\bpython -m ([A-Za-z_][\w.]*\w)", text):
        path = ROOT.joinpath(*module.split("."))
        if not (path.with_suffix(".py").is_file() or (path / "__main__.py").is_file()) \
                and importlib.util.find_spec(module) is None:
            missing.append(f"python -m {module}")
    assert not missing, f"{page.relative_to(ROOT)} cites commands that do not exist: {', '.join(sorted(set(missing)))}"


def repository_files() -> set:
    """The files a commit of this tree holds: tracked, or new and not ignored."""
    import subprocess
    try:
        out = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                             capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout: which files the repository holds is unknown")
    return {f for f in out.splitlines() if (ROOT / f).exists()}


@pytest.mark.parametrize("page", CITING, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_cited_results_file_is_in_the_repository(page):
    """A results file a page cites (results/NAME.EXT, or results/NAME.* for all of a run's files) is in
    the repository, not only on the machine that ran it: never under results/runs/ or a cache, which
    .gitignore leaves out. Folders and names with a <placeholder> are not files, and are not checked."""
    import fnmatch
    files, missing = repository_files(), []
    for cited in re.findall(r"\bresults/[\w.*<>/-]*[\w*>/]", page.read_text()):
        if cited.endswith("/") or "<" in cited or "." not in cited.rsplit("/", 1)[1]:
            continue
        if not (fnmatch.filter(files, cited) if "*" in cited else cited in files):
            missing.append(cited)
    assert not missing, f"{page.relative_to(ROOT)} cites results the repository does not hold: {', '.join(missing)}"


def test_the_tour_excerpt_is_the_last_tour_run():
    """The tour's excerpt (docs/experiments.md), its timings included, is what results/tour.log holds."""
    excerpt = section("What `python demo.py` prints", (ROOT / "docs" / "experiments.md").read_text()).split("```\n", 1)[1].split("```", 1)[0]
    log = (ROOT / "results" / "tour.log").read_text().splitlines()
    missing = [line for line in excerpt.splitlines() if line.strip() and line not in log]
    assert not missing, f"docs/experiments.md's tour excerpt is not in results/tour.log: {missing}"


# ---------------------------------------------------------------- issue 51: the report writes only inside its blocks

BLOCKS = "intro\n<!-- results: memory -->\nold\n<!-- /results -->\nprose between\n<!-- results: retention -->\nold\n<!-- /results -->\nend\n"


@pytest.mark.parametrize("damage, says", [
    (lambda t: t.replace("old\n<!-- /results -->\nprose", "old\nprose", 1), r"line 2: the block 'memory' has no .* before the next block \(line 5\)"),
    (lambda t: t.rsplit("<!-- /results -->", 1)[0] + "end\n", "line 6: the block 'retention' has no"),
    (lambda t: t.replace("prose between", "prose\n<!-- /results -->\nbetween"), "line 6: a '<!-- /results -->' closes no block"),
    (lambda t: t.replace("<!-- results: memory -->\n", "<!-- results: memory -->  \n"), "line 2: '<!-- results: memory -->' is not a results marker"),
    # round 11: BLOCK reads markers at a line's start, so an indented one ran the block on to the next's closing
    (lambda t: t.replace("prose between", "prose <!-- /results --> between"), "line 5: a results marker must begin its line"),
    (lambda t: t.replace("old\n<!-- /results -->\nprose", "old\n  <!-- /results -->\nprose", 1), "line 4: a results marker must begin its line"),
    (lambda t: t.replace("old\n<!-- /results -->\nprose", "old\n\t<!-- /results -->\nprose", 1), "line 4: a results marker must begin its line"),
    (lambda t: t.replace("\n<!-- results: retention", "\n <!-- results: retention"), "line 6: a results marker must begin its line"),
], ids=["closing missing", "last closing missing", "stray closing", "opening not alone", "closing mid-line", "closing indented",
        "closing after a tab", "opening indented"])
def test_a_page_whose_markers_do_not_pair_is_refused_by_name(damage, says, tmp_path, monkeypatch, capsys):
    """With one closing marker missing, the report replaced everything to the next block's closing marker
    (23 lines of prose) and said "rewritten"."""
    import demo
    from lab import harness
    (tmp_path / "docs").mkdir()
    page = tmp_path / "docs" / "page.md"
    page.write_text(damage(BLOCKS))
    monkeypatch.setattr(harness, "ROOT", tmp_path)
    before = page.read_text()
    with pytest.raises(ValueError, match=rf"docs/page.md: {says}"):
        demo.cmd_report(type("Args", (), {"check": False})())
    assert page.read_text() == before


def test_what_the_report_writes_cannot_end_its_block(tmp_path, monkeypatch):
    """Results content ("-->", "<!-- /results -->" in a method's name or a command) broke the markers."""
    import demo
    (tmp_path / "memory.json").write_text(sealed({"about": {"command": "python demo.py memory `x` <!-- /results -->"}}, "memory"))
    monkeypatch.setitem(demo.REPORT, "memory", ("memory", lambda data: "a row <!-- /results --> more\n<!-- results: tour_time -->"))
    text = demo.reported("<!-- results: memory -->\nold\n<!-- /results -->\nprose\n", results=tmp_path)
    assert text.endswith("<!-- /results -->\nprose\n") and text.count("<!--") == 2 and text.count("-->") == 2, text
    assert demo.reported(text, results=tmp_path) == text  # and it reads back as one block
    assert "``python demo.py memory `x` &lt;!-- /results --&gt;``" in text


def test_the_report_reads_the_folder_the_pages_cite(tmp_path, monkeypatch, capsys):
    """With MSRNN_RESULTS exported it wrote the pages from that folder while citing results/."""
    import demo
    from lab import harness
    for folder, when in ((tmp_path / "results", "published"), (tmp_path / "elsewhere", "a course run")):
        folder.mkdir()
        (folder / "memory.json").write_text(sealed({"about": {"command": f"python demo.py memory # {when}"}}, "memory"))
    (tmp_path / "docs").mkdir()
    page = tmp_path / "docs" / "page.md"
    page.write_text("<!-- results: memory -->\n<!-- /results -->\n")
    monkeypatch.setitem(demo.REPORT, "memory", ("memory", lambda data: data["about"]["command"]))
    monkeypatch.setattr(harness, "ROOT", tmp_path)
    monkeypatch.setattr(demo, "PUBLISHED", tmp_path / "results")
    monkeypatch.setattr(harness, "RESULTS", tmp_path / "elsewhere")  # as MSRNN_RESULTS would make it
    monkeypatch.setenv("MSRNN_RESULTS", str(tmp_path / "elsewhere"))
    demo.cmd_report(type("Args", (), {"check": False})())
    assert "# published" in page.read_text() and "a course run" not in page.read_text()
    out = capsys.readouterr().out
    assert f"reading {tmp_path / 'results'}" in out and f"MSRNN_RESULTS={tmp_path / 'elsewhere'} is not read" in out


def test_a_results_file_that_cannot_be_read_is_named(tmp_path):
    import demo
    (tmp_path / "memory.json").write_text("{not json")
    with pytest.raises(ValueError, match=r"results/memory.json \(block memory\): JSONDecodeError"):
        demo.reported("<!-- results: memory -->\n<!-- /results -->\n", results=tmp_path)


@pytest.mark.parametrize("edit, says", [({"about": "a string"}, "ValueError: it holds no `about` object"), ({"rows": []}, "ValueError: no row of T2R")])
def test_a_results_file_of_another_shape_is_named(tmp_path, edit, says):
    """An `about` that is not an object, or a summary of no rows, ended the report in a bare traceback."""
    import json
    import demo
    data = json.loads((ROOT / "results" / "t2r_mini.json").read_text())
    (tmp_path / "t2r_mini.json").write_text(json.dumps(data | edit) if "about" in edit else sealed(data | edit, "t2r_mini"))
    with pytest.raises(ValueError, match=rf"results/t2r_mini.json \(block t2r_mini_summary\): {says}"):
        demo.reported("<!-- results: t2r_mini_summary -->\n<!-- /results -->\n", results=tmp_path)


def test_the_t2r_chapter_reads_in_one_sitting():
    """docs/t2r.md is a chapter of claims, figures and verdicts, not a lab notebook: at most 250 lines."""
    lines = (ROOT / "docs" / "t2r.md").read_text().splitlines()
    assert len(lines) <= 250, f"docs/t2r.md has {len(lines)} lines; the chapter's budget is 250"


@pytest.mark.parametrize("edit, says", [({"idle": float("nan")}, "holds NaN"), ({"idle": True}, "tour_s.idle must be a positive number"),
                                        ({"idle": 0}, "tour_s.idle must be a positive number")])
def test_the_report_refuses_a_number_it_cannot_publish(tmp_path, edit, says):
    """Round 8: NaN was published as "nan s", true as "1 s", and 0 ended in a bare ZeroDivisionError."""
    import json
    import demo
    data = json.loads((ROOT / "results" / "busy.json").read_text())
    data["tour_s"] |= edit
    (tmp_path / "busy.json").write_text(sealed(data, "busy"))  # as a run that wrote it would: the check is the report's own
    with pytest.raises(ValueError, match=rf"results/busy.json \(block tour_time\): .*{says}"):
        demo.reported("<!-- results: tour_time -->\n<!-- /results -->\n", results=tmp_path)


def test_the_report_says_the_cores_of_the_run_and_escapes_tags(tmp_path):
    """Round 8: the tour's line said "2 idle cores" whatever busy.json held, and a tag in a label was
    written as HTML."""
    import json
    import demo
    data = json.loads((ROOT / "results" / "busy.json").read_text())
    (tmp_path / "busy.json").write_text(sealed(data | {"cores": 16, "busy_loops": 3, "default": "<b>x</b>"}, "busy"))
    text = demo.reported("<!-- results: tour_time -->\n<!-- /results -->\n", results=tmp_path)
    assert "on 16 idle cores" in text and "beside 3 busy loops" in text and "&lt;b>x&lt;/b>" in text and "<b>" not in text


def test_a_results_marker_in_a_code_example_is_not_a_block(tmp_path, monkeypatch):
    """Round 8: a page that shows the markers in a fenced example had the example filled."""
    import demo
    monkeypatch.setitem(demo.REPORT, "memory", ("memory", lambda data: "new"))
    (tmp_path / "memory.json").write_text(sealed({"about": {"command": "python demo.py memory"}}, "memory"))
    example = "```\n<!-- results: memory -->\nan example\n<!-- /results -->\n```\n"
    block = "<!-- results: memory -->\n```\nold\n```\n<!-- /results -->\n"
    text = demo.reported(example + block + "prose\n" + example, results=tmp_path)
    assert text.startswith(example) and text.endswith("prose\n" + example) and "old" not in text


def test_round_9_the_report_leaves_every_kind_of_example_and_escapes_by_the_writer(tmp_path, monkeypatch):
    """Round 9: an example in an indented code block, a quote, a ```` fence holding ```, or a <pre> was filled
    with the real table; a label holding ``` turned the escaping off for what followed (a tag published);
    a command holding `` ended its code span."""
    import json
    from t2r import speed
    import demo
    monkeypatch.setitem(demo.REPORT, "memory", ("memory", lambda data: "new"))
    (tmp_path / "memory.json").write_text(sealed({"about": {"command": "python demo.py memory"}}, "memory"))
    markers = "<!-- results: memory -->\nan example\n<!-- /results -->\n"
    for example in ("".join("    " + line + "\n" for line in markers.splitlines()), "".join("> " + line + "\n" for line in markers.splitlines()),
                    "````\n```\n" + markers + "```\n````\n", "<pre>\n" + markers + "</pre>\n",
                    # round 11: a tab is 4 columns (a tab then ``` neither opens nor closes a fence); raw HTML blocks
                    "```text\n\t```\n" + markers + "```\n", "\tcode ```\n", "<textarea>\n" + markers + "</textarea>\n",
                    "<script>\n" + markers + "</script>\n"):
        page = example + "<!-- results: memory -->\nold\n<!-- /results -->\n" + example
        text = demo.reported(page, results=tmp_path)
        assert text.startswith(example) and text.endswith(example) and "old" not in text, example
    data = json.loads((ROOT / "results" / "t2r_speed.json").read_text())
    data["t2r"], data["tail"] = "relu ``` x", "<img src=x>"  # the settings a run's labels are made of (speed.labels)
    for r in data["results"]:
        r["label"] = speed.labels(data["size"], data["t2r"], data["tail"])[r["kind"]]
    data["about"]["command"] = "python -m t2r.speed --x ``<b>y</b>``"
    (tmp_path / "t2r_speed.json").write_text(sealed(data, "t2r_speed"))
    text = demo.reported("<!-- results: t2r_speed -->\n<!-- /results -->\n", results=tmp_path)
    assert "relu ``` x" in text and "<img" not in text and "&lt;img" in text
    assert "(``` python -m t2r.speed --x ``<b>y</b>`` ```, results/t2r_speed.json)" in text  # CommonMark: a longer run delimits


@pytest.mark.parametrize("old, new, says", [('"ppl": 33.878', '"ppl": -33.878', "results.0.ppl is -33.878"),
                                        ('"state_bytes": 1474560', '"state_bytes": -1', "results.0.state_bytes is -1"),
                                        ('"state_bytes": 1474560', '"state_bytes": true', "results.0.state_bytes is true"),  # round 11
                                        ('"tokens": 4096', '"tokens": -4096', "tokens is -4096"),
                                        ('"results": [', '"deep": ' + "[" * 100_000 + "]" * 100_000 + ', "results": [', "RecursionError")])
def test_round_9_the_report_refuses_numbers_no_run_makes_and_names_a_file_too_deep(old, new, says, tmp_path):
    """Round 9: a perplexity of -33.88 and negative bytes were published; JSON nested 100,000 deep ended the
    report with "maximum recursion depth exceeded", naming no file."""
    import json
    import demo
    text = (ROOT / "results" / "t2r.json").read_text()
    assert old in text
    text = text.replace(old, new, 1)
    (tmp_path / "t2r.json").write_text(text if "deep" in new else sealed(json.loads(text), "t2r"))  # as a run that wrote it would
    with pytest.raises(ValueError, match=rf"results/t2r.json \(block t2r\): .*{says}"):
        demo.reported("<!-- results: t2r -->\n<!-- /results -->\n", results=tmp_path)


def test_round_9_the_report_refuses_a_linked_or_read_only_page(tmp_path, monkeypatch):
    """Round 9: a page that was a link became a file (its target kept the stale block); a read-only page was
    rewritten and made writable."""
    import os
    import demo
    from lab import harness
    (tmp_path / "docs").mkdir()
    stale = "<!-- results: memory -->\nold\n<!-- /results -->\n"
    (tmp_path / "elsewhere.md").write_text(stale)
    os.symlink(tmp_path / "elsewhere.md", tmp_path / "docs" / "linked.md")
    monkeypatch.setattr(harness, "ROOT", tmp_path)
    with pytest.raises(ValueError, match="docs/linked.md is a link to"):
        demo.cmd_report(type("Args", (), {"check": False})())
    (tmp_path / "docs" / "linked.md").unlink()
    (tmp_path / "docs" / "locked.md").write_text(stale)
    (tmp_path / "docs" / "locked.md").chmod(0o444)
    with pytest.raises(ValueError, match="docs/locked.md is read-only"):
        demo.cmd_report(type("Args", (), {"check": False})())
