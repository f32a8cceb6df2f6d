"""Every command the README and docs/ print names a script that exists and flags that script accepts, every
repository path they pass exists, and every relative link resolves.

Commands come from fenced bash blocks (backslash continuations joined, trailing comments dropped) and from
inline code spans that start with `python`, `python3` or `torchrun`. Each script's accepted flags are read
from its own `--help`, so a parser built from a dataclass is checked like a hand-written one; every help
text comes from one child process (torch and the package load once)."""

from __future__ import annotations

import glob
import json
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)
SPAN = re.compile(r"`([^`]+)`")
LINK = re.compile(r"\]\(([^)\s]+)\)")
FLAG = re.compile(r"(?<![\w-])--[A-Za-z0-9][\w.-]*")
PATH_ARGS = ("checkpoints/", "experiments/results/", "tests/")
"""Arguments that name tracked files: they must exist (after brace and glob expansion)."""

# Runs `--help` of each target (a script path, or a module such as experiments.table1) in this one process
# and prints {target: help text} as JSON on the last line. Experiment scripts run as package modules, the
# way `python -m experiments.X` runs them.
HELP_CHILD = """
import contextlib, io, json, runpy, sys
texts = {}
for target in sys.argv[1:]:
    buf, argv = io.StringIO(), sys.argv
    sys.argv = [target, "--help"]
    try:
        with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(buf):
            if target.endswith(".py") and not target.startswith("experiments/"):
                runpy.run_path(target, run_name="__main__")
            else:  # the experiments package's modules: python -m experiments.X, the same parser
                module = target.removesuffix(".py").replace("/", ".")
                runpy.run_module(module, run_name="__main__", alter_sys=True)
    except SystemExit:
        pass
    except Exception as e:
        buf.write(f"CRASHED: {type(e).__name__}: {e}")
    finally:
        sys.argv = argv
    texts[target] = buf.getvalue()
print(json.dumps(texts))
"""


@dataclass(frozen=True)
class Command:
    page: str
    text: str
    target: str  # what runs: a script path (train/score.py) or a module (experiments.table1)
    script: str  # the file that holds it, relative to the repository root
    args: tuple[str, ...]  # everything after the script

    @property
    def flags(self) -> list[str]:
        return [a.split("=", 1)[0] for a in self.args if a.startswith("--")]


def _strip_comment(line: str) -> str:
    return re.sub(r"(^|\s)#.*$", "", line)


def shell_lines(markdown: str) -> list[str]:
    """Commands in the page: one per line of a bash block (continuations joined), then every inline span
    that starts with python / python3 / torchrun (whitespace inside the span collapsed)."""
    out = []
    for lang, body in FENCE.findall(markdown):
        if lang not in ("bash", "sh", "shell"):
            continue
        joined = re.sub(r"\\\n\s*", " ", "\n".join(_strip_comment(x) for x in body.splitlines()))
        out += [x.strip() for x in joined.splitlines() if x.strip()]
    prose = FENCE.sub("", markdown)
    for span in SPAN.findall(prose):
        words = " ".join(span.split())
        first = next((w for w in words.split() if "=" not in w), "")
        if first in ("python", "python3", "torchrun"):
            out.append(words)
    return out


def parse(page: str, line: str) -> Command | None:
    """The script a command runs and its arguments; None for what is not one of ours (pip, pytest, ruff)."""
    try:
        words = shlex.split(line)
    except ValueError:
        words = line.split()
    words = [w for w in words if not re.fullmatch(r"[A-Z_]+=\S*", w)]  # environment assignments
    if not words or words[0] not in ("python", "python3", "torchrun"):
        return None
    rest = words[1:]
    if words[0] != "torchrun" and rest[:1] == ["-m"]:
        module = rest[1]
        if module.split(".")[0] in ("pytest", "pip"):
            return None
        return Command(page, line, module, module.replace(".", "/") + ".py", tuple(rest[2:]))
    for i, w in enumerate(rest):
        if w.endswith(".py"):
            return Command(page, line, w, w, tuple(rest[i + 1:]))
    return None


def collect(pages: list[Path]) -> list[Command]:
    cmds = []
    for page in pages:
        for line in shell_lines(page.read_text()):
            if (cmd := parse(page.name, line)) is not None:
                cmds.append(cmd)
    return cmds


def accepted_flags(help_text: str) -> set[str]:
    """Flags an argparse help declares: the usage block and the start of each option line (not the
    descriptions, whose examples may name flags of other scripts)."""
    usage = help_text.split("\n\n", 1)[0]
    flags = set(FLAG.findall(usage))
    for line in help_text.splitlines():
        if line.lstrip().startswith("-"):
            flags |= set(FLAG.findall(re.split(r"(?<=\S)\s{2,}", line.strip(), maxsplit=1)[0]))
    return flags | {"--help"}


def expand(arg: str) -> list[str]:
    """Brace expansion ({,_a,_b}) as bash does it, for one group at a time."""
    m = re.search(r"\{([^{}]*)\}", arg)
    if not m:
        return [arg]
    return [y for part in m.group(1).split(",") for y in expand(arg[:m.start()] + part + arg[m.end():])]


COMMANDS = collect(PAGES)


@cache
def help_texts() -> dict[str, str]:
    """`--help` of every script the pages run (that exists), from one child process."""
    targets = sorted({c.target for c in COMMANDS if (ROOT / c.script).is_file()})
    done = subprocess.run([sys.executable, "-c", HELP_CHILD, *targets], cwd=ROOT, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_pages_print_the_main_commands():
    """The collector sees what a reader sees: the README's three commands and the docs' blocks."""
    targets = {c.target for c in COMMANDS}
    assert {"train/blueprint.py", "train/score.py", "search/run.py", "experiments.table1"} <= targets
    assert len(COMMANDS) > 50, len(COMMANDS)


def test_every_entry_point_exists():
    missing = [f"{c.page}: {c.text}" for c in COMMANDS if not (ROOT / c.script).is_file()]
    assert not missing, "commands naming no script:\n" + "\n".join(missing)


def test_every_flag_is_accepted_by_its_script():
    texts = help_texts()
    crashed = {t: x for t, x in texts.items() if "usage:" not in x}
    assert not crashed, f"--help printed no usage: {crashed}"
    wrong = [f"{c.page}: {flag} in `{c.text}`" for c in COMMANDS if c.target in texts
             for flag in c.flags if flag not in accepted_flags(texts[c.target])]
    assert not wrong, "flags the script does not accept:\n" + "\n".join(wrong)


def test_every_path_passed_exists():
    missing = []
    for c in COMMANDS:
        for arg in c.args:
            if arg.startswith(PATH_ARGS) and not all(glob.glob(str(ROOT / x)) for x in expand(arg)):
                missing.append(f"{c.page}: {arg}")
    assert not missing, "paths that do not exist:\n" + "\n".join(missing)


def test_every_relative_link_resolves():
    missing = []
    for page in PAGES:
        for link in LINK.findall(FENCE.sub("", page.read_text())):
            if "://" in link or link.startswith("#"):
                continue
            if not (page.parent / link.split("#", 1)[0]).exists():
                missing.append(f"{page.name}: {link}")
    assert not missing, "links to nothing:\n" + "\n".join(missing)


@pytest.mark.parametrize("page, found", [
    ("```bash\npython train/nope.py --x 1   # gone\n```\n", ("train/nope.py", ["--x"])),
    ("Run `OMP_NUM_THREADS=1 python experiments/bench_range.py\n  --games 3`.", ("experiments/bench_range.py",
                                                                               ["--games"])),
    ("```bash\npython -m experiments.table1 --combine a.json \\\n    --record x\n```\n",
     ("experiments.table1", ["--combine", "--record"])),
    ("```bash\ntorchrun --nproc-per-node 4 search/run.py --mode lbs-1\n```\n", ("search/run.py", ["--mode"])),
    ("```bash\npython3 -m pytest -x -q\nruff check .\n```\n`pip install torch`", None),
])
def test_the_collector_reads_blocks_spans_modules_and_torchrun(tmp_path, page, found):
    (tmp_path / "page.md").write_text(page)
    cmds = collect([tmp_path / "page.md"])
    assert [(c.target, c.flags) for c in cmds] == ([found] if found else [])


def test_the_checker_catches_a_flag_the_parser_lacks():
    text = help_texts()["experiments.table1"]
    flags = accepted_flags(text)
    assert "--max-range" in flags and "--record" in flags and "--help" in flags
    assert "--max-ranges" not in flags and "--rows" not in flags
    assert expand("a{,_b,_c}.json") == ["a.json", "a_b.json", "a_c.json"]
