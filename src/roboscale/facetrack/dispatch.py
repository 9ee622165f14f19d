"""Which worker gets the next frame: random (the paper's), round-robin or least-loaded.

`choose(outstanding)` takes the frames each worker holds and has not answered yet (only
least-loaded looks at it) and returns a worker index. Seeded, so two stacks given the
same config send the same frames to the same workers under random and round-robin.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from roboscale.facetrack.config import DISPATCH_POLICIES, ConfigError


class Dispatcher:
    def __init__(self, policy: str, workers: int, seed: int = 0) -> None:
        if policy not in DISPATCH_POLICIES:
            allowed = ", ".join(DISPATCH_POLICIES)
            raise ConfigError("dispatch", f"{policy!r} is not one of: {allowed}")
        if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
            raise ConfigError("workers", f"must be at least 1, got {workers!r}")
        self.policy, self.workers = policy, workers
        self._rng = random.Random(seed)
        self._next = 0

    def choose(self, outstanding: Sequence[int] = ()) -> int:
        if self.policy == "random":
            return self._rng.randrange(self.workers)
        if self.policy == "round_robin" or len(outstanding) != self.workers:
            chosen = self._next
        else:
            # Least loaded; ties go to the first one at or after the round-robin pointer,
            # so idle workers share the frames instead of worker 0 taking them all.
            low = min(outstanding)
            chosen = next(
                i % self.workers
                for i in range(self._next, self._next + self.workers)
                if outstanding[i % self.workers] == low
            )
        self._next = (chosen + 1) % self.workers
        return chosen
