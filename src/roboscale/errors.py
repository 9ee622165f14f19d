"""User-facing errors: each one is printed as a clear message, never a traceback."""

from __future__ import annotations


class UserError(Exception):
    """A problem the user can fix: bad input, a missing backend, an unwritable path."""

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return self.message if self.hint is None else f"{self.message}\n  hint: {self.hint}"


class SpecError(UserError):
    """A validation error located in a file: file:line: field: what is wrong and allowed."""

    def __init__(self, path: str, line: int | None, field: str, problem: str) -> None:
        where = f"{path}:{line}" if line is not None else path
        super().__init__(f"{where}: {field}: {problem}" if field else f"{where}: {problem}")
        self.path = path
        self.line = line
        self.field = field
        self.problem = problem


class SpecErrors(UserError):
    """Several validation errors of one file, reported together."""

    def __init__(self, errors: list[SpecError]) -> None:
        super().__init__("\n".join(e.message for e in errors))
        self.errors = errors


class BackendUnavailable(UserError):
    """A backend whose middleware is not installed; the hint says how to install it."""
