"""Checkpoints: one file, written atomically, that carries its own configs and is never trusted blindly.

A checkpoint alone rebuilds its model (configs are stored as plain dicts next to the weights), so
loading never depends on a command line or a log. The file is a short readable header line, then a
torch payload:

    LBSCKPT {"kind": "blueprint", "format": 2, "sha256": "...", "bytes": N}\\n<torch.save bytes>

The sha256 covers the payload, so a flipped byte is caught before anything is unpickled, and the
payload is read with `weights_only=True` (plus an allowlist, `SAFE_GLOBALS`), so a hostile file cannot
run code when loaded. Mismatches, corruption and refused files raise CheckpointError with the path and
the reason. Files of format 1 (a bare torch file, no hash) still load, also with weights_only.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import pickle
import stat
import tempfile
from pathlib import Path
from typing import Any

import torch

FORMAT_VERSION = 2
LEGACY_FORMATS = (1,)
MAGIC = b"LBSCKPT "
SAFE_GLOBALS: list = []
"""Extra types a checkpoint may contain beyond weights_only's tensors and plain containers (none today:
payloads hold configs as dicts). Add a project type here, never a callable."""


class CheckpointError(RuntimeError):
    """A checkpoint is missing, unreadable, refused, of the wrong kind, or for another game config."""


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _remove_stale_temps(path: Path) -> None:
    """Temp files of a writer that was killed mid-write (the rename never happened); safe because one
    process at a time owns a run folder (lbs.runs locks it)."""
    for tmp in path.parent.glob(f".{path.name}.*.tmp"):
        tmp.unlink(missing_ok=True)


class SaveError(CheckpointError):
    """A file could not be written (disk full, no permission): the previous file at that path is intact."""


def write_atomic(path: str | Path, *parts: bytes) -> Path:
    """Write `parts` to path atomically (temp file in the same folder + fsync + rename): a reader sees the
    old file or the new one, never a torn one. A failure (ENOSPC, EACCES, ...) removes the temp file and
    raises SaveError in one line saying the previous file is intact. The file gets the usual permissions
    (0666 minus the umask), not the temp file's 0600."""
    path = Path(path)
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        os.fchmod(fd, 0o666 & ~_umask())
        with os.fdopen(fd, "wb") as f:
            for part in parts:
                f.write(part)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as e:
        if tmp is not None and os.path.exists(tmp):
            os.unlink(tmp)
        kept = f"the previous {path.name} is intact" if path.exists() else "nothing was written"
        raise SaveError(f"could not write {path}: {e.strerror or e}; {kept}") from None
    except BaseException:
        if tmp is not None and os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return path


def save(path: str | Path, kind: str, payload: dict[str, Any]) -> Path:
    """Atomically write {kind, format, **payload} with its sha256 to path (write_atomic)."""
    path = Path(path)
    buf = io.BytesIO()
    torch.save({"kind": kind, "format": FORMAT_VERSION, **payload}, buf)
    body = buf.getvalue()
    header = {"kind": kind, "format": FORMAT_VERSION, "sha256": hashlib.sha256(body).hexdigest(),
              "bytes": len(body)}
    if path.parent.is_dir():
        _remove_stale_temps(path)
    return write_atomic(path, MAGIC + json.dumps(header).encode() + b"\n", body)


def read_file(path: str | Path, what: str = "checkpoint", head: int | None = None) -> bytes:
    """The bytes of a file the user named (`what` it should be, for the message): a missing path, a folder,
    something other than a regular file (a FIFO, a device: reading it could block or never end) or a file
    this process may not read is a CheckpointError in one line. The read itself decides readability, not
    the permission bits (root reads a chmod 000 file; nobody reads a write-only /proc file)."""
    path = Path(path)
    try:
        mode = os.stat(path).st_mode
    except (FileNotFoundError, NotADirectoryError):
        raise CheckpointError(f"{what} not found: {path}") from None
    except OSError as e:
        raise CheckpointError(f"cannot read {what} {path}: {e.strerror or e}") from None
    if stat.S_ISDIR(mode):
        raise CheckpointError(f"{what} {path} is a folder, not a file")
    if not stat.S_ISREG(mode):
        raise CheckpointError(f"{what} {path} is not a regular file")
    try:
        if head is None:
            return path.read_bytes()
        with path.open("rb") as f:  # the first `head` bytes alone (a header, not the weights)
            return f.read(head)
    except OSError as e:
        raise CheckpointError(f"cannot read {what} {path}: {e.strerror or e}") from None


HEADER_MAX = 4096
"""Bytes of a header line read as JSON (a header is a few hundred)."""


def _split_header(path: Path, data: bytes) -> tuple[dict | None, bytes]:
    """(the JSON header of a format-2 file, its payload), or (None, the whole file) for a legacy one."""
    if not data.startswith(MAGIC):
        return None, data
    line, _, body = data[len(MAGIC):].partition(b"\n")
    try:
        header = json.loads(line[:HEADER_MAX])
    except ValueError as e:
        raise CheckpointError(f"checkpoint {path} has a corrupt header: {e}") from e
    if not isinstance(header, dict):
        raise CheckpointError(f"checkpoint {path} has a corrupt header: not a JSON object")
    return header, body


def read_header(path: str | Path) -> dict | None:
    """The JSON header of a format-2 file (kind, format, sha256, bytes), or None for a legacy file."""
    return _split_header(Path(path), read_file(path, head=len(MAGIC) + HEADER_MAX + 1))[0]


def _unpickle(path: Path, data: bytes, map_location) -> Any:
    try:
        with torch.serialization.safe_globals(SAFE_GLOBALS):
            return torch.load(io.BytesIO(data), map_location=map_location, weights_only=True)
    except pickle.UnpicklingError:
        raise CheckpointError(
            f"refused to load {path}: it contains objects other than tensors and plain data, which could "
            "run code when loaded; use a checkpoint written by lbs") from None
    except Exception as e:  # torch raises many types for truncated/corrupt files
        raise CheckpointError(f"checkpoint {path} is corrupt or not a torch file: {e}") from e


def load(
    path: str | Path, kind: str, game: dict | None = None, map_location: str | torch.device = "cpu"
) -> dict:
    """Read a checkpoint of the given kind; if `game` is given, its stored game config must equal it.
    The content hash is verified before the payload is read; nothing but weights and plain data loads."""
    path = Path(path)
    header, body = _split_header(path, read_file(path))
    if header is not None:
        if header.get("format") != FORMAT_VERSION:
            raise CheckpointError(f"{path} has format {header.get('format')}, this lbs reads "
                                  f"{FORMAT_VERSION}")
        if len(body) != header.get("bytes") or hashlib.sha256(body).hexdigest() != header.get("sha256"):
            raise CheckpointError(f"checkpoint {path} is corrupt: its content does not match the sha256 in "
                                  "its header (truncated or modified after it was written)")
    blob = _unpickle(path, body, map_location)
    if not isinstance(blob, dict) or "kind" not in blob:
        raise CheckpointError(f"{path} is not an lbs checkpoint (no 'kind' field)")
    if blob["kind"] != kind:
        raise CheckpointError(f"{path} holds a {blob['kind']!r} checkpoint, expected {kind!r}")
    fmt = blob.get("format")
    if fmt != FORMAT_VERSION and not (header is None and fmt in LEGACY_FORMATS):
        raise CheckpointError(f"{path} has format {fmt}, this lbs reads {FORMAT_VERSION}")
    if game is not None and blob.get("game") != game:
        raise CheckpointError(f"{path} is for game config {blob.get('game')}, expected {game}")
    _check_finite(path, blob)
    return blob


WEIGHT_KEYS = ("model", "target", "state_dict")
"""Payload fields that hold a model's weights (blueprint: model and target; belief: Lightning's
state_dict)."""


def _check_finite(path: Path, blob: dict) -> None:
    """Weights with NaN or Inf are refused: such a model plays (or samples) nonsense without failing."""
    for key in WEIGHT_KEYS:
        weights = blob.get(key)
        if not isinstance(weights, dict):
            continue
        for name, t in weights.items():
            if isinstance(t, torch.Tensor) and t.is_floating_point() and not bool(torch.isfinite(t).all()):
                raise CheckpointError(f"checkpoint {path} has non-finite weights (NaN or Inf) in "
                                      f"{key}.{name}: refused (the run that wrote it diverged)")


def file_hash(path: str | Path, what: str = "checkpoint") -> str:
    """sha256 of a file, so a belief checkpoint can name the exact blueprint it was trained for; a file that
    cannot be read is a CheckpointError naming it as `what` (read_file)."""
    return hashlib.sha256(read_file(path, what)).hexdigest()


def half_state_dict(state_dict: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Floating tensors to fp16 for shipped checkpoints (loading casts back to the model's dtype)."""
    return {k: v.half() if v.is_floating_point() else v for k, v in state_dict.items()}
