"""docs/reproduce.md's commands, in order, on a small game with every length shortened: the recipe (imitation,
TD values), shipping the blueprint, the belief on the shipped file, shipping it, fine-tuning it with the acted
cards weighed, shipping that, then one LBS game with the pair. If the commands rot, this fails."""

import os
import re
import subprocess
import sys
from pathlib import Path

from lbs import ckpt
from lbs.models import load_belief, load_blueprint

ROOT = Path(__file__).resolve().parents[2]
SHORT = ('[{"kind": "imitate", "updates": 16, "dagger": 0.5, "chunk": 32}, '
         '{"kind": "values", "updates": 16, "eps_base": 0.3, "n_step": 40, "fit_games": 64}]')
"""the `recipe` preset's phases, shortened (its network as the preset's: a policy network beside Q)"""


def run(*args: str, cwd: Path) -> str:
    env = {**os.environ, "WANDB_MODE": "disabled", "PYTHONPATH": str(ROOT)}
    res = subprocess.run([sys.executable, *args], capture_output=True, text=True, cwd=cwd, env=env,
                         timeout=900)
    assert res.returncode == 0, f"{args}\n{res.stdout[-2000:]}\n{res.stderr[-3000:]}"
    return res.stdout + res.stderr


def test_the_documented_commands_rebuild_a_pair_that_searches(tmp_path):
    doc = (ROOT / "docs" / "reproduce.md").read_text()
    commands = re.findall(r"^python train/\S+ .*$", doc, flags=re.M)
    assert [c.split()[1:3] for c in commands] == [
        ["train/blueprint.py", "--preset"], ["train/ship.py", "blueprint"],
        ["train/belief.py", "--blueprint"], ["train/ship.py", "belief"],
        ["train/belief.py", "--blueprint"], ["train/ship.py", "belief"]]
    (tmp_path / "checkpoints").mkdir()
    bp_run, bel_run = tmp_path / "runs" / "bp", tmp_path / "runs" / "bel"
    run(str(ROOT / "train" / "blueprint.py"), "--preset", "recipe-small", "--threads", "1", "--out_dir",
        str(bp_run), "--phases", SHORT, "--net.policy_net", "true", "--eval_every", "16", "--eval_games",
        "20", "--value_games", "10", "--min_replay", "32", "--no_progress", cwd=tmp_path)
    card = run(str(ROOT / "train" / "ship.py"), "blueprint", str(bp_run / "best.pt"), "--name", "bp",
               "--games", "20", "--threads", "1", cwd=tmp_path)
    assert "imitate smartbot, DAgger 0.5" in card and "TD policy evaluation of the anchor" in card
    assert "| 1 | TD policy evaluation" in card and "From update 0: `python train/blueprint.py" in card
    assert "the Q network alone (moves held by the policy network)" in card and "policy_net=True" in card
    shipped = tmp_path / "checkpoints" / "bp.pt"
    assert not {"optimizer", "anchor", "target"} & set(ckpt.load(shipped, "blueprint"))
    run(str(ROOT / "train" / "belief.py"), "--blueprint", "checkpoints/bp.pt", "--preset", "tiny",
        "--threads", "1", "--out_dir", str(bel_run), "--total_steps", "10", "--min_replay", "64",
        "--val_every", "5", "--val_games", "10", "--eval_games", "10", "--no_progress", cwd=tmp_path)
    assert ckpt.load(bel_run / "best.pt", "belief")["conventions"] == "smartbot"  # read from the recipe
    card = run(str(ROOT / "train" / "ship.py"), "belief", str(bel_run / "best.pt"), "--blueprint",
               "checkpoints/bp.pt", "--name", "bel", "--games", "10", "--threads", "1", cwd=tmp_path)
    assert "Conventions: the blueprint learnt smartbot's" in card
    first = tmp_path / "checkpoints" / "bel.pt"
    first_sha = ckpt.file_hash(first)
    weighted = tmp_path / "runs" / "weighted"  # the second stage: from the shipped file, acted cards weighed
    run(str(ROOT / "train" / "belief.py"), "--blueprint", "checkpoints/bp.pt", "--preset", "tiny", "--init",
        "checkpoints/bel.pt", "--acted_weight", "10", "--threads", "1", "--out_dir", str(weighted),
        "--total_steps", "4", "--min_replay", "64", "--val_every", "2", "--val_games", "10", "--eval_games",
        "10", "--no_progress", cwd=tmp_path)
    card = run(str(ROOT / "train" / "ship.py"), "belief", str(weighted / "best.pt"), "--blueprint",
               "checkpoints/bp.pt", "--name", "bel", "--games", "10", "--threads", "1", "--notes",
               "The second stage.", cwd=tmp_path)
    assert "--notes '<the paragraph below>'`" in card and card.rstrip().endswith("The second stage.")
    assert f"`checkpoints/bel.pt` (sha256 `{first_sha}`)" in card  # the file it replaced, by content
    assert "the card played or discarded weighing 10 in the loss" in card
    assert ckpt.file_hash(first) != first_sha
    game, model = load_belief(first, blueprint_path=shipped)
    assert model.conventions == "smartbot" and game == load_blueprint(shipped)[0]
    out = run(str(ROOT / "search" / "run.py"), "--mode", "lbs-1", "--blueprint", "checkpoints/bp.pt",
              "--belief", "checkpoints/bel.pt", "--games", "1", "--rollouts", "120", "--min_rollouts", "10",
              "--device", "cpu", "--no_progress", "--out", str(tmp_path / "lbs1.json"), cwd=tmp_path)
    assert "lbs-1" in out and (tmp_path / "lbs1.json").is_file()
