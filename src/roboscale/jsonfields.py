"""A JSON object read field by field, each as the type its reader asks for.

Stdlib only: agents (in Debian's system Python for ros1) read their node configs with
it. What one process writes and another reads is checked on reading: a field of another
type, or a missing one, is a `FieldError` (a ValueError) naming the field, never a
dataclass silently holding a value of the wrong type.
"""

from __future__ import annotations

from collections.abc import Mapping


class FieldError(ValueError):
    """A field missing, or of another type than its reader allows."""


class Fields:
    """The fields of one JSON object; `where` names it in errors ("config.kind")."""

    def __init__(self, data: object, where: str) -> None:
        if not isinstance(data, Mapping) or not all(isinstance(k, str) for k in data):
            raise FieldError(f"{where}: must be a JSON object, got {type(data).__name__}")
        self._data: Mapping[str, object] = data
        self.where = where

    def __contains__(self, key: str) -> bool:
        return key in self._data

    def get(self, key: str) -> object:
        """The field as it is (None when absent), for a reader that checks it itself."""
        return self._data.get(key)

    def _value(self, key: str, present: bool) -> object:
        if key not in self._data and present:
            raise FieldError(f"{self.where}.{key}: missing")
        return self._data.get(key)

    def _wrong(self, key: str, value: object, allowed: str) -> FieldError:
        return FieldError(f"{self.where}.{key}: {value!r} is not {allowed}"[:300])

    def text(self, key: str, default: str | None = None) -> str:
        value = self._value(key, default is None)
        if value is None and default is not None:
            return default
        if not isinstance(value, str):
            raise self._wrong(key, value, "a string")
        return value

    def whole(self, key: str, default: int | None = None) -> int:
        value = self._value(key, default is None)
        if value is None and default is not None:
            return default
        if isinstance(value, bool) or not isinstance(value, int):
            raise self._wrong(key, value, "a whole number")
        return value

    def number(self, key: str, default: float | None = None) -> float:
        value = self._value(key, default is None)
        if value is None and default is not None:
            return default
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise self._wrong(key, value, "a number")
        return float(value)

    def flag(self, key: str, default: bool | None = None) -> bool:
        value = self._value(key, default is None)
        if value is None and default is not None:
            return default
        if not isinstance(value, bool):
            raise self._wrong(key, value, "true or false")
        return value

    def optional_whole(self, key: str) -> int | None:
        """A whole number, or None when null or absent."""
        return None if self._data.get(key) is None else self.whole(key)

    def optional_number(self, key: str) -> float | None:
        """A number, or None when null or absent."""
        return None if self._data.get(key) is None else self.number(key)

    def optional_flag(self, key: str) -> bool | None:
        """True or false, or None when null or absent."""
        return None if self._data.get(key) is None else self.flag(key)

    def texts(self, key: str) -> tuple[str, ...]:
        """A list of strings; absent: none."""
        value = self._data.get(key, [])
        if not isinstance(value, list | tuple) or not all(isinstance(v, str) for v in value):
            raise self._wrong(key, value, "a list of strings")
        return tuple(value)

    def wholes(self, key: str) -> tuple[int, ...]:
        """A list of whole numbers; absent: none."""
        value = self._data.get(key, [])
        if not isinstance(value, list | tuple) or not all(
            isinstance(v, int) and not isinstance(v, bool) for v in value
        ):
            raise self._wrong(key, value, "a list of whole numbers")
        return tuple(value)

    def nested(self, key: str) -> Fields:
        return Fields(self._value(key, True), f"{self.where}.{key}")

    def optional_nested(self, key: str) -> Fields | None:
        value = self._data.get(key)
        return None if value is None else Fields(value, f"{self.where}.{key}")

    def nested_list(self, key: str) -> list[Fields]:
        """A list of objects; absent: none."""
        value = self._data.get(key, [])
        if not isinstance(value, list | tuple):
            raise self._wrong(key, value, "a list of objects")
        return [Fields(v, f"{self.where}.{key}[{i}]") for i, v in enumerate(value)]

    def mapping(self) -> dict[str, object]:
        """The object's fields as they are, for a reader that checks them (TrackerConfig)."""
        return dict(self._data)
