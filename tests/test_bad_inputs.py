"""Every entry point's bad inputs: one clear line on stderr naming the problem and a non-zero exit, never a
traceback and never a run on nonsense. Each script's invocations run in one Python process (the imports are
paid once per script), each as `python script ...` would run it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from lbs import ckpt
from lbs.bad.config import apply_preset
from lbs.bad.policy import BadNet
from lbs.configs import to_dict

ROOT = Path(__file__).resolve().parent.parent
BP, BELIEF = ROOT / "checkpoints" / "blueprint_2c.pt", ROOT / "checkpoints" / "belief_2c.pt"
PAIR = ["--blueprint", str(BP), "--belief", str(BELIEF)]

HARNESS = r"""
import contextlib, io, json, runpy, sys, traceback
script, cases = sys.argv[1], json.loads(sys.argv[2])
sys.path.insert(0, str(__import__("pathlib").Path(script).parent))
out = []
for argv in cases:
    err, code = io.StringIO(), 0
    sys.argv = [script, *argv]
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            runpy.run_path(script, run_name="__main__")
        except SystemExit as e:  # as the interpreter reports it
            code = 1 if isinstance(e.code, str) else (e.code or 0)
            if isinstance(e.code, str):
                print(e.code, file=sys.stderr)
        except BaseException:
            traceback.print_exc()
            code = 1
    out.append([code, err.getvalue()])
print(json.dumps(out))
"""


def nan_copy(src: Path, dst: Path, kind: str, key: str, value: float) -> Path:
    """`src` with one weight set to `value` (NaN, Inf), written as a well-formed checkpoint."""
    with open(src, "rb") as f:
        f.readline()
        blob = torch.load(f, weights_only=True)
    name = next(k for k, v in blob[key].items() if v.is_floating_point())
    blob[key][name] = blob[key][name].clone().fill_(value)
    return ckpt.save(dst, kind, {k: v for k, v in blob.items() if k not in ("kind", "format")})


def unreadable(tmp: Path) -> Path:
    """A regular file this process cannot read, also as root (which reads past a chmod 000): the chmod 000
    copy when that is enough, else a write-only /proc file, which root cannot read either."""
    locked = tmp / "locked.pt"
    locked.write_bytes(BP.read_bytes())
    locked.chmod(0)
    for path in (locked, Path("/proc/sys/vm/drop_caches")):
        try:
            path.open("rb").close()
        except PermissionError:
            return path
    raise AssertionError("no unreadable file to test with")


BIG = [str(2**32), str(2**64)]
"""Game numbers past the seeds' game index (0 .. 2**32 - 1)."""


def cases(tmp: Path) -> dict[str, list[tuple[list[str], str]]]:
    """script -> (argv, what its one line must say)."""
    nan_bp = nan_copy(BP, tmp / "nan_bp.pt", "blueprint", "model", float("nan"))
    tiny = apply_preset("tiny")
    bad = ckpt.save(tmp / "bad.pt", "bad", {"config": to_dict(tiny),
                                            "model": BadNet(tiny.game, tiny.net).state_dict()})
    locked = unreadable(tmp)
    inf_belief = nan_copy(BELIEF, tmp / "inf_belief.pt", "belief", "state_dict", float("inf"))
    not_table = tmp / "search.json"
    not_table.write_text(json.dumps({"summary": {}, "games": []}))
    (tmp / "a_file").write_text("x")
    run = ["--out_dir", str(tmp / "run")]
    return {
        "train/blueprint.py": [
            ([*run, "--device", "gpu9"], "device='gpu9'"),
            ([*run, "--device", "mps"], "device='mps'"),
            ([*run, "--lr", "inf"], "lr=inf: must be > 0 and finite"),
            ([*run, "--lr", "nan"], "lr=nan"),
            ([*run, "--alpha", "inf"], "alpha=inf"),
            ([*run, "--seed", "-1"], "seed=-1"),
            ([*run, "--max_minutes", "nan"], "max_minutes=nan"),
            ([*run, "--precision", "fp8"], "precision='fp8'"),
            (["--out_dir", "/etc/hostname/x"], "cannot write the run folder"),
            (["--out_dir", str(tmp / "a_file" / "run")], "cannot write the run folder"),
            (["--resume", str(tmp / "missing.pt")], "not found"),
            (["--resume", str(nan_bp), "--out_dir", str(tmp / "r1")], "non-finite weights"),
            (["--resume", str(locked)], "Permission denied"),
            ([*run, "--init", str(tmp)], "is a folder, not a file"),
        ],
        "train/belief.py": [
            ([*run, "--blueprint", str(BP), "--device", "gpu9"], "device='gpu9'"),
            ([*run, "--blueprint", str(BP), "--device", "mps"], "device='mps'"),
            ([*run, "--blueprint", str(BP), "--cuda_graphs", "true", "--device", "cpu"],
             "--cuda_graphs needs a CUDA device (the run is on cpu)"),
            ([*run, "--blueprint", str(BP), "--precision", "fp8"], "precision='fp8'"),
            ([*run, "--blueprint", str(BP), "--max_minutes", "nan"], "max_minutes=nan"),
            ([*run, "--blueprint", str(BP), "--eval_seed", "-1"], "eval_seed=-1"),
            ([*run, "--blueprint", str(BP), "--lr", "inf"], "lr=inf: must be a finite number"),
            ([*run, "--blueprint", str(BP), "--threads", "-1"], "--threads -1"),
            ([*run], "--blueprint is required"),
            ([*run, "--blueprint", str(nan_bp)], "non-finite weights"),
            ([*run, "--blueprint", "smartbot", "--players", "7"], "players=7"),
            ([*run, "--blueprint", str(BP), "--players", "3"], "is a 2-player blueprint"),
            (["--blueprint", str(BP), "--out_dir", "/proc/lbs-belief"], "cannot write the run folder"),
            ([*run, "--blueprint", str(BP), "--init", str(locked)], "Permission denied"),
            ([*run, "--blueprint", str(locked)], "Permission denied"),
            (["--resume", str(BELIEF), "--preset", "paper"], "--preset with --resume"),
            (["--resume", str(BELIEF), "--init", str(BELIEF)], "--init with --resume"),
        ],
        "train/score.py": [
            ([str(BP), "--device", "gpu9"], "--device gpu9"),
            ([str(BP), "--device", "mps"], "--device mps"),
            ([str(BP), "--games", "0"], "--games 0"),
            ([str(BP), "--seed", "-1"], "--seed -1"),
            ([str(BP), "--seed", "99999999999"], "--seed 99999999999"),
            ([str(nan_bp)], "non-finite weights"),
            ([str(BP), "--belief", str(inf_belief)], "non-finite weights"),
            ([str(tmp / "missing.pt")], "not found"),
            ([str(BP), "--players", "3"], "is a 2-player blueprint"),
            (["smartbot", "--players", "6"], "players=6"),
            ([str(locked)], "Permission denied"),
            ([str(BP), "--belief", str(locked)], "Permission denied"),
            ([str(BP), "--games", BIG[1]], f"--games {BIG[1]}"),
            ([str(bad), "--belief", str(BELIEF)], "a BAD checkpoint is scored on one process"),
        ],
        "search/run.py": [
            ([*PAIR, "--device", "gpu9"], "--device gpu9"),
            ([*PAIR, "--threads", "-1"], "--threads -1"),
            ([*PAIR, "--rollouts", "99999999999999999999"], "rollouts=99999999999999999999"),
            ([*PAIR, "--delta", "nan"], "delta=nan"),
            ([*PAIR, "--delta", "inf"], "delta=inf"),
            ([*PAIR, "--prune-z", "nan"], "prune_z=nan"),
            ([*PAIR, "--show", "-1"], "--show -1"),
            ([*PAIR, "--players", "3"], "is a 2-player blueprint"),
            ([*PAIR, "--seed", "-1"], "--seed -1"),
            ([*PAIR, "--out", "/etc/hostname/x.json"], "--out /etc/hostname/x.json"),
            ([*PAIR, "--out", str(tmp)], "is a folder"),
            (["--mode", "blueprint", "--blueprint", str(nan_bp), "--out", str(tmp / "s.json")],
             "non-finite weights"),
            (["--mode", "lbs-1", "--blueprint", str(BP), "--belief", str(inf_belief), "--out",
              str(tmp / "s.json")], "non-finite weights"),
            ([*PAIR[:2], "--belief", str(locked), "--out", str(tmp / "s.json")], "Permission denied"),
            ([*PAIR, "--first-game", BIG[0]], f"--first-game {BIG[0]}"),
            ([*PAIR, "--games", BIG[0], "--first-game", "1"], f"--games {BIG[0]} from --first-game 1"),
        ],
        "experiments/table1.py": [
            ([*PAIR, "--games", "0"], "--games 0"),
            ([*PAIR, "--batch-games", "0"], "--batch-games 0"),
            ([*PAIR, "--seed", "-1"], "--seed -1"),
            ([*PAIR, "--max-rows", "0"], "--max-rows 0"),
            ([*PAIR, "--players", "4"], "is a 2-player blueprint"),
            ([*PAIR, "--max-range", "0"], "max_range=0"),
            ([*PAIR, "--threads", "-1"], "--threads -1"),
            ([*PAIR, "--device", "gpu9"], "--device gpu9"),
            (["--combine", str(not_table)], "is not a table1 result"),
            ([*PAIR, "--record", "../../x"], "--record '../../x'"),
            ([*PAIR, "--out", "/etc/hostname"], "/etc/hostname is a file, not a folder"),
            (["--blueprint", str(locked), "--belief", str(BELIEF)], "Permission denied"),
            ([*PAIR, "--games", BIG[1]], f"--games {BIG[1]}"),
        ],
        "experiments/diagnose_lbs.py": [
            ([*PAIR, "--games", "0"], "--games 0"),
            ([*PAIR, "--plays", "--samples", "0"], "--samples 0"),
            (["--blueprint", "smartbot", "--belief", str(ROOT / "checkpoints" / "belief_smartbot_2p.pt"),
              "--mode", "lbs-1"], "use lbs-inf or sparta"),
            ([*PAIR, "--delta", "nan"], "delta=nan"),
            (["--blueprint", "smartbot", "--players", "1", "--mode", "sparta"], "players=1"),
            (["--blueprint", "smartbot", "--players", "5", "--plays"], "--plays rates a belief"),
        ],
        "experiments/rollout_spread.py": [
            (["--blueprint", "smartbot", "--games", "0"], "--games 0"),
            (["--blueprint", "smartbot", "--samples", "1"], "--samples 1"),
            (["--blueprint", "smartbot", "--moves", "-1"], "--moves -1"),
            (["--blueprint", "missing.pt"], "not found"),
            (["--blueprint", "smartbot", "--record", "a/b"], "--record 'a/b'"),
        ],
        "experiments/bench_search.py": [
            ([*PAIR, "--games", "0"], "--games 0"),
            ([*PAIR, "--groups", "0"], "--groups 0"),
            ([*PAIR, "--batch-games", "1", "0"], "--batch-games 0"),
            ([*PAIR, "--max-range", "0"], "max_range=0"),
            ([*PAIR, "--threads", "-1"], "--threads -1"),
            ([*PAIR, "--device", "mps"], "--device mps"),
            ([*PAIR, "--record", "a/b"], "--record 'a/b'"),
            ([*PAIR, "--players", "5"], "is a 2-player blueprint"),
        ],
    }


def run_cases(script: str, argvs: list[list[str]], cwd: Path) -> list[tuple[int, str]]:
    """(exit code, stderr) of each invocation of `script`, all in one Python process (HARNESS)."""
    env = {**os.environ, "WANDB_MODE": "disabled", "OMP_NUM_THREADS": "1",
           "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    r = subprocess.run([sys.executable, "-c", HARNESS, str(ROOT / script), json.dumps(argvs)],
                       capture_output=True, text=True, env=env, cwd=cwd, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    return [tuple(x) for x in json.loads(r.stdout.splitlines()[-1])]


@pytest.fixture(scope="module")
def refusals(tmp_path_factory) -> list[tuple[str, list[str], str, int, str]]:
    """(script, argv, expected words, exit code, stderr) of every case; the scripts run one at a time."""
    tmp = tmp_path_factory.mktemp("bad")
    rows = []
    for script, table in cases(tmp).items():
        results = run_cases(script, [a for a, _ in table], tmp)
        for (argv, want), (code, err) in zip(table, results, strict=True):
            rows.append((script, argv, want, code, err))
    return rows


def test_at_least_forty_bad_invocations_over_eight_entry_points(refusals):
    assert len(refusals) >= 40 and len({r[0] for r in refusals}) == 8


def test_each_bad_invocation_is_one_line_and_a_non_zero_exit(refusals):
    wrong = [f"{script} {' '.join(argv)}: exit {code}, stderr {err!r} (want one line with {want!r})"
             for script, argv, want, code, err in refusals
             if code == 0 or len(err.strip().splitlines()) != 1 or want not in err]
    assert not wrong, "\n".join(wrong)


def test_a_refused_run_leaves_no_folder_behind(tmp_path):
    """Refused after the run folder or the result's folder was made (a resume of a weights-only file, a
    default run folder and a wrong --init, a missing belief): one line each, and no folder left."""
    blueprint = run_cases("train/blueprint.py", [
        ["--resume", str(BP), "--out_dir", str(tmp_path / "new" / "run")],
        ["--init", str(BELIEF)],  # its default folder runs/blueprint/tiny-<time> is made first
    ], tmp_path)
    search = run_cases("search/run.py", [
        ["--mode", "lbs-1", "--blueprint", str(BP), "--belief", str(tmp_path / "missing.pt"), "--out",
         str(tmp_path / "deep" / "er" / "r.json")],
    ], tmp_path)
    assert [code for code, _ in blueprint + search] == [1, 1, 1]
    assert all(len(err.strip().splitlines()) == 1 for _, err in blueprint + search)
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_a_rank_without_its_group_is_refused_before_any_write(tmp_path):
    """LOCAL_RANK (or RANK) set by hand, with no group of that size: a trainer would run as a non-zero rank,
    writing latest.pt without holding the folder's lock. Refused in one line, and nothing written."""
    trainers = {"train/blueprint.py": ["--preset", "tiny", "--total_updates", "4"],
                "train/belief.py": ["--blueprint", str(BP), "--preset", "tiny", "--total_steps", "2"]}
    env = {**os.environ, "WANDB_MODE": "disabled", "LOCAL_RANK": "1"}
    for script, argv in trainers.items():
        out = tmp_path / Path(script).stem
        cmd = [sys.executable, str(ROOT / script), *argv, "--out_dir", str(out), "--no-progress"]
        r = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)
        assert r.returncode == 1 and r.stderr.strip().splitlines() == [
            f"{Path(script).stem}: LOCAL_RANK=1 is set, but WORLD_SIZE=1 makes no group with such a rank: "
            "unset it, or start the processes with a launcher (torchrun, --devices N)"], r.stderr
        assert not out.exists()
