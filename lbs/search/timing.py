"""Where a search run's time goes, measured only when profiling."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import torch


@dataclass
class Timing:
    """Seconds spent, by kind (measured only when profiling; CUDA is synchronised around each part)."""

    networks: float = 0.0
    """blueprint forward passes (real games and rollouts)"""
    sampler: float = 0.0
    """the hand sampler: following the real games (belief encoder steps; range updates and counterfactual
    filters) and drawing hands"""
    rollouts: float = 0.0
    """rollouts, networks included"""
    drawing: float = 0.0
    """the part of `sampler` spent drawing hands for searched moves (SPARTA: with the deferred counterfactual
    filters of the searched games, which run there)"""
    cpu: bool = False
    """read the calling thread's CPU time instead of the wall clock: with one torch thread on a CPU these are
    core-seconds, unaffected by other jobs sharing the machine"""

    def clock(self) -> float:
        if self.cpu:
            return time.thread_time()
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        return time.perf_counter()

    def add(self, t0: float, *what: str) -> None:
        """The time since t0 (one clock read) added to each of `what`."""
        dt = self.clock() - t0
        for name in what:
            vars(self)[name] += dt

    def wrap(self, fn: Callable, what: str = "networks") -> Callable:
        """fn, with its wall time added to `what`."""

        def run(*a, **kw):
            t0 = self.clock()
            out = fn(*a, **kw)
            self.add(t0, what)
            return out

        return run
