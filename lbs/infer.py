"""InferenceServer: the one owner of model weights on the device.

Actors, evaluation and search call models through it. Calls from several threads are coalesced
into one forward pass (concatenated along the batch, run once, split back), and the learner swaps
in new weights atomically, so a forward pass never sees half-loaded weights.

Batching rule for `call` arguments and results: a Tensor has its batch on dim 0; a tuple of
tensors (a recurrent state such as models.qnet.HiddenState) has it on dim 1; None passes through; other
constants go in keyword arguments (requests are merged only when those are equal).
"""

from __future__ import annotations

import contextlib
import copy
import queue
import threading
from collections import deque
from collections.abc import Sequence
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from .acting import epsilon_greedy
from .models.qnet import HiddenState

DEFAULT = "qnet"
PRECISIONS = ("fp32", "tf32", "bf16")


@dataclass
class ServerConfig:
    """How the server batches and computes."""

    max_batch: int = 16384
    """most rows merged into one forward pass (a single larger request still runs, alone)"""
    coalesce: bool = True
    """run a background worker that merges concurrent calls; False: every call runs in its caller's thread"""
    precision: str = "fp32"
    """fp32 (on CUDA cuDNN's TF32 default is turned off for the server's passes, so the LSTM is fp32 too);
    tf32 (CUDA matmuls and cuDNN in TF32); bf16 (autocast, results in fp32). Torch's process-wide TF32 flags
    are set only while this server runs a forward pass and restored after"""
    poll_s: float = 1.0
    """how often a waiting caller checks that the worker is still alive"""

    def __post_init__(self) -> None:
        if not isinstance(self.max_batch, int) or self.max_batch < 1:
            raise ValueError(f"ServerConfig.max_batch={self.max_batch!r}: must be an int >= 1")
        if self.precision not in PRECISIONS:
            raise ValueError(f"ServerConfig.precision={self.precision!r}: must be one of {PRECISIONS}")
        if not self.poll_s > 0:
            raise ValueError(f"ServerConfig.poll_s={self.poll_s!r}: must be > 0")


@dataclass
class ServerStats:
    """Counters since start: forward passes run, requests served, rows computed."""

    batches: int = 0
    requests: int = 0
    rows: int = 0


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


@dataclass
class _Request:
    name: str
    method: str
    args: tuple
    kwargs: dict
    rows: int
    key: Any
    future: Future = field(default_factory=Future)


_STOP = object()


class InferenceServer:
    """Serves registered modules on one device; `model` (optional) is registered as "qnet".

    Use as a context manager, or call close(). All methods are thread-safe.
    """

    def __init__(self, model: nn.Module | None = None, device: torch.device | str = "cpu",
                 cfg: ServerConfig | None = None):
        self.cfg = ServerConfig() if cfg is None else cfg
        self.device = torch.device(device)
        self.stats = ServerStats()
        self._slots: dict[str, _Slot] = {}
        self._cond = threading.Condition()  # guards slot readers / current / version and stats
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._submit_lock = threading.Lock()
        self._closed = False
        self._worker: threading.Thread | None = None
        if model is not None:
            self.register(DEFAULT, model)
        if self.cfg.coalesce:
            # OpenMP's thread count is per thread: the worker takes its creator's (torch.set_num_threads
            # in the creating thread, e.g. one per process under DDP, would not reach it otherwise)
            self._threads = torch.get_num_threads()
            self._worker = threading.Thread(target=self._loop, name="lbs-inference", daemon=True)
            self._worker.start()

    # ---- models and weights ----------------------------------------------------------------------
    def register(self, name: str, module: nn.Module) -> None:
        """Take a copy of `module` (the caller keeps theirs) onto the device, in eval mode, no grads."""
        own = copy.deepcopy(module).to(self.device).eval().requires_grad_(False)
        _flatten_rnns(own)
        with self._cond:
            if name in self._slots:
                raise ValueError(f"a model is already registered as {name!r}")
            self._slots[name] = _Slot(own)

    def update_weights(self, state_dict: dict[str, torch.Tensor], name: str = DEFAULT) -> int:
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

    @property
    def version(self) -> int:
        """Weight version of "qnet" (0 as registered, +1 per update)."""
        return self.version_of(DEFAULT)

    @contextlib.contextmanager
    def pinned(self, name: str = DEFAULT):
        """Hold the copy of the weights served now for a block, and yield which copy it is (0 or 1).

        A captured CUDA graph keeps reading the copy it was captured with, outside any call: its cache
        keys on this index, and the pin keeps a weight update from loading into that copy meanwhile."""
        slot, i = self._acquire(name)
        try:
            yield i
        finally:
            self._release(slot, i)

    def version_of(self, name: str) -> int:
        slot = self._slot(name)
        with self._cond:
            return slot.version

    def state_dict(self, name: str = DEFAULT) -> dict[str, torch.Tensor]:
        """A copy of the weights being served."""
        slot, i = self._acquire(name)
        try:
            return {k: v.detach().clone() for k, v in slot.buffers[i].state_dict().items()}
        finally:
            self._release(slot, i)

    # ---- Q-network shortcuts ---------------------------------------------------------------------
    def initial_state(self, batch: int, name: str = DEFAULT) -> HiddenState:
        slot, i = self._acquire(name)
        try:
            return slot.buffers[i].initial_state(batch, self.device)
        finally:
            self._release(slot, i)

    def q(self, priv: torch.Tensor, publ: torch.Tensor, legal: torch.Tensor, hid: tuple,
          name: str = DEFAULT) -> tuple[torch.Tensor, HiddenState]:
        """Q-values and next state: one step ([B, D] inputs) or sequences ([B, T, D])."""
        return self.call(name, "step" if legal.dim() == 2 else "forward", priv, publ, legal, hid)

    def step(self, priv: torch.Tensor, publ: torch.Tensor, legal: torch.Tensor, hid: tuple,
             name: str = DEFAULT) -> tuple[torch.Tensor, HiddenState]:
        """One step: [B, D] inputs -> (q [B, A], hid)."""
        return self.call(name, "step", priv, publ, legal, hid)

    def act(
        self,
        priv: torch.Tensor,
        publ: torch.Tensor,
        legal: torch.Tensor,
        hid: tuple,
        eps: torch.Tensor | float,
        keys: Sequence[torch.Tensor] | None = None,
        generator: torch.Generator | None = None,
        name: str = DEFAULT,
    ) -> tuple[torch.Tensor, torch.Tensor, HiddenState]:
        """Epsilon-greedy actions [B] over legal moves, with q [B, A] and the next state.

        Only the forward pass is shared with other callers; the exploration draws use this caller's
        keys (hashed counters, see acting.epsilon_greedy) or generator, so they do not depend on batching.
        """
        if legal.dim() != 2:
            raise ValueError(f"act takes one step: legal must be [B, A], got {tuple(legal.shape)}")
        q, hid = self.call(name, "step", priv, publ, legal, hid)
        actions = epsilon_greedy(q, legal.to(q.device), eps, keys=keys, generator=generator)
        return actions, q, hid

    # ---- generic calls ---------------------------------------------------------------------------
    def call(self, name: str, method: str, *args, **kwargs):
        """module.method(*args, **kwargs), merged with concurrent calls when a worker runs. A call made
        while this thread captures a CUDA graph runs here: the capture must record its kernels (queued to
        the worker they would run once, outside the graph, and every replay would reuse stale outputs)."""
        if self._worker is None or _capturing(self.device):
            return self.run_direct(name, method, *args, **kwargs)
        return self._wait(self.submit(name, method, *args, **kwargs))

    def run_direct(self, name: str, method: str, *args, **kwargs):
        """Run in the caller's thread, unbatched (single-threaded use, or calls that must not wait)."""
        self._check_call(name, method)
        rows, _ = _batch_signature(args)
        out = self._run(name, method, _to_device(args, self.device), kwargs)
        self._count(1, 1, rows)
        return out

    def submit(self, name: str, method: str, *args, **kwargs) -> Future:
        """Queue a call for the worker; the Future holds the caller's own rows of the result.

        The arguments are read when the batch runs: do not modify them until the Future is done.
        """
        if self._worker is None:
            raise RuntimeError("submit needs ServerConfig.coalesce=True (no worker is running)")
        self._check_call(name, method)
        rows, sig = _batch_signature(args)
        try:
            consts = tuple(sorted(kwargs.items()))
            hash(consts)
        except TypeError:
            consts = object()  # unhashable constants: never merged with another request
        req = _Request(name, method, args, kwargs, rows, (name, method, sig, consts))
        with self._submit_lock:
            if self._closed:
                raise RuntimeError("InferenceServer is closed")
            self._queue.put(req)
        return req.future

    # ---- lifecycle -------------------------------------------------------------------------------
    def close(self, timeout: float | None = None) -> None:
        """Serve what is queued, then stop the worker. Later calls raise RuntimeError."""
        with self._submit_lock:
            if self._closed:
                return
            self._closed = True
            if self._worker is not None:
                self._queue.put(_STOP)
        if self._worker is not None:
            self._worker.join(timeout)

    @property
    def closed(self) -> bool:
        return self._closed

    def __enter__(self) -> InferenceServer:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ---- internals -------------------------------------------------------------------------------
    def _slot(self, name: str) -> _Slot:
        slot = self._slots.get(name)
        if slot is None:
            raise ValueError(f"no model registered as {name!r} (registered: {sorted(self._slots)})")
        return slot

    def _check_call(self, name: str, method: str) -> None:
        if self._closed:
            raise RuntimeError("InferenceServer is closed")
        module = self._slot(name).buffers[0]
        if method.startswith("_") or not callable(getattr(module, method, None)):
            raise ValueError(f"{type(module).__name__} (served as {name!r}) has no public method {method!r}")

    def _acquire(self, name: str) -> tuple[_Slot, int]:
        slot = self._slot(name)
        with self._cond:
            i = slot.current
            slot.readers[i] += 1
            loaded = slot.loaded[i]
        # CUDA: this stream's reads come after the load of these weights. Not inside a capture: the graph's
        # copy is pinned and was loaded before it (a capture may not wait on work outside it)
        if loaded is not None and not _capturing(self.device):
            torch.cuda.current_stream(self.device).wait_event(loaded)
        return slot, i

    def _release(self, slot: _Slot, i: int) -> None:
        done = None
        if self.device.type == "cuda" and not _capturing(self.device):  # where this stream's reads of i end
            # (a replay's reads end before the pin that held its copy is released, which marks them)
            stream = torch.cuda.current_stream(self.device)
            done = torch.cuda.Event()
            done.record(stream)
        with self._cond:
            if done is not None:
                slot.read[i][stream.cuda_stream] = done
            slot.readers[i] -= 1
            self._cond.notify_all()

    def _count(self, batches: int, requests: int, rows: int) -> None:
        with self._cond:
            self.stats.batches += batches
            self.stats.requests += requests
            self.stats.rows += rows

    def _run(self, name: str, method: str, args: tuple, kwargs: dict):
        slot, i = self._acquire(name)
        try:
            module = slot.buffers[i]
            fn = module if method == "forward" else getattr(module, method)
            bf16 = self.cfg.precision == "bf16"
            amp = torch.autocast(self.device.type, dtype=torch.bfloat16) if bf16 else contextlib.nullcontext()
            cuda = self.device.type == "cuda"
            flags = tf32_matmuls(self.cfg.precision == "tf32") if cuda else contextlib.nullcontext()
            with torch.no_grad(), amp, flags:
                out = fn(*args, **kwargs)
            return _to_float32(out) if bf16 else out
        finally:
            self._release(slot, i)

    def _wait(self, fut: Future):
        while True:
            try:
                return fut.result(timeout=self.cfg.poll_s)
            except FutureTimeout:
                if not fut.done() and (self._worker is None or not self._worker.is_alive()):
                    raise RuntimeError("the inference worker stopped before serving this call") from None

    def _loop(self) -> None:
        """Worker: take the oldest request, merge every queued one with the same signature, run once."""
        torch.set_num_threads(self._threads)
        pending: deque[_Request] = deque()
        stopping = False
        while pending or not stopping:
            if not pending:
                item = self._queue.get()
                if item is _STOP:
                    stopping = True
                    continue
                pending.append(item)
            while True:
                try:
                    item = self._queue.get_nowait()
                except queue.Empty:
                    break
                if item is _STOP:
                    stopping = True
                else:
                    pending.append(item)
            group = self._take_group(pending)
            if group:
                self._execute(group)

    def _take_group(self, pending: deque[_Request]) -> list[_Request]:
        first, group, rest, rows = pending[0], [], [], 0
        for r in pending:
            if r is first or (r.key == first.key and rows + r.rows <= self.cfg.max_batch):
                group.append(r)
                rows += r.rows
            else:
                rest.append(r)
        pending.clear()
        pending.extend(rest)
        return [r for r in group if r.future.set_running_or_notify_cancel()]  # drop cancelled calls

    def _execute(self, group: list[_Request]) -> None:
        """Run a group; on failure run its requests one by one so only the faulty one gets the error."""
        try:
            if len(group) == 1:
                r = group[0]
                outs = [self._run(r.name, r.method, _to_device(r.args, self.device), r.kwargs)]
            else:
                args = _concat([_to_device(r.args, self.device) for r in group])
                out = self._run(group[0].name, group[0].method, args, group[0].kwargs)
                outs = _split(out, [r.rows for r in group])
        except Exception as e:  # every error goes back to the caller(s) that caused it
            if len(group) == 1:
                group[0].future.set_exception(e)
            else:
                for r in group:
                    self._execute([r])
            return
        self._count(1, len(group), sum(r.rows for r in group))
        for r, o in zip(group, outs, strict=True):
            r.future.set_result(o)


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


def _capturing(device: torch.device) -> bool:
    """Whether this thread's current CUDA stream is capturing a graph (no sync: a host-side query)."""
    return device.type == "cuda" and torch.cuda.is_current_stream_capturing()


# ---- batching helpers ----------------------------------------------------------------------------
def _batch_signature(args: tuple) -> tuple[int, tuple]:
    """(rows, signature): rows shared by every batched argument; signature = what must match to merge."""
    rows: int | None = None
    sig: list = []

    def batch(n: int, what: str) -> None:
        nonlocal rows
        if rows is not None and n != rows:
            raise ValueError(f"batched arguments disagree on the batch size: {rows} vs {n} ({what})")
        rows = n

    for j, a in enumerate(args):
        if a is None:
            sig.append(None)
        elif isinstance(a, torch.Tensor):
            if a.dim() < 1:
                raise ValueError(f"argument {j} is a 0-d tensor; constants go in keyword arguments")
            batch(a.shape[0], f"argument {j}, dim 0")
            sig.append(("t", tuple(a.shape[1:]), a.dtype))
        elif isinstance(a, (tuple, list)) and all(isinstance(t, torch.Tensor) and t.dim() >= 2 for t in a):
            for t in a:
                batch(t.shape[1], f"state argument {j}, dim 1")
            sig.append(("s", type(a), tuple((t.shape[0], tuple(t.shape[2:]), t.dtype) for t in a)))
        else:
            raise TypeError(f"argument {j} ({type(a).__name__}) must be a tensor, a tuple of state tensors "
                            "[layers, B, ...] or None; pass constants as keyword arguments")
    if rows is None:
        raise ValueError("a served call needs at least one batched tensor argument")
    return rows, tuple(sig)


def _to_device(args: tuple, device: torch.device) -> tuple:
    def move(a):
        if isinstance(a, torch.Tensor):
            return a.to(device)
        if isinstance(a, (tuple, list)):
            return _same_kind(a, [t.to(device) for t in a])
        return a

    return tuple(move(a) for a in args)


def _same_kind(like, items: list):
    """A tuple/list/NamedTuple of the same type as `like` holding `items`."""
    if isinstance(like, tuple) and hasattr(like, "_fields"):
        return type(like)(*items)
    return type(like)(items)


def _concat(arg_lists: list[tuple]) -> tuple:
    out = []
    for parts in zip(*arg_lists, strict=True):
        a = parts[0]
        if a is None:
            out.append(None)
        elif isinstance(a, torch.Tensor):
            out.append(torch.cat(parts, dim=0))
        else:
            out.append(_same_kind(a, [torch.cat(ts, dim=1) for ts in zip(*parts, strict=True)]))
    return tuple(out)


def _split(out, sizes: list[int]) -> list:
    """Split a result by rows: a Tensor on dim 0, a NamedTuple (HiddenState) as a state on dim 1, a plain
    tuple item by item (its tensors on dim 0, its nested tuples as states on dim 1)."""
    n = len(sizes)

    def state(s) -> list:
        cols = [[p.contiguous() for p in torch.split(t, sizes, dim=1)] for t in s]
        return [_same_kind(s, [c[i] for c in cols]) for i in range(n)]

    def item(x) -> list:
        if x is None:
            return [None] * n
        if isinstance(x, torch.Tensor):
            return list(torch.split(x, sizes, dim=0))
        if isinstance(x, (tuple, list)):
            return state(x)
        raise TypeError(f"cannot split a result of type {type(x).__name__} by rows")

    if isinstance(out, tuple) and not hasattr(out, "_fields"):
        cols = [item(x) for x in out]
        return [tuple(c[i] for c in cols) for i in range(n)]
    return item(out)


def _to_float32(out):
    if isinstance(out, torch.Tensor):
        return out.float() if out.is_floating_point() else out
    if isinstance(out, (tuple, list)):
        return _same_kind(out, [_to_float32(x) for x in out])
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
