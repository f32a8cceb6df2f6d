# ruff: noqa: E501  (the model cards below are Markdown)
"""Shipping a trained model into checkpoints/: fp16 weights with their configs, one file per model, and a model
card beside it that says how it was made (from the run's own record) and how well it does (scored as shipped).

Only files a train/ command made ship: a blueprint run's checkpoint (train/blueprint.py: best.pt or
latest.pt) and a belief run's (train/belief.py). A shipped file replaces the previous one of its name.
"""

from __future__ import annotations

import datetime
import os
from pathlib import Path

import torch

from . import ckpt
from .belief.evaluate import evaluate_belief
from .machine import machine
from .models.io import (
    BELIEF_KIND,
    BLUEPRINT_KIND,
    is_rule_bot,
    load_belief,
    load_blueprint,
    training_record,
)
from .scoring import evaluate
from .search.config import SearchConfig


def _card(path: Path, loader: str, body: str, command: str, notes: str) -> str:
    """The model card beside `path`: `body`, the file line, how it was shipped, then the notes (once)."""
    size_mb = path.stat().st_size / 2**20
    card = (f"{body.rstrip()}\n"
            f"- File: `{path}`, {size_mb:.1f} MB, fp16 weights, configs inside (`{loader}`).\n"
            f"- Shipped {datetime.date.today()} on {machine()} by `{command}`.\n"
            + (f"\n{notes.strip()}\n" if notes.strip() else ""))
    ckpt.write_atomic(path.with_suffix(".md"), card.encode())  # as the weights: whole or not at all
    return card


def _phase_words(p: dict, by_policy: bool = False) -> str:
    if p["kind"] == "imitate":
        words = [f"imitate {p['demonstrator']}"]
        words += [f"DAgger {p['dagger']:g}"] * bool(p["dagger"])
        words += [f"losing plays weighed {p['bomb_weight']:g}"] * bool(p["bomb_weight"])
        return ", ".join(words)
    if by_policy and p["kind"] == "values":
        hold = ", the Q network alone (moves held by the policy network)"
    else:
        hold = f", anchor held by margin {p['anchor_margin']:g} x {p['anchor_weight']:g}" if p["anchor_weight"] else ""
    explore = f", behaviour eps base {p['eps_base']:g}" if p.get("eps_base") is not None else ""
    decay = " (decaying to 0)" if p["kind"] == "improve" and p["anchor_weight"] else ""
    what = {"values": "TD policy evaluation of the anchor", "improve": "R2D2 improvement"}[p["kind"]]
    return f"{what}{explore}{hold}{decay}"


def recipe_lines(blob: dict) -> str:
    """The card's account of a blueprint run: every phase with its length and what it ended at, the run's
    totals, and each start's command and machine."""
    cfg, rec = blob["config"], training_record(blob)
    history, counters = rec.get("history", []), rec.get("counters", {})
    lines = ["| phase | what | updates | lr | at its end: score | value check: RMS own / other | moves kept |",
             "|---|---|---|---|---|---|---|"]
    end = 0
    for i, p in enumerate(cfg["phases"]):
        end += p["updates"]
        row = next((h for h in history if h["updates"] == end), None)
        score = f"{row['mean']:.2f} ± {row['sem']:.2f} ({row['games']} games)" if row else "not reached"
        check = row.get("value_check", {}) if row else {}
        rms = f"{check['rms_own']:.2f} / {check['rms_other']:.2f}" if check else ""
        kept = f"{100 * check['moves_kept']:.1f}%" if "moves_kept" in check else ""
        lr = p["lr"] if p["lr"] is not None else cfg["lr"]
        words = _phase_words(p, cfg["net"].get("policy_net", False))
        lines.append(f"| {i} | {words} | {p['updates']:,} | {lr:g} | {score} | {rms} | {kept} |")
    cpu = history[-1]["cpu_seconds"] / 60 if history else float("nan")
    lines += ["", f"- Run: {counters.get('updates', 0):,} updates, {counters.get('demo_games', 0):,} demonstrator "
              f"games, {counters.get('episodes', 0):,} self-play episodes, {cpu:.0f} CPU minutes of the "
              f"training process ({counters.get('wall_seconds', 0) / 3600:.2f} h wall). The value check "
              "(lbs.rl.values): Q of the blueprint's own move and of every other legal move against the return "
              "of that move then the blueprint, on held-out states; moves kept: the share of its greedy moves "
              "that are the anchor's."]
    for s in rec.get("starts", []):
        lines.append(f"- From update {s['updates']:,}: `{s['command']}` on {s['machine']}.")
    return "\n".join(lines) + "\n"


def ship_blueprint(run_file: str | Path, name: str, games: int, device: torch.device, folder: Path,
                   command: str, notes: str = "") -> str:
    """checkpoints/<name>.pt from a blueprint run's checkpoint (weights in fp16, config, game, the run's record),
    scored as shipped on `games` evaluation deals; the card's text."""
    blob = ckpt.load(run_file, BLUEPRINT_KIND)
    if "counters" not in blob or "phases" not in blob.get("config", {}):
        raise ckpt.CheckpointError(f"{run_file}: not a checkpoint of a train/blueprint.py run")
    out = folder / f"{name}.pt"
    payload = {"config": blob["config"], "game": blob["game"], "model": ckpt.half_state_dict(blob["model"]),
               "trained": training_record(blob)}
    ckpt.save(out, BLUEPRINT_KIND, payload)
    game, net = load_blueprint(out, device=device)
    mover = net.mover  # the moves alone are scored (a policy network's Q is not run)
    with torch.no_grad():
        res = evaluate(game, mover.step, lambda b: mover.initial_state(b, device), games, seed=0, batch=1000,
                       device=device)
    body = f"""# {name}: Hanabi blueprint ({game.players} players, {game.colors} colours x {game.ranks} ranks)

**Score: {res.mean:.2f} ± {res.sem:.2f}** (greedy self-play, {res.games} games, seeds 0..{res.games - 1} of
`python train/score.py {out} --games {res.games}`); perfect {100 * res.perfect:.1f}%,
bomb-out {100 * res.bombed:.1f}%, mean length {res.mean_length:.1f} moves. Scored with the fp16 weights as shipped.

Made by `train/blueprint.py` from `{run_file}` (its recipe, phase by phase):

{recipe_lines(blob)}- Game: `{game}`
- Network: `{net.cfg}`
"""
    return _card(out, "lbs.models.load_blueprint", body, command, notes)


def ship_belief(run_file: str | Path, blueprint: str, name: str, games: int, device: torch.device,
                folder: Path, command: str, notes: str = "") -> str:
    """checkpoints/<name>.pt from a belief run's checkpoint, tied to the blueprint it was trained for (that
    file, by sha256, or rule bot), scored as shipped on held-out games; the card's text."""
    load_belief(run_file, blueprint_path=blueprint)  # refuses a belief for another blueprint
    blob = ckpt.load(run_file, BELIEF_KIND)
    out = folder / f"{name}.pt"
    payload = {
        "config": blob["config"],
        "game": blob["game"],
        # relative to the belief file's folder, so the pair loads from any working directory
        "blueprint": {"sha256": blob["blueprint"]["sha256"],
                      "path": blueprint if is_rule_bot(blueprint) else os.path.relpath(blueprint, out.parent)},
        "state_dict": ckpt.half_state_dict(blob["state_dict"]),
        "step": blob.get("step", blob.get("global_step")),
        "validation": blob.get("validation", {}),
        **({"conventions": blob["conventions"]} if blob.get("conventions") else {}),
        **({"blueprint_net": blob["blueprint_net"]} if "blueprint_net" in blob else {}),
    }
    ckpt.save(out, BELIEF_KIND, payload)
    game, model = load_belief(out, blueprint_path=blueprint, device=device)
    _, net = load_blueprint(blueprint, device=device, game=game)
    net = net.mover
    with torch.no_grad():
        res = evaluate_belief(game, model, net.step, lambda b: net.initial_state(b, device), games=games,
                              device=device)
    turns = [t for t, n in enumerate(res.cards_by_turn) if n > 0]
    wins = sum(res.learned_by_turn[t] < res.grounded_by_turn[t] for t in turns)
    beyond = sum(res.learned_by_turn[t] < res.counting_by_turn[t] for t in turns)
    tied = ("a rule bot, taken by name: the belief loads with no other blueprint" if is_rule_bot(blueprint)
            else f"sha256 `{blob['blueprint'].get('sha256', '?')}`; loading with another blueprint raises")
    conv = blob.get("conventions", "")
    conventions = (f"\n- Conventions: the blueprint learnt {conv}'s from its games (the belief trainer read its "
                   "recipe)." if conv else "")
    conventions += (f"\n- Search: LBS draws from this belief alone or within SmartBot's public card knowledge, "
                    f"followed from the searcher's own observations (`--knowledge none|smartbot`; default "
                    f"`{SearchConfig.knowledge}`).")
    cfg = blob["config"]
    val = blob.get("validation", {})
    best = (f"; the lowest validation NLL ({val['best_nll']:.3f} per card, {cfg['val_games']} games) at step "
            f"{val['best_step']}" if val.get("best_step", -1) >= 0 else "")
    warm = "none" if not cfg.get("init") else f"`{cfg['init']}`" + (
        f" (sha256 `{blob['init_sha256']}`)" if blob.get("init_sha256") else "")
    weighed = (f", the card played or discarded weighing {cfg['acted_weight']:g} in the loss"
               if cfg.get("acted_weight", 1.0) != 1.0 else "")
    body = f"""# {name}: learned belief for `{blueprint}`

**Cross-entropy of the true hand: {res.nll_learned:.3f} nats per card** (learned) vs {res.nll_grounded:.3f} for the
grounded belief (card counts + hints, the LBS paper's eq. 7), over {res.games} held-out greedy blueprint
games; the learned belief is lower at {wins} of {len(turns)} turns. Scored with the fp16 weights as shipped.
The counting prior alone (the same counts slot by slot, no network) scores {res.nll_counting:.3f}: the learned
belief is lower at {beyond} of {len(turns)} turns; that gap is what it learned from the blueprint's play.

- Blueprint: `{blueprint}` ({tied}).{conventions}
- Made by `train/belief.py` from `{run_file}`: step {blob.get("step")} of {cfg["total_steps"]:,}{best}; warm start
  {warm}.
- Model: `{model.cfg}`
- Training: lr {cfg["lr"]}, batch {cfg["batch_size"]} streams, replay {cfg["replay_capacity"]} streams (refilled at
  {cfg["data_ratio"]} streams per stream sampled), explore {cfg["explore"]}{weighed}.
- Game: `{game}`
"""
    return _card(out, "lbs.models.load_belief", body, command, notes)
