"""The captured-step path (lbs.graphs) gives exactly what eager play gives: actor rounds with exploration,
colour shuffles and recording hooks, evaluation, weight updates through the server, and search decisions.

On a CPU the captured step runs eagerly on its static buffers (what a replay does, minus the capture);
on a GPU the same tests replay real CUDA graphs and must still match eager bit for bit."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch
from conftest import DEVICES

from lbs.graphs import Graphs
from lbs.hanabi import GameConfig
from lbs.infer import InferenceServer, ServerConfig
from lbs.models import BeliefConfig, BeliefModel, NetConfig, make_qnet
from lbs.rl.actors import ActorConfig, run_round
from lbs.scoring import evaluate
from lbs.search.config import SearchConfig
from lbs.search.play import play_games
from lbs.search.setup import SearchSetup

GAME = GameConfig(players=2, colors=2, ranks=3, hand_size=3)
pytestmark = pytest.mark.usefixtures("one_thread")


def net(seed: int = 0):
    torch.manual_seed(seed)
    return make_qnet(GAME, NetConfig(hidden=16, lstm_layers=1, mlp_layers=1)).eval()


def _round(server: InferenceServer, seeds: torch.Tensor, episode: int, graphs: Graphs | None):
    cfg = ActorConfig(num_games=len(seeds), max_len=GAME.max_steps, shuffle_colors=True)
    eps = torch.linspace(0.05, 0.5, len(seeds), device=seeds.device)
    blueprint = server.qnet()
    with torch.no_grad(), blueprint.pinned() as weights:
        return run_round(GAME, blueprint.step, blueprint.initial_state, seeds, episode, cfg, eps=eps,
                         aux=True, graphs=graphs, weights=weights)


def _differ(a: dict, b: dict) -> list[str]:
    """The fields where two rounds differ (those in one only, if the field names differ)."""
    if a.keys() != b.keys():
        return sorted(a.keys() ^ b.keys())
    return [k for k in a if not torch.equal(a[k], b[k])]


def _same(a: dict, b: dict) -> bool:
    return not _differ(a, b)


@pytest.mark.parametrize("device", DEVICES)
def test_captured_actor_rounds_equal_eager_rounds_across_weight_updates(device):
    # a merging worker runs, as with search's groups: calls made while capturing must still run inline
    server = InferenceServer(net(0), device=device, cfg=ServerConfig(coalesce=True))
    graphs = Graphs(device)
    for episode, seeds in enumerate([torch.arange(6), torch.arange(6) + 100, torch.arange(6) + 200]):
        seeds = seeds.to(device)
        eager_ep, eager_stats = _round(server, seeds, episode, None)
        ep, stats = _round(server, seeds, episode, graphs)
        differ = _differ(ep, eager_ep) + _differ(stats, eager_stats)
        assert not differ, f"episode {episode}: captured and eager rounds differ in {differ}"
        assert ep["mask"].sum() > 20  # real games were recorded
        server.update_weights(net(episode + 1).state_dict())  # the next round reads the other copy
    # one capture per copy of the weights, reused by later rounds of the same shape
    assert graphs.captures == 2


@pytest.mark.parametrize("device", DEVICES)
def test_captured_evaluation_equals_eager(device):
    model = net(3).to(device)
    init = lambda b: model.initial_state(b, device)  # noqa: E731
    graphs = Graphs(device)
    with torch.no_grad():
        eager = evaluate(GAME, model.step, init, games=40, batch=16, device=device)
        captured = evaluate(GAME, model.step, init, games=40, batch=16, device=device, graphs=graphs)
    assert eager == captured and eager.mean > 0
    assert graphs.captures == 2  # batches of 16 and of the last 8 games
    # served as the blueprint trainer evaluates: the copy in use keys the capture, an update reads the other
    server = InferenceServer(net(0), device)
    learner = server.qnet()
    served = []
    for _ in range(3):
        server.update_weights(model.state_dict())
        with torch.no_grad(), learner.pinned() as weights:
            served.append(evaluate(GAME, learner.step, learner.initial_state, games=40, batch=16,
                                   device=device, graphs=graphs, weights=weights))
    with torch.no_grad():
        served_eager = evaluate(GAME, learner.step, learner.initial_state, games=40, batch=16, device=device)
    assert served == [served_eager] * 3
    if device == "cpu":  # (on CUDA the server's fp32 turns cuDNN's default TF32 off)
        assert served_eager == eager
    assert graphs.captures == 2 + 4  # two shapes per copy of the weights, reused by the third evaluation


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("depth", [1, None])
def test_captured_search_rollouts_make_the_same_decisions(device, depth):
    torch.manual_seed(0)
    model = BeliefModel(GAME, BeliefConfig(hidden=16, mlp_layers=1, lstm_layers=1, card_embed=4)).eval()
    cfg = SearchConfig(rollouts=400, min_rollouts=20, delta=0.0)
    mode = "lbs-inf" if depth is None else f"lbs-{depth}"
    runs = []
    with torch.no_grad():
        for graphs in (False, True):
            setup = SearchSetup.of(GAME, net(0), mode, replace(cfg, cuda_graphs=graphs), model, device)
            res = play_games(setup, games=4, seed=2, batch_games=4)
            runs.append([(r.record.moves, [(d["move"], d["candidates"]) for d in r.decisions]) for r in res])
    assert runs[0] == runs[1]
    assert sum(len(d) for _, d in runs[0]) > 0


def test_a_changed_shape_or_mode_is_a_new_capture_never_a_stale_one():
    """Greedy and exploring steps, and different batch sizes, never share a captured step."""
    bp = InferenceServer(net(0)).qnet()
    graphs = Graphs("cpu")
    seeds = torch.arange(4)
    cfg = ActorConfig(num_games=4, max_len=GAME.max_steps)
    with torch.no_grad():
        greedy = run_round(GAME, bp.step, bp.initial_state, seeds, 0, cfg, graphs=graphs)
        explore = run_round(GAME, bp.step, bp.initial_state, seeds, 0, cfg,
                            eps=torch.ones(4), graphs=graphs)
        cfg5 = replace(cfg, num_games=5)
        wider = run_round(GAME, bp.step, bp.initial_state, torch.arange(5), 0, cfg5, graphs=graphs)
        assert _same(greedy[0], run_round(GAME, bp.step, bp.initial_state, seeds, 0, cfg)[0])
        assert _same(explore[0], run_round(GAME, bp.step, bp.initial_state, seeds, 0, cfg,
                                           eps=torch.ones(4))[0])
        five = torch.arange(5)
        assert _same(wider[0], run_round(GAME, bp.step, bp.initial_state, five, 0, cfg5)[0])
    assert graphs.captures == 3
