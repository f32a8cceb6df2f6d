"""The run lifecycle both trainers share: why a run stopped, the finished check, the resume refusal, best.pt
reconciliation and the W&B settings (the trainers' own tests run them end to end)."""

import operator
import os
import signal
import time
from pathlib import Path

import pytest

from lbs import ckpt
from lbs.runs import InUseError, Lifecycle, RunDirError, Stopped, check_out_dir, default_out_dir, stop_reason


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


HOLDER = """
import sys
from lbs.runs import hold_folder
hold_folder(sys.argv[1])
print("held", flush=True)
sys.stdin.read()
"""


def _holder(folder):
    """A second real process that holds `folder` until its stdin closes."""
    import subprocess
    import sys

    proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(folder)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "held"
    return proc


def test_a_run_folder_has_one_holder_at_a_time(tmp_path):
    out = tmp_path / "run"
    proc = _holder(out)
    try:
        life = Lifecycle("blueprint", out, "update")
        held = f"run folder {out} is in use by another process \\(pid {proc.pid}\\)"
        with pytest.raises(InUseError, match=held):
            life.check_folder(resuming=False, overwrite=False)
    finally:
        proc.stdin.close()
        proc.wait(timeout=30)
    life.check_folder(resuming=False, overwrite=False)  # the holder ended: the folder is free
    assert (out / ".lock").read_text().strip() == str(os.getpid())


def test_a_killed_holder_frees_its_folder(tmp_path):
    out = tmp_path / "run"
    proc = _holder(out)
    proc.kill()
    proc.wait(timeout=30)
    assert (out / ".lock").exists()  # kill -9 left its lock file; the kernel dropped its lock
    Lifecycle("belief", out, "step").check_folder(resuming=False, overwrite=False)


def test_default_folders_are_unique_within_one_second(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(time, "strftime", lambda fmt: "20260101-000000")
    a, b, c = (default_out_dir("blueprint", "tiny") for _ in range(3))
    assert len({a, b, c}) == 3 and all(Path(x).is_dir() for x in (a, b, c))
    assert b.endswith("tiny-20260101-000000-2")


def test_a_resume_into_a_folder_holding_another_run_is_refused(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    ckpt.save(b / "latest.pt", "blueprint", {"best": 20.0})
    with pytest.raises(RunDirError, match="holds another run"):
        check_out_dir(b, a / "latest.pt", overwrite=False)
    check_out_dir(b, b / "latest.pt", overwrite=False)  # its own folder
    check_out_dir(tmp_path / "empty", a / "latest.pt", overwrite=False)  # an empty folder


def test_a_folder_with_best_only_names_no_missing_latest(tmp_path):
    ckpt.save(tmp_path / "best.pt", "blueprint", {"best": 20.0})
    with pytest.raises(RunDirError) as e:
        check_out_dir(tmp_path, False, overwrite=False)
    assert "--resume" not in str(e.value) and "no latest.pt" in str(e.value)


def test_an_unwritable_run_folder_is_refused_before_any_work(tmp_path):
    (tmp_path / "file").write_text("x")
    for bad in (tmp_path / "file" / "run", Path("/proc/lbs-run")):
        with pytest.raises(RunDirError, match="cannot write the run folder"):
            Lifecycle("blueprint", bad, "update").check_folder(resuming=False, overwrite=False)


def test_a_trainer_on_a_held_folder_is_refused_in_one_line(tmp_path):
    """Two real processes: a trainer started on a folder another process holds exits non-zero with one line
    and writes nothing there."""
    import subprocess
    import sys

    root = Path(__file__).resolve().parent.parent
    out = tmp_path / "run"
    proc = _holder(out)
    try:
        r = subprocess.run([sys.executable, str(root / "train" / "blueprint.py"), "--out_dir", str(out)],
                           capture_output=True, text=True, timeout=300,
                           env={**os.environ, "WANDB_MODE": "disabled"})
    finally:
        proc.stdin.close()
        proc.wait(timeout=30)
    assert r.returncode == 1 and r.stderr.strip().splitlines() == [
        f"blueprint: run folder {out} is in use by another process (pid {proc.pid}); wait for it to end or "
        "choose another"]
    assert not out.exists()  # the holder made the folder; its lock went with it, and so did the empty folder


def test_folders_a_refused_process_made_are_gone_when_it_exits(tmp_path):
    """A process that made a run folder (and its parents) and was then refused leaves no empty folder; a
    folder that was there before, or that holds a file, stays."""
    import subprocess
    import sys

    (tmp_path / "kept").mkdir()
    code = ("import sys; from lbs.runs import hold_folder, make_folder; hold_folder(sys.argv[1]); "
            "make_folder(sys.argv[2]); open(sys.argv[2] + '/f', 'w').close(); make_folder(sys.argv[3]); "
            "sys.exit('refused')")
    r = subprocess.run([sys.executable, "-c", code, str(tmp_path / "a" / "b" / "run"), str(tmp_path / "full"),
                        str(tmp_path / "kept")], capture_output=True, text=True, timeout=120)
    assert r.returncode == 1 and r.stderr.strip() == "refused"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["full", "kept"]
