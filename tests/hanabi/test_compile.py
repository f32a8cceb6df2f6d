"""torch.compile of the actor step (experiments/bench_env.py --compile): one graph, equal to eager.

On an H100 (torch 2.11) `bench_env.py --compile` failed in Inductor with `torch.bool is not supported
by torch.iinfo`: encode viewed its bool buffer as uint8 (`aten.view.dtype`), a bitcast Inductor could
not lower for bool before torch 2.12. The step also broke into several graphs (a host-side
`storage_offset()` read in encode; a cached property's lock), and every graph rebuilt the lookup
tables from Python lists, since torch.compile traces through functools.lru_cache. The checks here use
the ATen graphs AOT autograd hands the backend (no C++ compile, so they fit CI); the last test lowers
the observation encoding with Inductor itself.
"""

from __future__ import annotations

import pytest
import torch
from torch._dynamo.backends.common import aot_autograd

from lbs.hanabi import GameConfig, HanabiState, engine
from lbs.hanabi.encode import encode
from lbs.hanabi.random_play import actor_step, core_step, start

STEPS = 6


def recording_backend(graphs: list[torch.fx.GraphModule]):
    """A torch.compile backend that keeps each ATen forward graph and runs it as is."""

    def keep(gm: torch.fx.GraphModule, example_inputs):
        graphs.append(gm)
        return gm

    return aot_autograd(fw_compiler=keep)


def bool_bitcasts(graphs: list[torch.fx.GraphModule]) -> list[str]:
    """`aten.view.dtype` nodes whose input is bool: what Inductor before torch 2.12 cannot lower."""
    found = []
    for gm in graphs:
        for node in gm.graph.nodes:
            if node.target is torch.ops.aten.view.dtype:
                val = node.args[0].meta.get("val")
                if val is not None and val.dtype == torch.bool:
                    found.append(node.format_node())
    return found


def assert_states_equal(a: HanabiState, b: HanabiState) -> None:
    for name, x in vars(a).items():
        assert torch.equal(x, getattr(b, name)), name


@pytest.mark.parametrize("fn", [actor_step, core_step], ids=["actor", "core"])
def test_compiled_step_is_one_graph_and_equals_eager(fn, one_thread):
    """fullgraph=True (no graph break, so no host sync either) and bit-equal to eager over a few steps
    of a small variant, finished games restarting (actor) or idling (core)."""
    torch._dynamo.reset()
    cfg = GameConfig(players=2, colors=1, ranks=3, hand_size=2)  # games end within STEPS
    seeds = torch.arange(16)
    graphs: list[torch.fx.GraphModule] = []
    compiled = torch.compile(fn, dynamic=False, fullgraph=True, backend=recording_backend(graphs))
    runs = []
    for step_fn in (fn, compiled):
        state, episodes, outs = start(cfg, fn, seeds), torch.zeros_like(seeds), []
        for _ in range(STEPS):
            state, episodes, *out = step_fn(cfg, state, seeds, episodes, torch.float32)
            outs.append(out)
        runs.append((state, episodes, outs))
    (s_eager, e_eager, eager), (s_comp, e_comp, comp) = runs
    for t, (a, b) in enumerate(zip(eager, comp, strict=True)):
        for name, x, y in zip(("obs", "legal", "reward", "done"), a, b, strict=True):
            assert x.dtype == y.dtype and torch.equal(x, y), (t, name)
    assert torch.equal(e_eager, e_comp)
    if fn is actor_step:
        assert s_eager.episodes.sum() > 0  # finished games restarted
        assert torch.equal(s_eager.episodes, s_comp.episodes)
        s_eager, s_comp = s_eager.state, s_comp.state
    assert_states_equal(s_eager, s_comp)
    assert graphs, "the backend never ran"
    assert not bool_bitcasts(graphs), bool_bitcasts(graphs)


def test_compiled_step_reads_tables_instead_of_rebuilding_them():
    """Once built, the lookup tables enter the graph as inputs: it does not build them from Python lists
    (with functools.lru_cache every call of every compiled step did, then copied them to the device)."""
    torch._dynamo.reset()
    cfg = GameConfig(players=2, colors=2, ranks=3)
    state = engine.reset(cfg, torch.arange(4), torch.zeros(4, dtype=torch.long))
    graphs: list[torch.fx.GraphModule] = []

    def observe_and_step(state: HanabiState):
        legal = engine.legal_moves(cfg, state)
        return encode(cfg, state), engine.step(cfg, state, legal.long().argmax(1))[0].hands

    compiled = torch.compile(observe_and_step, fullgraph=True, backend=recording_backend(graphs))
    compiled(state)  # a cold cache: this call builds the tables (in the graph) and stores them
    compiled(state)  # the cache changed, so this call recompiles and reads them
    built = [n for n in graphs[-1].graph.nodes if n.target is torch.ops.aten.lift_fresh_copy.default]
    assert not built, [n.format_node() for n in built]


def test_inductor_lowers_the_encoding(one_thread):
    """Inductor itself (C++ on CPU) compiles the canonical encoding, bool buffer included, and agrees
    with eager for float and uint8 observations."""
    torch._dynamo.reset()
    cfg = GameConfig(players=2, colors=1, ranks=3, hand_size=2)
    state = engine.reset(cfg, torch.arange(8), torch.zeros(8, dtype=torch.long))
    for dtype in (torch.float32, torch.uint8):
        compiled = torch.compile(encode, fullgraph=True, dynamic=False)
        assert torch.equal(compiled(cfg, state, dtype=dtype), encode(cfg, state, dtype=dtype))
