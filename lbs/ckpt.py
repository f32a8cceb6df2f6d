"""Checkpoints: one file, written atomically, that carries its own configs.

A checkpoint alone rebuilds its model (configs are stored as plain dicts next to the weights), so
loading never depends on a command line or a log. Mismatches and corruption raise CheckpointError
with the path and the reason.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path
from typing import Any

import torch

FORMAT_VERSION = 1


class CheckpointError(RuntimeError):
    """A checkpoint is missing, unreadable, of the wrong kind, or for another game config."""


def save(path: str | Path, kind: str, payload: dict[str, Any]) -> Path:
    """Atomically write {kind, format, **payload} to path (temp file + fsync + rename)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    blob = {"kind": kind, "format": FORMAT_VERSION, **payload}
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            torch.save(blob, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return path


def load(
    path: str | Path, kind: str, game: dict | None = None, map_location: str | torch.device = "cpu"
) -> dict:
    """Read a checkpoint of the given kind; if `game` is given, its stored game config must equal it."""
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"checkpoint not found: {path}")
    try:
        blob = torch.load(path, map_location=map_location, weights_only=False)
    except Exception as e:  # torch raises many types for truncated/corrupt files
        raise CheckpointError(f"checkpoint {path} is corrupt or not a torch file: {e}") from e
    if not isinstance(blob, dict) or "kind" not in blob:
        raise CheckpointError(f"{path} is not an lbs checkpoint (no 'kind' field)")
    if blob["kind"] != kind:
        raise CheckpointError(f"{path} holds a {blob['kind']!r} checkpoint, expected {kind!r}")
    if blob.get("format") != FORMAT_VERSION:
        raise CheckpointError(f"{path} has format {blob.get('format')}, this lbs reads {FORMAT_VERSION}")
    if game is not None and blob.get("game") != game:
        raise CheckpointError(f"{path} is for game config {blob.get('game')}, expected {game}")
    return blob


def file_hash(path: str | Path) -> str:
    """sha256 of a file, so a belief checkpoint can name the exact blueprint it was trained for."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def half_state_dict(state_dict: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Floating tensors to fp16 for shipped checkpoints (loading casts back to the model's dtype)."""
    return {k: v.half() if v.is_floating_point() else v for k, v in state_dict.items()}
