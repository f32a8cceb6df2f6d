"""Every search entry point (search/run.py and the experiments package's search scripts) shares one
declaration of the search flags: the same defaults, the same refusals; and diagnose_lbs's oracle check."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "LBS_EAGER": "1",
       "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}


def test_the_oracle_check_needs_no_belief(tmp_path):
    """diagnose_lbs --sampler true searches with the true hand: a blueprint no belief was trained for still
    gets it, where the belief's sampler is refused in one line."""
    bp = tmp_path / "bp.pt"
    bp.write_bytes((ROOT / "checkpoints" / "blueprint_2c.pt").read_bytes())  # not shipped: no belief found
    flags = [sys.executable, "-m", "experiments.diagnose_lbs", "--mode", "lbs-1", "--blueprint",
             str(bp), "--games", "2", "--rollouts", "100", "--min-rollouts", "5", "--threads", "1"]
    r = subprocess.run([*flags, "--sampler", "true"], capture_output=True, text=True, env=ENV, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "lbs-1, sampler true" in r.stdout and "paired difference" in r.stdout
    r = subprocess.run([*flags, "--sampler", "belief"], capture_output=True, text=True, env=ENV, timeout=300)
    assert r.returncode != 0 and "needs a belief" in r.stderr and "Traceback" not in r.stderr


# ---- every search entry point: the shared flags, declared once ------------------------------------------
SCRIPTS = {"search/run.py": "quick", "experiments/table1.py": "table1",
           "experiments/diagnose_lbs.py": "table1", "experiments/bench_search.py": "table1"}
"""Each search entry point and the named budget it starts from."""

HARNESS = r"""
import contextlib, io, json, os, runpy, sys
script, cases = sys.argv[1], json.loads(sys.argv[2])
sys.path.insert(0, os.path.dirname(script))  # as `python script` runs it
out = []
for argv, env in cases:
    err, code = io.StringIO(), 0
    sys.argv = [script, *argv]
    before = dict(os.environ)
    os.environ.update(env)
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            runpy.run_path(script, run_name="__main__")
        except SystemExit as e:
            code = 1 if isinstance(e.code, str) else (e.code or 0)
            if isinstance(e.code, str):
                print(e.code, file=sys.stderr)
    os.environ.clear()
    os.environ.update(before)
    out.append([code, err.getvalue()])
print(json.dumps(out))
"""


def refusals(script: str, cases: list[tuple[list[str], dict]]) -> list[tuple[int, str]]:
    """(exit code, stderr) of each (argv, environment) case, all in one process (imports paid once)."""
    env = {**ENV, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    r = subprocess.run([sys.executable, "-c", HARNESS, str(ROOT / script), json.dumps(cases)],
                       capture_output=True, text=True, env=env, cwd=ROOT, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    return [tuple(x) for x in json.loads(r.stdout.splitlines()[-1])]


BLUEPRINT_2C = ["--blueprint", str(ROOT / "checkpoints" / "blueprint_2c.pt")]
BELIEF_2C = ["--belief", str(ROOT / "checkpoints" / "belief_2c.pt")]
BAD_CHOICE = "--knowledge: invalid choice: 'bogus' (choose from 'smartbot', 'none')"
FLAG_CASES = {
    "search/run.py": [
        (["--mode", "blueprint", *BELIEF_2C], "no mode here draws hands from a belief (blueprint)"),
        (["--mode", "sparta", "--belief", "missing.pt"], "no mode here draws hands from a belief (sparta)"),
        (["--mode", "lbs-2", "--cuda-graphs", "--device", "cpu"], "--cuda-graphs needs a CUDA device"),
        (["--mode", "lbs-2", "--max-range", "10"], "--max-range: matters to no mode here (lbs-2)"),
        (["--mode", "sparta", "--knowledge", "none"], "--knowledge: matters to no mode here (sparta)"),
        (["--mode", "blueprint", "--knowledge", "smartbot"], "--knowledge: matters to no mode here (blue"),
        (["--mode", "lbs-2", "--knowledge", "bogus"], BAD_CHOICE),
        (["--mode", "blueprint", "--delta", "0.1"], "--delta: matters to no mode here (blueprint)"),
    ],
    "experiments/table1.py": [
        (["--modes", "blueprint", "sparta", *BELIEF_2C], "no mode here draws hands from a belief"),
        (["--modes", "lbs-1", "lbs-2", "lbs-1"], "--modes names lbs-1 more than once"),
        (["--strata", "-1"], "--strata -1: must be >= 0"),
        (["--cuda-graphs", "--device", "cpu"], "--cuda-graphs needs a CUDA device"),
        (["--modes", "blueprint", "lbs-1", "--max-range", "10"], "--max-range: matters to no mode here"),
        (["--modes", "blueprint", "sparta", "--knowledge", "none"], "--knowledge: matters to no mode here"),
    ],
    "experiments/diagnose_lbs.py": [
        (["--mode", "sparta", *BELIEF_2C], "no mode here draws hands from a belief (sparta)"),
        (["--sampler", "true", *BELIEF_2C], "no mode here draws hands from a belief (lbs-1)"),
        (["--cuda-graphs", "--device", "cpu"], "--cuda-graphs needs a CUDA device"),
    ],
    "experiments/bench_search.py": [
        (["--modes", "sparta", *BELIEF_2C], "no mode here draws hands from a belief (sparta)"),
        (["--modes", "lbs-1", "lbs-1"], "--modes names lbs-1 more than once"),
        (["--cuda-graphs", "on", "--device", "cpu"], "--cuda-graphs on needs a CUDA device"),
        (["--batch-games", "1", "-2"], "--batch-games -2: must be >= 1"),
        (["--modes", "sparta", "--reference", "missing/sparta_eval"],
         "--reference missing/sparta_eval: no executable file there"),
        (["--modes", "sparta", "--reference", "/bin/true"], "the reference searches SmartBot by SPARTA only"),
        (["--blueprint", "smartbot", "--modes", "sparta", "--reference", "/bin/true"],
         "give --reference-budget on"),
        (["--blueprint", "smartbot", "--modes", "sparta", "--reference", "/bin/true", "--reference-budget",
          "on", "--threads", "2"], "both sides are timed in core-seconds"),
    ],
}


@pytest.mark.parametrize("script", list(SCRIPTS))
def test_flags_that_matter_to_no_chosen_mode_are_refused_in_one_line(script):
    """Every search entry point refuses, in one line before any work, what its modes would ignore or cannot
    do: a belief where no mode draws hands from one (even a missing file), a SearchConfig flag no chosen mode
    reads, a mode named twice, CUDA graphs off CUDA, a negative count, and LBS_EAGER other than 1."""
    cases = [(argv if "--blueprint" in argv else [*BLUEPRINT_2C, *argv], {})
             for argv, _ in FLAG_CASES[script]]
    cases += [([*BLUEPRINT_2C, *BELIEF_2C], {"LBS_EAGER": value}) for value in ("0", "yes")]
    wants = [w for _, w in FLAG_CASES[script]] + ["LBS_EAGER='0'", "LBS_EAGER='yes'"]
    for (argv, env), want, (code, err) in zip(cases, wants, refusals(script, cases), strict=True):
        assert code != 0 and want in err and len(err.strip().splitlines()) == 1, (argv, env, err)


def load_parser(script: str):
    """The script's parser() (each entry point builds its flags there)."""
    import importlib
    import importlib.util

    if script.startswith("experiments/"):
        return importlib.import_module(f"experiments.{Path(script).stem}").parser()
    spec = importlib.util.spec_from_file_location(f"_entry_{Path(script).stem}", ROOT / script)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.parser()


def help_defaults(ap) -> dict[str, str]:
    """Each option's default as its --help shows it: the [value] closing a SearchConfig field's text, else
    the value after 'default' (the first spelling of the option names it)."""
    import re

    blocks: list[str] = []
    for line in ap.format_help().split("options:", 1)[1].splitlines():
        if line.startswith("  -"):  # an option's first line
            blocks.append(line)
        elif line.startswith("   ") and blocks:  # its help, wrapped
            blocks[-1] += " " + line
        else:  # a blank line or a group's title ends it
            blocks.append("")
    out = {}
    for block in filter(None, blocks):
        flat = " ".join(block.split())
        name = flat.split()[0].rstrip(",")
        shown = re.findall(r"\[([^\]]*)\]$", flat) or re.findall(r"\(default:? ([^):;,]+)", flat)
        if shown:
            out[name.lstrip("-").replace("-", "_")] = shown[0].strip()
    return out


def test_every_search_script_shows_the_one_declaration_of_each_default():
    """The defaults each entry point's --help shows are the declaration's: every SearchConfig field the named
    budget's value (no script re-declares a search setting), the same delta everywhere, and the shared flags
    (device, threads, seed, first game) alike; a plain parse builds that budget's config."""
    from lbs.search import flags
    from lbs.search.config import BUDGETS, SearchConfig

    shown = {}
    for script, budget in SCRIPTS.items():
        ap = load_parser(script)
        defaults = help_defaults(ap)
        shown[script] = defaults
        want = BUDGETS[budget].search
        for f in dataclasses.fields(SearchConfig):
            if f.name in ap.sweep:
                continue
            assert defaults[f.name] == repr(getattr(want, f.name)), (script, f.name, defaults.get(f.name))
        assert defaults["budget"] == budget, script
        search = flags.read(ap, ap.parse_args([]))
        assert search.cfg == want and search.budget is BUDGETS[budget], script
    for flag in ("device", "threads", "seed", "first_game", "delta"):
        assert len({d[flag] for d in shown.values()}) == 1, (flag, {s: d[flag] for s, d in shown.items()})
    assert {d["delta"] for d in shown.values()} == {"0.5"}
