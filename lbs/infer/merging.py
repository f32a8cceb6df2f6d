"""Merging concurrent calls: a worker thread concatenates queued requests into one forward pass.

Worth it only when several threads call the same model at once (search's groups); a single caller runs
inline instead (see InferenceServer). Requests merge when they call the same model with the same function,
their batched arguments agree in every dimension but the batch, and their keyword constants are equal.

Batching rule for arguments and results: a Tensor has its batch on dim 0; a tuple of tensors (a recurrent
state) has it on its type's `batch_dim` (HiddenState, and a plain tuple: dim 1, layers first; SmartBotState:
dim 0); None passes through; other constants go in keyword arguments.
"""

from __future__ import annotations

import queue
import threading
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field
from typing import Any

import torch

from ..models.qnet import state_batch_dim
from .weights import Weights, same_kind


@dataclass
class ServerStats:
    """Counters since start: forward passes run, requests served, rows computed."""

    batches: int = 0
    requests: int = 0
    rows: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def add(self, batches: int, requests: int, rows: int) -> None:
        with self.lock:
            self.batches += batches
            self.requests += requests
            self.rows += rows


@dataclass
class _Request:
    name: str
    fn: Callable[..., Any]
    args: tuple
    kwargs: dict
    rows: int
    key: Any
    future: Future = field(default_factory=Future)


_STOP = object()


class Merger:
    """The worker thread: takes the oldest request, merges every queued one with its key, runs them once."""

    def __init__(self, weights: Weights, stats: ServerStats, max_batch: int, poll_s: float):
        self.weights, self.stats, self.max_batch, self.poll_s = weights, stats, max_batch, poll_s
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        # OpenMP's thread count is per thread: the worker takes its creator's (torch.set_num_threads
        # in the creating thread, e.g. one per process under DDP, would not reach it otherwise)
        self._threads = torch.get_num_threads()
        self._worker = threading.Thread(target=self._loop, name="lbs-inference", daemon=True)
        self._worker.start()

    def submit(self, name: str, fn: Callable[..., Any], args: tuple, kwargs: dict) -> Future:
        """Queue fn(model, *args, **kwargs); the Future holds the caller's own rows of the result."""
        rows, sig = batch_signature(args)
        try:
            consts = tuple(sorted(kwargs.items()))
            hash(consts)
        except TypeError:
            consts = object()  # unhashable constants: never merged with another request
        req = _Request(name, fn, args, kwargs, rows, (name, fn, sig, consts))
        self._queue.put(req)
        return req.future

    def wait(self, fut: Future):
        """The Future's result; raises if the worker died before serving it."""
        while True:
            try:
                return fut.result(timeout=self.poll_s)
            except FutureTimeout:
                if not fut.done() and not self._worker.is_alive():
                    raise RuntimeError("the inference worker stopped before serving this call") from None

    def stop(self, timeout: float | None = None) -> None:
        """Serve what is queued, then end the worker."""
        self._queue.put(_STOP)
        self._worker.join(timeout)

    # ---- the worker ------------------------------------------------------------------------------
    def _loop(self) -> None:
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
            if r is first or (r.key == first.key and rows + r.rows <= self.max_batch):
                group.append(r)
                rows += r.rows
            else:
                rest.append(r)
        pending.clear()
        pending.extend(rest)
        return [r for r in group if r.future.set_running_or_notify_cancel()]  # drop cancelled calls

    def _execute(self, group: list[_Request]) -> None:
        """Run a group; on failure run its requests one by one so only the faulty one gets the error."""
        dev = self.weights.device
        try:
            first = group[0]
            if len(group) == 1:
                outs = [self.weights.run(first.name, first.fn, to_device(first.args, dev), first.kwargs)]
            else:
                args = _concat([to_device(r.args, dev) for r in group])
                out = self.weights.run(first.name, first.fn, args, first.kwargs)
                outs = _split(out, [r.rows for r in group])
        except Exception as e:  # every error goes back to the caller(s) that caused it
            if len(group) == 1:
                group[0].future.set_exception(e)
            else:
                for r in group:
                    self._execute([r])
            return
        self.stats.add(1, len(group), sum(r.rows for r in group))
        for r, o in zip(group, outs, strict=True):
            r.future.set_result(o)


# ---- batching helpers ----------------------------------------------------------------------------
def batch_signature(args: tuple) -> tuple[int, tuple]:
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
        elif isinstance(a, (tuple, list)) and all(isinstance(t, torch.Tensor) and t.dim() > state_batch_dim(a)
                                                  for t in a):
            d = state_batch_dim(a)
            for t in a:
                batch(t.shape[d], f"state argument {j}, dim {d}")
            sig.append(("s", type(a), tuple((t.shape[:d] + t.shape[d + 1:], t.dtype) for t in a)))
        else:
            raise TypeError(f"argument {j} ({type(a).__name__}) must be a tensor, a tuple of state tensors "
                            "(batch on its type's batch_dim) or None; pass constants as keyword arguments")
    if rows is None:
        raise ValueError("a served call needs at least one batched tensor argument")
    return rows, tuple(sig)


def to_device(args: tuple, device: torch.device) -> tuple:
    def move(a):
        if isinstance(a, torch.Tensor):
            return a.to(device)
        if isinstance(a, (tuple, list)):
            return same_kind(a, [t.to(device) for t in a])
        return a

    return tuple(move(a) for a in args)


def _concat(arg_lists: list[tuple]) -> tuple:
    out = []
    for parts in zip(*arg_lists, strict=True):
        a = parts[0]
        if a is None:
            out.append(None)
        elif isinstance(a, torch.Tensor):
            out.append(torch.cat(parts, dim=0))
        else:
            d = state_batch_dim(a)
            out.append(same_kind(a, [torch.cat(ts, dim=d) for ts in zip(*parts, strict=True)]))
    return tuple(out)


def _split(out, sizes: list[int]) -> list:
    """Split a result by rows: a Tensor on dim 0, a NamedTuple (a recurrent state) on its type's batch_dim,
    a plain tuple item by item (its tensors on dim 0, its nested tuples as states)."""
    n = len(sizes)

    def state(s) -> list:
        d = state_batch_dim(s)
        cols = [[p.contiguous() for p in torch.split(t, sizes, dim=d)] for t in s]
        return [same_kind(s, [c[i] for c in cols]) for i in range(n)]

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
