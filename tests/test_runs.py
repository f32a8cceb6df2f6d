"""The run lifecycle both trainers share: why a run stopped, the finished check, the resume refusal, best.pt
reconciliation and the W&B settings (the trainers' own tests run them end to end)."""

import operator
import signal

import pytest

from lbs import ckpt
from lbs.runs import Lifecycle, RunDirError, Stopped, stop_reason


def test_stop_reason_names_the_signal_or_the_error():
    assert stop_reason(KeyboardInterrupt())[0] == "stopped by Ctrl-C"
    reason, stop = stop_reason(Stopped("SIGTERM", signal.SIGTERM))
    assert reason == "stopped by SIGTERM" and stop.signum == signal.SIGTERM and stop.reason == reason
    reason, stop = stop_reason(RuntimeError("Lightning's own exception"), sigterm=True)
    assert reason == "stopped by SIGTERM" and stop.signum == signal.SIGTERM
    reason, stop = stop_reason(ValueError("boom"))
    assert reason == "stopped by an error (ValueError)" and stop is None


def test_a_run_folder_its_resume_and_its_best(tmp_path, capsys, monkeypatch):
    life = Lifecycle("blueprint", tmp_path / "run", "update")
    assert not life.finished(3, 4)
    assert life.finished(4, 4)
    assert "already finished (4 of total_updates=4)" in capsys.readouterr().err
    life.begin(0, "cpu")
    assert life.out.is_dir() and "blueprint run in" in capsys.readouterr().err

    weights = ckpt.save(tmp_path / "shipped.pt", "blueprint", {"model": {}, "best": 1.0})
    with pytest.raises(ckpt.CheckpointError, match="weights only .* cannot be resumed"):
        life.training_state(weights, needs=("optimizer",))
    state = ckpt.save(tmp_path / "state.pt", "blueprint", {"optimizer": {}, "best": 1.0})
    assert life.training_state(state, needs=("optimizer",))["best"] == 1.0

    read = operator.itemgetter("best")
    assert life.best_so_far(2.0, read, operator.gt) == 2.0  # no best.pt yet
    ckpt.save(life.out / "best.pt", "blueprint", {"best": 3.0})
    assert life.best_so_far(2.0, read, operator.gt) == 3.0  # best.pt is newer than the resumed file
    assert life.best_so_far(2.0, read, operator.lt) == 2.0  # (lower is better: the resumed one stays)
    with pytest.raises(RunDirError, match="already holds a run"):
        life.check_folder(resuming=False, overwrite=False)

    monkeypatch.setenv("WANDB_MODE", "disabled")
    kept = life.wandb_settings("p", "", "offline", "abcd", ["t"])
    assert kept["id"] == "abcd" and kept["mode"] == "disabled" and kept["group"] is None
    assert kept["dir"] == str(life.out) and kept["name"] == "run" and kept["job_type"] == "blueprint"
    monkeypatch.delenv("WANDB_MODE")
    new = life.wandb_settings("p", "g", "offline", None, [])
    assert new["mode"] == "offline" and len(new["id"]) == 8 and new["group"] == "g"
