"""Typed handles: one object per registered model whose methods are that model's own, run by the server.

`server.qnet().step(...)` reads like `net.step(...)`, and a reader (or a tool) follows it to the function
below that calls `net.step`. Each function here is what the server runs on its copy of the weights; being
one module-level object per method, it is also what lets concurrent calls of the same method merge.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from typing import Any, Protocol

import torch
from torch import nn

from ..belief.sampling import slot_mask
from ..blueprint import Capabilities
from ..models.qnet import HiddenState
from .weights import Weights


class Server(Protocol):
    """What a handle uses of its InferenceServer (a protocol, so this module needs no import of it)."""

    device: torch.device
    weights: Weights

    def call(self, name: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any: ...

    def pinned(self, name: str) -> AbstractContextManager[int]: ...


# ---- what the server runs on its copy (one function per served method) -------------------------------
def _forward(net: nn.Module, *args: Any) -> Any:
    return net(*args)


def _step(net: nn.Module, priv: torch.Tensor, publ: torch.Tensor, legal: torch.Tensor, hid: tuple):
    return net.step(priv, publ, legal, hid)


def _moves(net: nn.Module, priv: torch.Tensor, publ: torch.Tensor, legal: torch.Tensor, hid: tuple, *,
           values: bool):
    return net.moves(priv, publ, legal, hid, values)


def _public_out(net: nn.Module, publ: torch.Tensor, hid: tuple):
    return net.public_out(publ, hid)


def _q_from_public(net: nn.Module, priv: torch.Tensor, publ_out: torch.Tensor, legal: torch.Tensor):
    return net.q_from_public(priv, publ_out, legal)


def _encode(belief: nn.Module, priv: torch.Tensor, hid: tuple | None):
    return belief.encode(priv, hid)


def _sample(belief: nn.Module, context: torch.Tensor, seeds: torch.Tensor, hand_len: torch.Tensor,
            allowed: torch.Tensor | None, unseen: torch.Tensor | None, *, k: int):
    mask = slot_mask(belief.game, allowed, unseen) if allowed is not None or unseen is not None else None
    return belief.sample(context, k, seeds, hand_len, mask_fn=mask)


# ---- handles ------------------------------------------------------------------------------------------
class ModelHandle:
    """A model registered in a server under `name`. Calls run inline in the caller's thread, or merged
    with concurrent callers' when the server runs a merging worker (ServerConfig.coalesce)."""

    requires: tuple[str, ...] = ()
    """methods the registered module must have for this kind of handle"""

    def __init__(self, server: Server, name: str):
        self.server, self.name = server, name
        with self.borrowed() as module:
            has = dir(module)
            missing = [m for m in self.requires if m not in has]
        if missing:
            raise ValueError(f"{type(module).__name__} (served as {name!r}) cannot back a "
                             f"{type(self).__name__}: it has no {', '.join(missing)}")

    def __call__(self, *args: Any) -> Any:
        """The module's forward pass."""
        return self._call(_forward, *args)

    def _call(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        return self.server.call(self.name, fn, *args, **kwargs)

    @contextlib.contextmanager
    def pinned(self) -> Iterator[int]:
        """See InferenceServer.pinned."""
        with self.server.pinned(self.name) as i:
            yield i

    @contextlib.contextmanager
    def borrowed(self) -> Iterator[nn.Module]:
        """The served module itself, pinned for the block, for code that reads its layers (SPARTA's fast
        filter): no merging, no precision context. Do not modify it."""
        with self.server.weights.pinned(self.name) as (module, _):
            yield module


class QNetHandle(ModelHandle):
    """A served Q-network (lbs.models.qnet, or a double): the blueprint's forward passes."""

    requires = ("step", "initial_state")

    @property
    def capabilities(self) -> Capabilities:
        """What the served blueprint declares beyond its step (lbs.blueprint; search checks it at set-up)."""
        with self.borrowed() as net:
            return net.capabilities

    def initial_state(self, batch: int) -> HiddenState:
        """Zero recurrent state for `batch` rows, on the server's device."""
        with self.borrowed() as net:
            return net.initial_state(batch, self.server.device)

    def step(self, priv: torch.Tensor, publ: torch.Tensor, legal: torch.Tensor,
             hid: tuple) -> tuple[torch.Tensor, HiddenState]:
        """One step: [B, D] inputs -> (q [B, A], next state)."""
        return self._call(_step, priv, publ, legal, hid)

    def moves(self, priv: torch.Tensor, publ: torch.Tensor, legal: torch.Tensor, hid: tuple,
              values: bool = True) -> tuple[torch.Tensor, HiddenState]:
        """One step read for its greedy move alone (lbs.blueprint.Blueprint.moves; the served module must
        have it): the same move as step's, and its next state unless `values` is False."""
        return self._call(_moves, priv, publ, legal, hid, values=values)

    def forward(self, priv: torch.Tensor, publ: torch.Tensor, legal: torch.Tensor,
                hid: tuple) -> tuple[torch.Tensor, HiddenState]:
        """Sequences: [B, T, D] inputs -> (q [B, T, A], final state)."""
        return self._call(_forward, priv, publ, legal, hid)

    def public_out(self, publ: torch.Tensor, hid: tuple) -> tuple[torch.Tensor, HiddenState]:
        """The public stream's output [B, F] and its next state (public-state nets only)."""
        return self._call(_public_out, publ, hid)

    def q_from_public(self, priv: torch.Tensor, publ_out: torch.Tensor, legal: torch.Tensor) -> torch.Tensor:
        """Q [B, A] from private features and a public output already computed (public-state nets only)."""
        return self._call(_q_from_public, priv, publ_out, legal)


class BeliefHandle(ModelHandle):
    """A served belief model (lbs.models.belief): encoder steps and seeded samples."""

    requires = ("encode", "sample", "initial_state")

    def initial_state(self, batch: int) -> HiddenState:
        """Zero encoder state for `batch` rows, on the server's device."""
        with self.borrowed() as belief:
            return belief.initial_state(batch, self.server.device)

    def encode(self, priv: torch.Tensor, hid: tuple | None = None) -> tuple[torch.Tensor, HiddenState]:
        """Private observations [B, T, D] -> (contexts [B, T, E], encoder state)."""
        return self._call(_encode, priv, hid)

    def sample(self, context: torch.Tensor, seeds: torch.Tensor, hand_len: torch.Tensor, k: int,
               allowed: torch.Tensor | None = None, unseen: torch.Tensor | None = None) -> torch.Tensor:
        """k hands per query: context [Q, E], counter seeds [Q], hand_len [Q] -> hands [Q, k, H]. Seeded
        draws make each query's hands independent of how concurrent queries were merged. Given, slot s
        draws only the card ids allowed [Q, H, T] gives it, and only while the earlier slots leave unseen
        [Q, T] copies (belief.sampling.slot_mask)."""
        return self._call(_sample, context, seeds, hand_len, allowed, unseen, k=k)
