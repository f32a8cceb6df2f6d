"""What a save promises under faults: a best value counts only once its file is on disk, and a full disk
is said in one line with the previous file intact (a writer raising ENOSPC stands in for a full disk)."""

from __future__ import annotations

import errno
import json
import math
import os
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from lbs import ckpt

ROOT = Path(__file__).resolve().parent.parent


def _tearing(real, writes=lambda mode: "w" in mode):
    """`real` (os.fdopen or open) whose files opened to write take half of a write and then raise ENOSPC:
    a full disk tearing the file."""
    def opener(target, mode="r", *a, **k):
        f = real(target, mode, *a, **k)
        if writes(mode):
            inner = f.write

            def write(data):
                inner(bytes(data)[: len(data) // 2])
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            f.write = write
        return f
    return opener


def _enospc_fdopen():
    return _tearing(os.fdopen)


def test_a_failed_save_is_one_line_and_the_previous_file_stays(tmp_path, monkeypatch):
    path = tmp_path / "latest.pt"
    ckpt.save(path, "blueprint", {"step": 1})
    before = path.read_bytes()
    monkeypatch.setattr(ckpt.os, "fdopen", _enospc_fdopen())
    with pytest.raises(ckpt.SaveError) as e:
        ckpt.save(path, "blueprint", {"step": 2})
    assert str(e.value) == f"could not write {path}: No space left on device; the previous latest.pt is " \
                           "intact"
    assert path.read_bytes() == before and ckpt.load(path, "blueprint")["step"] == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["latest.pt"]  # no temp file left
    with pytest.raises(ckpt.SaveError, match="nothing was written"):
        ckpt.write_atomic(tmp_path / "new.json", b"{}")


def test_a_journal_on_a_full_disk_keeps_the_games_before(tmp_path, monkeypatch):
    from lbs.hanabi.interop.record import GameRecord
    from lbs.search.agent import GameResult
    from lbs.search.journal import Journal

    def game(n: int) -> GameResult:
        return GameResult(GameRecord({"players": 2}, [n], [0], n), False, 1, 0, 0, 10, [])

    j = Journal(tmp_path, "lbs-1", {"mode": "lbs-1"})
    j.append([0, 1], 2.0, [game(0), game(1)])
    monkeypatch.setattr("builtins.open", _torn_open(open))
    with pytest.raises(ckpt.SaveError, match="it keeps the 2 games finished before"):
        j.append([2, 3], 2.0, [game(2), game(3)])
    monkeypatch.undo()
    again = Journal(tmp_path, "lbs-1", {"mode": "lbs-1"})  # the torn line is dropped
    assert sorted(again.games) == [0, 1] and again.games[1].record.score == 1
    again.append([2, 3], 2.0, [game(2), game(3)])
    assert sorted(Journal(tmp_path, "lbs-1", {"mode": "lbs-1"}).games) == [0, 1, 2, 3]


def _torn_open(real):
    """open() whose binary writes stop half-way with ENOSPC (a line torn by a full disk)."""
    return _tearing(real, lambda mode: "b" in mode and any(c in mode for c in "wa+"))


def test_a_stop_during_the_best_write_keeps_the_old_best(tmp_path, monkeypatch):
    """Blueprint: a signal while best.pt is written leaves the best value as it was (best.pt's), so the
    latest.pt written on the way out never claims a best that no file holds."""
    sys.path.insert(0, str(ROOT / "tests" / "rl"))
    from test_blueprint import micro_config

    from lbs.rl.trainer import Trainer

    t = Trainer(micro_config(tmp_path), progress=False)
    real = ckpt.save

    def save(path, kind, payload):
        if Path(path).name == "best.pt":
            raise KeyboardInterrupt  # Ctrl-C (or SIGTERM's Stopped) mid-write
        return real(path, kind, payload)

    monkeypatch.setattr(ckpt, "save", save)
    run = SimpleNamespace(summary={})
    with pytest.raises(KeyboardInterrupt):
        t._evaluate_and_keep_best(4, 0.0, SimpleNamespace(write=lambda s: None), run)
    assert t.record.best == -math.inf and not (tmp_path / "run" / "best.pt").exists()
    assert ckpt.load(t.save("latest.pt"), "blueprint")["best"] == -math.inf


def _belief_validation(tmp_path, save_checkpoint):
    """A belief run's validation callback at step 20 that finds NLL 2.0 below the best so far (3.0 at step
    10), writing best.pt with `save_checkpoint`; (callback, module, trainer, lifecycle)."""
    from lbs.belief.trainer import _Validation
    from lbs.runs import Lifecycle

    life = Lifecycle("belief", tmp_path, "step")
    module = SimpleNamespace(best_val=3.0, best_step=10, model=None)
    trainer = SimpleNamespace(global_step=20, logger=None, save_checkpoint=save_checkpoint)
    val = _Validation(lambda m: SimpleNamespace(nll_learned=2.0, nll_counting=0, nll_grounded=0),
                      tmp_path / "best.pt", 10, life)
    return val, module, trainer, life


def test_a_belief_best_write_that_fails_keeps_the_old_best(tmp_path):
    def save_checkpoint(path, weights_only=False):
        raise ckpt.SaveError(f"could not write {path}: No space left on device; nothing was written")

    val, module, trainer, life = _belief_validation(tmp_path, save_checkpoint)
    with pytest.raises(ckpt.SaveError):
        val.on_train_batch_end(trainer, module, None, None, 0)
    assert (module.best_val, module.best_step) == (3.0, 10) and life.best_written == ""


def test_a_stop_during_the_belief_best_write_takes_effect_once_best_pt_is_complete(tmp_path, capsys):
    """Ctrl-C arrives while best.pt is written: the write finishes, the new best is recorded, then the stop
    goes on (KeyboardInterrupt) and the closing line names the best that best.pt holds."""
    import signal

    def save_checkpoint(path, weights_only=False):
        os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C mid-write
        best = {"best_nll": module.best_val, "best_step": module.best_step}
        ckpt.save(path, "belief", {"validation": best})

    val, module, trainer, life = _belief_validation(tmp_path, save_checkpoint)
    before = signal.signal(signal.SIGINT, signal.default_int_handler)  # as in a script, whatever runs tests
    try:
        with pytest.raises(KeyboardInterrupt):
            val.on_train_batch_end(trainer, module, None, None, 0)
    finally:
        signal.signal(signal.SIGINT, before)
    assert (module.best_val, module.best_step) == (2.0, 20)
    assert ckpt.load(tmp_path / "best.pt", "belief")["validation"] == {"best_nll": 2.0, "best_step": 20}
    life.end("stopped by Ctrl-C", 20, tmp_path / "latest.pt")
    assert capsys.readouterr().err.strip().endswith(
        "saved " + str(tmp_path / "latest.pt") + "; best.pt holds the best so far (validation NLL per card "
        "2.0000 at step 20)")


def test_a_belief_save_on_a_full_disk_is_never_called_saved(tmp_path):
    from lbs.belief.trainer import _PeriodicCheckpoint

    def save_checkpoint(path, weights_only=False):
        raise ckpt.SaveError(f"could not write {path}: No space left on device; the previous latest.pt is "
                             "intact")

    saver = _PeriodicCheckpoint(tmp_path / "latest.pt", 50)
    saver.saved_step = 50
    trainer = SimpleNamespace(global_step=100, max_steps=1000, save_checkpoint=save_checkpoint)
    with pytest.raises(ckpt.SaveError):
        saver.on_train_batch_end(trainer, None, None, None, 0)
    saver.on_exception(trainer, None, RuntimeError())  # the stop's own save fails too: kept, not raised
    assert saver.saved_step == 50 and "No space left" in str(saver.failed)


def test_a_blueprint_run_on_a_full_disk_says_so_once(tmp_path, monkeypatch, capsys):
    sys.path.insert(0, str(ROOT / "tests" / "rl"))
    from test_blueprint import micro_config

    from lbs.rl.trainer import Trainer

    cfg = micro_config(tmp_path)
    t = Trainer(cfg, progress=False)
    real = ckpt.save

    def save(path, kind, payload):
        if Path(path).name == "latest.pt":
            raise ckpt.SaveError(f"could not write {path}: No space left on device; nothing was written")
        return real(path, kind, payload)

    monkeypatch.setattr(ckpt, "save", save)
    with pytest.raises(ckpt.SaveError) as e:
        t.run()
    assert str(e.value).startswith("finished (6 updates) at update 6, but could not write")
    assert "saved" not in capsys.readouterr().err


def test_journal_lines_are_json(tmp_path):
    from lbs.search.journal import Journal

    j = Journal(tmp_path, "x", {"a": 1})
    j.append([], 0.0, [])
    head, batch = (json.loads(x) for x in j.path.read_text().splitlines())
    assert head["key"] == {"a": 1} and batch["numbers"] == [] and head["settings"] == batch["settings"]
    assert all(len(row["sha256"]) == 64 for row in (head, batch))
