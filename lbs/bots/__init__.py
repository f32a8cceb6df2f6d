"""Rule-based blueprints, batched behind the networks' step."""

from .smartbot import SmartBot, SmartBotState
from .vandenbergh import VanDenBergh, VanDenBerghState

__all__ = ["SmartBot", "SmartBotState", "VanDenBergh", "VanDenBerghState"]
