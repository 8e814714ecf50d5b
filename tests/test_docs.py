"""The docs stay honest: README.md is a short front door, every command has its page, every
example command parses against the real CLI, and every relative link points at a file (and,
with `#anchor`, at one of its headings).

Everything is checked against the click objects of `evalkit.cli.app`; nothing runs a command.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
import typer.main

from evalkit.cli import app

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = ROOT / "docs"
MAX_README_LINES = 250
INDEX_HEADING = "## Commands"
REQUIRED_PAGES = (
    "passk", "regrade", "diff", "forgetting", "train", "traces", "report", "study", "grading",
    "run-folder", "reliability", "scale-out", "architecture", "references",
)
# entropy, length and groups share one page, or have one each.
SAMPLE_PAGES = (("samples",), ("entropy", "length", "groups"))
SHELL_OPERATORS = {";", "&&", "||", "|", "&"}


# --- the command tree -----------------------------------------------------------------------

def command_tree(cmd=None, prefix: tuple[str, ...] = ()) -> dict[str, object]:
    """Every leaf command of the CLI, by its full name ("passk", "train grpo")."""
    cmd = typer.main.get_command(app) if cmd is None else cmd
    subs = getattr(cmd, "commands", None)
    if not subs:
        return {" ".join(prefix): cmd}
    tree: dict[str, object] = {}
    for name, sub in subs.items():
        tree.update(command_tree(sub, (*prefix, name)))
    return tree


def option_names(cmd) -> set[str]:
    names = {"--help"}
    for param in cmd.params:
        names.update(o for o in (*param.opts, *param.secondary_opts) if o.startswith("-"))
    return names


# --- reading markdown -----------------------------------------------------------------------

def doc_files() -> list[Path]:
    return [README, *sorted(DOCS.glob("*.md"))]


def rel(path: Path) -> str:
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else path.name


ASSIGNMENT = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)=(\S.*)$")


def example_lines(text: str) -> list[tuple[int, str]]:
    """(line number, command) for every `evalkit ...` line in a fenced or indented code block.

    Shell continuations (a trailing backslash) are joined; the number is the first line's. A
    variable set in a code block (`C="--steps 8 ..."`) is put in place of `$C` / `${C}` in the
    commands after it, so the options it holds are checked too.
    """
    out: list[tuple[int, str]] = []
    lines = text.splitlines()
    variables: dict[str, str] = {}
    fenced = False
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.lstrip().startswith("```"):
            fenced = not fenced
            i += 1
            continue
        in_code = fenced or line.startswith("    ") or line.startswith("\t")
        assigned = ASSIGNMENT.match(line.strip()) if in_code else None
        if assigned:
            # `$C` unquoted: its value is split into words again, as the shell does
            variables[assigned.group(1)] = " ".join(shlex.split(assigned.group(2), comments=True))
        elif in_code and line.strip().startswith("evalkit "):
            start, command = i + 1, line.strip()
            while command.endswith("\\") and i + 1 < len(lines):
                i += 1
                command = command[:-1] + " " + lines[i].strip()
            for name, value in variables.items():
                pattern = r"\$(?:\{" + name + r"\}|" + name + r"\b)"
                command = re.sub(pattern, lambda _, v=value: v, command)
            out.append((start, command))
        i += 1
    return out


def split_commands(command: str) -> list[list[str]]:
    """The words of each `evalkit ...` command on a shell line (`;`, `&&`, `|` split it)."""
    lexer = shlex.shlex(command, posix=True, punctuation_chars=";&|")
    lexer.whitespace_split = True
    lexer.commenters = "#"
    words = list(lexer)
    commands, current = [], []
    for word in words:
        if word in SHELL_OPERATORS:
            commands.append(current)
            current = []
        else:
            current.append(word)
    commands.append(current)
    return [c for c in commands if c and c[0] == "evalkit"]


def check_command(words: list[str], root=None) -> list[str]:
    """Problems with one `evalkit ...` command: an unknown subcommand or option."""
    cmd = typer.main.get_command(app) if root is None else root
    path = ["evalkit"]
    rest = words[1:]
    while getattr(cmd, "commands", None):
        if not rest or rest[0] in ("--help", "-h"):
            return []  # `evalkit train --help`: a group's own help
        name = rest[0]
        if name not in cmd.commands:
            return [f"unknown command {' '.join([*path, name])!r} "
                    f"(known: {', '.join(sorted(cmd.commands))})"]
        cmd = cmd.commands[name]
        path.append(name)
        rest = rest[1:]
    known = option_names(cmd)
    problems = []
    for word in rest:
        if word.startswith("--") and word != "--":
            option = word.split("=", 1)[0]
            if option not in known:
                problems.append(f"{' '.join(path)}: unknown option {option}")
    return problems


def example_problems(path: Path, root=None) -> list[str]:
    problems = []
    for number, line in example_lines(path.read_text(encoding="utf-8")):
        try:
            commands = split_commands(line)
        except ValueError as exc:  # unbalanced quotes
            problems.append(f"{rel(path)}:{number}: cannot parse {line!r}: {exc}")
            continue
        for words in commands:
            for problem in check_command(words, root):
                problems.append(f"{rel(path)}:{number}: {problem}\n    {line}")
    return problems


LINK = re.compile(r"\[[^\]\n]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")


def prose(text: str) -> str:
    """The text outside fenced code blocks and inline code spans."""
    kept, fenced = [], False
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
            kept.append("")
        else:
            kept.append("" if fenced else re.sub(r"`[^`]*`", "", line))
    return "\n".join(kept)


def slug(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    found: set[str] = set()
    fenced = False
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
        elif not fenced and re.match(r"#{1,6} ", line):
            base = slug(line.lstrip("#"))
            name, n = base, 0
            while name in found:  # a repeated heading gets -1, -2, ...
                n += 1
                name = f"{base}-{n}"
            found.add(name)
    return found


def broken_links(path: Path) -> list[str]:
    """Relative links whose file is missing, or whose #anchor is no heading of that page."""
    problems = []
    for number, line in enumerate(prose(path.read_text(encoding="utf-8")).splitlines(), 1):
        for target in LINK.findall(line):
            if re.match(r"[a-z][a-z0-9+.-]*:", target):
                continue  # http(s):, mailto:
            file, _, anchor = target.partition("#")
            page = path.parent / file if file else path
            where = f"{rel(path)}:{number}: link to {target!r}"
            if not page.exists():
                problems.append(f"{where}: no such file")
            elif anchor and page.suffix == ".md" and anchor not in anchors(page):
                problems.append(f"{where}: {page.name} has no heading #{anchor}")
    return problems


def command_index() -> dict[str, str]:
    """The README's command index: command (`passk`, `train grpo`) -> the page it links."""
    lines = README.read_text(encoding="utf-8").splitlines()
    assert INDEX_HEADING in lines, f"README.md has no {INDEX_HEADING!r} section (the command index)"
    start = lines.index(INDEX_HEADING) + 1
    index: dict[str, str] = {}
    for line in lines[start:]:
        if line.startswith("## "):
            break
        if not line.startswith(("|", "-")):
            continue
        named = re.search(r"`evalkit ([a-z][a-z0-9 -]*?)`", line)
        if not named:
            continue
        link = LINK.search(prose(line)) or LINK.search(line)
        assert link, f"README.md command index: {line!r} links no page"
        index[named.group(1).strip()] = link.group(1).split("#", 1)[0]
    return index


TEST_REFERENCE = re.compile(r"`(tests/[\w/]+\.py)(?:::(\w+))?`")


def missing_tests(path: Path) -> list[str]:
    """Test files (and `file::test_name`) a page cites that do not exist."""
    problems = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        for file, name in TEST_REFERENCE.findall(line):
            test_file = ROOT / file
            if not test_file.exists():
                problems.append(f"{rel(path)}:{number}: cites {file}, which does not exist")
            elif name and not re.search(rf"^def {name}\(", test_file.read_text(encoding="utf-8"), re.M):
                problems.append(f"{rel(path)}:{number}: cites {file}::{name}, which {file} lacks")
    return problems


# --- the tests ------------------------------------------------------------------------------

def test_readme_is_short():
    count = len(README.read_text(encoding="utf-8").splitlines())
    assert count <= MAX_README_LINES, (
        f"README.md has {count} lines, more than {MAX_README_LINES}: move detail to docs/"
    )


def test_docs_pages_exist():
    pages = {p.stem for p in DOCS.glob("*.md")}
    missing = [p for p in REQUIRED_PAGES if p not in pages]
    assert not missing, f"docs/ lacks {', '.join(f'{p}.md' for p in missing)}"
    assert any(all(p in pages for p in group) for group in SAMPLE_PAGES), (
        "docs/ needs samples.md, or entropy.md, length.md and groups.md"
    )


def test_command_index_covers_the_cli():
    index = command_index()
    commands = command_tree()
    missing = sorted(set(commands) - set(index))
    assert not missing, f"README.md's command index lacks: {', '.join(missing)}"
    stale = sorted(set(index) - set(commands))
    assert not stale, f"README.md's command index names commands the CLI lacks: {', '.join(stale)}"
    for command, target in index.items():
        assert target.startswith("docs/") and target.endswith(".md"), (
            f"README.md command index: {command} links {target!r}, not a docs/*.md page"
        )
        page = ROOT / target
        assert page.exists(), f"README.md command index: {command} links {target}, which is missing"
        examples = [words for _, line in example_lines(page.read_text(encoding="utf-8"))
                    for words in split_commands(line)]
        assert any(words[1:1 + len(command.split())] == command.split() for words in examples), (
            f"{target} (the page of `evalkit {command}`) has no example `evalkit {command} ...`"
        )


@pytest.mark.parametrize("path", doc_files(), ids=rel)
def test_example_commands_parse(path):
    problems = example_problems(path)
    assert not problems, "example commands that the CLI would refuse:\n" + "\n".join(problems)


@pytest.mark.parametrize("path", doc_files(), ids=rel)
def test_relative_links_resolve(path):
    problems = broken_links(path)
    assert not problems, "broken links:\n" + "\n".join(problems)


@pytest.mark.parametrize("path", doc_files(), ids=rel)
def test_cited_tests_exist(path):
    problems = missing_tests(path)
    assert not problems, "the page names tests that are gone:\n" + "\n".join(problems)


# --- the checker itself can fail -------------------------------------------------------------

def test_checker_finds_bad_examples(tmp_path):
    page = tmp_path / "page.md"
    page.write_text(
        "Text.\n\n"
        "    evalkit passk smollm2-135m --n 4 --k=1,2 --out runs/x   # fine\n"
        "    evalkit passk smollm2-135m --nope 3\n"
        "    evalkit trian es --out x\n"
        "\n```bash\n"
        "evalkit train grpo --steps 2 \\\n    --no-such-flag\n"
        "evalkit train --help ; evalkit diff a b --top=3 && evalkit groups r --bogus=1\n"
        "```\n"
        "    evalkit train\n"
        "\n"
        "    C=\"--steps 2 --bogus-c\"   # a variable the commands below use\n"
        "    evalkit train grpo $C --out x\n"
        "    evalkit train distill ${C}\n",
        encoding="utf-8",
    )
    # the first line of each problem, without the list of known commands
    problems = [p.split("\n")[0].split(" (known: ")[0] for p in example_problems(page)]
    assert problems == [
        "page.md:4: evalkit passk: unknown option --nope",
        "page.md:5: unknown command 'evalkit trian'",
        "page.md:8: evalkit train grpo: unknown option --no-such-flag",
        "page.md:10: evalkit groups: unknown option --bogus",
        "page.md:15: evalkit train grpo: unknown option --bogus-c",
        "page.md:16: evalkit train distill: unknown option --bogus-c",
    ]


def test_checker_finds_broken_links(tmp_path):
    (tmp_path / "there.md").write_text("# There\n\n## `evalkit x`: the X, (y)\n\n## Twice\n\n## Twice\n",
                                       encoding="utf-8")
    page = tmp_path / "page.md"
    page.write_text(
        "# Top\n\n[ok](there.md) [anchor](there.md#evalkit-x-the-x-y) [again](there.md#twice-1)\n"
        "[web](https://example.org) [top](#top) `[in code](nowhere.md)`\n"
        "[gone](missing.md) [no heading](there.md#nope) [none here](#bottom)\n",
        encoding="utf-8",
    )
    assert broken_links(page) == [
        "page.md:5: link to 'missing.md': no such file",
        "page.md:5: link to 'there.md#nope': there.md has no heading #nope",
        "page.md:5: link to '#bottom': page.md has no heading #bottom",
    ]


def test_checker_finds_missing_tests(tmp_path):
    page = tmp_path / "page.md"
    page.write_text(
        "Kept by `tests/test_docs.py::test_readme_is_short` and `tests/test_docs.py`.\n"
        "Gone: `tests/test_nothing_here.py`, `tests/test_docs.py::test_that_never_was`.\n",
        encoding="utf-8",
    )
    assert missing_tests(page) == [
        "page.md:2: cites tests/test_nothing_here.py, which does not exist",
        "page.md:2: cites tests/test_docs.py::test_that_never_was, which tests/test_docs.py lacks",
    ]
