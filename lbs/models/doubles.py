"""Deterministic test doubles with the Q-network interface (search and R2D2 logic tests)."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from ..blueprint import Blueprint, Capabilities
from ..hanabi.config import GameConfig
from .qnet import HiddenState, WithState


class FixedQNet(Blueprint):
    """Test double with the QNet interface: Q ignores the observation and ranks actions by `order`.

    q[a] = A - (position of a in order); actions not listed follow in id order, so greedy picks the
    first legal action of `order`. The values are a Parameter (state_dict, optimizers and weight
    updates work); the state's h counts the steps each row has taken, to check state threading.
    """

    capabilities = Capabilities(value=True, public_state=True, public_split=True)

    def __init__(self, game: GameConfig, order: Sequence[int] = ()):
        super().__init__()
        self.game = game
        self.num_actions = a = game.num_actions
        order = list(order)
        if len(set(order)) != len(order) or any(not 0 <= x < a for x in order):
            raise ValueError(f"FixedQNet order must list distinct actions in 0..{a - 1}, got {order}")
        full = order + [x for x in range(a) if x not in order]
        values = torch.empty(a)
        values[torch.tensor(full)] = torch.arange(a, 0, -1, dtype=torch.float32)
        self.values = nn.Parameter(values)

    def initial_state(self, batch: int, device: torch.device | str | None = None) -> HiddenState:
        z = torch.zeros(1, batch, 1, device=self.values.device if device is None else device)
        return HiddenState(z, z.clone())

    def forward(self, priv: torch.Tensor, publ: torch.Tensor, legal: torch.Tensor, hid: tuple):
        b, t = legal.shape[:2]
        return self.values.expand(b, t, -1).clone(), HiddenState(hid[0] + t, hid[1])

    def step(self, priv: torch.Tensor, publ: torch.Tensor, legal: torch.Tensor, hid: tuple):
        q, hid = self.forward(priv[:, None], publ[:, None], legal[:, None], hid)
        return q[:, 0], hid

    def public_out(self, publ: torch.Tensor, hid: tuple) -> WithState:
        steps = publ.shape[1] if publ.dim() == 3 else 1
        return publ.new_ones(*publ.shape[:-1], 1), HiddenState(hid[0] + steps, hid[1])

    def advance_public(self, publ: torch.Tensor, hid: tuple) -> HiddenState:
        return self.public_out(publ, hid)[1]

    def q_from_public(self, priv: torch.Tensor, publ_out: torch.Tensor, legal: torch.Tensor) -> torch.Tensor:
        return self.values.expand(*legal.shape).clone()
