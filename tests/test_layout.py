"""The house shows the design: the root holds the design card's files, every import runs downward
through the picture of the layers (docs/files.md), and no two names differ by one letter."""
import ast
import itertools
import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parent.parent
FILES = (ROOT / "docs" / "files.md").read_text()

# The design card's files, and what a Python project's root needs beside them.
ROOT_FILES = {"llama.py", "msrnn.py", "policies.py", "load_weights.py", "demo.py", "test_equivalence.py", "README.md",
              "requirements.txt", "pytest.ini", "conftest.py", ".gitignore"}


def modules():
    """Every module of the project by dotted name (tests/, docs/ and a student's course/work/ aside)."""
    out = {}
    for p in ROOT.rglob("*.py"):
        rel = p.relative_to(ROOT)
        if (rel.parts[0] in ("tests", "docs", "results") or rel.parts[0].startswith(".") or rel.parts[:2] == ("course", "work")
                or rel.stem.startswith("test_") or rel.stem == "conftest"):
            continue
        out[".".join(rel.with_suffix("").parts)] = p
    return out


def imports(path, known):
    """The project's modules that `path` imports, at the top or inside a function."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            out |= {f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in known else node.module for a in node.names}
    return out & known.keys()


def layers():
    """the picture of the layers: one line per layer, top first, `N  names...  what they are`; names are modules
    (`llama.py`) or folders (`lab/`). Returns the layers bottom first, each a list of name prefixes."""
    block = FILES.split("## Tour of the files\n", 1)[1].split("```\n", 2)[1]
    rows = [re.findall(r"(\S+?)(?:\.py|/)(?=[\s,])", line.split("  ", 1)[1].split("   ")[0] + " ")
            for line in block.strip().splitlines()]
    return [[name.replace("/", ".") for name in row] for row in reversed(rows)]


def layer_of(module, picture):
    hits = [(len(name), i) for i, row in enumerate(picture) for name in row
            if module == name or module.startswith(name + ".")]
    assert hits, f"{module} is in no layer of the picture of the layers"
    return max(hits)[1]  # the most specific name: engine/guards.py lies below engine/


def test_the_root_holds_the_design_card():
    entries = {p.name for p in ROOT.iterdir() if not p.name.startswith(".") or p.name == ".gitignore"}
    files = {name for name in entries if (ROOT / name).is_file()}
    assert files <= ROOT_FILES, f"files at the root that the design card does not name: {sorted(files - ROOT_FILES)}"
    assert {"llama.py", "msrnn.py", "policies.py", "load_weights.py", "demo.py", "test_equivalence.py"} <= files
    folders = entries - files - {"__pycache__"}
    assert folders == {"engine", "lab", "t2r", "data", "tests", "course", "docs", "results"}, folders


def test_imports_run_down_readmes_picture_of_the_layers():
    known, picture = modules(), layers()
    graph = {m: imports(p, known) for m, p in known.items()}
    for m, deps in graph.items():
        for d in deps:
            assert layer_of(d, picture) <= layer_of(m, picture), f"{m} imports {d}, which the picture of the layers puts above it"
    # within a layer, no cycle: a topological order exists
    done, todo = set(), set(graph)
    while todo:
        ready = {m for m in todo if graph[m] <= done | {m}}
        assert ready, f"an import cycle among {sorted(todo)}"
        done, todo = done | ready, todo - ready
    # the reading path imports no driver
    for m in ("llama", "msrnn", "policies", "load_weights"):
        assert not {d for d in graph[m] if d.split(".")[0] in ("lab", "t2r", "demo", "course")}, m


def test_no_two_names_differ_by_one_letter():
    names = {p.stem for p in ROOT.rglob("*") if not any(part.startswith(".") or part in ("results", "__pycache__", "work")
                                                         for part in p.relative_to(ROOT).parts)}

    def one_edit(a, b):  # one letter added, removed or changed
        if abs(len(a) - len(b)) > 1 or a == b:
            return False
        if len(a) == len(b):
            return sum(x != y for x, y in zip(a, b)) == 1
        a, b = sorted((a, b), key=len)
        return any(b[:i] + b[i + 1:] == a for i in range(len(b)))
    close = [(a, b) for a, b in itertools.combinations(sorted(names), 2) if one_edit(a, b)]
    assert not close, close
