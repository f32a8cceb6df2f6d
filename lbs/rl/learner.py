"""The blueprint learner on Lightning Fabric: the online and target networks, the anchor, Adam, one update at
a time, of whichever loss the recipe's phase asks for (imitation, or TD with R2D2's maths).

The anchor is a frozen copy of the network as a TD phase began: its greedy moves are the policy a values
phase evaluates and the moves the large-margin term holds best. With `devices` > 1 Fabric's DDP wrapper
averages the gradients, so every rank holds the same weights; the learner's `agree` is the one collective
besides the gradients (the loop's stop agreement).
"""

from __future__ import annotations

import copy
import logging

import torch

from ..acting import greedy
from ..hanabi.encode import public_features
from ..models.qnet import make_qnet
from ..shards import process_rank
from .config import Phase, TrainConfig
from .demos import Episodes
from .imitation import imitation_loss
from .r2d2 import players_as_rows, r2d2_loss, rows_as_players
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
        for name in ("forward_heads", "forward_moves"):  # the losses' forwards, through Fabric's wrapper
            self.net.mark_forward_method(name)
        self.updates = 0
        self.anchor: torch.nn.Module | None = None
        self.set_phase(cfg.phases[0])

    @property
    def module(self) -> torch.nn.Module:
        """The plain network (Fabric's wrapper removed): its weights are the ones saved and served."""
        return self.net.module if hasattr(self.net, "module") else self.net

    @property
    def by_policy(self) -> bool:
        """Its moves are a policy network's (NetConfig.policy_net, lbs.models.qnet.HeldQNet): a values phase
        trains the Q network alone, so no loss is needed to hold them."""
        return self.module.policy is not None

    def set_phase(self, phase: Phase, progress: float = 0.0) -> None:
        """The phase the next updates belong to, `progress` of the way through it: its rate, its anchor
        weight (which decays to 0 over an improve phase), and, beside a policy network, what it trains (a
        values phase the Q network alone: the policy, hence every move, stays)."""
        self.phase = phase
        self.anchor_weight = phase.anchor_weight * (1.0 - progress if phase.kind == "improve" else 1.0)
        if self.by_policy:
            self.anchor_weight = 0.0
            self.module.policy.requires_grad_(phase.kind != "values")
        for group in self.opt.param_groups:
            group["lr"] = self.cfg.phase_lr(phase)

    def hold(self) -> None:
        """The network as it is now becomes the anchor (a TD phase begins)."""
        if self.anchor is None:
            self.anchor = copy.deepcopy(self.module).requires_grad_(False).eval()
        else:
            self.anchor.load_state_dict(self.module.state_dict())

    def anchor_moves(self, batch: Episodes) -> torch.Tensor:
        """The anchor's greedy moves [B, T, P] on every seat's sequence of a batch (beside a policy network,
        its policy's alone: the same moves without running its Q network)."""
        legal = batch["legal"]
        priv = players_as_rows(batch["priv"])
        net = self.anchor.policy if self.by_policy else self.anchor
        with torch.no_grad():
            q = net(priv, self.public(priv), players_as_rows(legal),
                    net.initial_state(priv.shape[0], priv.device))[0]
        return rows_as_players(greedy(q, players_as_rows(legal)), legal.shape[0])

    def loss(self, batch: dict[str, torch.Tensor], w: torch.Tensor):
        """The TD loss of a batch with importance weights `w` in the current phase (policy evaluation of the
        anchor in a values phase, double-Q otherwise; the anchor's moves held by the margin term):
        (loss, new priorities, stats)."""
        cfg, phase = self.cfg, self.phase
        holds = phase.kind == "values" or self.anchor_weight > 0  # the anchor's moves are read
        held = self.anchor_moves(batch) if self.anchor is not None and holds else None
        n = cfg.n_step if phase.n_step is None else phase.n_step
        return r2d2_loss(
            self.net, self.target, batch, w, cfg.gamma, n, eta=cfg.eta, public_fn=self.public,
            evaluate=held if phase.kind == "values" else None, anchor=held, margin=phase.anchor_margin,
            anchor_weight=self.anchor_weight,
        )

    def public(self, priv: torch.Tensor) -> torch.Tensor:
        return public_features(self.cfg.game, priv)

    def priorities(self, episodes: dict[str, torch.Tensor]) -> torch.Tensor:
        """Initial replay priorities of fresh episodes: the learner's own TD errors on them."""
        with torch.no_grad():
            w = torch.ones(episodes["mask"].shape[0], device=self.device)
            batch = dict(episodes, priv=episodes["priv"].float())
            return self.loss(batch, w)[1]

    def step(self, loss: torch.Tensor) -> None:
        """One optimizer step on `loss`; the target network is copied every target_sync updates."""
        self.opt.zero_grad(set_to_none=True)
        self.fabric.backward(loss)
        self.fabric.clip_gradients(self.net, self.opt, max_norm=self.cfg.grad_clip)
        self.opt.step()
        self.updates += 1
        if self.updates % self.cfg.target_sync == 0:
            self.target.load_state_dict(self.module.state_dict())

    def update(self, replay: PrioritizedReplay) -> dict[str, torch.Tensor]:
        """One TD update on a batch drawn from replay (its priorities refreshed). Stats are 0-d tensors:
        read them only when logging."""
        batch, idx, w = replay.sample(self.cfg.batch_size)
        loss, prio, stats = self.loss(batch, w)
        self.step(loss)
        replay.update_priorities(idx, prio.detach())
        return {"loss": loss.detach(), **stats}

    def imitate(self, batch: Episodes) -> dict[str, torch.Tensor]:
        """One imitation update on a batch of demonstrator games."""
        loss = imitation_loss(self.net, batch, self.cfg.game, self.phase.bomb_weight)
        self.step(loss)
        return {"loss": loss.detach()}

    def agree(self, flags: list[int]) -> list[int]:
        """The largest of each flag over the ranks (one all-reduce); one process: the flags as they are."""
        if self.fabric.world_size == 1:
            return flags
        return self.fabric.all_reduce(torch.tensor(flags, device=self.device), reduce_op="max").tolist()

    def state_dict(self) -> dict:
        anchor = {"anchor": self.anchor.state_dict()} if self.anchor is not None else {}
        return {"model": self.module.state_dict(), "target": self.target.state_dict(),
                "optimizer": self.opt.state_dict(), **anchor}

    def start_from(self, weights: dict[str, torch.Tensor]) -> None:
        """A new run's first weights (TrainConfig.init): the online and the target network both."""
        self.module.load_state_dict(weights)
        self.target.load_state_dict(weights)

    def load_state_dict(self, state: dict) -> None:
        """Weights, target, anchor and Adam state of a resumed run; this config's rate and eps take effect
        (the restored optimizer state would silently keep the old values; the loop sets the phase's rate)."""
        self.module.load_state_dict(state["model"])
        self.target.load_state_dict(state["target"])
        if "anchor" in state:
            self.anchor = copy.deepcopy(self.module).requires_grad_(False).eval()
            self.anchor.load_state_dict(state["anchor"])
        self.opt.load_state_dict(state["optimizer"])
        for group in self.opt.param_groups:
            group["lr"], group["eps"] = self.cfg.phase_lr(self.phase), self.cfg.adam_eps
