"""The package's shape: search-side rooms load no trainer, and no module imports itself back."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import lbs

PACKAGE = Path(lbs.__file__).parent


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path, modules: set[str]) -> set[str]:
    """lbs modules a file imports anywhere (function-level imports included)."""
    name = _module_name(path)
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name in modules}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(up + ([node.module] if node.module else []))
            for a in node.names:
                if f"{base}.{a.name}" in modules:
                    out.add(f"{base}.{a.name}")
                elif base in modules:
                    out.add(base)
    return out - {name}


def import_graph() -> dict[str, set[str]]:
    files = sorted(PACKAGE.rglob("*.py"))
    modules = {_module_name(f) for f in files}
    return {_module_name(f): _imports(f, modules) for f in files}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """A cycle as a list of modules (first == last), or None."""
    state: dict[str, int] = {}  # 1 on the stack, 2 done
    stack: list[str] = []

    def visit(m: str) -> list[str] | None:
        state[m] = 1
        stack.append(m)
        for n in sorted(graph.get(m, ())):
            if state.get(n) == 1:
                return stack[stack.index(n):] + [n]
            if n not in state and (c := visit(n)):
                return c
        stack.pop()
        state[m] = 2
        return None

    for m in sorted(graph):
        if m not in state and (c := visit(m)):
            return c
    return None


def test_cycle_finder_finds_a_planted_cycle():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set(), "c": {"a", "b"}}) is None


def test_no_import_cycle_inside_lbs():
    graph = import_graph()
    assert "lbs.acting" in graph and "lbs.hanabi.engine" in graph["lbs.acting"]
    assert find_cycle(graph) is None, find_cycle(graph)


def test_search_side_rooms_load_no_trainer_lightning_or_wandb():
    code = (
        "import sys\n"
        "import lbs.hanabi, lbs.models, lbs.acting, lbs.infer, lbs.search, lbs.scoring, lbs.seeding\n"
        "import lbs.belief.constraints, lbs.belief.sampling\n"
        "heavy = ('lightning', 'pytorch_lightning', 'wandb')\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in heavy\n"
        "             or m.startswith(('lbs.rl', 'lbs.belief.trainer', 'lbs.belief.data')))\n"
        "print(','.join(bad))\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "", f"search-side imports loaded: {r.stdout.strip()}"
