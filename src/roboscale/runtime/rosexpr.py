"""roslaunch's substitutions (`$(arg x)`, `$(find pkg)`, `$(env X)`, `$(optenv X d)`,
`$(dirname)`, `$(anon n)`, `$(eval expr)`), with `$(eval)` through a safe evaluator.

roslaunch hands `$(eval ...)` to Python's `eval`. Here no text ever becomes code: the
expression is parsed by a small recursive-descent parser over literals (numbers,
strings, true/false), argument names, `arg('x')`, `env('X')`, `optenv('X', 'd')`,
arithmetic (+ - * / // %), comparisons (== != < <= > >=), `and`, `or`, `not`, and
parentheses. Lengths, nesting and numbers are bounded, so an expression can neither run
code nor exhaust memory. Every problem is an `ExprError` whose message says what is
allowed; the reader adds the file, line and attribute.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

Value = str | int | float | bool

MAX_EXPR = 1000  # characters of one $(eval ...)
MAX_DEPTH = 32  # nesting of parentheses and operators
MAX_TEXT = 10_000  # characters of a string the evaluator makes
MAX_INT_BITS = 256
SUBST = re.compile(r"\$\(([a-z]+)((?:\s+[^\s()$]+)*)\s*\)")
KINDS = "arg, find, env, optenv, dirname, anon, eval"
ALLOWED_EXPR = (
    "literals, argument names, arg('x'), env('X'), optenv('X', 'default'), "
    "+ - * / // %, == != < <= > >=, and, or, not, parentheses"
)
_TOKEN = re.compile(
    r"\s*(?:(?P<num>\d+\.\d*(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?|\d+(?:[eE][-+]?\d+)?)"
    r"|(?P<str>'[^'\\]*'|\"[^\"\\]*\")|(?P<name>[A-Za-z_]\w*)"
    r"|(?P<op>//|==|!=|<=|>=|[-+*/%<>(),]))"
)


class ExprError(ValueError):
    """A substitution or expression that cannot be resolved; the message says why."""


@dataclass
class Context:
    """What substitutions see: the arguments in scope, the file's folder, the environment."""

    args: Mapping[str, str]
    dirname: Path
    env: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))
    find: Callable[[str], str] | None = None
    anon: dict[str, str] = field(default_factory=dict)
    passed: set[str] = field(default_factory=set)  # given by the caller: `value=` cannot be

    def arg(self, name: str) -> str:
        if name not in self.args:
            known = ", ".join(sorted(self.args)) or "none"
            raise ExprError(f"arg {name!r} is not declared (declared: {known})")
        return self.args[name]


def rospack_find(pkg: str) -> str:
    """`$(find pkg)`: the package's folder, as rospack (roslaunch's own resolver) says."""
    if not re.fullmatch(r"[A-Za-z][\w-]*", pkg):
        raise ExprError(f"$(find {pkg}): not a package name")
    try:
        done = subprocess.run(
            ["rospack", "find", pkg], capture_output=True, text=True, timeout=30, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        raise ExprError(f"$(find {pkg}): cannot run rospack ({e})") from None
    if done.returncode != 0:
        raise ExprError(f"$(find {pkg}): no such ROS package on ROS_PACKAGE_PATH")
    return done.stdout.strip()


def substitute(text: str, ctx: Context) -> str:
    """Every $(...) of `text` resolved; `$(eval ...)` must be the whole value (roslaunch)."""
    stripped = text.strip()
    if stripped.startswith("$(eval ") and stripped.endswith(")"):
        return str(evaluate(stripped[7:-1], ctx))  # roslaunch's str(eval()): True, not true
    if "$(eval" in text:
        raise ExprError("$(eval ...) must be the whole value")
    out, pos = [], 0
    for m in SUBST.finditer(text):
        out.append(text[pos : m.start()])
        out.append(_one(m.group(1), m.group(2).split(), ctx))
        pos = m.end()
    rest = text[pos:]
    if "$(" in rest:
        raise ExprError(f"cannot read the substitution in {text!r}; allowed: $({KINDS} ...)")
    return "".join(out) + rest


def _one(kind: str, words: list[str], ctx: Context) -> str:
    arity = {"arg": (1, 1), "find": (1, 1), "env": (1, 1), "optenv": (1, 99), "dirname": (0, 0),
             "anon": (1, 1)}  # fmt: skip
    if kind not in arity:
        raise ExprError(f"$({kind} ...) is not supported; allowed: $({KINDS} ...)")
    low, high = arity[kind]
    if not low <= len(words) <= high:
        raise ExprError(f"$({kind}) takes {low if low == high else f'at least {low}'} word(s)")
    if kind == "arg":
        return ctx.arg(words[0])
    if kind == "find":
        return (ctx.find or rospack_find)(words[0])
    if kind == "env":
        if words[0] not in ctx.env:
            raise ExprError(f"$(env {words[0]}): not set; $(optenv NAME default) allows that")
        return ctx.env[words[0]]
    if kind == "optenv":
        return ctx.env.get(words[0], " ".join(words[1:]))
    if kind == "dirname":
        return str(ctx.dirname)
    return ctx.anon.setdefault(words[0], f"{words[0]}_{os.getpid()}_{len(ctx.anon)}")


def evaluate(expr: str, ctx: Context) -> Value:
    """The value of a $(eval ...) expression, computed without Python's eval."""
    if len(expr) > MAX_EXPR:
        raise ExprError(f"$(eval) expression longer than {MAX_EXPR} characters")
    parser = _Parser(_tokens(expr), ctx)
    value = parser.expression(0)
    if parser.pos != len(parser.tokens):
        raise ExprError(f"$(eval): unexpected {parser.tokens[parser.pos][1]!r}; {ALLOWED_EXPR}")
    return value


def _tokens(expr: str) -> list[tuple[str, str]]:
    tokens, pos = [], 0
    while pos < len(expr):
        if expr[pos:].strip() == "":
            break
        m = _TOKEN.match(expr, pos)
        if m is None or m.lastgroup is None:
            raise ExprError(f"$(eval): cannot read {expr[pos:].strip()[:20]!r}; {ALLOWED_EXPR}")
        tokens.append((m.lastgroup, m.group(m.lastgroup)))
        pos = m.end()
    return tokens


_CMP = ("==", "!=", "<", "<=", ">", ">=")


class _Parser:
    """Precedence: or < and < not < comparison < + - < * / // % < unary - < atom."""

    def __init__(self, tokens: list[tuple[str, str]], ctx: Context) -> None:
        self.tokens = tokens
        self.pos = 0
        self.ctx = ctx

    def peek(self) -> str | None:
        return self.tokens[self.pos][1] if self.pos < len(self.tokens) else None

    def take(self) -> tuple[str, str]:
        if self.pos >= len(self.tokens):
            raise ExprError(f"$(eval): the expression ends too early; {ALLOWED_EXPR}")
        self.pos += 1
        return self.tokens[self.pos - 1]

    def expect(self, text: str) -> None:
        if self.take()[1] != text:
            raise ExprError(f"$(eval): expected {text!r}")

    def expression(self, depth: int) -> Value:
        _check_depth(depth)
        value = self.conjunction(depth)
        while self.peek() == "or":
            self.take()
            right = self.conjunction(depth)
            value = value or right
        return value

    def conjunction(self, depth: int) -> Value:
        value = self.negation(depth)
        while self.peek() == "and":
            self.take()
            right = self.negation(depth)
            value = value and right
        return value

    def negation(self, depth: int) -> Value:
        if self.peek() == "not":
            self.take()
            _check_depth(depth + 1)
            return not self.negation(depth + 1)
        return self.comparison(depth)

    def comparison(self, depth: int) -> Value:
        left = self.sum(depth)
        if self.peek() not in _CMP:
            return left
        result = True
        while self.peek() in _CMP:  # a chain, as Python's: a < b < c
            op = self.take()[1]
            right = self.sum(depth)
            result = result and _compare(op, left, right)
            left = right
        return result

    def sum(self, depth: int) -> Value:
        value = self.product(depth)
        while self.peek() in ("+", "-"):
            op = self.take()[1]
            value = _arith(op, value, self.product(depth))
        return value

    def product(self, depth: int) -> Value:
        value = self.unary(depth)
        while self.peek() in ("*", "/", "//", "%"):
            op = self.take()[1]
            value = _arith(op, value, self.unary(depth))
        return value

    def unary(self, depth: int) -> Value:
        if self.peek() in ("-", "+"):
            op = self.take()[1]
            _check_depth(depth + 1)  # `- - - 1` recurses as parentheses do
            value = self.unary(depth + 1)
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise ExprError(f"$(eval): {op} needs a number, not {value!r}")
            return -value if op == "-" else value
        return self.atom(depth)

    def atom(self, depth: int) -> Value:
        kind, text = self.take()
        if text == "(" and kind == "op":
            value = self.expression(depth + 1)
            self.expect(")")
            return value
        if kind == "num":
            number = float(text) if any(c in text for c in ".eE") else int(text)
            return _bounded(number)
        if kind == "str":
            return text[1:-1]
        if kind == "name":
            return self.name(text)
        raise ExprError(f"$(eval): unexpected {text!r}; {ALLOWED_EXPR}")

    def name(self, text: str) -> Value:
        if text in ("true", "True"):
            return True
        if text in ("false", "False"):
            return False
        if self.peek() == "(":
            return self.call(text)
        return _typed(self.ctx.arg(text))

    def call(self, function: str) -> Value:
        allowed = {"arg": 1, "env": 1, "optenv": 2}
        if function not in allowed:
            raise ExprError(f"$(eval): {function}() is not allowed; {ALLOWED_EXPR}")
        self.expect("(")
        words: list[str] = []
        while True:
            kind, text = self.take()
            if kind != "str":
                raise ExprError(f"$(eval): {function}() takes quoted strings")
            words.append(text[1:-1])
            if self.take()[1] == ")":
                break
        if not 1 <= len(words) <= allowed[function]:
            raise ExprError(f"$(eval): {function}() takes at most {allowed[function]} strings")
        if function == "arg":
            return _typed(self.ctx.arg(words[0]))
        if function == "env":
            return _one("env", words, self.ctx)
        return self.ctx.env.get(words[0], words[1] if len(words) > 1 else "")


def _check_depth(depth: int) -> None:
    if depth > MAX_DEPTH:
        raise ExprError(f"$(eval): nested deeper than {MAX_DEPTH}")


def _typed(text: str) -> Value:
    """An argument as roslaunch's eval sees it: a number or a boolean when it reads as one."""
    low = text.strip().lower()
    if low in ("true", "false"):
        return low == "true"
    for kind in (int, float):
        try:
            return _bounded(kind(text))
        except (ValueError, ExprError):
            continue
    return text


def _bounded(value: Value) -> Value:
    too_big = isinstance(value, int) and value.bit_length() > MAX_INT_BITS
    if too_big and not isinstance(value, bool):
        raise ExprError(f"$(eval): a number beyond {MAX_INT_BITS} bits")
    if isinstance(value, str) and len(value) > MAX_TEXT:
        raise ExprError(f"$(eval): a text longer than {MAX_TEXT} characters")
    return value


def _compare(op: str, left: Value, right: Value) -> bool:
    if op in ("==", "!="):
        return (left == right) == (op == "==")
    if isinstance(left, str) != isinstance(right, str):
        raise ExprError(f"$(eval): cannot order {left!r} and {right!r}")
    a, b = left, right
    return {"<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b}[op]  # type: ignore[operator]


def _arith(op: str, left: Value, right: Value) -> Value:
    numbers = all(isinstance(v, int | float) and not isinstance(v, bool) for v in (left, right))
    if op == "+" and isinstance(left, str) and isinstance(right, str):
        return _bounded(left + right)
    if not numbers:
        raise ExprError(f"$(eval): {left!r} {op} {right!r}: arithmetic needs numbers")
    a, b = left, right
    assert isinstance(a, int | float) and isinstance(b, int | float)
    if op in ("/", "//", "%") and b == 0:
        raise ExprError("$(eval): division by zero")
    ops: dict[str, Callable[[], Value]] = {
        "+": lambda: a + b, "-": lambda: a - b, "*": lambda: a * b, "/": lambda: a / b,
        "//": lambda: a // b, "%": lambda: a % b,
    }  # fmt: skip
    return _bounded(ops[op]())
