"""The dds backend's per-message path in C (_dds_take.c); see dds_cdr."""

from collections.abc import Callable
from typing import Any

class Taker:
    def __init__(
        self,
        functions: tuple[int, int, int, int, int],
        reader: int,
        mask: int,
        batch: int,
        info_layout: tuple[int, int],
        deliver: Callable[[int, Any], object],
        sample_type: Callable[[int, int, int], Any],
    ) -> None: ...
    def take(self) -> int: ...
    def function(self) -> int: ...
    def argument(self) -> int: ...
    @property
    def malformed(self) -> int: ...
    @property
    def errors(self) -> list[BaseException]: ...

class Forwarder:
    def __init__(self, functions: tuple[int, int], writer: int) -> None: ...
    def __call__(self, sample: Any) -> int: ...
