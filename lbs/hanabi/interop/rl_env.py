"""Our policies as players of HLE's rl_env (its duck-typed Agent API)."""

from __future__ import annotations

import torch

from ..config import GameConfig
from ..policies import ObsPolicy
from ..rng import hash_keys
from .hle import hle_game, import_pyhanabi, record_from_hle
from .record import GameRecord


def make_rl_env(cfg: GameConfig, seed: int = -1):
    """HLE's rl_env.HanabiEnv for a config (seed -1: HLE draws one)."""
    import_pyhanabi()
    from hanabi_learning_environment import rl_env

    return rl_env.HanabiEnv(config={**cfg.hle_params(), "seed": seed})


class RlEnvAgent:
    """Plays HLE's rl_env with one of our observation policies (rl_env's duck-typed Agent API).

    act() gets one player's observation dict and returns rl_env's move dict on that player's turn,
    None otherwise. The policy sees exactly what rl_env shows the player: the canonical vector and
    the legal moves. Seeds for its randomness are hash(seed, moves made by this agent).
    """

    def __init__(self, cfg: GameConfig, policy: ObsPolicy, seed: int = 0, device: torch.device | str = "cpu"):
        self.cfg, self.policy, self.seed = cfg, policy, seed
        self.device = torch.device(device)
        game = hle_game(cfg).game
        self._move_dicts = [game.get_move(m).to_dict() for m in range(cfg.num_moves)]
        self.moves_made = 0

    def reset(self, config: dict | None = None) -> None:
        self.moves_made = 0

    def act(self, observation: dict) -> dict | None:
        if observation["current_player_offset"] != 0:
            return None
        vec = observation["vectorized"]
        if len(vec) != self.cfg.obs_dim:
            raise ValueError(f"observation has {len(vec)} features, {self.cfg} expects {self.cfg.obs_dim}")
        obs = torch.tensor(vec, dtype=torch.float32, device=self.device)[None]
        legal = torch.zeros(1, self.cfg.num_moves, dtype=torch.bool, device=self.device)
        legal[0, list(observation["legal_moves_as_int"])] = True
        seeds = hash_keys(torch.tensor([self.seed], device=self.device), self.moves_made)
        move = int(self.policy(self.cfg, obs, legal, seeds)[0])
        if not legal[0, move]:
            raise ValueError(f"policy chose illegal move {move} {self.cfg.move_name(move)}")
        self.moves_made += 1
        return dict(self._move_dicts[move])


def play_rl_env(cfg: GameConfig, env, agents: list, max_steps: int | None = None) -> GameRecord:
    """Play one rl_env game with one agent per player; returns its record (deck: dealt cards first)."""
    if len(agents) != cfg.players:
        raise ValueError(f"need {cfg.players} agents, got {len(agents)}")
    for a in agents:
        a.reset()
    obs = env.reset()
    done, steps = False, 0
    limit = max_steps if max_steps is not None else cfg.max_steps
    while not done:
        if steps >= limit:
            raise RuntimeError(f"rl_env game did not end in {limit} steps")
        cur = obs["current_player"]
        actions = [a.act(o) for a, o in zip(agents, obs["player_observations"], strict=True)]
        if any(x is not None for i, x in enumerate(actions) if i != cur) or actions[cur] is None:
            raise RuntimeError(f"agents answered out of turn at step {steps}: {actions}")
        obs, _, done, _ = env.step(actions[cur])
        steps += 1
    return record_from_hle(cfg, env.state)
