"""README cannot drift from the code: its file tour, its line counts, its code excerpt, its test command."""
import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()


def lines(path):
    return len(path.read_text().splitlines())


def section(title):
    return README.split(f"## {title}\n", 1)[1].split("\n## ", 1)[0]


def test_file_tour_lists_every_file_with_its_line_count():
    tour = dict(re.findall(r"^\| `([\w*.]+)` \| (\d+) \|", section("Tour of the files"), re.M))
    tests = sorted(ROOT.glob("test_*.py"))
    files = {p.name: lines(p) for p in [*ROOT.glob("*.py"), *ROOT.glob("*.html")] if p not in tests}
    files["test_*.py"] = sum(map(lines, tests))
    assert {name: int(n) for name, n in tour.items()} == files, "update README's tour of the files"
    assert f"{len(tests)} test files" in section("Tour of the files")


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
    for file, spans, rest in re.findall(r"`(\w+\.py)` (\d+–\d+(?:, \d+–\d+)*)([^|\n]*)", text):
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


def test_reading_order_is_short_and_holds_what_it_names():
    table = section("Read in this order")
    rows = re.findall(r"^\| \d \| (`\w+\.py` [\d–, ]+) \| (\d+) \| (.*) \|$", table, re.M)
    total = 0
    for where, n, what in rows:
        (file, spans, _), = cited(where)
        assert holds(file, spans, re.findall(r"`(\w+)`", what)) == int(n), f"{where}: not {n} lines"
        total += int(n)
    assert len(rows) >= 6 and total <= 400 and f"Total: {total} lines" in table
    for file, spans, names in cited(table.split("Total:", 1)[1]):  # what to read next
        holds(file, spans, names)


def test_the_course_solutions_are_the_lines_it_cites():
    course = (ROOT / "docs" / "course.md").read_text()
    for file, spans, names in cited(course):
        holds(file, spans, names)
