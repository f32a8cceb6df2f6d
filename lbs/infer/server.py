"""InferenceServer: the one owner of model weights on the device.

Training actors, evaluation and search call models through it, by typed handles (`server.qnet().step`,
`server.belief().sample`). It holds two copies of every model (lbs.infer.weights), so the learner swaps
in new weights atomically and a forward pass never sees half-loaded ones. A call runs inline in its
caller's thread; with ServerConfig.coalesce a worker thread merges concurrent callers' calls into one
forward pass instead (lbs.infer.merging), which pays only when several threads call at once.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any, TypeVar

import torch
from torch import nn

from .handles import BeliefHandle, ModelHandle, QNetHandle
from .merging import Merger, ServerStats, batch_signature, to_device
from .weights import PRECISIONS, Weights, capturing

QNET = "qnet"
"""Name of the blueprint in a server (the model passed to InferenceServer)."""
BELIEF = "belief"
"""Name of the belief model in a server that serves one (search's LBS)."""
H = TypeVar("H", bound=ModelHandle)


@dataclass
class ServerConfig:
    """How the server batches and computes."""

    max_batch: int = 16384
    """most rows merged into one forward pass (a single larger request still runs, alone)"""
    coalesce: bool = False
    """run a background worker that merges concurrent callers' calls (several threads calling at once);
    False: every call runs inline in its caller's thread"""
    precision: str = "fp32"
    """fp32 (on CUDA cuDNN's TF32 default is turned off for the server's passes, so the LSTM is fp32 too);
    tf32 (CUDA matmuls and cuDNN in TF32); bf16 (autocast, results in fp32). Torch's process-wide TF32 flags
    are set only while this server runs a forward pass and restored after"""
    poll_s: float = 1.0
    """how often a caller waiting on the merging worker checks that it is still alive"""

    def __post_init__(self) -> None:
        if not isinstance(self.max_batch, int) or self.max_batch < 1:
            raise ValueError(f"ServerConfig.max_batch={self.max_batch!r}: must be an int >= 1")
        if self.precision not in PRECISIONS:
            raise ValueError(f"ServerConfig.precision={self.precision!r}: must be one of {PRECISIONS}")
        if not self.poll_s > 0:
            raise ValueError(f"ServerConfig.poll_s={self.poll_s!r}: must be > 0")


class InferenceServer:
    """Serves registered modules on one device; `model` (optional) is registered as QNET.

    Use as a context manager, or call close(). All methods are thread-safe.
    """

    def __init__(self, model: nn.Module | None = None, device: torch.device | str = "cpu",
                 cfg: ServerConfig | None = None):
        self.cfg = ServerConfig() if cfg is None else cfg
        self.device = torch.device(device)
        self.stats = ServerStats()
        self.weights = Weights(self.device, self.cfg.precision)
        self._lock = threading.Lock()  # orders close() after every accepted submit
        self._closed = False
        self._handles: dict[tuple[type, str], ModelHandle] = {}
        if model is not None:
            self.register(QNET, model)
        self._merger = Merger(self.weights, self.stats, self.cfg.max_batch, self.cfg.poll_s) \
            if self.cfg.coalesce else None

    # ---- models and their handles ------------------------------------------------------------------
    def register(self, name: str, module: nn.Module) -> None:
        """Take a copy of `module` (the caller keeps theirs) onto the device, in eval mode, no grads."""
        self.weights.register(name, module)

    def qnet(self, name: str = QNET) -> QNetHandle:
        """The Q-network registered as `name`."""
        return self._handle(QNetHandle, name)

    def belief(self, name: str = BELIEF) -> BeliefHandle:
        """The belief model registered as `name`."""
        return self._handle(BeliefHandle, name)

    def module(self, name: str) -> ModelHandle:
        """Any module registered as `name`, called by its forward pass."""
        return self._handle(ModelHandle, name)

    def _handle(self, kind: type[H], name: str) -> H:
        """One handle per kind and name (made once: making one checks the module's methods)."""
        with self._lock:
            handle = self._handles.get((kind, name))
        if handle is None:
            handle = kind(self, name)
            with self._lock:
                handle = self._handles.setdefault((kind, name), handle)
        return handle

    # ---- weights -----------------------------------------------------------------------------------
    def update_weights(self, state_dict: dict[str, torch.Tensor], name: str = QNET) -> int:
        """Load new weights atomically (see Weights.update); returns the new version."""
        return self.weights.update(name, state_dict)

    @property
    def version(self) -> int:
        """Weight version of QNET (0 as registered, +1 per update)."""
        return self.version_of(QNET)

    def version_of(self, name: str) -> int:
        return self.weights.version(name)

    @contextlib.contextmanager
    def pinned(self, name: str = QNET) -> Iterator[int]:
        """Hold the copy of the weights served now for a block, and yield which copy it is (0 or 1).

        A captured CUDA graph keeps reading the copy it was captured with, outside any call: its cache
        keys on this index, and the pin keeps a weight update from loading into that copy meanwhile."""
        with self.weights.pinned(name) as (_, i):
            yield i

    def state_dict(self, name: str = QNET) -> dict[str, torch.Tensor]:
        """A copy of the weights being served."""
        return self.weights.state_dict(name)

    # ---- calls (handles use these) -----------------------------------------------------------------
    def call(self, name: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """fn(module `name`, *args, **kwargs): merged with concurrent calls when a merging worker runs,
        else inline. A call made while this thread captures a CUDA graph runs inline: the capture must
        record its kernels (queued to the worker they would run once, outside the graph, and every replay
        would reuse stale outputs)."""
        if self._merger is None or capturing(self.device):
            return self.run_inline(name, fn, *args, **kwargs)
        return self._merger.wait(self.submit(name, fn, *args, **kwargs))

    def run_inline(self, name: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Run in the caller's thread, never merged (single-threaded use, or calls that must not wait)."""
        self._check_open()
        rows, _ = batch_signature(args)
        out = self.weights.run(name, fn, to_device(args, self.device), kwargs)
        self.stats.add(1, 1, rows)
        return out

    def submit(self, name: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Future:
        """Queue a call for the merging worker; the Future holds the caller's own rows of the result.

        The arguments are read when the batch runs: do not modify them until the Future is done.
        """
        if self._merger is None:
            raise RuntimeError("submit needs ServerConfig.coalesce=True (no merging worker runs)")
        with self._lock:
            self._check_open()
            self.weights.version(name)  # an unknown name fails here, in the caller's thread
            return self._merger.submit(name, fn, args, kwargs)

    # ---- lifecycle -------------------------------------------------------------------------------
    def close(self, timeout: float | None = None) -> None:
        """Serve what is queued, then stop the worker. Later calls raise RuntimeError."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        if self._merger is not None:
            self._merger.stop(timeout)

    @property
    def closed(self) -> bool:
        return self._closed

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError("InferenceServer is closed")

    def __enter__(self) -> InferenceServer:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
