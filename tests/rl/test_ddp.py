"""The blueprint learner over two CPU processes (Fabric DDP, gloo): gradients are averaged, ranks play
different deals, rank 0 alone writes and prints, a stop reaches every rank, a resume continues."""

import os
import signal
import subprocess
import sys
import time

import torch
from conftest import run_ranks
from test_blueprint import MICRO_FLAGS, ROOT, _cli, micro_config

from lbs import ckpt
from lbs.rl.trainer import Trainer

# Each rank: a first round (its deals), then one batch's gradient without and with DDP's all-reduce,
# then the run to its end; what it saw goes to rank<r>.pt. Every rank gets its own out_dir, so a write
# by rank 1 would show.
WORKER = """
import os
from dataclasses import replace
from pathlib import Path
import torch
from test_blueprint import micro_config
from lbs.rl.trainer import Trainer

tmp, rank = Path({tmp!r}), int(os.environ["RANK"])
cfg = replace(micro_config(tmp / f"rank{{rank}}"), devices=2)
t = Trainer(cfg, progress=False)
n = cfg.actor.num_games
t.selfplay.act_round()
first = {{k: t.replay.storage[k][:n].clone() for k in ("own_hand", "action")}}
while len(t.replay) < cfg.min_replay:
    t.selfplay.act_round()
batch, _, w = t.replay.sample(cfg.batch_size)
learner = t.learner

def grads(sync):
    learner.opt.zero_grad(set_to_none=True)
    with learner.fabric.no_backward_sync(learner.net, enabled=not sync):
        learner.fabric.backward(learner.loss(batch, w)[0])
    return [p.grad.clone() for p in learner.module.parameters()]

local, synced = grads(False), grads(True)
learner.opt.zero_grad(set_to_none=True)
result = t.run()
torch.save({{"first": first, "local": local, "synced": synced, "result": result,
            "weights": learner.module.state_dict(), "counters": dict(t.counters)}}, tmp / f"rank{{rank}}.pt")
"""


def test_ddp_averages_gradients_and_rank0_alone_writes(tmp_path):
    ranks = run_ranks(WORKER.format(tmp=str(tmp_path)), 2, tmp_path, imports=ROOT / "tests" / "rl")
    for r, p in enumerate(ranks):
        assert p.returncode == 0, f"rank {r}: {p.stderr[-3000:]}"
    a, b = (torch.load(tmp_path / f"rank{r}.pt", weights_only=False) for r in (0, 1))
    # the ranks' batches differ, and DDP hands both the mean of their gradients
    assert any(not torch.equal(x, y) for x, y in zip(a["local"], b["local"], strict=True))
    for x, y, sa, sb in zip(a["local"], b["local"], a["synced"], b["synced"], strict=True):
        assert torch.equal(sa, sb)
        torch.testing.assert_close(sa, (x + y) / 2, rtol=1e-5, atol=1e-7)
    # so after the run both hold the same weights
    assert a["weights"].keys() == b["weights"].keys()
    for k, v in a["weights"].items():
        assert torch.equal(v, b["weights"][k]), k
    # rank 0 plays the deals a one-device run plays; rank 1 others
    one = Trainer(micro_config(tmp_path / "one"), progress=False)
    one.selfplay.act_round()
    n = one.cfg.actor.num_games
    for k in ("own_hand", "action"):
        assert torch.equal(a["first"][k], one.replay.storage[k][:n]), k
    assert not torch.equal(a["first"]["own_hand"], b["first"]["own_hand"])
    one.selfplay.close()
    # rank 0 alone evaluates, writes and prints
    cfg = micro_config(tmp_path)
    assert a["counters"]["updates"] == b["counters"]["updates"] == cfg.total_updates
    assert a["result"] is not None and b["result"] is None
    saved = ckpt.load(tmp_path / "rank0" / "run" / "latest.pt", "blueprint")
    assert saved["config"]["devices"] == 2 and saved["counters"]["updates"] == cfg.total_updates
    assert not (tmp_path / "rank1").exists()
    assert "lbs: blueprint run in" in ranks[0].stderr and "lbs:" not in ranks[1].stderr, ranks[1].stderr


def test_cli_two_devices_stop_together_and_resume(tmp_path):
    """`--devices 2`: a SIGTERM to the first process stops both ranks at the same round, one line says what
    was saved, the exit status is 143; --resume continues the run on two processes to a larger total."""
    out = tmp_path / "ddp"
    cmd = [sys.executable, str(ROOT / "train" / "blueprint.py"), *MICRO_FLAGS, "--devices", "2",
           "--total_updates", "1000000", "--eval_every", "1000000", "--checkpoint_minutes", "1000",
           "--out_dir", str(out)]
    env = {**os.environ, "WANDB_MODE": "disabled"}
    proc = subprocess.Popen(cmd, env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    seen = []
    for line in proc.stderr:  # wait until the training loop runs
        seen.append(line)
        if "lbs: blueprint run in" in line:
            break
    time.sleep(3)
    proc.send_signal(signal.SIGTERM)  # the first process only: rank 1 hears of it through the agreement
    _, err = proc.communicate(timeout=120)  # returns once every rank has closed the pipes
    err = "".join(seen) + err
    assert proc.returncode == 128 + signal.SIGTERM, err
    assert err.count("stopped by SIGTERM at update") == 1 and "Traceback" not in err, err
    saved = ckpt.load(out / "latest.pt", "blueprint")
    u = saved["counters"]["updates"]
    assert saved["config"]["devices"] == 2 and u > 0
    r = _cli(["--resume", str(out / "latest.pt"), "--no-progress", "--total_updates", str(u + 4)], tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.count("final: score") == 1 and r.stderr.count("blueprint run in") == 1, r.stderr
    assert ckpt.load(out / "latest.pt", "blueprint")["counters"]["updates"] == u + 4
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ddp"]  # no stray folder from rank 1
