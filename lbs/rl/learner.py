"""The R2D2 + VDN learner on Lightning Fabric: the online and target networks, Adam, and one update at a time.

With `devices` > 1 Fabric's DDP wrapper averages the gradients, so every rank holds the same weights; the
learner's `agree` is the one collective besides the gradients (the loop's stop agreement).
"""

from __future__ import annotations

import copy
import logging

import torch

from ..hanabi.encode import public_features
from ..models.qnet import make_qnet
from ..shards import process_rank
from .config import TrainConfig
from .demos import demo_count, mixed_sample, update_mixed_priorities
from .r2d2 import r2d2_loss
from .replay import PrioritizedReplay


class Learner:
    """The networks being trained and their optimizer; `updates` counts the updates made."""

    def __init__(self, cfg: TrainConfig, device: torch.device):
        from lightning.fabric import Fabric

        self.cfg = cfg
        if device.type == "cuda" and torch.cuda.device_count() < cfg.devices:
            raise ValueError(f"TrainConfig.devices={cfg.devices} needs {cfg.devices} CUDA devices, found "
                             f"{torch.cuda.device_count()}")
        if process_rank() != 0:  # a rank Fabric started: rank 0 alone prints, Lightning's lines included
            logging.getLogger("lightning.fabric").setLevel(logging.WARNING)
        self.fabric = Fabric(
            accelerator="cuda" if device.type == "cuda" else "cpu", devices=cfg.devices,
            strategy="ddp" if cfg.devices > 1 else "auto", precision=cfg.precision
        )
        self.fabric.launch()  # devices > 1: rank 0 re-runs this script (same argv) for ranks 1..N-1
        self.rank, self.is_main = self.fabric.global_rank, self.fabric.is_global_zero
        self.device = self.fabric.device if cfg.devices > 1 else device
        self.fabric.seed_everything(cfg.seed, verbose=False)
        net = make_qnet(cfg.game, cfg.net)
        self.target = copy.deepcopy(net).to(self.device).requires_grad_(False)
        opt = torch.optim.Adam(net.parameters(), lr=cfg.lr, eps=cfg.adam_eps)
        self.net, self.opt = self.fabric.setup(net, opt)
        if cfg.net.aux_head:  # route the aux forward through Fabric's wrapper (autocast, DDP)
            self.net.mark_forward_method("forward_aux")
        self.updates = 0

    @property
    def module(self) -> torch.nn.Module:
        """The plain network (Fabric's wrapper removed): its weights are the ones saved and served."""
        return self.net.module if hasattr(self.net, "module") else self.net

    def loss(self, batch: dict[str, torch.Tensor], w: torch.Tensor, demo: torch.Tensor | None = None):
        """r2d2_loss of a batch with importance weights `w` (and the large-margin loss on the sequences
        `demo` [B] marks): (loss, new priorities, stats)."""
        cfg = self.cfg
        return r2d2_loss(
            self.net, self.target, batch, w, cfg.gamma, cfg.n_step, eta=cfg.eta, public_fn=self.public,
            demo=demo, margin=cfg.margin, margin_weight=cfg.margin_weight,
        )

    def public(self, priv: torch.Tensor) -> torch.Tensor:
        return public_features(self.cfg.game, priv)

    def priorities(self, episodes: dict[str, torch.Tensor]) -> torch.Tensor:
        """Initial replay priorities of fresh episodes: the learner's own TD errors on them."""
        with torch.no_grad():
            w = torch.ones(episodes["mask"].shape[0], device=self.device)
            batch = dict(episodes, priv=episodes["priv"].float())
            return self.loss(batch, w)[1]

    def update(self, replay: PrioritizedReplay, demos: PrioritizedReplay | None = None
               ) -> dict[str, torch.Tensor]:
        """One update on a batch drawn from replay, and from the demonstration replay `demos` when given
        (lbs.rl.demos.demo_count says how many; their priorities refreshed in their own replay); the target
        network is copied every target_sync updates. Stats are 0-d tensors: read them only when logging."""
        cfg = self.cfg
        n_demo = demo_count(cfg, self.updates) if demos is not None else 0
        batch, idx, w, is_demo = mixed_sample(replay, demos, cfg.batch_size, n_demo)
        loss, prio, stats = self.loss(batch, w, is_demo if demos is not None else None)
        self.opt.zero_grad(set_to_none=True)
        self.fabric.backward(loss)
        self.fabric.clip_gradients(self.net, self.opt, max_norm=cfg.grad_clip)
        self.opt.step()
        update_mixed_priorities(replay, demos, idx, prio.detach(), n_demo)
        self.updates += 1
        if self.updates % cfg.target_sync == 0:
            self.target.load_state_dict(self.module.state_dict())
        return {"loss": loss.detach(), **stats}

    def agree(self, flags: list[int]) -> list[int]:
        """The largest of each flag over the ranks (one all-reduce); one process: the flags as they are."""
        if self.fabric.world_size == 1:
            return flags
        return self.fabric.all_reduce(torch.tensor(flags, device=self.device), reduce_op="max").tolist()

    def state_dict(self) -> dict:
        return {"model": self.module.state_dict(), "target": self.target.state_dict(),
                "optimizer": self.opt.state_dict()}

    def start_from(self, weights: dict[str, torch.Tensor]) -> None:
        """A new run's first weights (TrainConfig.init): the online and the target network both."""
        self.module.load_state_dict(weights)
        self.target.load_state_dict(weights)

    def load_state_dict(self, state: dict) -> None:
        """Weights, target and Adam state of a resumed run; this config's lr and eps take effect (the
        restored optimizer state would silently keep the old values)."""
        self.module.load_state_dict(state["model"])
        self.target.load_state_dict(state["target"])
        self.opt.load_state_dict(state["optimizer"])
        for group in self.opt.param_groups:
            group["lr"], group["eps"] = self.cfg.lr, self.cfg.adam_eps
