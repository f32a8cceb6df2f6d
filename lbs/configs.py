"""Dataclass configs as plain dicts (inside every checkpoint) and as command-line flags.

`from_dict` is the one load path for stored configs: fields a config gained after a file was written
take the value that reproduces the old behaviour (a class's LEGACY_DEFAULTS), not today's default.
The library never parses argv itself; the thin scripts in train/ and search/ build their parsers here.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import functools
import inspect
import json
import textwrap
import types
import typing
from collections.abc import Callable
from typing import Any


@functools.cache
def field_docs(cls: type) -> dict[str, str]:
    """The docstring under each field of a dataclass (the string literal that follows it in the source),
    so --help can show what the code already documents."""
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(cls)))
    except (OSError, TypeError):
        return {}
    body = tree.body[0].body if tree.body and isinstance(tree.body[0], ast.ClassDef) else []
    docs = {}
    for node, nxt in zip(body, body[1:], strict=False):
        named = isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)
        if named and isinstance(nxt, ast.Expr) and isinstance(nxt.value, ast.Constant) \
                and isinstance(nxt.value.value, str):
            docs[node.target.id] = " ".join(nxt.value.value.split())
    return docs


def check(cfg: Any, name: str, ok: bool, allowed: str) -> None:
    """Raise ValueError naming the field, its value and the allowed range when `ok` is false."""
    if not ok:
        raise ValueError(f"{type(cfg).__name__}.{name}={getattr(cfg, name)!r}: must be {allowed}")


def is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _leaf_fields(cls: type, prefix: str = "") -> list[tuple[str, Any, str]]:
    """(dotted name, type, docstring) for every non-dataclass field, recursing into nested dataclasses."""
    hints = typing.get_type_hints(cls)
    docs = field_docs(cls)
    out = []
    for f in dataclasses.fields(cls):
        t = hints[f.name]
        if dataclasses.is_dataclass(t):
            out += _leaf_fields(t, f"{prefix}{f.name}.")
        else:
            out.append((prefix + f.name, t, docs.get(f.name, "")))
    return out


def _get(obj: Any, dotted: str) -> Any:
    for part in dotted.split("."):
        obj = getattr(obj, part)
    return obj


def flag_names(name: str) -> list[str]:
    """--a_b and its --a-b spelling (both are accepted everywhere)."""
    dashed = name.replace("_", "-")
    return [f"--{name}"] + ([f"--{dashed}"] if dashed != name else [])


def _items_of(t: Any) -> type | None:
    """The dataclass of a `tuple[Item, ...]` field (a list of configs, e.g. a recipe's phases), else None."""
    args = typing.get_args(t)
    if typing.get_origin(t) is tuple and args and dataclasses.is_dataclass(args[0]):
        return args[0]
    return None


def _parser_for(t: Any):
    item = _items_of(t)
    if item is not None:  # a JSON list of the items' fields

        def parse_items(s: str) -> tuple:
            try:
                rows = json.loads(s)
                if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
                    raise ValueError("not a list of objects")
                return tuple(from_dict(item, r) for r in rows)
            except (ValueError, TypeError) as e:  # (json's error is a ValueError)
                raise argparse.ArgumentTypeError(f"expected a JSON list of {item.__name__} fields: {e}") \
                    from None

        return parse_items
    origin = typing.get_origin(t)
    if origin is typing.Literal:  # its values are the flag's choices (_choices)
        return type(typing.get_args(t)[0])
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


def _choices(t: Any) -> tuple | None:
    """The values a `Literal[...]` field accepts (its flag's choices, shown by --help), else None."""
    return typing.get_args(t) if typing.get_origin(t) is typing.Literal else None


def add_dataclass_args(ap: argparse.ArgumentParser, cls: type, defaults: Any = None,
                       title: str = "", skip: tuple[str, ...] = ()) -> None:
    """Add one optional --dotted.name flag per leaf field (also spelled with dashes), with the field's
    docstring and its value in `defaults` (the preset in use) as help; not for the fields in `skip` (set
    another way). The parsed default stays None, meaning "keep the preset's (or the resumed checkpoint's)
    value". A boolean flag given alone means true (--flag, --flag true, --flag false); a `Literal[...]` field
    takes one of its values (argparse's choices: any other is refused in one line)."""
    group = ap.add_argument_group(title or f"{cls.__name__} fields (override any preset value)")
    for name, t, doc in _leaf_fields(cls):
        if name in skip:
            continue
        shown = f" [{_shown(_get(defaults, name))}]" if defaults is not None else ""
        alone = {"nargs": "?", "const": True} if t is bool else {}
        choices = _choices(t)
        group.add_argument(
            *flag_names(name), dest=name, type=_parser_for(t), default=None, **alone, choices=choices,
            metavar=None if choices else getattr(t, "__name__", "VALUE"),
            help=(doc + shown).replace("%", "%%") or None,
        )


def _shown(value: Any) -> str:
    """A default as --help shows it: a tuple of configs as the JSON its flag takes."""
    if isinstance(value, tuple) and value and dataclasses.is_dataclass(value[0]):
        return json.dumps([dataclasses.asdict(v) for v in value])
    return repr(value)


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
            t, v = hints[f.name], d[f.name]
            item = _items_of(t)
            if dataclasses.is_dataclass(t):
                v = from_dict(t, v)
            elif item is not None:
                v = tuple(r if isinstance(r, item) else from_dict(item, r) for r in v)
            kwargs[f.name] = v
    return cls(**kwargs)


def trainer_parser(doc: str, cls: type, presets: dict[str, Any], preset: str, *, preset_help: str,
                   resume_help: str, progress_help: str = "no progress bar (also --no-progress)",
                   extra: Callable[[argparse.ArgumentParser], None] | None = None) -> argparse.ArgumentParser:
    """A train/ script's flags: its own (`extra`, first), the ones every trainer shares (--preset, --resume,
    --overwrite, --threads, --no-progress), then `cls`'s fields with `preset`'s values shown as defaults."""
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    if extra is not None:
        extra(ap)
    ap.add_argument("--preset", default=None, choices=sorted(presets), help=preset_help)
    ap.add_argument("--resume", default=None, help=resume_help)
    ap.add_argument("--overwrite", action="store_true", help="allow a new run in a folder that holds one")
    ap.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: torch's default)")
    ap.add_argument(*flag_names("no_progress"), dest="no_progress", action="store_true", help=progress_help)
    title = f"{cls.__name__} fields; [values] are the {preset!r} preset's, any flag overrides them"
    add_dataclass_args(ap, cls, defaults=presets.get(preset, presets["tiny"]), title=title)
    return ap


def preset_named(argv: list[str] | None) -> str:
    """The --preset on a command line (tiny without one), read before the full parser exists: its values
    become the defaults --help shows."""
    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument("--preset", default="tiny")
    return pre.parse_known_args(argv)[0].preset
