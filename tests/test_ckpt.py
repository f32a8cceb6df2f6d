"""Checkpoint files: atomic, self-describing, and loud when wrong."""

import pytest
import torch

from lbs import ckpt


def test_round_trip_and_kind(tmp_path):
    p = ckpt.save(tmp_path / "a.pt", "blueprint", {"game": {"players": 2}, "model": {"w": torch.ones(3)}})
    blob = ckpt.load(p, "blueprint", game={"players": 2})
    assert torch.equal(blob["model"]["w"], torch.ones(3))
    assert not list(tmp_path.glob(".*.tmp")), "temporary file left behind"
    with pytest.raises(ckpt.CheckpointError, match="holds a 'blueprint' checkpoint, expected 'belief'"):
        ckpt.load(p, "belief")


def test_missing_corrupt_and_wrong_game(tmp_path):
    with pytest.raises(ckpt.CheckpointError, match="not found"):
        ckpt.load(tmp_path / "nope.pt", "blueprint")
    bad = tmp_path / "bad.pt"
    bad.write_bytes(b"this is not a checkpoint")
    with pytest.raises(ckpt.CheckpointError, match="corrupt"):
        ckpt.load(bad, "blueprint")
    p = ckpt.save(tmp_path / "a.pt", "blueprint", {"game": {"players": 2}})
    truncated = tmp_path / "trunc.pt"
    truncated.write_bytes(p.read_bytes()[:40])
    with pytest.raises(ckpt.CheckpointError, match="corrupt"):
        ckpt.load(truncated, "blueprint")
    with pytest.raises(ckpt.CheckpointError, match="for game config"):
        ckpt.load(p, "blueprint", game={"players": 3})
    torch.save({"weights": 1}, tmp_path / "foreign.pt")
    with pytest.raises(ckpt.CheckpointError, match="not an lbs checkpoint"):
        ckpt.load(tmp_path / "foreign.pt", "blueprint")


def test_failed_write_keeps_old_file(tmp_path):
    p = ckpt.save(tmp_path / "a.pt", "blueprint", {"v": 1})

    class Boom:
        def __reduce__(self):
            raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        ckpt.save(p, "blueprint", {"v": Boom()})
    assert ckpt.load(p, "blueprint")["v"] == 1
    assert not list(tmp_path.glob(".*.tmp"))


def test_half_state_dict_and_hash(tmp_path):
    sd = ckpt.half_state_dict({"w": torch.ones(2), "n": torch.tensor([3])})
    assert sd["w"].dtype == torch.float16 and sd["n"].dtype == torch.long
    f = tmp_path / "x"
    f.write_bytes(b"abc")
    assert ckpt.file_hash(f) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
