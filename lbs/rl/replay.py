"""Prioritized sequence replay: whole episodes in preallocated ring-buffer tensors.

Episodes are stored padded to a fixed length (R2D2 on full episodes), one slot per episode, so a
sample is a batch of [B, T, ...] sequences gathered with one index_select per field. Which slots are
drawn is the sampler's job (STYLE #8): `ProportionalSampler` keeps priority**alpha in a flat-tensor
sum tree (O(log N) batched descent, a Python loop only over tree levels), `UniformSampler` ignores
priorities. Random numbers come from counter hashing (lbs.hanabi.rng), so a seed draws the same
slots on CPU and CUDA and the generator state is one integer in the checkpoint.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Protocol

import torch

from lbs.hanabi.rng import uniform

__all__ = [
    "FieldSpec", "PrioritizedReplay", "ProportionalSampler", "Sampler", "SumTree", "UniformSampler",
    "importance_weights",
]


@dataclass(frozen=True)
class FieldSpec:
    """One stored field: per-episode shape (leading dim T), storage dtype, and the dtype a sample gets.

    sample_dtype lets features live as uint8/bool (1 byte a feature) and reach the learner as float.
    """

    shape: tuple[int, ...]
    dtype: torch.dtype
    sample_dtype: torch.dtype | None = None

    @staticmethod
    def of(name: str, spec: FieldSpec | tuple) -> FieldSpec:
        """Accept a FieldSpec or a (shape, dtype[, sample_dtype]) tuple."""
        if isinstance(spec, FieldSpec):
            out = spec
        elif isinstance(spec, tuple) and len(spec) in (2, 3):
            out = FieldSpec(tuple(spec[0]), *spec[1:])
        else:
            raise TypeError(f"spec[{name!r}]: expected FieldSpec or (shape, dtype[, sample_dtype]), "
                            f"got {spec!r}")
        if not all(isinstance(s, int) and s > 0 for s in out.shape):
            raise ValueError(f"spec[{name!r}]: shape must be positive ints, got {out.shape}")
        if not isinstance(out.dtype, torch.dtype):
            raise TypeError(f"spec[{name!r}]: dtype must be a torch.dtype, got {out.dtype!r}")
        return out

    @property
    def bytes(self) -> int:
        return math.prod(self.shape) * torch.empty((), dtype=self.dtype).element_size()


class SumTree:
    """Binary sum tree in one flat tensor: node k has children 2k, 2k+1; root 1; leaf i at L + i.

    Parents are recomputed from their children on update (no incremental +=), so totals never drift.
    float64 keeps sampling exact to ~1e-16 relative for any realistic capacity.
    """

    def __init__(self, capacity: int, device: torch.device | str = "cpu", dtype: torch.dtype = torch.float64):
        if capacity < 1:
            raise ValueError(f"SumTree capacity must be >= 1, got {capacity}")
        self.capacity = capacity
        self.depth = max(0, (capacity - 1).bit_length())
        self.leaves = 1 << self.depth  # L, a power of two >= capacity
        self.tree = torch.zeros(2 * self.leaves, dtype=dtype, device=device)
        # scratch for "last write wins" de-duplication; -1 everywhere between calls
        self._last = torch.full((capacity,), -1, dtype=torch.long, device=device)

    @property
    def device(self) -> torch.device:
        return self.tree.device

    def total(self) -> torch.Tensor:
        """Sum of all leaves, a 0-d tensor (no host sync)."""
        return self.tree[1]

    def get(self, indices: torch.Tensor) -> torch.Tensor:
        return self.tree[indices + self.leaves]

    def update(self, indices: torch.Tensor, values: torch.Tensor) -> None:
        """Set leaves[indices] = values, vectorised; with repeated indices the last occurrence wins."""
        idx = indices.to(self.device, torch.long).reshape(-1)
        val = values.to(self.device, self.tree.dtype).reshape(-1)
        if idx.numel() != val.numel():
            raise ValueError(f"SumTree.update: {idx.numel()} indices but {val.numel()} values")
        pos = torch.arange(idx.numel(), device=self.device)
        self._last.scatter_reduce_(0, idx, pos, reduce="amax")
        val = val[self._last[idx]]  # every duplicate now carries its last value: writes agree
        self._last.index_fill_(0, idx, -1)
        node = idx + self.leaves
        self.tree[node] = val
        for _ in range(self.depth):
            node = node >> 1
            self.tree[node] = self.tree[2 * node] + self.tree[2 * node + 1]

    def find(self, mass: torch.Tensor) -> torch.Tensor:
        """Leaf index i with prefix(i) <= mass < prefix(i + 1) for each mass in [0, total): [B] -> [B].

        Never enters an empty subtree, so float rounding cannot return a zero-priority leaf.
        """
        mass = mass.to(self.tree.dtype)
        node = torch.ones_like(mass, dtype=torch.long)
        for _ in range(self.depth):
            left = self.tree[2 * node]
            go_right = (mass >= left) & (self.tree[2 * node + 1] > 0)
            mass = torch.where(go_right, mass - left, mass)
            node = 2 * node + go_right.long()
        return node - self.leaves


class Sampler(Protocol):
    """Chooses replay slots. `u` are uniforms in [0, 1) [B]; `size` is the number of filled slots."""

    def set_priorities(self, indices: torch.Tensor, priorities: torch.Tensor) -> None: ...

    def sample(self, u: torch.Tensor, size: int) -> tuple[torch.Tensor, torch.Tensor]:
        """-> (indices [B] long, P(indices) [B] float64), the exact probability of each draw."""
        ...

    def clear(self) -> None:
        """Forget every priority (all slots empty)."""
        ...

    def state_dict(self) -> dict: ...

    def load_state_dict(self, state: dict) -> None: ...


class UniformSampler:
    """Every filled slot equally likely; priorities are accepted and ignored (IS weights become 1)."""

    def __init__(self, capacity: int, device: torch.device | str = "cpu"):
        self.capacity, self.device = capacity, torch.device(device)

    def set_priorities(self, indices: torch.Tensor, priorities: torch.Tensor) -> None:
        pass

    def sample(self, u: torch.Tensor, size: int) -> tuple[torch.Tensor, torch.Tensor]:
        idx = (u * size).long().clamp_max(size - 1)
        return idx, torch.full_like(u, 1.0 / size, dtype=torch.float64)

    def clear(self) -> None:
        pass

    def state_dict(self) -> dict:
        return {}

    def load_state_dict(self, state: dict) -> None:
        pass


class ProportionalSampler:
    """P(i) = p_i**alpha / sum_j p_j**alpha (Schaul et al. 2016), via a sum tree over the slots.

    Priorities are clamped to min_priority so a zero TD error never makes a sequence unreachable.
    """

    def __init__(self, capacity: int, alpha: float = 0.9, device: torch.device | str = "cpu",
                 min_priority: float = 1e-6):
        if alpha < 0:
            raise ValueError(f"alpha must be >= 0, got {alpha}")
        self.capacity, self.alpha, self.min_priority = capacity, alpha, min_priority
        self.tree = SumTree(capacity, device)

    @property
    def device(self) -> torch.device:
        return self.tree.device

    def set_priorities(self, indices: torch.Tensor, priorities: torch.Tensor) -> None:
        p = priorities.to(self.device, torch.float64).clamp_min(self.min_priority)
        self.tree.update(indices, p.pow(self.alpha))

    def sample(self, u: torch.Tensor, size: int) -> tuple[torch.Tensor, torch.Tensor]:
        total = self.tree.total()
        idx = self.tree.find(u.to(self.device, torch.float64) * total)
        return idx, self.tree.get(idx) / total

    def clear(self) -> None:
        self.tree.tree.zero_()

    def state_dict(self) -> dict:
        return {"alpha": self.alpha, "tree": self.tree.tree.clone()}

    def load_state_dict(self, state: dict) -> None:
        if state["tree"].shape != self.tree.tree.shape:
            raise ValueError(f"sum tree shape {tuple(state['tree'].shape)} != {tuple(self.tree.tree.shape)}")
        self.alpha = state["alpha"]
        self.tree.tree.copy_(state["tree"])


def importance_weights(probs: torch.Tensor, size: int, beta: float) -> torch.Tensor:
    """(N P(i))**-beta, divided by the batch maximum so weights only ever scale the loss down. [B]."""
    w = (size * probs).pow(-beta)
    return (w / w.max()).float()


def _resolve_storage(storage_device: torch.device | str, device: torch.device, nbytes: int) -> torch.device:
    """'auto': the compute device when the buffer fits in 90% of its free memory, else host memory."""
    if storage_device != "auto":
        return torch.device(storage_device)
    if device.type == "cuda":
        free, _ = torch.cuda.mem_get_info(device)
        return device if nbytes < 0.9 * free else torch.device("cpu")
    return device


class PrioritizedReplay:
    """Ring buffer of whole episodes with pluggable slot sampling.

    spec: name -> FieldSpec or (shape, dtype[, sample_dtype]); shape is per episode, leading dim T,
      e.g. {"priv": ((T, P, D), torch.uint8, torch.float32), "mask": ((T,), torch.bool)}.
    device: where sampled batches (and the sampler) live. storage_device: where episodes live;
      "auto" = device when it fits, else CPU.
    alpha: priority exponent of the default ProportionalSampler (ignored when `sampler` is given).
    beta: importance-sampling exponent (settable, e.g. annealed; or pass beta= to sample()).
    checked: validate priorities and indices by value (one host sync per call); shapes and dtypes
      are always checked (metadata only, no sync).
    """

    def __init__(self, capacity_episodes: int, spec: dict[str, FieldSpec | tuple],
                 device: torch.device | str = "cpu", alpha: float = 0.9, beta: float = 0.6, seed: int = 0,
                 sampler: Sampler | None = None, storage_device: torch.device | str = "auto",
                 checked: bool = False):
        if capacity_episodes < 1:
            raise ValueError(f"capacity_episodes must be >= 1, got {capacity_episodes}")
        if not spec:
            raise ValueError("spec is empty: name at least one field")
        self.capacity = capacity_episodes
        self.spec = {name: FieldSpec.of(name, s) for name, s in spec.items()}
        self.device = torch.device(device)
        self.storage_device = _resolve_storage(storage_device, self.device,
                                               capacity_episodes * self.bytes_per_episode())
        self.beta, self.seed, self.checked = beta, seed, checked
        self.sampler: Sampler = sampler if sampler is not None else ProportionalSampler(
            capacity_episodes, alpha, self.device)
        self.storage = {  # name -> [capacity, T, ...]
            name: torch.zeros((capacity_episodes, *f.shape), dtype=f.dtype, device=self.storage_device)
            for name, f in self.spec.items()
        }
        self.pos = 0  # next slot to write
        self.size = 0  # filled slots
        self.num_added = 0  # episodes ever added
        self.num_sampled = 0  # sequences ever drawn (the RNG counter)

    def __len__(self) -> int:
        return self.size

    def bytes_per_episode(self) -> int:
        """Stored bytes per episode slot (fields only; the sum tree adds ~16 bytes a slot)."""
        return sum(f.bytes for f in self.spec.values())

    def _check_batch(self, batch: dict[str, torch.Tensor], priorities: torch.Tensor) -> int:
        missing, extra = self.spec.keys() - batch.keys(), batch.keys() - self.spec.keys()
        if missing or extra:
            raise KeyError(f"add(): batch fields must match the spec; missing {sorted(missing)}, "
                           f"unknown {sorted(extra)}")
        num = None
        for name, f in self.spec.items():
            x = batch[name]
            if not isinstance(x, torch.Tensor):
                raise TypeError(f"add(): {name!r} must be a tensor, got {type(x).__name__}")
            if x.dtype != f.dtype:
                raise TypeError(f"add(): {name!r} has dtype {x.dtype}, spec says {f.dtype} "
                                "(convert with .to())")
            if x.dim() != len(f.shape) + 1 or tuple(x.shape[1:]) != f.shape:
                raise ValueError(f"add(): {name!r} has shape {tuple(x.shape)}, expected [E, *{f.shape}]")
            if num is None:
                num = x.shape[0]
            elif x.shape[0] != num:
                raise ValueError(f"add(): {name!r} holds {x.shape[0]} episodes, other fields {num}")
        if not isinstance(priorities, torch.Tensor) or priorities.shape != (num,):
            got = (tuple(priorities.shape) if isinstance(priorities, torch.Tensor)
                   else type(priorities).__name__)
            raise ValueError(f"add(): priorities must be a tensor of shape [{num}], got {got}")
        if self.checked and not bool(torch.isfinite(priorities).all() & (priorities >= 0).all()):
            raise ValueError("add(): priorities must be finite and >= 0")
        return num  # type: ignore[return-value]

    def add(self, batch: dict[str, torch.Tensor], priorities: torch.Tensor) -> torch.Tensor:
        """Write E episodes ([E, *shape] per field) into the next ring slots; returns the slots [E].

        When E > capacity only the last `capacity` episodes are kept (as if added one at a time).
        """
        num = self._check_batch(batch, priorities)
        skip = max(0, num - self.capacity)
        kept = num - skip
        slots = (self.pos + skip + torch.arange(kept, device=self.device)) % self.capacity
        store_slots = slots.to(self.storage_device)
        for name, x in batch.items():
            self.storage[name].index_copy_(0, store_slots, x[skip:].to(self.storage_device))
        self.sampler.set_priorities(slots, priorities[skip:])
        self.pos = (self.pos + num) % self.capacity
        self.size = min(self.capacity, self.size + num)
        self.num_added += num
        return slots

    def sample(self, batch_size: int, beta: float | None = None
               ) -> tuple[dict[str, torch.Tensor], torch.Tensor, torch.Tensor]:
        """Draw B sequences i.i.d. from the sampler.

        Returns (batch: name -> [B, *shape] on device, cast to sample_dtype; indices [B] long;
        IS weights [B] float32 = (N P(i))**-beta / max over the batch).
        """
        if self.size == 0:
            raise RuntimeError("sample(): the replay is empty")
        if batch_size < 1:
            raise ValueError(f"sample(): batch_size must be >= 1, got {batch_size}")
        counters = self.num_sampled + torch.arange(batch_size, device=self.device)
        u = uniform(self.seed, counters)  # [B] float64 in [0, 1), same on every device
        self.num_sampled += batch_size
        idx, probs = self.sampler.sample(u, self.size)
        weights = importance_weights(probs, self.size, self.beta if beta is None else beta)
        store_idx = idx.to(self.storage_device)
        out = {}
        for name, f in self.spec.items():
            x = self.storage[name].index_select(0, store_idx).to(self.device, non_blocking=True)
            out[name] = x if f.sample_dtype is None else x.to(f.sample_dtype)
        return out, idx, weights

    def update_priorities(self, indices: torch.Tensor, priorities: torch.Tensor) -> None:
        """New priorities for sampled slots (vectorised; with repeated slots the last one wins)."""
        if indices.shape != priorities.shape or indices.dim() != 1:
            raise ValueError(f"update_priorities(): indices {tuple(indices.shape)} and priorities "
                             f"{tuple(priorities.shape)} must be equal 1-d shapes")
        if self.checked:
            if not bool(((indices >= 0) & (indices < self.size)).all()):
                raise IndexError(f"update_priorities(): indices outside the {self.size} filled slots")
            if not bool(torch.isfinite(priorities).all() & (priorities >= 0).all()):
                raise ValueError("update_priorities(): priorities must be finite and >= 0")
        self.sampler.set_priorities(indices.to(self.device), priorities.detach())

    def state_dict(self, include_data: bool = True) -> dict:
        """Counters, sampler state and (when `include_data`) the stored episodes.

        Without data, loading restores only the counters that do not refer to stored data
        (num_added, num_sampled) and leaves the buffer empty.
        """
        state = {
            "capacity": self.capacity,
            "spec": {n: (f.shape, str(f.dtype)) for n, f in self.spec.items()},
            "seed": self.seed, "beta": self.beta,
            "num_added": self.num_added, "num_sampled": self.num_sampled,
        }
        if include_data:
            state.update(pos=self.pos, size=self.size, sampler=self.sampler.state_dict(),
                         storage={n: x.clone() for n, x in self.storage.items()})
        return state

    def load_state_dict(self, state: dict) -> None:
        mine = {n: (f.shape, str(f.dtype)) for n, f in self.spec.items()}
        theirs = {n: (tuple(s), d) for n, (s, d) in state["spec"].items()}
        if state["capacity"] != self.capacity or theirs != mine:
            raise ValueError(f"load_state_dict(): saved replay (capacity {state['capacity']}, spec {theirs}) "
                             f"does not match this one (capacity {self.capacity}, spec {mine})")
        self.seed, self.beta = state["seed"], state["beta"]
        self.num_added, self.num_sampled = state["num_added"], state["num_sampled"]
        if "storage" in state:
            for n, x in state["storage"].items():
                self.storage[n].copy_(x)
            self.sampler.load_state_dict(state["sampler"])
            self.pos, self.size = state["pos"], state["size"]
        else:
            self.sampler.clear()
            self.pos = self.size = 0
