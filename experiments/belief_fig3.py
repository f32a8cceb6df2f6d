"""LBS paper Fig. 3 for our models: per-card cross-entropy of the true hand against the turn number,
learned belief vs grounded belief (and the counting prior alone), over blueprint games; plus belief
sampling throughput.

    python experiments/belief_fig3.py --belief runs/belief/latest.pt --games 1000
    python experiments/belief_fig3.py --belief runs/belief/latest.pt --blueprint bp.pt --device cuda

Games are greedy blueprint self-play on held-out deals (evaluate_belief: seeds 0..games-1, episode
-1-seed, never a training deal). Every player's own hand at every turn counts; the learned belief reads
the player's observations turn by turn; the grounded belief is lbs.belief.sampling.grounded_belief
(public card counts x hint plausibility, slots independent, the paper's eq. 7); "counting" is the same
counts taken slot by slot (copies used by earlier slots removed), the prior a count_prior belief
starts from, so learned < counting is what the network learned from the blueprint's play.
Throughput: K hands per query sampled from the learned belief at real positions, then filtered
exactly (sample_valid); we report valid hands per second, one query per call as search issues them,
plus the paper-size network (random weights, full 2-player game) for the cost of the reference model.
Writes runs/experiments/belief_fig3_<date>_<tag>.{png,csv,md}; --record writes into the tracked
experiments/results/belief_fig3/.
"""

from __future__ import annotations

import argparse
import csv
import datetime
import sys
import time
from pathlib import Path

import torch

from lbs import ckpt
from lbs.belief.constraints import HandConstraints
from lbs.belief.constraints import from_obs as constraints_from_obs
from lbs.belief.data import episodes_to_streams
from lbs.belief.evaluate import evaluate_belief
from lbs.belief.sampling import sample_valid
from lbs.hanabi import GameConfig, engine
from lbs.hanabi.encode import encode
from lbs.models import (
    BeliefConfig,
    BeliefModel,
    load_belief,
    load_blueprint,
    resolve_device,
    stored_blueprint_path,
)
from lbs.rl.actors import ActorConfig, run_round

if __package__:  # python -m experiments.belief_fig3, or imported
    from .common import machine
else:  # python experiments/belief_fig3.py: this folder is first on the import path
    from common import machine

RESULTS = Path(__file__).resolve().parent / "results" / "belief_fig3"


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _query(cons: HandConstraints, i: int) -> HandConstraints:
    return HandConstraints(cons.unseen[i : i + 1], cons.color_plausible[i : i + 1],
                           cons.rank_plausible[i : i + 1], cons.hand_len[i : i + 1])


def sampling_throughput(model: BeliefModel, context: torch.Tensor, cons: HandConstraints, k: int,
                        device: torch.device, reps: int = 1) -> dict[str, float]:
    """Sample k hands for each query (one query per call, after one warm-up call) and filter them."""
    q = context.shape[0]
    sample_valid(model, context[:1], k, torch.zeros(1, dtype=torch.long, device=device), _query(cons, 0))
    _sync(device)
    valid = 0
    t0 = time.perf_counter()
    for r in range(reps):
        for i in range(q):
            seeds = torch.full((1,), r * q + i + 1, dtype=torch.long, device=device)
            out = sample_valid(model, context[i : i + 1], k, seeds, _query(cons, i))
            valid += int(out.num_valid.sum())
    _sync(device)
    dt = time.perf_counter() - t0
    calls = reps * q
    return {"queries": calls, "k": k, "seconds": dt, "ms_per_query": 1e3 * dt / calls,
            "hands_per_s": calls * k / dt, "valid_per_s": valid / dt, "acceptance": valid / (calls * k)}


def real_queries(game: GameConfig, model: BeliefModel, net, n: int, device: torch.device, seed: int):
    """Contexts [n, E] and constraints at positions of greedy blueprint games where the player holds cards."""
    seeds = torch.arange(n, device=device)
    episodes, _ = run_round(game, net.step, lambda b: net.initial_state(b, device), seeds, -1000 - seed,
                            ActorConfig(num_games=n, max_len=game.max_steps))
    s = episodes_to_streams(episodes)
    held = (s["hand"] >= 0).any(-1)  # [S, T]
    lengths = held.sum(1)
    rows = torch.arange(n, device=device) * game.players  # player 0 of each game
    turns = (torch.arange(n, device=device) * 7) % lengths[rows].clamp(min=1)  # spread over the game
    with torch.no_grad():
        context, _ = model.encode(s["priv"][rows].float())
    ctx = context[torch.arange(n, device=device), turns]
    cons = constraints_from_obs(game, s["priv"][rows, turns])
    return ctx, cons


def paper_size_throughput(k: int, device: torch.device, queries: int) -> dict[str, float]:
    """Random-weight reference-size belief on the full 2-player game (cost only; acceptance means little)."""
    game = GameConfig(players=2)
    torch.manual_seed(0)
    model = BeliefModel(game, BeliefConfig()).to(device).eval()
    state = engine.reset(game, torch.arange(queries, device=device))
    obs = encode(game, state)[:, 0]  # [Q, D] player 0 at the deal
    with torch.no_grad():
        context, _ = model.encode(obs[:, None])
    return sampling_throughput(model, context[:, 0], constraints_from_obs(game, obs), k, device)


def turn_ranges(turns: list[int]) -> str:
    if not turns:
        return "none"
    out, start, prev = [], turns[0], turns[0]
    for t in turns[1:] + [None]:
        if t is None or t != prev + 1:
            out.append(f"{start}" if start == prev else f"{start}-{prev}")
            if t is not None:
                start = t
        if t is not None:
            prev = t
    return ", ".join(out)


def plot(path: Path, ev, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    turns = [t for t, c in enumerate(ev.cards_by_turn) if c > 0]
    fig, ax = plt.subplots(figsize=(7, 4.2))
    for name, ys, mean, style in (("learned belief", ev.learned_by_turn, ev.nll_learned, "-"),
                                  ("grounded belief (eq. 7)", ev.grounded_by_turn, ev.nll_grounded, "-"),
                                  ("counting prior alone", ev.counting_by_turn, ev.nll_counting, ":")):
        ax.plot(turns, [ys[t] for t in turns], style, label=f"{name} (mean {mean:.3f})")
    ax.set_xlabel("turn")
    ax.set_ylabel("cross-entropy per card (nats)")
    ax.set_title(title, fontsize=9)
    ax.grid(alpha=0.3)
    ax2 = ax.twinx()
    ax2.fill_between(turns, [ev.cards_by_turn[t] for t in turns], color="grey", alpha=0.12, step="mid")
    ax2.set_ylabel("cards scored at this turn", color="grey")
    ax.set_zorder(ax2.get_zorder() + 1)  # curves in front of the card-count area
    ax.patch.set_visible(False)
    ax.legend(loc="best")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--belief", required=True, help="belief checkpoint (train/belief.py)")
    ap.add_argument("--blueprint", default=None, help="default: the one --belief names")
    ap.add_argument("--games", type=int, default=1000)
    ap.add_argument("--batch", type=int, default=250, help="games played in lockstep")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--acceptance-k", type=int, default=32,
                    help="hands sampled per player and turn for the acceptance column (0: skip)")
    ap.add_argument("--k", type=int, default=10_000, help="hands per query for the throughput measurement")
    ap.add_argument("--queries", type=int, default=16, help="queries timed per model")
    ap.add_argument("--paper-queries", type=int, default=2, help="queries timed, paper-size model (0: skip)")
    ap.add_argument("--device", default="auto")
    ap.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: torch's default)")
    ap.add_argument("--tag", default="", help="suffix of the result files (default: the device type)")
    ap.add_argument("--out", default="runs/experiments", help="folder for the results (default: scratch)")
    ap.add_argument("--record", action="store_true", help="write into the tracked results/belief_fig3/")
    args = ap.parse_args(argv)
    if args.record:
        args.out = str(RESULTS)
    if args.threads:
        torch.set_num_threads(args.threads)
    device = resolve_device(args.device)
    try:
        blob = ckpt.load(args.belief, "belief")
        bp_path = args.blueprint or str(stored_blueprint_path(blob, args.belief))
    except ckpt.CheckpointError as e:
        sys.exit(f"belief_fig3: {e}")
    step = blob.get("step", blob.get("global_step", "?"))  # shipped files carry global_step only
    game, model = load_belief(args.belief, blueprint_path=bp_path, device=device)  # checks the blueprint hash
    _, net = load_blueprint(bp_path, device=device, game=game)

    t0 = time.time()
    ev = evaluate_belief(game, model, net.step, lambda b: net.initial_state(b, device), games=args.games,
                         seed=args.seed, batch=min(args.batch, args.games), acceptance_k=args.acceptance_k,
                         device=device)
    eval_s = time.time() - t0
    print(ev, f"({eval_s:.0f} s)")
    live = [t for t, c in enumerate(ev.cards_by_turn) if c > 0]
    better = [t for t in live if ev.learned_by_turn[t] < ev.grounded_by_turn[t]]
    beyond = [t for t in live if ev.learned_by_turn[t] < ev.counting_by_turn[t]]

    ctx, cons = real_queries(game, model, net, args.queries, device, args.seed)
    thr = {f"learned ({device.type})": sampling_throughput(model, ctx, cons, args.k, device)}
    if device.type == "cuda":
        cpu = torch.device("cpu")
        thr["learned (cpu)"] = sampling_throughput(model.to(cpu), ctx.to(cpu), HandConstraints(
            *(x.to(cpu) for x in (cons.unseen, cons.color_plausible, cons.rank_plausible, cons.hand_len))),
            args.k, cpu)
        model.to(device)
    if args.paper_queries:
        devs = [device] + ([torch.device("cpu")] if device.type == "cuda" else [])
        for d in devs:
            name = f"paper-size, random weights ({d.type})"
            thr[name] = paper_size_throughput(args.k, d, args.paper_queries)
    for name, r in thr.items():
        print(f"{name}: {r['valid_per_s']:.0f} valid hands/s ({r['hands_per_s']:.0f} sampled/s, "
              f"{r['ms_per_query']:.1f} ms per query of K={r['k']}, acceptance {r['acceptance']:.3f})")

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    stem = f"belief_fig3_{datetime.date.today().isoformat()}_{args.tag or device.type}"
    title = (f"{game.players}p {game.colors}c{game.ranks}r, belief step {step}, "
             f"{args.games} greedy blueprint games")
    plot(out / f"{stem}.png", ev, title)
    with open(out / f"{stem}.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["turn", "cards", "learned_nll_per_card", "grounded_nll_per_card", "counting_nll_per_card",
                    "acceptance"])
        for t in live:
            acc = ev.acceptance_by_turn[t] if ev.acceptance_by_turn else ""
            w.writerow([t, ev.cards_by_turn[t], f"{ev.learned_by_turn[t]:.5f}",
                        f"{ev.grounded_by_turn[t]:.5f}", f"{ev.counting_by_turn[t]:.5f}",
                        f"{acc:.4f}" if acc != "" else ""])
    bp_blob = ckpt.load(bp_path, "blueprint")
    best_score = max((h["mean"] for h in bp_blob.get("history", [])), default=float("nan"))
    lines = [
        "# Belief cross-entropy by turn (LBS Fig. 3) and sampling throughput, "
        f"{datetime.datetime.now():%Y-%m-%d %H:%M}",
        "",
        f"- machine: {machine()}",
        f"- command: `{' '.join([Path(sys.executable).name, *sys.argv])}`",
        f"- game: {game.to_dict()}",
        f"- blueprint: `{bp_path}` (sha256 {ckpt.file_hash(bp_path)[:16]}..., "
        f"{bp_blob['counters']['updates']} updates, best greedy score {best_score:.3f})",
        f"- belief: `{args.belief}` (step {step}, model {blob['config']['model']}, "
        f"explore {blob['config']['explore']})",
        f"- evaluation: {args.games} greedy games, seeds 0..{args.games - 1}, episode {-1 - args.seed} "
        f"(held out), {eval_s:.0f} s",
        "",
        "## Cross-entropy per card (nats), all players, all turns",
        "",
        "| belief | mean NLL per card |",
        "|---|---|",
        f"| learned | {ev.nll_learned:.4f} |",
        f"| grounded (eq. 7, slots independent) | {ev.nll_grounded:.4f} |",
        f"| counting prior alone (slot by slot, no network) | {ev.nll_counting:.4f} |",
        "",
        f"Learned beats grounded on average: **{'yes' if ev.nll_learned < ev.nll_grounded else 'no'}** "
        f"({ev.nll_grounded - ev.nll_learned:+.4f} nats per card in favour of learned). Per turn, learned is "
        f"lower at {len(better)} of {len(live)} turns: {turn_ranges(better)}; grounded is lower or equal at "
        f"{turn_ranges([t for t in live if t not in better])}.",
        "",
        f"Learned beats the counting prior alone (what the network learned from the blueprint's play): "
        f"{ev.nll_counting - ev.nll_learned:+.4f} nats per card; lower at {len(beyond)} of {len(live)} "
        f"turns: {turn_ranges(beyond)}.",
        "",
        f"![fig3]({stem}.png)",
        "",
        "| turn | cards | learned | grounded | counting | learned − grounded | acceptance |",
        "|---|---|---|---|---|---|---|",
    ]
    for t in live:
        acc = f"{ev.acceptance_by_turn[t]:.3f}" if ev.acceptance_by_turn else "-"
        lt, gt, ct = ev.learned_by_turn[t], ev.grounded_by_turn[t], ev.counting_by_turn[t]
        lines.append(f"| {t} | {ev.cards_by_turn[t]} | {lt:.4f} | {gt:.4f} | {ct:.4f} | {lt - gt:+.4f} "
                     f"| {acc} |")
    lines += [
        "",
        f"acceptance = fraction of {args.acceptance_k} plain (unguided) samples per player and turn that "
        "pass "
        "the exact filter (hints and card counts).",
        "",
        f"## Belief sampling throughput (K = {args.k} hands per query, one query per call)",
        "",
        "| model | queries | ms per query | sampled hands/s | valid hands/s | acceptance |",
        "|---|---|---|---|---|---|",
    ]
    for name, r in thr.items():
        lines.append(f"| {name} | {r['queries']} | {r['ms_per_query']:.1f} | {r['hands_per_s']:.0f} | "
                     f"{r['valid_per_s']:.0f} | {r['acceptance']:.3f} |")
    lines += ["", "No GPU on this machine." if not torch.cuda.is_available() else "", ""]
    (out / f"{stem}.md").write_text("\n".join(lines))
    print(f"wrote {out / stem}.{{png,csv,md}}")


if __name__ == "__main__":
    main()
