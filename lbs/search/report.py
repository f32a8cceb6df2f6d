"""What a search run reports: scores against the blueprint on the same deals, cost, and behaviour."""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import asdict, dataclass

import torch

from ..scoring import EvalResult, summarize
from .agent import GameResult


@dataclass
class SearchSummary:
    """Every number a run prints (and writes to its JSON result). Definitions:

    score: the searching team's final scores (mean ± s.e.m.); blueprint: the blueprint alone on the same
    deals; paired_diff: mean of (search - blueprint) per deal ± its standard error; seconds_per_game and
    seconds_per_search: wall time of the search run per game and per searched move; rollouts_per_s:
    rollouts (one candidate move on one sampled hand, played out) per wall second; deviation_pct: searched
    moves where the search move replaced the blueprint move; fallback_pct: searched moves where too few
    sampled hands were valid and the blueprint move was played; knowledge and belief_type: LBS only, where
    its hands were drawn (SearchConfig.knowledge and belief_type), None for a mode that draws none from a
    belief. A tree search (MO-ISMCTS, RIS-MCTS; every seat searches) counts MCTS iterations as its rollouts
    (each plays one simulation to the end), and has decision_depth: the mean over searched moves of the
    deepest node of the move's tree (the paper's decision depth); None for the other modes.
    """

    mode: str
    games: int
    score: EvalResult
    blueprint: EvalResult | None
    paired_diff: float
    paired_sem: float
    seconds: float
    seconds_per_game: float
    seconds_per_search: float
    searched_moves: int
    rollouts: int
    rollouts_per_s: float
    deviation_pct: float
    fallback_pct: float
    knowledge: str | None = None
    belief_type: str | None = None
    decision_depth: float | None = None

    def lines(self) -> list[str]:
        k, b = self.knowledge, self.belief_type or "learned"
        drawn = f"; --belief-type {b} --knowledge {k}: hands drawn {drawn_from(b, k)}" if k else ""
        out = [f"{self.mode}: {self.score}{drawn}"]
        if self.blueprint is not None:
            out.append(f"blueprint on the same deals: {self.blueprint}")
            out.append(f"paired difference (search - blueprint): {self.paired_diff:+.3f} ± "
                       f"{self.paired_sem:.3f} over {self.games} deals: "
                       f"{verdict(self.paired_diff, self.paired_sem, self.games)}")
        unit = "iterations" if self.decision_depth is not None else "rollouts"
        out.append(
            f"time: {self.seconds_per_game:.2f} s per game, {self.seconds_per_search:.3f} s per searched "
            f"move ({self.searched_moves} searched moves), {self.rollouts_per_s:,.0f} {unit}/s"
        )
        if self.decision_depth is not None:
            out.append(f"tree search at every seat: {self.rollouts / max(self.searched_moves, 1):.0f} "
                       f"iterations per move, mean decision depth {self.decision_depth:.2f}")
            return out
        out.append(
            f"search moves that deviate from the blueprint: {self.deviation_pct:.1f}%, sampler fallbacks "
            f"(too few valid hands, or a range above --max-range): {self.fallback_pct:.1f}%"
        )
        return out

    def to_dict(self) -> dict:
        return asdict(self)


def drawn_from(belief_type: str, knowledge: str) -> str:
    """Where LBS drew its hands (SearchConfig.belief_type and knowledge), as a result line says it."""
    belief = {"learned": "the learned belief", "bayes": "the Bayesian belief"}[belief_type]
    return f"from {belief} within SmartBot's public card knowledge" if knowledge == "smartbot" else \
        f"from {belief} alone"


def verdict(diff: float, sem: float, games: int) -> str:
    """What a paired difference says, plainly: more than noise (at least 2 standard errors) or not, and then
    about how many deals would tell a difference of this size from none."""
    if games < 2:
        return "one deal, no error estimate: not a result"
    if abs(diff) >= 2 * sem and sem > 0:
        return f"{abs(diff) / sem:.1f} standard errors {'above' if diff > 0 else 'below'} the blueprint"
    if diff == 0:
        return "no difference" if sem == 0 else "within noise (no mean difference)"
    need = math.floor(round((2 * sem * math.sqrt(games) / abs(diff)) ** 2, 6)) + 1  # then 2 s.e. < |diff|
    return (f"within noise (|difference| < 2 s.e.): about {need:,} deals would tell a difference this size "
            "from none")


def deviations(results: list[GameResult]) -> str:
    """One line: how often the search replaced each kind of blueprint move (play, discard, hint) by each."""
    kinds: Counter[str] = Counter()
    for r in results:
        for d in r.decisions:
            if d["deviated"]:
                kind = {c["id"]: name.strip("(").split()[0].replace("Reveal", "hint").lower()
                        for name, c in d["candidates"].items()}
                kinds[f"{kind[d['blueprint']]} -> {kind[d['move']]}"] += 1
    if not kinds:
        return "the search never replaced a blueprint move"
    return (f"blueprint moves replaced ({sum(kinds.values())}), by kind: "
            + ", ".join(f"{k} {n}" for k, n in kinds.most_common()))


def _scores(results: list[GameResult]) -> torch.Tensor:
    return torch.tensor([float(r.record.score) for r in results], dtype=torch.float64)


def paired_difference(search: torch.Tensor, base: torch.Tensor) -> tuple[float, float]:
    """Mean of (search - base) over the same deals [N] ± its standard error (0 with one deal)."""
    d = search.double() - base.double()
    n = d.numel()
    return float(d.mean()), float(d.std(unbiased=True) / math.sqrt(n)) if n > 1 else 0.0


def evaluation(results: list[GameResult], game_max: int) -> EvalResult:
    s = _scores(results)
    return summarize(
        s,
        s == game_max,
        torch.tensor([r.bombed for r in results]),
        torch.tensor([float(len(r.record.moves)) for r in results]),
    )


def summarize_run(
    mode: str, results: list[GameResult], blueprint: list[GameResult] | None, seconds: float, max_score: int,
    knowledge: str | None = None, belief_type: str | None = None, tree: bool = False,
) -> SearchSummary:
    """The summary of a run, paired with the blueprint's games on the same deals when given; knowledge and
    belief_type: an LBS run's SearchConfig fields (SearchSetup.knowledge_shown and belief_shown); tree: a
    tree search's run (its decisions carry their depth)."""
    n = len(results)
    searched = sum(r.searched for r in results)
    rollouts = sum(r.rollouts for r in results)
    pair = blueprint is not None
    diff, sem = paired_difference(_scores(results), _scores(blueprint)) if pair else (math.nan, math.nan)
    return SearchSummary(
        mode=mode,
        games=n,
        score=evaluation(results, max_score),
        blueprint=evaluation(blueprint, max_score) if blueprint is not None else None,
        paired_diff=diff,
        paired_sem=sem,
        seconds=seconds,
        seconds_per_game=seconds / max(n, 1),
        seconds_per_search=seconds / max(searched, 1),
        searched_moves=searched,
        rollouts=rollouts,
        rollouts_per_s=rollouts / max(seconds, 1e-9),
        deviation_pct=100.0 * sum(r.deviated for r in results) / max(searched, 1),
        fallback_pct=100.0 * sum(r.fallbacks for r in results) / max(searched, 1),
        knowledge=knowledge,
        belief_type=belief_type,
        decision_depth=_mean_depth(results) if tree else None,
    )


def _mean_depth(results: list[GameResult]) -> float:
    depths = [d["depth"] for r in results for d in r.decisions]
    return sum(depths) / max(len(depths), 1)
