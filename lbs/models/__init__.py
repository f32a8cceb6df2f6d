"""Networks (Q-networks, the belief model, test doubles) and loading them from checkpoints.

Nothing here imports a trainer, Lightning or wandb: search and evaluation load models from here.
"""

from .belief import BeliefConfig, BeliefModel
from .doubles import FixedQNet
from .io import (
    BELIEF_KIND,
    BLUEPRINT_KIND,
    RULE_BOTS,
    OtherBlueprint,
    is_rule_bot,
    load_belief,
    load_blueprint,
    resolve_device,
    stored_blueprint_path,
    training_record,
)
from .qnet import HiddenState, NetConfig, QNet, make_qnet

__all__ = [
    "BELIEF_KIND",
    "BLUEPRINT_KIND",
    "RULE_BOTS",
    "BeliefConfig",
    "BeliefModel",
    "FixedQNet",
    "HiddenState",
    "NetConfig",
    "OtherBlueprint",
    "QNet",
    "is_rule_bot",
    "load_belief",
    "load_blueprint",
    "make_qnet",
    "resolve_device",
    "stored_blueprint_path",
    "training_record",
]
