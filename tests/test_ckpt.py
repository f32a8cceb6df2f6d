"""Checkpoint files: atomic, self-describing, and loud when wrong."""

import os

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


def test_flipped_bytes_are_caught_before_loading(tmp_path):
    p = ckpt.save(tmp_path / "a.pt", "blueprint", {"model": {"w": torch.arange(4096.0)}})
    data = bytearray(p.read_bytes())
    data[len(data) // 2] ^= 0xFF  # inside the weights: torch alone would load wrong values silently
    p.write_bytes(bytes(data))
    with pytest.raises(ckpt.CheckpointError, match="corrupt: its content does not match the sha256"):
        ckpt.load(p, "blueprint")


class _Hostile:
    def __reduce__(self):
        return (print, ("pwned",))


def test_hostile_file_is_refused_not_run(tmp_path, capsys):
    legacy = {"kind": "blueprint", "format": 1, "x": _Hostile()}
    for name, write in [("legacy.pt", lambda p: torch.save(legacy, p)),
                        ("hashed.pt", lambda p: ckpt.save(p, "blueprint", {"x": _Hostile()}))]:
        p = tmp_path / name
        write(p)
        with pytest.raises(ckpt.CheckpointError, match="refused to load") as e:
            ckpt.load(p, "blueprint")
        assert "pwned" not in capsys.readouterr().out
        assert "weights_only" not in str(e.value) and len(str(e.value).splitlines()) == 1  # never "run it"


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf")])
def test_non_finite_weights_are_refused_at_load(tmp_path, bad):
    good = {"w": torch.ones(3), "steps": torch.arange(3)}
    ckpt.save(tmp_path / "ok.pt", "blueprint", {"model": good, "best": -float("inf")})  # a -inf best is data
    assert ckpt.load(tmp_path / "ok.pt", "blueprint")["best"] == -float("inf")
    for key in ("model", "target", "state_dict"):
        p = ckpt.save(tmp_path / f"{key}.pt", "blueprint", {key: {**good, "w": torch.tensor([1.0, bad])}})
        with pytest.raises(ckpt.CheckpointError, match=f"non-finite weights \\(NaN or Inf\\) in {key}.w"):
            ckpt.load(p, "blueprint")


def test_legacy_format_still_loads_with_weights_only(tmp_path):
    torch.save({"kind": "blueprint", "format": 1, "model": {"w": torch.ones(2)}}, tmp_path / "old.pt")
    assert torch.equal(ckpt.load(tmp_path / "old.pt", "blueprint")["model"]["w"], torch.ones(2))
    assert ckpt.read_header(tmp_path / "old.pt") is None


def test_permissions_and_stale_temp_files(tmp_path):
    stale = tmp_path / ".a.pt.abc123.tmp"  # what a writer killed mid-write leaves
    stale.write_bytes(b"half a file")
    p = ckpt.save(tmp_path / "a.pt", "blueprint", {"v": 1})
    assert not stale.exists()
    mask = os.umask(0)
    os.umask(mask)
    assert p.stat().st_mode & 0o777 == 0o666 & ~mask
    assert ckpt.read_header(p)["kind"] == "blueprint"


def test_a_path_that_cannot_be_read_is_one_line_naming_it(tmp_path):
    """A folder, a FIFO (reading one would block) and a file this process may not read: refused before any
    read, whoever runs it (root reads past a chmod 000, not past a write-only /proc file)."""
    fifo = tmp_path / "fifo.pt"
    os.mkfifo(fifo)
    locked = tmp_path / "locked.pt"
    ckpt.save(locked, "blueprint", {"v": 1}).chmod(0)
    try:
        locked.open("rb").close()
        locked = "/proc/sys/vm/drop_caches"  # root: a file that not even root may read
    except PermissionError:
        pass
    for path, why in ((tmp_path, "is a folder, not a file"), (fifo, "is not a regular file"),
                      (locked, "Permission denied")):
        for read in (lambda p: ckpt.load(p, "blueprint"), ckpt.file_hash):
            with pytest.raises(ckpt.CheckpointError, match=why) as e:
                read(path)
            assert str(path) in str(e.value) and len(str(e.value).splitlines()) == 1
