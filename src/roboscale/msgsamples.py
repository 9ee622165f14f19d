"""One sample message of a type of the user's (`roboscale.msgtypes`), filled with content
that is not constant and sized: what a typed payload carries. Lab side (rosbags)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from roboscale.errors import UserError

if TYPE_CHECKING:
    from rosbags.typesys.store import Typestore

    from roboscale.msgtypes import TypeSet

NESTED_SEQUENCE = 2  # elements of an array inside an element of another array

_DTYPE = {"bool": "bool", "byte": "uint8", "char": "uint8"}
_INT_MODULUS = {"int8": 100, "uint8": 251, "byte": 251, "char": 251}


class Filler:
    """Builds a message of a store's type with content that is not constant: numbers
    follow waves and counters, strings are numbered; every variable-length array gets
    `count` elements (bounded ones at most their bound), arrays inside the elements of
    another array NESTED_SEQUENCE. Deterministic: the same type and count give the same
    message."""

    def __init__(self, store: Typestore, count: int) -> None:
        self.store = store
        self.count = count
        self.k = 0

    def message(self, name: str, nested: bool = False) -> Any:
        _, fields = self.store.fielddefs[name]
        return self.store.types[name](**{f: self.value(d, nested) for f, d in fields})

    def value(self, desc: Any, nested: bool) -> Any:
        from rosbags.interfaces import Nodetype

        kind, detail = desc
        self.k += 1
        if kind == Nodetype.BASE:
            return self.scalar(detail[0], detail[1])
        if kind == Nodetype.NAME:
            return self.message(detail, nested)
        inner, length = detail
        if kind == Nodetype.SEQUENCE:
            wanted = NESTED_SEQUENCE if nested else self.count
            length, nested = min(wanted, length) if length else wanted, True
        return self.array(inner, length, nested)

    def scalar(self, typ: str, bound: int) -> Any:
        k = self.k
        if typ == "string":
            return f"roboscale-{k}"[: bound or None]
        if typ == "bool":
            return k % 2 == 1
        if typ.startswith("float"):
            return round(100 * math.sin(0.1 * k), 3)
        return (k * 7 + 3) % _INT_MODULUS.get(typ, 1000)

    def array(self, inner: Any, length: int, nested: bool) -> Any:
        import numpy as np
        from rosbags.interfaces import Nodetype

        kind, detail = inner
        if kind != Nodetype.BASE or detail[0] == "string":
            return [self.value(inner, nested) for _ in range(length)]
        typ, start = detail[0], self.k
        steps = np.arange(start, start + length)
        if typ.startswith("float"):
            values: Any = 100 * np.sin(0.01 * steps)
        elif typ == "bool":
            values = steps % 2 == 1
        else:
            values = (steps * 7 + 3) % _INT_MODULUS.get(typ, 1000)
        return values.astype(_DTYPE.get(typ, typ))


def cdr_sample(types: TypeSet, name: str, count: int) -> bytes:
    msg = Filler(types.ros2, count).message(name)
    return bytes(types.ros2.serialize_cdr(msg, name))


def sequence_count(types: TypeSet, name: str, size: int) -> int:
    """Elements per variable-length array so that the CDR message is about `size` bytes;
    a UserError if the type cannot be that size."""
    base, one = len(cdr_sample(types, name, 0)), len(cdr_sample(types, name, 1))
    if one == base:
        raise UserError(f"{name} has a fixed size of {base} B (no variable-length array); "
                        "remove its size")  # fmt: skip
    if size < base:
        raise UserError(f"{name} is at least {base} B; allowed: a size from {base} B")
    count = (size - base) // (one - base)
    bounds = _sequence_bounds(types, name)
    if 0 not in bounds and count > max(bounds):
        biggest = len(cdr_sample(types, name, max(bounds)))
        raise UserError(f"{name} is at most {biggest} B (its arrays are bounded); "
                        f"allowed: a size up to {biggest} B")  # fmt: skip
    return count


def _sequence_bounds(types: TypeSet, name: str) -> list[int]:
    """The bounds (0: none) of the variable-length arrays a payload's size fills: those
    not inside an element of another one."""
    from rosbags.interfaces import Nodetype

    def walk(desc: Any) -> list[int]:
        kind, detail = desc
        if kind == Nodetype.NAME:
            return [b for _, d in types.ros2.fielddefs[detail][1] for b in walk(d)]
        if kind == Nodetype.ARRAY:
            return walk(detail[0])
        return [detail[1]] if kind == Nodetype.SEQUENCE else []

    return walk((Nodetype.NAME, name))
