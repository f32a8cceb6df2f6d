"""The served weights: every registered model held twice on the device (double buffer), swapped atomically.

Readers pin the current copy for the length of a forward pass (or a captured CUDA graph's life); an update
loads the spare copy once nobody reads it and then makes it current, so a pass never sees half-loaded
weights. Forward passes run here under the server's precision (fp32, tf32 or bf16 autocast).
"""

from __future__ import annotations

import contextlib
import copy
import threading
from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch import nn

PRECISIONS = ("fp32", "tf32", "bf16")


class _Slot:
    """A model held twice (double buffer): callers read `current`, updates load the other copy.

    On CUDA, readers and the updater may run on different streams (the trainer's actor thread has its
    own), and a reader's release only means its kernels were queued: events order the GPU work too. A
    reader waits for the load of its copy (`loaded`); a load waits for every stream's last read of the
    copy it overwrites (`read`, one event per stream, the newest)."""

    def __init__(self, module: nn.Module):
        self.buffers = [module, _copy_module(module)]
        self.readers = [0, 0]
        self.current = 0
        self.version = 0
        self.update_lock = threading.Lock()  # one weight update at a time per model
        self.loaded: list[torch.cuda.Event | None] = [None, None]
        self.read: list[dict[int, torch.cuda.Event]] = [{}, {}]


class Weights:
    """The device's copies of every registered model. Thread-safe."""

    def __init__(self, device: torch.device, precision: str = "fp32"):
        self.device, self.precision = device, precision
        self._slots: dict[str, _Slot] = {}
        self._cond = threading.Condition()  # guards slot readers / current / version

    def register(self, name: str, module: nn.Module) -> None:
        """Take a copy of `module` (the caller keeps theirs) onto the device, in eval mode, no grads."""
        own = copy.deepcopy(module).to(self.device).eval().requires_grad_(False)
        _flatten_rnns(own)
        with self._cond:
            if name in self._slots:
                raise ValueError(f"a model is already registered as {name!r}")
            self._slots[name] = _Slot(own)

    def names(self) -> list[str]:
        with self._cond:
            return sorted(self._slots)

    def update(self, name: str, state_dict: dict[str, torch.Tensor]) -> int:
        """Load new weights atomically; returns the new version.

        The spare copy is loaded once no forward pass still reads it, then becomes current under the
        lock: every forward pass uses exactly one version. A failed load (wrong keys or shapes)
        raises here and leaves the served weights untouched.
        """
        slot = self._slot(name)
        with slot.update_lock:
            with self._cond:
                spare = 1 - slot.current
                self._cond.wait_for(lambda: slot.readers[spare] == 0)
                reads, slot.read[spare] = slot.read[spare], {}
            cuda = self.device.type == "cuda"
            for ev in reads.values():  # GPU-side waits: the learner's thread does not block
                torch.cuda.current_stream(self.device).wait_event(ev)
            slot.buffers[spare].load_state_dict(state_dict)
            if cuda:
                slot.loaded[spare] = torch.cuda.Event()
                slot.loaded[spare].record(torch.cuda.current_stream(self.device))
            with self._cond:
                slot.current = spare
                slot.version += 1
                return slot.version

    def version(self, name: str) -> int:
        """Weight version of `name` (0 as registered, +1 per update)."""
        slot = self._slot(name)
        with self._cond:
            return slot.version

    @contextlib.contextmanager
    def pinned(self, name: str) -> Iterator[tuple[nn.Module, int]]:
        """The copy served now and which copy it is (0 or 1), held for the block: no update loads into it
        meanwhile. A captured CUDA graph keeps reading the copy it was captured with, outside any call: its
        cache keys on the index, and the pin keeps that copy whole while it replays."""
        slot, i = self._acquire(name)
        try:
            yield slot.buffers[i], i
        finally:
            self._release(slot, i)

    def state_dict(self, name: str) -> dict[str, torch.Tensor]:
        """A copy of the weights being served."""
        with self.pinned(name) as (module, _):
            return {k: v.detach().clone() for k, v in module.state_dict().items()}

    def run(self, name: str, fn: Callable[..., Any], args: tuple, kwargs: dict) -> Any:
        """fn(module, *args, **kwargs) on the copy served now, without grads, in the server's precision
        (bf16 results come back in fp32)."""
        bf16 = self.precision == "bf16"
        amp = torch.autocast(self.device.type, dtype=torch.bfloat16) if bf16 else contextlib.nullcontext()
        cuda = self.device.type == "cuda"
        flags = tf32_matmuls(self.precision == "tf32") if cuda else contextlib.nullcontext()
        with self.pinned(name) as (module, _), torch.no_grad(), amp, flags:
            out = fn(module, *args, **kwargs)
        return _to_float32(out) if bf16 else out

    # ---- internals -------------------------------------------------------------------------------
    def _slot(self, name: str) -> _Slot:
        slot = self._slots.get(name)
        if slot is None:
            raise ValueError(f"no model registered as {name!r} (registered: {sorted(self._slots)})")
        return slot

    def _acquire(self, name: str) -> tuple[_Slot, int]:
        slot = self._slot(name)
        with self._cond:
            i = slot.current
            slot.readers[i] += 1
            loaded = slot.loaded[i]
        # CUDA: this stream's reads come after the load of these weights. Not inside a capture: the graph's
        # copy is pinned and was loaded before it (a capture may not wait on work outside it)
        if loaded is not None and not capturing(self.device):
            torch.cuda.current_stream(self.device).wait_event(loaded)
        return slot, i

    def _release(self, slot: _Slot, i: int) -> None:
        done = None
        if self.device.type == "cuda" and not capturing(self.device):  # where this stream's reads of i end
            # (a replay's reads end before the pin that held its copy is released, which marks them)
            stream = torch.cuda.current_stream(self.device)
            done = torch.cuda.Event()
            done.record(stream)
        with self._cond:
            if done is not None:
                slot.read[i][stream.cuda_stream] = done
            slot.readers[i] -= 1
            self._cond.notify_all()


@contextlib.contextmanager
def tf32_matmuls(on: bool = True):
    """CUDA matmuls and cuDNN (the LSTM) in TF32 or not for the duration of the block; the previous flags
    come back after it (torch's flags are process-wide, so a server must not leave them set; cuDNN's
    default is TF32, which an fp32 server turns off)."""
    before = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = on
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = before


def capturing(device: torch.device) -> bool:
    """Whether this thread's current CUDA stream is capturing a graph (no sync: a host-side query)."""
    return device.type == "cuda" and torch.cuda.is_current_stream_capturing()


def same_kind(like, items: list):
    """A tuple/list/NamedTuple of the same type as `like` holding `items`."""
    if isinstance(like, tuple) and hasattr(like, "_fields"):
        return type(like)(*items)
    return type(like)(items)


def _to_float32(out):
    if isinstance(out, torch.Tensor):
        return out.float() if out.is_floating_point() else out
    if isinstance(out, (tuple, list)):
        return same_kind(out, [_to_float32(x) for x in out])
    return out


def _flatten_rnns(module: nn.Module) -> None:
    """Re-pack cuDNN RNN weights after a copy (avoids a warning and a slow path on CUDA)."""
    for m in module.modules():
        if isinstance(m, nn.RNNBase):
            m.flatten_parameters()


def _copy_module(module: nn.Module) -> nn.Module:
    twin = copy.deepcopy(module)
    _flatten_rnns(twin)
    return twin
