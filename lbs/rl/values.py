"""Are a blueprint's Q-values its action values? The check LBS's bootstrap stands on.

LBS-k plays a candidate move, the blueprint for k-1 more, and bootstraps with the VDN sum over seats of each
seat's Q of its greedy move, at states after moves the blueprint itself would not have made. So Q(s, a) must
price every legal move a as the points to come after (a, then the blueprint), not only rank the blueprint's
own. This compares them directly: on held-out states of the blueprint's own greedy games, for its move and
for every other legal move, Q(s, a) against the Monte-Carlo return of (a, then the blueprint) on the same
deck (the engine's deck is fixed by the deal, so the branches share every card still to come).
"""

from __future__ import annotations

import math

import torch

from ..acting import greedy, play
from ..hanabi import engine, public_features
from ..hanabi.config import GameConfig
from ..seeding import Stream, game_seeds, pack
from .actors import ActorConfig, run_round
from .r2d2 import players_as_rows, rows_as_players

HELD_OUT_START = 1 << 20
"""The value check's deals: games from here on of the blueprint validation stream, which no evaluation
reaches (they play its first games)."""
FIT_START = 1 << 30
"""The value fit's deals: games from here on of the blueprint training stream, which no actor reaches."""
FIT_CHUNK = 512
"""Games played at once by the value fit (bounds the recorded episodes' memory)."""


def returns_to_go(reward: torch.Tensor, gamma: float) -> torch.Tensor:
    """G_t = sum_k gamma^k r_{t+k}: [N, T] -> [N, T] (a reverse scan over steps, every game at once)."""
    out = torch.zeros_like(reward)
    acc = torch.zeros_like(reward[:, 0])
    for t in range(reward.shape[1] - 1, -1, -1):
        acc = reward[:, t] + gamma * acc
        out[:, t] = acc
    return out


def _regressors(net, game: GameConfig, eps: dict[str, torch.Tensor]) -> torch.Tensor:
    """[N, T, H + 2] what the VDN sum of the moves' Q is linear in, given the trunk: per step, the sum over
    seats of the head's input features, of 1 (the value stream's bias), and of the advantage of the move made
    (less the mean over the legal moves, as QHead takes it)."""
    priv, legal = players_as_rows(eps["priv"].float()), players_as_rows(eps["legal"])
    feats = {}
    hook = net.head.register_forward_hook(lambda mod, inp, out: feats.update(o=inp[0]))
    net(priv, public_features(game, priv), legal, net.initial_state(priv.shape[0], priv.device))
    hook.remove()
    o = feats["o"]
    a = net.head(o, legal) - net.head.value(o)
    made = a.gather(-1, players_as_rows(eps["action"]).long()[..., None]).double()
    x = torch.cat([o.double(), torch.ones_like(made), made], -1)  # [N * P, T, H + 2]
    return rows_as_players(x, eps["legal"].shape[0]).sum(2)


@torch.no_grad()
def fit_value_head(game: GameConfig, net, games: int, seed: int, gamma: float,
                   device: torch.device | str = "cpu", ridge: float = 1e-3, min_scale: float = 1e-3) -> dict:
    """Make an imitation network's Q the scale of values without moving a greedy choice: the dueling value
    stream and one positive scale of the advantage stream are refitted by least squares (a small ridge), every
    other weight as it was, so that the VDN sum of Q predicts the discounted points to come in `games` of the
    net's own greedy games. Adding one number to every move of a state and scaling its advantages by a
    positive number leave its best move as it was. TD learning then starts from values of the right size
    (Adam moves a bias by about its rate per step: a logit's offset would take tens of thousands). Returns
    what was fitted (the advantage scale and the fit's RMS error)."""
    if getattr(net.head, "value", None) is None:
        raise ValueError("a value fit needs a dueling network (NetConfig.dueling)")
    dev = torch.device(device)
    h = net.head.adv.in_features
    xtx = torch.zeros(h + 2, h + 2, dtype=torch.float64, device=dev)
    xty = torch.zeros(h + 2, dtype=torch.float64, device=dev)
    yy, n = 0.0, 0
    was = net.training
    net.eval()
    for first in range(0, games, FIT_CHUNK):
        k = min(FIT_CHUNK, games - first)
        seeds = game_seeds(Stream.BLUEPRINT_TRAIN, seed, k, start=FIT_START + first, device=dev)
        eps, _ = run_round(game, net.step, lambda rows: net.initial_state(rows, dev), seeds, 0,
                           ActorConfig(num_games=k, max_len=0))
        mask = eps["mask"]
        x, y = _regressors(net, game, eps)[mask], returns_to_go(eps["reward"].double(), gamma)[mask]
        xtx += x.T @ x
        xty += x.T @ y
        yy, n = yy + float(y @ y), n + y.shape[0]
    net.train(was)
    eye = torch.eye(h + 2, dtype=torch.float64, device=dev) * ridge * n
    eye[-2, -2] = eye[-1, -1] = 0.0  # no shrinkage of the bias or the scale
    w = torch.linalg.solve(xtx + eye, xty)
    if w[-1] <= min_scale:  # the scale must stay positive for the moves to stay: held there, the rest again
        rest = torch.linalg.solve(xtx[:-1, :-1] + eye[:-1, :-1], xty[:-1] - min_scale * xtx[:-1, -1])
        w = torch.cat([rest, rest.new_tensor([min_scale])])
    sse = yy - 2 * float(w @ xty) + float(w @ xtx @ w)
    net.head.value.weight.copy_(w[:h].float()[None])
    net.head.value.bias.fill_(float(w[h]))
    net.head.adv.weight.mul_(float(w[-1]))
    net.head.adv.bias.mul_(float(w[-1]))
    return {"advantage_scale": float(w[-1]), "rms": (max(sse, 0.0) / max(n, 1)) ** 0.5, "steps": float(n)}


@torch.no_grad()
def values_from_policy(net) -> None:
    """A HeldQNet's Q network starts as its policy network (the imitation network), so TD starts where it
    would without a policy network (fit_value_head then gives Q the scale of values)."""
    net.q.load_state_dict(net.policy.state_dict())


def _both(net, anchor, moves: list[torch.Tensor]):
    """A step that acts with `net` and also writes the anchor's greedy move on the same observation (its own
    recurrent state beside net's) into `moves`: how often the two policies choose differently, state by
    state, on net's own games."""

    def step(priv, publ, legal, hid):
        q, h = net.step(priv, publ, legal, hid[0])
        qa, ha = anchor.step(priv, publ, legal, hid[1])
        moves.append(torch.stack([greedy(q, legal), greedy(qa, legal)]))
        return q, (h, ha)

    def initial_state(rows: int, device: torch.device):
        return net.initial_state(rows, device), anchor.initial_state(rows, device)

    return step, initial_state


def _forcer(game: GameConfig, at: torch.Tensor, forced: torch.Tensor, path: torch.Tensor | None,
            legal_at: torch.Tensor):
    """The override of a branching play: row r makes move forced[r] at step at[r] where it is legal (and
    marks legal_at[r]); before that, with `path` [N, T] (one row per deal), the deal's recorded moves."""
    per_deal = forced.shape[0] // (path.shape[0] if path is not None else 1)

    def force(t, state, hid, move):
        legal = engine.legal_moves(game, state).gather(1, forced[:, None]).squeeze(1)
        hit = (at == t) & ~state.done & legal
        legal_at.logical_or_(hit)
        if path is not None:  # up to the branching step, the other net's game
            move = torch.where(at > t, path.repeat_interleave(per_deal, 0)[:, t], move)
        return torch.where(hit, forced, move)

    return force


def _add_return(ret: torch.Tensor, turn, at: torch.Tensor, gamma: float) -> None:
    """Add a step's reward to each row's return from its branching step at[r] on (discounted from there)."""
    power = (turn.t - at).clamp(min=0).double()
    ret.add_(torch.where(turn.t >= at, gamma ** power * turn.reward.double(), 0.0))


def reshuffled(decks: torch.Tensor, drawn: torch.Tensor, k: int, gen: torch.Generator) -> torch.Tensor:
    """[N * k, D]: k orders of each deck [N, D] whose first drawn[n] cards stay in place and whose rest is
    shuffled (the first of the k the deck as it was): the same deal up to where drawn cards were seen."""
    n, d = decks.shape
    pos = torch.arange(d, device=decks.device, dtype=torch.float64)
    keys = torch.rand(n, k, d, generator=gen, dtype=torch.float64).to(decks.device)
    keys[:, 0] = pos / d  # the deal's own order
    keys = torch.where(pos < drawn[:, None, None], pos - d, keys)  # the cards already drawn, first and kept
    return decks.repeat_interleave(k, 0).gather(1, keys.argsort(-1).reshape(n * k, d))


def _deck_floor(game: GameConfig, net, decks: torch.Tensor, at: torch.Tensor, drawn: torch.Tensor,
                path: torch.Tensor | None, own: torch.Tensor, legal: torch.Tensor, gamma: float, k: int,
                gen: torch.Generator) -> dict[str, float]:
    """floor_own / floor_other / floor_adv of value_check: every (deal, move) branch replayed on k deck
    orders (decks [N, D], at / drawn [N] the branching step and the cards dealt before it; own / legal
    [N, M] the net's greedy move and the legal ones there)."""
    n, m = own.shape
    dev = decks.device
    rows = n * k * m
    orders = reshuffled(decks, drawn, k, gen)  # [N * k, D]
    at_r = at.repeat_interleave(k * m)
    forced = torch.arange(m, device=dev).repeat(n * k)
    path_r = path.repeat_interleave(k, 0) if path is not None else None
    ret = torch.zeros(rows, dtype=torch.float64, device=dev)
    hit = torch.zeros(rows, dtype=torch.bool, device=dev)
    play(game, engine.initial_state(game, orders.repeat_interleave(m, 0)), net.step,
         net.initial_state(rows * game.players, dev), game.max_steps,
         hook=lambda turn: _add_return(ret, turn, at_r, gamma),
         override=_forcer(game, at_r, forced, path_r, hit))
    g = ret.reshape(n, k, m)
    g_own = (g * own[:, None]).sum(2, keepdim=True)
    has_own = own.any(1)
    out = {}
    for name, sel, value in (("own", legal & own, g), ("other", legal & ~own & has_own[:, None], g),
                             ("adv", legal & ~own & has_own[:, None], g - g_own)):
        spread = value.var(1)[sel]  # over the k orders, unbiased
        out[f"floor_{name}"] = float(spread.mean().sqrt()) if spread.numel() else math.nan
    return out


@torch.no_grad()
def value_check(game: GameConfig, net, games: int = 200, seed: int = 0, gamma: float = 1.0,
                device: torch.device | str = "cpu", anchor=None, along=None, reshuffles: int = 0
                ) -> dict[str, float]:
    """Q against returns on `games` held-out deals: per deal one state drawn uniformly from a greedy game (the
    net's own, or with `along` another network's, so several nets are checked on the same states), branched
    into one game per legal move (that move, then the net's greedy play).

    Returns (floats): rms_own / rms_other (RMS error of Q(s, a) against the return, gamma-discounted, for
    the net's greedy move / every other legal move), bias_own / bias_other (mean Q - return), corr_own /
    corr_other, n_own / n_other (states / moves compared), rms_adv / corr_adv (Q(s, a) - Q(s, own) against
    G(a) - G(own) on the same deck, every other legal move), sign_adv (the share of other moves whose return
    differs from the own move's by a point or more where Q orders the two the same way); the same three for
    the leaf value LBS-1 uses instead of Q(s, a) (rms_leaf_adv, corr_leaf_adv, sign_leaf_adv: the move's
    reward plus the team's Q at the next state), rms_leaf_other (that leaf value against G(a)), mean_return;
    with `anchor` (a network) also moves_kept: the share of moves on the net's own games where its greedy move
    is the anchor's. With `reshuffles` K >= 2 also floor_own / floor_other / floor_adv: every branch replayed
    on K orders of the cards not yet drawn at the branching step (the first the deal's own), the RMS spread
    of its return over them (of G(a) - G(own) for floor_adv). No function of what the seats see can be
    closer to one deal's return than that on average, so it bounds the rms columns from below (the hidden
    hands' spread would add to it)."""
    if reshuffles < 0 or reshuffles == 1:
        raise ValueError(f"reshuffles={reshuffles}: 0 (no floor) or at least 2 orders (a spread needs two)")
    dev = torch.device(device)
    was = net.training
    net.eval()
    try:
        return _check(game, net, games, seed, gamma, dev, anchor, along, reshuffles)
    finally:
        net.train(was)


def _check(game: GameConfig, net, games: int, seed: int, gamma: float, dev: torch.device, anchor, along,
           reshuffles: int = 0):
    p, moves = game.players, game.num_moves
    seeds = game_seeds(Stream.BLUEPRINT_VAL, seed, games, start=HELD_OUT_START, device=dev)
    out: dict[str, float] = {}
    # the net's own games: their lengths (where to branch) and, beside an anchor, whose moves it keeps
    chosen: list[torch.Tensor] = []
    q_fn, init = net.step, lambda rows: net.initial_state(rows, dev)
    if anchor is not None:
        anchor.eval()
        q_fn, both = _both(net, anchor, chosen)
        init = lambda rows: both(rows, dev)  # noqa: E731
    made: list[torch.Tensor] = []  # the moves of the games whose states are checked
    drawn: list[torch.Tensor] = []  # and the cards dealt before each of their steps

    def follow(turn) -> None:
        made.append(turn.move)
        drawn.append(turn.state.deck_pos)

    start = engine.reset(game, seeds)
    if along is None or anchor is not None:  # (with `along` and no anchor its own games are not needed)
        final, _ = play(game, start, q_fn, init(games * p), game.max_steps,
                        hook=follow if along is None else None)
    path = None  # the moves of the games whose states are checked, when they are another net's
    if along is not None:
        along.eval()
        final, _ = play(game, start, along.step, along.initial_state(games * p, dev),
                        game.max_steps, hook=follow)
        path = torch.stack(made, 1)  # [N, T]
    if anchor is not None:
        pairs = torch.stack(chosen, 1).reshape(2, len(chosen), games, p)  # [2, T, N, P]
        acting = pairs[0] < moves  # a seat that moves (not the no-op), in a game still running
        out["moves_kept"] = float((pairs[0] == pairs[1])[acting].double().mean())
    gen = torch.Generator().manual_seed(int(pack(Stream.BLUEPRINT_VAL, seed, 0)))
    length = final.num_steps.cpu()
    branch_at = (torch.rand(games, generator=gen) * length).long().clamp(max=length - 1).to(dev)  # [N]
    # one row per (deal, move): the same deck, the move forced at the branching step, then greedy play
    rows = games * moves
    at = branch_at.repeat_interleave(moves)
    forced = torch.arange(moves, device=dev).repeat(games)
    ret = torch.zeros(rows, dtype=torch.float64, device=dev)
    legal_at = torch.zeros(rows, dtype=torch.bool, device=dev)
    q_at = torch.zeros(rows, p, game.num_actions, device=dev)
    mover_at = torch.zeros(rows, dtype=torch.long, device=dev)
    # the value LBS-1 bootstraps with: the move's reward, then the team's Q of its greedy joint action at the
    # next state (the partner's view there sees the mover's cards); 0 where the move ended the game
    reward_at = torch.zeros(rows, dtype=torch.float64, device=dev)
    next_q = torch.zeros(rows, dtype=torch.float64, device=dev)

    force = _forcer(game, at, forced, path, legal_at)

    def keep(turn) -> None:
        t = turn.t
        here = at == t
        q_at.copy_(torch.where(here[:, None, None], turn.q.float(), q_at))
        mover_at.copy_(torch.where(here, turn.state.cur_player, mover_at))
        reward_at.copy_(torch.where(here, turn.reward.double(), reward_at))
        team = turn.q.double().gather(2, turn.action[..., None]).squeeze(2).sum(1)
        next_q.copy_(torch.where((at + 1 == t) & ~turn.state.done, team, next_q))
        _add_return(ret, turn, at, gamma)

    play(game, engine.reset(game, seeds.repeat_interleave(moves)), net.step, net.initial_state(rows * p, dev),
         game.max_steps, hook=keep, override=force)
    # Q_tot(s, a): the mover's Q of a plus every waiting seat's Q of its no-op (VDN)
    seat = torch.arange(p, device=dev)
    waiting = (q_at[..., -1] * (seat[None] != mover_at[:, None])).sum(1)
    q_mover = q_at.gather(1, mover_at[:, None, None].expand(-1, 1, q_at.shape[-1])).squeeze(1)  # [R, A]
    q_tot = q_mover.gather(1, forced[:, None]).squeeze(1) + waiting
    legal_mover = q_mover.new_zeros(q_mover.shape, dtype=torch.bool)
    legal_mover[:, :moves] = legal_at.reshape(games, moves).repeat_interleave(moves, 0)  # the deal's moves
    own = greedy(q_mover, legal_mover) == forced
    for name, sel in (("own", legal_at & own), ("other", legal_at & ~own)):
        q, g = q_tot[sel].double(), ret[sel]
        n = int(sel.sum())
        out[f"n_{name}"] = float(n)
        out[f"rms_{name}"] = float((q - g).pow(2).mean().sqrt()) if n else math.nan
        out[f"bias_{name}"] = float((q - g).mean()) if n else math.nan
        out[f"corr_{name}"] = float(torch.corrcoef(torch.stack([q, g]))[0, 1]) if n > 1 else math.nan
    # paired with the own move on the same deck: Q(s, a) - Q(s, own) against G(a) - G(own), the comparison
    # search makes; the deck's luck after the branching step partly cancels in the difference
    has_own = (legal_at & own).reshape(games, moves)
    q_own = (q_tot.double().reshape(games, moves) * has_own).sum(1, keepdim=True)
    g_own = (ret.reshape(games, moves) * has_own).sum(1, keepdim=True)
    sel = (legal_at & ~own).reshape(games, moves) & has_own.any(1, keepdim=True)
    dg = (ret.reshape(games, moves) - g_own)[sel]
    big = dg.abs() >= 1  # where the returns say the other move is better or worse by a point or more
    leaf = reward_at + gamma * next_q
    leaf_own = (leaf.reshape(games, moves) * has_own).sum(1, keepdim=True)
    n, n_big = int(sel.sum()), int(big.sum())
    for name, value, at_own in (("adv", q_tot.double(), q_own), ("leaf_adv", leaf, leaf_own)):
        d = (value.reshape(games, moves) - at_own)[sel]
        out[f"rms_{name}"] = float((d - dg).pow(2).mean().sqrt()) if n else math.nan
        out[f"corr_{name}"] = float(torch.corrcoef(torch.stack([d, dg]))[0, 1]) if n > 1 else math.nan
        # how often the value orders the two moves as their returns do
        out[f"sign_{name}"] = float(((d > 0) == (dg > 0))[big].double().mean()) if n_big else math.nan
    other = legal_at & ~own
    out["rms_leaf_other"] = float((leaf[other] - ret[other]).pow(2).mean().sqrt()) if n else math.nan
    out["mean_return"] = float(ret[legal_at & own].mean())
    if reshuffles >= 2:
        drawn_at = torch.stack(drawn, 1).gather(1, branch_at[:, None]).squeeze(1)  # [N]
        out.update(_deck_floor(game, net, start.deck, branch_at, drawn_at, path, own.reshape(games, moves),
                               legal_at.reshape(games, moves), gamma, reshuffles, gen))
    return out
