"""Loading shipped and trained models, and choosing the device: what search and evaluation need
without importing a trainer.

A checkpoint carries its configs, so the file alone rebuilds its model. Blueprint files (kind
"blueprint") hold the trainer's config with `game` and `net`, and the weights under `model`; belief
files (kind "belief") hold the belief trainer's config with `model`, the game, the weights under
`state_dict` (prefixed "model.") and the blueprint's path and sha256.
"""

from __future__ import annotations

from pathlib import Path

import torch

from .. import ckpt
from ..bots import SmartBot, VanDenBergh
from ..configs import from_dict
from ..hanabi.config import GameConfig
from .belief import BeliefConfig, BeliefModel
from .qnet import NetConfig, QNet, make_qnet

BLUEPRINT_KIND, BELIEF_KIND = "blueprint", "belief"
RULE_BOTS = {SmartBot.name: SmartBot, VanDenBergh.name: VanDenBergh}
"""Blueprints that need no checkpoint: where a blueprint file is expected, their name loads them."""


def is_rule_bot(path: str | Path | None) -> bool:
    return path is not None and str(path) in RULE_BOTS


SHIPPED_BELIEFS = {"blueprint_2p.pt": "belief_2p.pt", "blueprint_2c.pt": "belief_2c.pt"}
"""The beliefs shipped in checkpoints/ for the shipped blueprint files; a rule bot's for P players is
belief_<bot>_<P>p.pt."""


def shipped_belief(blueprint: str | Path, checkpoints: Path, players: int | None = None) -> str | None:
    """The belief shipped in `checkpoints` for `blueprint` when it is a shipped one (a file of that folder,
    or a rule bot by name, for `players` players, default 2); None for any other blueprint, which needs a
    belief trained for it, and for a player count with none shipped."""
    if is_rule_bot(blueprint):
        name = f"belief_{blueprint}_{players or GameConfig().players}p.pt"
    else:
        path = Path(blueprint)
        shipped = path.is_file() and path.resolve().parent == checkpoints.resolve()
        name = SHIPPED_BELIEFS.get(path.name) if shipped else None
    return str(checkpoints / name) if name and (checkpoints / name).is_file() else None


DEVICE_NAMES = "auto, cpu, cuda or cuda:N"


def is_device_name(name: str) -> bool:
    """Whether `name` reads as a device (a config checks the name; resolve_device, the machine)."""
    kind, colon, index = str(name).partition(":")
    cuda = kind == "cuda" and (not colon or index.isdigit())
    return name == "auto" or (kind == "cpu" and not colon) or cuda


def resolve_device(name: str) -> torch.device:
    """The one reading of every --device flag: 'auto' picks CUDA when present; anything else must be cpu,
    cuda or cuda:N of a GPU this machine has (ValueError in one line otherwise, e.g. gpu9 or mps)."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    kind, _, index = name.partition(":")
    if not is_device_name(name):
        raise ValueError(f"--device {name}: unknown device; choose {DEVICE_NAMES}")
    if kind == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"--device {name}: CUDA is not available on this machine")
    if kind == "cuda" and index and int(index) >= torch.cuda.device_count():
        raise ValueError(f"--device {name}: this machine has {torch.cuda.device_count()} CUDA device(s)")
    return torch.device(name)


TRAINING_RECORDS = ("counters", "history", "starts")
"""What a blueprint file keeps of its training (train/blueprint.py): its counters, its evaluations (with each
phase's value check) and how each start of the run was asked for."""


def training_record(blob: dict) -> dict:
    """A blueprint file's training record: its own fields, or, in a shipped file, the record it carries under
    "trained", where the trainer does not mistake it for a run to resume."""
    return blob.get("trained") or {k: blob[k] for k in TRAINING_RECORDS if k in blob}


def float_weights(weights: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Shipped files are fp16; models run in fp32."""
    return {k: v.float() if v.is_floating_point() else v for k, v in weights.items()}


def load_blueprint(path: str | Path, device: torch.device | str = "cpu", game: GameConfig | None = None,
                   players: int | None = None) -> tuple[GameConfig, QNet | SmartBot]:
    """(GameConfig, network in eval mode on `device`) from a blueprint checkpoint; weights as float32.
    With game, the stored game config must equal it (ckpt.CheckpointError otherwise); with players, its
    player count (ValueError otherwise: a checkpoint carries its game).

    A rule bot's name instead of a path ("smartbot") gives that bot for `game`, else the standard game for
    `players` (default 2); a game it cannot play raises ValueError naming the field."""
    if players is not None and game is not None and players != game.players:
        raise ValueError(f"players {players} and a {game.players}-player game given")
    if is_rule_bot(path):
        if game is None:
            game = GameConfig(players=players) if players is not None else GameConfig()
        return game, RULE_BOTS[str(path)](game, device)
    blob = ckpt.load(path, BLUEPRINT_KIND, game=game.to_dict() if game else None, map_location="cpu")
    try:
        stored_game = GameConfig.from_dict(blob["config"]["game"])
        net = make_qnet(stored_game, from_dict(NetConfig, blob["config"]["net"]))
        net.load_state_dict(float_weights(blob["model"]))
    except (KeyError, TypeError, ValueError, RuntimeError) as e:
        raise ckpt.CheckpointError(f"{path}: not a loadable blueprint ({type(e).__name__}: {e})") from e
    if players is not None and players != stored_game.players:
        raise ValueError(f"--players {players}: {path} is a {stored_game.players}-player blueprint (a "
                         "checkpoint carries its own game)")
    return stored_game, net.to(device).eval()


class OtherBlueprint(ckpt.CheckpointError):
    """A belief trained for another blueprint than the one given."""


def check_blueprint_hash(blob: dict, path: str | Path, sha256: str | None,
                         blueprint: str | Path = "") -> None:
    """A belief is only valid for the exact blueprint whose games it learned from (OtherBlueprint)."""
    stored = blob.get("blueprint", {})
    if sha256 is not None and stored.get("sha256") != sha256:
        trained = _identity_words(stored.get("path"), stored.get("sha256"))
        raise OtherBlueprint(f"{path} was trained for {trained}, but the blueprint given is "
                             f"{_identity_words(blueprint, sha256)}: a different blueprint")


def _identity_words(path: object, identity: object) -> str:
    """A blueprint as a person would name it: a rule bot by its name, a file by its path and hash."""
    if is_rule_bot(path):
        return f"the rule bot {str(path)!r}"
    named = f"{str(path)!r} " if path else "the file "
    return f"{named}(sha256 {str(identity)[:16]}...)"


def blueprint_identity(blueprint: str | Path) -> str:
    """What a belief records of its blueprint to recognise it later: a checkpoint's sha256, a rule bot's
    name. ckpt.CheckpointError for a file that cannot be read."""
    if is_rule_bot(blueprint):
        return str(blueprint)
    return ckpt.file_hash(blueprint, "blueprint checkpoint")


def stored_blueprint_path(blob: dict, belief_path: str | Path) -> Path | str:
    """The blueprint a belief checkpoint names. A relative path is relative to the belief file's own
    folder (so shipped files work from any working directory); an absolute one is used as is; a rule bot
    is its name."""
    try:
        name = blob["blueprint"]["path"]
        stored = Path(name)
    except (KeyError, TypeError) as e:
        raise ckpt.CheckpointError(f"{belief_path} names no blueprint; pass the blueprint explicitly") from e
    if is_rule_bot(name):
        return name
    return stored if stored.is_absolute() else Path(belief_path).parent / stored


def load_belief(path: str | Path, blueprint_path: str | Path | None = None, game: GameConfig | None = None,
                device: torch.device | str = "cpu") -> tuple[GameConfig, BeliefModel]:
    """(GameConfig, BeliefModel in eval mode on `device`) from a belief checkpoint.

    With blueprint_path, that file's sha256 (or that rule bot's name) must be the one the belief was trained
    for (OtherBlueprint otherwise); with game, the stored game config must equal it (ckpt.CheckpointError).
    """
    blob = ckpt.load(path, BELIEF_KIND, game=game.to_dict() if game else None, map_location="cpu")
    if blueprint_path is not None:
        check_blueprint_hash(blob, path, blueprint_identity(blueprint_path), blueprint_path)
    try:
        stored_game = GameConfig.from_dict(blob["game"])
        cfg = from_dict(BeliefConfig, blob["config"]["model"])
        net = make_qnet(stored_game, from_dict(NetConfig, blob["blueprint_net"])) if cfg.blueprint_features \
            else None  # the blueprint network the encoder reads: its shape here, its weights in state_dict
        model = BeliefModel(stored_game, cfg, net)
        weights = {k.removeprefix("model."): v for k, v in blob["state_dict"].items()
                   if k.startswith("model.")}
        model.load_state_dict(float_weights(weights))
    except (KeyError, TypeError, ValueError, RuntimeError) as e:
        raise ckpt.CheckpointError(f"{path}: not a loadable belief ({type(e).__name__}: {e})") from e
    model.conventions = blob.get("conventions", "")
    if model.conventions and not is_rule_bot(model.conventions):
        raise ckpt.CheckpointError(f"{path}: names conventions {model.conventions!r}, not a rule bot "
                                   f"({', '.join(RULE_BOTS)})")
    return stored_game, model.to(device).eval()
