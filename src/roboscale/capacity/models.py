"""The capacity models: the thesis's CSLV and our two-resource model.

CSLV (thesis, section 4.1): a host sustains N nodes, each at f Hz with messages of
S bytes, while N * f * S <= CSLV. Fitted here as the limit that misclassifies the
fewest trials, with the bracket between the loads on either side of it.

Two-resource model: a trial needs CPU u = c_node N + c_msg N f + c_byte N f S (in
cores; N f is the messages per second that cross the host, each out and back) and
link bandwidth N f S (bytes/s). The byte cost depends on what the bytes are: a
block (text, image, raw bytes) or an array of numbers (a LaserScan), which ROS 1
serializes element by element; each has its own c_byte. A trial is sustained
while u <= B_cpu and N f S <= B_link: the tighter budget binds. The costs come from
the CPU the lab accounts to the node processes (non-negative least squares on
sustained trials, where demand equals use); the budgets come from the
sustained/unsustained boundary. Trials that all stayed on loopback crossed no
link, so their link budget is unbounded, not fitted. Per-node cost makes many
nodes at 1 Hz fail, per-message cost makes tiny messages fail at high rates: CSLV,
being linear in S, can express neither.

Uncertainty: a bootstrap over trials refits every parameter; intervals are the
10th-90th percentiles (80 %), the same level as the CI80 of the trial statistics.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from roboscale.capacity.data import Observation
from roboscale.capacity.fitting import (
    UNBOUNDED,
    BoolArray,
    Boundary,
    FloatArray,
    LinearFit,
    best_boundary,
    best_two_limits,
    nnls,
)
from roboscale.errors import UserError

CSLV = "cslv"
TWO_RESOURCE = "two_resource"
MODEL_NAMES = (CSLV, TWO_RESOURCE)
PARAM_NAMES: dict[str, tuple[str, ...]] = {
    CSLV: ("cslv_bytes_s",),
    TWO_RESOURCE: (
        "cpu_s_per_node_s",
        "cpu_s_per_message",
        "cpu_s_per_byte",
        "cpu_s_per_numeric_byte",
        "cpu_budget_cores",
        "link_budget_bytes_s",
    ),
}
MIN_COST_TRIALS = 4
INTERVAL = (10.0, 90.0)  # percentiles of the bootstrap: an 80 % interval
DEFAULT_BOOTSTRAP = 200
TICK_S = 0.004  # CPU accounting granularity per process (a 250 Hz scheduler tick)


@dataclass(frozen=True)
class FittedModel:
    """One fitted model: point parameters, their bootstrap draws, and fit details."""

    name: str
    params: dict[str, float]
    stderr: dict[str, float | None]
    draws: FloatArray  # shape (draws, len(params)), in PARAM_NAMES order
    details: dict[str, object] = field(default_factory=dict)  # JSON values, for reports

    def vector(self) -> FloatArray:
        return np.array([self.params[k] for k in PARAM_NAMES[self.name]], dtype=np.float64)


# --- solving the budget inequalities -----------------------------------------------


def _cslv_max_nodes(p: FloatArray, size: float, rate: float, _numeric: bool) -> FloatArray:
    out: FloatArray = p[..., 0] / (rate * size)
    return out


def _cslv_max_rate(p: FloatArray, nodes: float, size: float, _numeric: bool) -> FloatArray:
    out: FloatArray = p[..., 0] / (nodes * size)
    return out


def _byte_cost(p: FloatArray, numeric: bool | npt.NDArray[np.bool_]) -> FloatArray:
    out: FloatArray = np.where(numeric, p[..., 3], p[..., 2])
    return out


def _cpu_per_node(
    p: FloatArray, rate: Any, size: Any, numeric: bool | npt.NDArray[np.bool_]
) -> FloatArray:
    """Cores one node needs: its fixed cost, per message, per byte of its payload's kind."""
    out: FloatArray = p[..., 0] + p[..., 1] * rate + _byte_cost(p, numeric) * rate * size
    return out


def _two_max_nodes(p: FloatArray, size: float, rate: float, numeric: bool) -> FloatArray:
    per_node = _cpu_per_node(p, rate, size, numeric)
    with np.errstate(divide="ignore", invalid="ignore"):
        cpu = np.where(per_node > 0, p[..., 4] / per_node, np.inf)
        link = p[..., 5] / (rate * size)
    out: FloatArray = np.minimum(cpu, link)
    return out


def _two_max_rate(p: FloatArray, nodes: float, size: float, numeric: bool) -> FloatArray:
    per_message = p[..., 1] + _byte_cost(p, numeric) * size
    spare = p[..., 4] / nodes - p[..., 0]  # cores per node left after its fixed cost
    with np.errstate(divide="ignore", invalid="ignore"):
        cpu = np.where(per_message > 0, np.maximum(spare, 0) / per_message, np.inf)
        cpu = np.where(spare <= 0, 0.0, cpu)
        link = p[..., 5] / (nodes * size)
    out: FloatArray = np.minimum(cpu, link)
    return out


SOLVERS: dict[str, tuple[Callable[..., FloatArray], Callable[..., FloatArray]]] = {
    CSLV: (_cslv_max_nodes, _cslv_max_rate),
    TWO_RESOURCE: (_two_max_nodes, _two_max_rate),
}


def max_nodes(
    model: FittedModel, size: float, rate: float, numeric: bool = False
) -> tuple[float, FloatArray]:
    """Largest N sustained at (size, rate): the point estimate and one value per draw.
    `numeric`: the payload is an array of numbers (priced per byte apart)."""
    solve = SOLVERS[model.name][0]
    point = float(solve(model.vector(), size, rate, numeric))
    return point, solve(model.draws, size, rate, numeric)


def max_rate(
    model: FittedModel, nodes: float, size: float, numeric: bool = False
) -> tuple[float, FloatArray]:
    solve = SOLVERS[model.name][1]
    point = float(solve(model.vector(), nodes, size, numeric))
    return point, solve(model.draws, nodes, size, numeric)


def binding_budget(model: FittedModel, size: float, rate: float, numeric: bool = False) -> str:
    """Which budget limits N at (size, rate): 'cpu' or 'link' ('volume' for CSLV)."""
    if model.name == CSLV:
        return "volume"
    p = model.vector()
    per_node = float(_cpu_per_node(p, rate, size, numeric))
    cpu = p[4] / per_node if per_node > 0 else math.inf
    return "link" if p[5] / (rate * size) < cpu else "cpu"


# --- fitting -----------------------------------------------------------------------


def _arrays(obs: Sequence[Observation]) -> tuple[FloatArray, FloatArray, FloatArray, BoolArray]:
    nodes = np.array([o.nodes for o in obs], dtype=np.float64)
    rate = np.array([o.rate_hz for o in obs], dtype=np.float64)
    size = np.array([o.payload_bytes for o in obs], dtype=np.float64)
    ok = np.array([o.sustained for o in obs], dtype=bool)
    return nodes, rate, size, ok


def _require_both_sides(obs: Sequence[Observation]) -> None:
    ok = sum(o.sustained for o in obs)
    if ok == 0 or ok == len(obs):
        side = "sustained" if ok else "unsustained"
        raise UserError(
            f"all {len(obs)} trials were {side}: there is no boundary to fit",
            hint="add trials past the limit and below it; `roboscale capacity search` finds both",
        )


@dataclass(frozen=True)
class CostDesign:
    """The CPU regression: y (CPU seconds) against per-node, per-message, per-byte columns.

    With CPU counted from READY on (`usage.cpu_s_after_ready`), start-up is already
    excluded and the columns are N*T, messages, bytes of blocks, bytes of numeric
    arrays. With only the whole-life total a first column N carries each node's
    start-up CPU.
    """

    x: FloatArray
    y: FloatArray
    after_ready: bool
    weight: FloatArray  # 1 / expected error of each row

    def weighted(self) -> tuple[FloatArray, FloatArray]:
        w = self.weight[:, None]
        return self.x * w, self.y * self.weight

    @property
    def rows(self) -> int:
        return int(self.y.size)

    def steady(self, coef: FloatArray) -> FloatArray:
        """Per-node-second, per-message, per-byte and per-numeric-byte costs (no start-up)."""
        out: FloatArray = coef[-4:]
        return out


def _cost_trials(obs: Sequence[Observation]) -> list[Observation]:
    return [o for o in obs if o.sustained and not o.failed and o.cpu_s is not None]


def cost_design(obs: Sequence[Observation]) -> CostDesign:
    """Rows of sustained trials (where demand equals use) with CPU accounting."""
    used = _cost_trials(obs)
    after_ready = bool(used) and all(o.cpu_ready_s is not None for o in used)
    rows, y = [], []
    for o in used:
        alive = o.stream_s + o.drain_s
        m = o.transmissions
        volume = m * o.payload_bytes
        steady = [o.nodes * alive, m, 0.0 if o.numeric else volume, volume if o.numeric else 0.0]
        rows.append(steady if after_ready else [o.nodes, *steady])
        y.append(o.cpu_ready_s if after_ready else o.cpu_s)
    width = 4 if after_ready else 5
    x = np.array(rows, dtype=np.float64).reshape(-1, width)
    y_arr = np.array(y, dtype=np.float64)
    # CPU accounting errs in proportion to the CPU used (load, frequency scaling), with a
    # floor of a few scheduler ticks per process: weight rows by that, or the long
    # low-rate trials drown the short high-rate ones that carry the per-message cost.
    floor = np.array([TICK_S * o.nodes for o in used], dtype=np.float64)
    weight = 1.0 / np.maximum(np.abs(y_arr), floor) if used else np.zeros(0)
    return CostDesign(x, y_arr, after_ready, weight)


def check_identifiable(design: CostDesign, used: Sequence[Observation]) -> None:
    """Whole-life CPU cannot split start-up from per-message cost if every sender sent as
    many messages: both then grow exactly with N. Say so rather than fit nonsense."""
    if design.after_ready:
        return
    per_sender = np.array([o.transmissions / o.nodes for o in used])
    if per_sender.size and np.ptp(per_sender) <= 0.01 * float(per_sender.mean()):
        raise UserError(
            "these results only hold whole-life CPU (usage.cpu_s_total), and every sender sent "
            "the same number of messages, so node start-up and per-message CPU cannot be told "
            "apart",
            hint="rerun with a roboscale that records usage.cpu_s_after_ready, "
            "or vary trial.messages / use trial.duration_s in some trials",
        )


def _cslv_limit(obs: Sequence[Observation]) -> Boundary:
    nodes, rate, size, ok = _arrays(obs)
    return best_boundary(nodes * rate * size, ok)


def _two_resource_point(
    obs: Sequence[Observation],
) -> tuple[FloatArray, LinearFit, Boundary, Boundary]:
    design = cost_design(obs)
    costs = nnls(*design.weighted())
    nodes, rate, size, ok = _arrays(obs)
    c = _unseen_kind_priced(design.steady(costs.coef).copy(), kinds_fitted(obs))
    numeric = np.array([o.numeric for o in obs], dtype=bool)
    cpu_demand = nodes * _cpu_per_node(c, rate, size, numeric)
    if all(o.on_loopback for o in obs):
        # No link was crossed: a threshold on bytes/s would only fit noise of the
        # byte-heavy trials, and the byte cost is already in the CPU demand.
        cpu, link = best_boundary(cpu_demand, ok), UNBOUNDED
    else:
        cpu, link = best_two_limits(cpu_demand, nodes * rate * size, ok)
    params = np.array([c[0], c[1], c[2], c[3], cpu.value, link.value], dtype=np.float64)
    return params, costs, cpu, link


def _unseen_kind_priced(c: FloatArray, kinds: dict[str, bool]) -> FloatArray:
    """A kind of payload (block or numeric array) with no cost trial has no cost of its own:
    it takes the other's, and `kinds_fitted` in the model says so (predict warns)."""
    if not kinds["numeric"]:
        c[3] = c[2]
    elif not kinds["bytes"]:
        c[2] = c[3]
    return c


def kinds_fitted(obs: Sequence[Observation]) -> dict[str, bool]:
    kinds = {o.numeric for o in _cost_trials(obs)}
    return {"bytes": False in kinds, "numeric": True in kinds}


def _bootstrap(
    obs: Sequence[Observation],
    one: Callable[[Sequence[Observation]], FloatArray],
    draws: int,
    seed: int,
) -> FloatArray:
    """Refit on trials resampled with replacement; degenerate resamples are skipped."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(draws):
        sample = [obs[i] for i in rng.integers(0, len(obs), len(obs))]
        try:
            out.append(one(sample))
        except (UserError, np.linalg.LinAlgError):
            continue
    width = len(one(obs))
    return np.array(out, dtype=np.float64).reshape(-1, width)


def fit_cslv(
    obs: Sequence[Observation], *, draws: int = DEFAULT_BOOTSTRAP, seed: int = 0
) -> FittedModel:
    _require_both_sides(obs)
    limit = _cslv_limit(obs)
    boot = _bootstrap(obs, lambda s: np.array([_cslv_limit(s).value]), draws, seed)
    spread = _finite_std(boot[:, 0])
    return FittedModel(
        name=CSLV,
        params={"cslv_bytes_s": limit.value},
        stderr={"cslv_bytes_s": spread},
        draws=boot,
        details={
            "bracket_bytes_s": [limit.low, limit.high],
            "misclassified": limit.errors,
            "trials": len(obs),
        },
    )


def _two_resource_vector(obs: Sequence[Observation]) -> FloatArray:
    if cost_design(obs).rows < MIN_COST_TRIALS:
        raise UserError("too few sustained trials with CPU accounting in this resample")
    return _two_resource_point(obs)[0]


def fit_two_resource(
    obs: Sequence[Observation], *, draws: int = DEFAULT_BOOTSTRAP, seed: int = 0
) -> FittedModel:
    _require_both_sides(obs)
    design = cost_design(obs)
    if design.rows < MIN_COST_TRIALS:
        raise UserError(
            f"the two-resource model needs at least {MIN_COST_TRIALS} sustained trials with CPU "
            f"accounting (usage.cpu_s_total in summary.json); these results have {design.rows}"
        )
    check_identifiable(design, _cost_trials(obs))
    params, costs, cpu, link = _two_resource_point(obs)
    boot = _bootstrap(obs, _two_resource_vector, draws, seed)
    names = PARAM_NAMES[TWO_RESOURCE]
    steady_se = design.steady(costs.stderr)
    stderr: dict[str, float | None] = {}
    for i, name in enumerate(names[:4]):
        se = float(steady_se[i])
        stderr[name] = se if math.isfinite(se) else _finite_std(boot[:, i])
    stderr["cpu_budget_cores"] = _finite_std(boot[:, 4])
    stderr["link_budget_bytes_s"] = _finite_std(boot[:, 5])
    start = float(costs.coef[0]) if not design.after_ready else None
    start_se = float(costs.stderr[0]) if not design.after_ready else math.nan
    return FittedModel(
        name=TWO_RESOURCE,
        params={k: float(v) for k, v in zip(names, params, strict=True)},
        stderr=stderr,
        draws=boot,
        details={
            "cpu_accounting": "after_ready" if design.after_ready else "whole_life",
            "cpu_s_per_node_start": start,
            "cpu_s_per_node_start_stderr": start_se if math.isfinite(start_se) else None,
            "cost_r2": _r2(design, costs.coef),
            "cost_residual_std_s": costs.residual_std,
            "cost_trials": design.rows,
            "kinds_fitted": kinds_fitted(obs),
            "cpu_bracket_cores": [cpu.low, cpu.high],
            "link_bracket_bytes_s": [link.low, link.high],
            "misclassified": cpu.errors,
            "trials": len(obs),
        },
    )


def _r2(design: CostDesign, coef: FloatArray) -> float:
    """Share of the CPU variance across trials the cost terms explain (unweighted)."""
    resid = design.y - design.x @ coef
    total = float(((design.y - design.y.mean()) ** 2).sum())
    return 1.0 - float(resid @ resid) / total if total > 0 else 1.0


def _finite_std(values: FloatArray) -> float | None:
    v = values[np.isfinite(values)]
    return float(v.std(ddof=1)) if v.size > 1 else None


FITTERS: dict[str, Callable[..., FittedModel]] = {CSLV: fit_cslv, TWO_RESOURCE: fit_two_resource}


def fit_all(
    obs: Sequence[Observation], *, draws: int = DEFAULT_BOOTSTRAP, seed: int = 0
) -> dict[str, FittedModel]:
    return {name: FITTERS[name](obs, draws=draws, seed=seed) for name in MODEL_NAMES}
