"""One translator from pydantic's ValidationError to file:line: field: what is allowed.

Specs (spec/loader.py) and launch files (runtime/launchspec.py, YAML or roslaunch XML)
both go through `to_spec_errors`. It lies beneath every package (it imports only
`errors` and `yamlfile`), so the runtime uses it without the spec.

A location is walked through the model's annotations: lists are indexed, and a tagged
union (`Annotated[A | B, Discriminator(...)]`) puts its tag into pydantic's location,
which is dropped here: the user wrote `children[0].argv`, not `children[0].command.argv`.
"""

from __future__ import annotations

import difflib
import types
import typing
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, ValidationError

from roboscale.errors import SpecError, SpecErrors
from roboscale.yamlfile import KeyPath, LineMap, dotted, line_for


def _no_allowed(loc: KeyPath) -> str:
    return ""


def _unwrap(tp: Any) -> Any:
    while typing.get_origin(tp) is typing.Annotated:
        tp = typing.get_args(tp)[0]
    return tp


def _members(tp: Any) -> list[Any]:
    origin = typing.get_origin(tp)
    if origin is typing.Union or origin is types.UnionType:
        return [_unwrap(a) for a in typing.get_args(tp)]
    return [tp]


def _is_model(tp: Any) -> bool:
    return isinstance(tp, type) and issubclass(tp, BaseModel)


def _names(model: type[BaseModel]) -> list[str]:
    return [f.alias or name for name, f in model.model_fields.items()]


def walk(model: type[BaseModel], loc: KeyPath) -> tuple[KeyPath, list[str]]:
    """`loc` without union tags, and the field names of the mapping holding its last part."""
    current: Any = model
    shown: list[str | int] = []
    fields: list[str] = _names(model)
    for i, part in enumerate(loc):
        current = _unwrap(current)
        union = [m for m in _members(current) if _is_model(m)]
        if isinstance(part, str) and len(union) > 1 and i < len(loc) - 1:
            chosen = [m for m in union if part in _names(m)]
            if chosen:  # pydantic's tag: pick that member, show nothing
                current = chosen[0]
                continue
        shown.append(part)
        if isinstance(part, int):
            args = typing.get_args(current)
            current = args[-1] if args else Any
            continue
        models = [m for m in _members(current) if _is_model(m)]
        if models:
            fields = _names(models[0])
            field = next(
                (f for n, f in models[0].model_fields.items() if part in (n, f.alias)), None
            )
            current = field.annotation if field is not None else Any
        else:
            current = Any
    return tuple(shown), fields


def message(err: Any, loc: KeyPath, names: list[str], allowed: str) -> str:
    """What is wrong and what is allowed, for one of pydantic's errors."""
    if err["type"] == "extra_forbidden":
        close = difflib.get_close_matches(str(loc[-1]), names, n=1)
        guess = f"; did you mean '{close[0]}'?" if close else ";"
        return f"unknown field{guess} allowed fields here: {', '.join(names)}"
    if err["type"] == "missing":
        return f"required field is missing; expected {allowed}" if allowed else "required"
    msg = str(err["msg"]).removeprefix("Value error, ")
    if "allowed:" in msg:
        return msg
    given = err.get("input")
    quoted = isinstance(given, dict | list) or repr(given) in msg
    shown = "" if quoted else f" (got {_shortened(repr(given))})"
    return f"{msg}{shown}; allowed: {allowed}" if allowed else f"{msg}{shown}"


MAX_SHOWN = 60  # characters of a wrong value echoed into its one-line error


def _shortened(text: str) -> str:
    return text if len(text) <= MAX_SHOWN else text[: MAX_SHOWN - 1] + "…"


def to_spec_errors(
    e: ValidationError,
    file: str,
    lines: LineMap,
    model: type[BaseModel],
    *,
    allowed: Callable[[KeyPath], str] = _no_allowed,
    shown_as: Callable[[KeyPath], tuple[KeyPath, LineMap]] | None = None,
) -> SpecErrors:
    """One SpecError per problem, in file order. `allowed(loc)` says what a field takes;
    `shown_as(loc)` may name a location otherwise (the spec's quick section)."""
    errors = []
    for err in e.errors():
        loc, names = walk(model, tuple(err["loc"]))
        shown, where = shown_as(loc) if shown_as is not None else (loc, lines)
        text = message(err, loc, names, allowed(loc))
        errors.append(SpecError(file, line_for(shown, where), dotted(shown), text))
    errors.sort(key=lambda x: (x.line or 0, x.field))
    return SpecErrors(errors)
