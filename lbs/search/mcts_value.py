"""The learned evaluation function of RIS-MCTS-NR (Goodman 2019, section VI): Q(s, a), the end-of-game score
(scaled to [0, 1]) after move a in state s, learnt from the root statistics of tree-search games, so that a
search values a new leaf by it instead of playing the game out.

Training pairs come from the games `search/run.py --mode ris-mcts ... --out FILE` writes: every searched
move's root children with their visits and mean scaled score. Each game is replayed to the move (the record's
deck and moves) and the mover's canonical observation is the input; the target is the child's mean. The
network sees what the mover sees, so a search can ask it in any determinized world without reading the
mover's own cards. Where we differ from the paper: its 38 hand-made state/action features (in a technical
report we do not have) are replaced by the canonical observation and one output per move; its deeper tree
nodes with 50 visits or more (the 'penumbra of exploration') are not recorded by the games, so the pairs
come from the roots alone.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn
from tqdm import tqdm

from .. import ckpt
from ..hanabi import GameConfig, encode
from ..hanabi.interop.record import GameRecord, replay_steps
from ..hanabi.state import HanabiState

KIND = "mcts_value"


@dataclass(frozen=True)
class EvalFnConfig:
    """The evaluation function's network and its training (the paper's settings where it gives them)."""

    hidden: int = 64
    """units of the one hidden layer (the paper: 30 over 38 features; the observation here is wider)"""
    steps: int = 4000
    """gradient steps (a declared length, so any machine makes the same network)"""
    batch: int = 256
    """training pairs per step"""
    lr: float = 1e-3
    """Adam's learning rate"""
    l1: float = 1e-5
    """L1 penalty on the weights (the paper's 1e-5)"""
    min_visits: int = 5
    """a root child is a training pair only with at least this many visits (its mean is the target)"""
    held_out: float = 0.1
    """the share of games kept out of training, whose pairs measure the fit"""
    seed: int = 0
    """the split and the initial weights"""

    def __post_init__(self) -> None:
        for name in ("hidden", "steps", "batch", "min_visits"):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise ValueError(f"EvalFnConfig.{name}={v!r}: must be an int >= 1")
        if not 0 < self.lr < 1 or not 0 <= self.l1 < 1:
            raise ValueError(f"EvalFnConfig: lr={self.lr} must be in (0, 1) and l1={self.l1} in [0, 1)")
        if not 0 <= self.held_out < 1:
            raise ValueError(f"EvalFnConfig.held_out={self.held_out}: must be in [0, 1)")


class EvalFn(nn.Module):
    """Observation [B, D] -> predicted scaled final score per move [B, M] (one hidden ReLU layer, a
    rectified tanh out as in the paper, inputs standardised by the training pairs' mean and spread)."""

    def __init__(self, game: GameConfig, hidden: int):
        super().__init__()
        self.game = game
        self.about: dict = {}
        """what its file says of it (load): config, fit and the games it learnt from"""
        self.register_buffer("mean", torch.zeros(game.obs_dim))
        self.register_buffer("scale", torch.ones(game.obs_dim))
        self.net = nn.Sequential(nn.Linear(game.obs_dim, hidden), nn.ReLU(),
                                 nn.Linear(hidden, game.num_moves))

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.net((obs - self.mean) / self.scale)).clamp(min=0)

    @torch.no_grad()
    def leaf_values(self, state: HanabiState) -> torch.Tensor:
        """[G, M] float64: each game's moves valued from its mover's observation (what mcts.search asks at a
        new leaf; the moves the tree may not take are the caller's to mask)."""
        obs = encode(self.game, state, state.cur_player[:, None])[:, 0]
        return self(obs.to(self.mean.dtype)).double()


@dataclass
class Pairs:
    """Training pairs: the mover's observation, the root child's move, its mean scaled score and visits,
    and the game each came from (the held-out split is by game)."""

    obs: torch.Tensor  # [K, D] float32
    move: torch.Tensor  # [K] long
    target: torch.Tensor  # [K] float32
    visits: torch.Tensor  # [K] long
    game: torch.Tensor  # [K] long, the game's index in the files read

    def take(self, keep: torch.Tensor) -> Pairs:
        return Pairs(*(x[keep] for x in dataclasses.astuple(self)))


def read_games(paths: list[str | Path]) -> list[dict]:
    """The games of search/run.py result files (JSON with a "games" list of records and decisions); a file
    that is not one is refused in one line naming it."""
    games = []
    for path in paths:
        try:
            blob = json.loads(Path(path).read_text())
            games.extend(blob["games"])
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise ValueError(f"{path}: not a search/run.py result file with games ({type(e).__name__}: "
                             f"{e})") from None
    if not games:
        raise ValueError("no games in " + ", ".join(map(str, paths)))
    return games


def pairs_from_games(games: list[dict], min_visits: int) -> tuple[GameConfig, Pairs]:
    """Replay the games (one game config) in lockstep and take, at every searched move, the mover's
    observation and each root child with at least `min_visits` visits. A decision whose recorded move is not
    the move the game made is refused: the file does not hold what it claims."""
    records = [GameRecord.from_dict(g["record"]) for g in games]
    at: dict[int, list[tuple[int, dict]]] = {}
    for i, g in enumerate(games):
        for d in g["decisions"]:
            at.setdefault(int(d["step"]), []).append((i, d))
    game = records[0].cfg
    parts: list[tuple[torch.Tensor, ...]] = []
    for t, state, moves in replay_steps(records):
        here = at.get(t, [])
        if not here:
            continue
        ids = torch.tensor([i for i, _ in here])
        bad = [i for i, d in here if int(moves[i]) != int(d["move"])]
        if bad:
            raise ValueError(f"game {bad[0]}: its decision at move {t} is not the move its record played "
                             f"({int(moves[bad[0]])})")
        obs = encode(game, state.index(ids), state.cur_player[ids][:, None])[:, 0]
        for k, (i, d) in enumerate(here):
            kids = [c for c in d["candidates"].values() if int(c["visits"]) >= min_visits]
            if kids:
                n = len(kids)
                parts.append((obs[k].expand(n, -1), torch.tensor([int(c["id"]) for c in kids]),
                              torch.tensor([float(c["mean"]) for c in kids]),
                              torch.tensor([int(c["visits"]) for c in kids]), torch.full((n,), i)))
    if not parts:
        raise ValueError(f"no root child with {min_visits} visits or more in these games")
    obs, move, target, visits, gid = (torch.cat(x) for x in zip(*parts, strict=True))
    return game, Pairs(obs.float(), move, target.float(), visits, gid)


def fit(game: GameConfig, pairs: Pairs, cfg: EvalFnConfig, progress: bool = True) -> tuple[EvalFn, dict]:
    """Train on the pairs of all but the held-out games (squared error on each pair's move); returns the
    network and its fit: RMS error (in points) on the training and held-out pairs, beside the RMS of a
    constant guess (the training mean) on the held-out ones."""
    gen = torch.Generator().manual_seed(cfg.seed)
    ids = pairs.game.unique()
    out = ids[torch.randperm(ids.numel(), generator=gen)[: round(cfg.held_out * ids.numel())]]
    test = torch.isin(pairs.game, out)
    train, held = pairs.take(~test), pairs.take(test)
    torch.manual_seed(cfg.seed)
    net = EvalFn(game, cfg.hidden)
    net.mean.copy_(train.obs.mean(0))
    net.scale.copy_(train.obs.std(0).clamp(min=0.1))  # a bit set in under 1% of rows stays small
    opt = torch.optim.Adam(net.parameters(), lr=cfg.lr)
    weights = [p for n, p in net.named_parameters() if n.endswith("weight")]
    bar = tqdm(range(cfg.steps), desc="evaluation function", disable=not progress)
    for _ in bar:
        i = torch.randint(train.move.numel(), (cfg.batch,), generator=gen)
        q = net(train.obs[i]).gather(1, train.move[i, None]).squeeze(1)
        loss = (q - train.target[i]).square().mean()
        (loss + cfg.l1 * sum(w.abs().sum() for w in weights)).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        bar.set_postfix(rms=f"{loss.item() ** 0.5 * game.max_score:.2f}", refresh=False)

    def rms(p: Pairs) -> float:
        if not p.move.numel():
            return float("nan")
        with torch.no_grad():
            q = net(p.obs).gather(1, p.move[:, None]).squeeze(1)
        return float((q - p.target).square().mean().sqrt()) * game.max_score

    constant = float((held.target - train.target.mean()).square().mean().sqrt()) * game.max_score \
        if held.move.numel() else float("nan")
    return net, {"pairs": int(train.move.numel()), "held_out_pairs": int(held.move.numel()),
                 "rms_train": rms(train), "rms_held_out": rms(held), "rms_constant": constant}


def save(path: str | Path, net: EvalFn, cfg: EvalFnConfig, fit_stats: dict, sources: list[str]) -> Path:
    """Atomically, with its game, config, fit and the files it learnt from."""
    return ckpt.save(path, KIND, {"game": net.game.to_dict(), "config": dataclasses.asdict(cfg),
                                  "fit": fit_stats, "sources": sources, "model": net.state_dict()})


def load(path: str | Path, game: GameConfig, device: torch.device | str = "cpu") -> EvalFn:
    """An evaluation function for `game`; a file for another game is refused, naming both (the rule for a
    lost last life may differ: the function values the points kept, what the tree backs up either way)."""
    blob = ckpt.load(path, KIND, map_location=device)
    stored = GameConfig.from_dict(blob["game"])
    if dataclasses.replace(stored, bomb_zero=game.bomb_zero) != game:
        raise ckpt.CheckpointError(f"{path} is an evaluation function for {stored}, this game is {game}")
    net = EvalFn(game, int(blob["config"]["hidden"])).to(device)
    net.load_state_dict(blob["model"])
    net.about = {k: blob[k] for k in ("config", "fit", "sources")}
    return net.eval()
