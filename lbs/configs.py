"""Dataclass configs as plain dicts (inside every checkpoint) and as command-line flags.

`from_dict` is the one load path for stored configs: fields a config gained after a file was written
take the value that reproduces the old behaviour (a class's LEGACY_DEFAULTS), not today's default.
The library never parses argv itself; the thin scripts in train/ and search/ build their parsers here.
"""

from __future__ import annotations

import argparse
import dataclasses
import types
import typing
from typing import Any


def _leaf_fields(cls: type, prefix: str = "") -> list[tuple[str, Any, Any]]:
    """(dotted name, type, default) for every non-dataclass field, recursing into nested dataclasses."""
    hints = typing.get_type_hints(cls)
    out = []
    for f in dataclasses.fields(cls):
        t = hints[f.name]
        if dataclasses.is_dataclass(t):
            out += _leaf_fields(t, f"{prefix}{f.name}.")
        else:
            out.append((prefix + f.name, t, f))
    return out


def _parser_for(t: Any):
    origin = typing.get_origin(t)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(t) if a is not type(None)]
        inner = _parser_for(args[0])
        return lambda s: None if s.lower() == "none" else inner(s)
    if t is bool:

        def parse_bool(s: str) -> bool:
            if s.lower() in ("1", "true", "yes", "on"):
                return True
            if s.lower() in ("0", "false", "no", "off"):
                return False
            raise argparse.ArgumentTypeError(f"expected a boolean, got {s!r}")

        return parse_bool
    return t


def add_dataclass_args(ap: argparse.ArgumentParser, cls: type) -> None:
    """Add one optional --dotted.name flag per leaf field (default None = keep the preset's value)."""
    group = ap.add_argument_group(f"{cls.__name__} fields (override any preset value)")
    for name, t, _ in _leaf_fields(cls):
        group.add_argument(
            f"--{name}", type=_parser_for(t), default=None, metavar=getattr(t, "__name__", "VALUE")
        )


def apply_overrides(cfg: Any, args: argparse.Namespace) -> Any:
    """A copy of cfg with every given flag replaced (nested dataclasses are rebuilt, so they validate)."""
    values = vars(args)

    def rebuild(obj: Any, prefix: str) -> Any:
        changes = {}
        for f in dataclasses.fields(obj):
            cur = getattr(obj, f.name)
            if dataclasses.is_dataclass(cur):
                changes[f.name] = rebuild(cur, f"{prefix}{f.name}.")
            elif values.get(prefix + f.name) is not None:
                changes[f.name] = values[prefix + f.name]
        return dataclasses.replace(obj, **changes)

    return rebuild(cfg, "")


def to_dict(cfg: Any) -> dict:
    return dataclasses.asdict(cfg)


def from_dict(cls: type, d: dict) -> Any:
    """Rebuild a nested dataclass config from to_dict's output (unknown keys are an error; missing keys
    take the class's LEGACY_DEFAULTS, then its defaults)."""
    hints = typing.get_type_hints(cls)
    d = {**getattr(cls, "LEGACY_DEFAULTS", {}), **d}
    kwargs = {}
    names = {f.name for f in dataclasses.fields(cls)}
    unknown = set(d) - names
    if unknown:
        raise ValueError(f"unknown {cls.__name__} fields: {sorted(unknown)}")
    for f in dataclasses.fields(cls):
        if f.name in d:
            t = hints[f.name]
            kwargs[f.name] = from_dict(t, d[f.name]) if dataclasses.is_dataclass(t) else d[f.name]
    return cls(**kwargs)
