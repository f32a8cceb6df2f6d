"""The inference server: the one owner of model weights on the device (see server.py).

    server = InferenceServer(blueprint, device, ServerConfig())   # the blueprint is served as "qnet"
    server.register("belief", belief_model)
    q, hid = server.qnet().step(priv, publ, legal, hid)
    hands = server.belief().sample(context, seeds, hand_len, k=16)

weights.py holds the double-buffered copies and runs forward passes; merging.py the worker that merges
concurrent callers; handles.py the typed handles whose methods are the models' own.
"""

from .handles import BeliefHandle, ModelHandle, QNetHandle
from .merging import ServerStats
from .server import BELIEF, QNET, InferenceServer, ServerConfig
from .weights import tf32_matmuls

__all__ = [
    "BELIEF",
    "QNET",
    "BeliefHandle",
    "InferenceServer",
    "ModelHandle",
    "QNetHandle",
    "ServerConfig",
    "ServerStats",
    "tf32_matmuls",
]
