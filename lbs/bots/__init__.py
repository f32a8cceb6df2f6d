"""Rule-based blueprints, batched behind the networks' step."""

from .smartbot import SmartBot, SmartBotState

__all__ = ["SmartBot", "SmartBotState"]
