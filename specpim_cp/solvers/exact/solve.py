"""Drivers of the CP-SAT model: Dinkelbach for ratio objectives, epsilon-constraint Pareto front, EDP, and
the canonical optimum (an exact lexicographic tie-break among the optimal designs, OBJ-3).

Every result is re-priced by the evaluator, and the claimed objective (recomputed tightly by CP-SAT
with the design's decisions fixed) must equal the evaluator's exactly; a mismatch raises
`ModelMismatch`, which is a bug in one of the two, never something to round away.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction

from ortools.sat.python import cp_model

from specpim_cp.catalog import Catalog
from specpim_cp.errors import ScenarioError
from specpim_cp.physics import speculation as spec
from specpim_cp.physics.evaluate import Evaluation, Evaluator
from specpim_cp.problem.design import ArchConfig, Design
from specpim_cp.problem.scenario import Scenario, scenario_catalog
from specpim_cp.problem.space import DesignSpace, TreeMenuTooLarge
from specpim_cp.solvers.exact.columns import ColumnSearch, chain_start_scenario, columns_refusal, hardware
from specpim_cp.solvers.exact.model import SpecModel, TieKey, ub
from specpim_cp.solvers.exact.prices import PriceTable
from specpim_cp.solvers.result import (
    DEFAULT_MAX_POINTS,
    DEFAULT_RESOLUTION_PCT,
    MAX_FRONT_POINTS,
    SolveReport,
    SolveResult,
    inputs_hash,
    solver_version,
)


class ModelMismatch(AssertionError):
    """The CP-SAT model and the evaluator price a design differently (a bug)."""


# -- integer range (input guards) -----------------------------------------------------------------
#: CP-SAT rejects a linear row (or objective) when the sum of its positive terms, or of its negative
#: terms, each |coefficient| x the variable's domain bound, can exceed int64max / 2 = 2^62 - 1
#: (cp_model_checker.cc, PossibleIntegerOverflow). The rows closest to it, per unit of input:
#:   [EN-1]  Q_SCALE * draft_nj[i] >= (Q_SCALE + waste) * draft_expected_nj[i]: 2 * 10^6 x the drafting
#:           energy bound per round (nJ) -> at most 2.3e12 nJ;
#:   [RND-2] Q_SCALE * R[k] >= (Q_SCALE - q) * maxDV[k] + q * (D[k] + V): 10^6 x the round-time bound
#:           (ns) -> at most 4.6e12 ns;
#:   [RND-3] OUTCOME_SCALE x the round-time bound; [EN-2] idle power (mW) x the round-time bound;
#:   [OBJ-1/2] Dinkelbach and epsilon rows d_prev * N - n_prev * D and N * d <= n * D: an incumbent's
#:           round ns (or nJ) x the largest expected tokens per round x TOKENS_SCALE (up to 17 x 10^6)
#:           -> at most 2.7e11 ns (or nJ) per round at max_draft_length 16.
INT_LIMIT = ((1 << 63) - 1) // 2

_VARIABLE_MEANING = {  # variable name prefix -> (family, what it is, unit)
    "draft_nj": ("EN-1", "drafting energy per round", "nJ"),
    "draft_expected_nj": ("EN-1", "expected drafting energy per round", "nJ"),
    "R": ("RND-2", "round time of a drafting outcome", "ns"),
    "maxDV": ("RND-2", "round time of a drafting outcome", "ns"),
    "D": ("RND-1", "drafting time of an outcome", "ns"),
    "round_ns": ("RND-3", "round time", "ns"),
    "idle_nj": ("EN-2", "idle energy per round", "nJ"),
    "energy_nj": ("EN-3", "energy per round", "nJ"),
    "cycle_ns": ("CYC-1", "drafter cycle time", "ns"),
    "cycle_nj": ("CYC-1", "drafter cycle energy", "nJ"),
    "pass_ns": ("PASS-1", "pass time", "ns"),
    "pass_nj": ("PASS-2", "pass energy", "nJ"),
}


class IntegerRangeError(ScenarioError):
    """A scenario whose rows would exceed CP-SAT's 64-bit range (an input guard, named by its family)."""


def _too_large(scenario: Scenario, what: str) -> IntegerRangeError:
    return IntegerRangeError(
        f"scenario too large for the exact model's 64-bit integers: {what}; CP-SAT rejects rows beyond 2^62 = "
        f"{INT_LIMIT:.3g}. Shorten the context (prompt_tokens + generated_tokens = {scenario.max_context}), the "
        f"batch ({scenario.batch_size}) or max_draft_length ({scenario.max_draft_length}), or use --method "
        "brute-force or the heuristic")


#: CP-SAT's sentinels for an unbounded side of a row's domain (`expr <= b` has [INT64_MIN, b]).
_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1


def check_integer_range(sm: SpecModel) -> None:
    """Raise ScenarioError, naming the row's family and bound, when a linear row of the model could
    overflow CP-SAT's integer check (exactly CP-SAT's rule, on the base model every solve clones), or
    when a row's right-hand side (a capacity of CAP-1/2) lies beyond 2^62."""
    proto = sm.m.proto
    variables = proto.variables
    bounds: dict[int, tuple[int, int]] = {}
    worst = (0, None, None)
    for c in proto.constraints:
        if not c.has_linear():
            continue
        pos = neg = 0
        big = (0, 0, 0)
        for ref, coeff in zip(c.linear.vars, c.linear.coeffs):
            idx = ref if ref >= 0 else -ref - 1
            if idx not in bounds:
                dom = list(variables[idx].domain)
                bounds[idx] = (dom[0], dom[len(dom) - 1])
            lo, hi = bounds[idx]
            k = coeff if ref >= 0 else -coeff
            terms = (k * lo, k * hi)
            pos += max(0, *terms)
            neg += min(0, *terms)
            if abs(k) * max(abs(lo), abs(hi)) > big[0]:
                big = (abs(k) * max(abs(lo), abs(hi)), idx, k)
        rhs = max((abs(b) for b in c.linear.domain if b not in (_INT64_MIN, _INT64_MAX)), default=0)
        if rhs > INT_LIMIT:
            raise _too_large(sm.scenario, f"[{_row_family(c, variables, '?')}] a row's bound is {rhs:.3g}")
        part = max(pos, -neg)
        if part > worst[0]:
            worst = (part, big, c)
    part, big, row = worst
    if part <= INT_LIMIT:
        return
    _, idx, k = big
    name = variables[idx].name
    family, what, unit = _VARIABLE_MEANING.get(name.split("[")[0], (None, f"variable {name}", ""))
    family = family or _row_family(row, variables, "?")
    raise _too_large(sm.scenario, f"[{family}] the {what} ({name}) can reach {bounds[idx][1]:.3g} {unit}, and its "
                                  f"row multiplies it by {abs(k):,}, summing to {part:.3g}")


def _row_family(row, variables, default: str) -> str:
    """The constraint family of a row enforced by an assumption literal (`assume[CAP][0]` -> CAP)."""
    for ref in row.enforcement_literal:
        name = variables[ref if ref >= 0 else -ref - 1].name
        if name.startswith("assume["):
            return name[len("assume["):].split("]")[0]
    return default


def check_capacity_rows(prices: PriceTable) -> None:
    """[CAP-1/2] before any row is added: per model and architecture, the KiB a capacity row can sum (every
    tensor split and draft2 model on the side, each times a 0/1 literal) and its capacity within 2^62,
    CP-SAT's row limit (user catalogs keep capacities far below it; a KV cache can still reach it)."""
    for d, pm in zip(prices.space.models, prices.models):
        for a in d.archs:
            splits = [v for (arch, _, _), v in pm.tensor_kib.items() if arch == a]
            splits += [v for (arch, _), v in pm.draft2_kib.items() if arch == a and v is not None]
            for side, word in enumerate(("PIM", "normal")):
                need = sum(v[side] for v in splits)
                worst = max(need, pm.capacity_kib[a][side])
                if worst > INT_LIMIT:
                    raise _too_large(prices.space.scenario, f"[CAP-{side + 1}] the {word} units of {d.label} "
                                     f"({d.spec.name}) on {a.memory_type} k={a.pim_units} x{a.devices}: "
                                     f"{need:.3g} KiB of tensors against {pm.capacity_kib[a][side]:.3g} KiB")


def _overflowing_integer(exc: Exception) -> int | None:
    """The integer beyond 64 bits that OR-Tools refused while a row or a variable was added (its binding
    raises a TypeError that shows the arguments), or None for any other error."""
    if not isinstance(exc, TypeError) or not re.search(r"incompatible (function|constructor) arguments", str(exc)):
        return None
    big = [int(x) for x in re.findall(r"-?\d{19,}", str(exc))]
    big = [x for x in big if not _INT64_MIN <= x <= _INT64_MAX]
    return max(big, key=abs) if big else None


def _largest_price(prices: PriceTable) -> str:
    """The slowest priced operator of the table, in words (what makes a derived bound too large)."""
    best = (-1, "")
    for d, pm in zip(prices.space.models, prices.models):
        for (op, a, p), by_tokens in pm.op_cost.items():
            for tokens, cost in by_tokens.items():
                if cost.time_ns > best[0]:
                    where = f"{op} of {d.label} ({d.spec.name}) on {a.memory_type} k={a.pim_units} x{a.devices}"
                    best = (cost.time_ns, f"{where}, {p.engine}, {tokens} tokens")
    return f"the slowest priced operator, {best[1]}, takes {best[0]:.3g} ns"


def build_model(scenario: Scenario, catalog: Catalog, ev: Evaluator) -> SpecModel:
    """The scenario's CP-SAT model, refused with one line before any solve when it cannot hold: a model
    larger than every allowed memory (`check_capacity`), a capacity row beyond 2^62
    (`check_capacity_rows`), a bound derived from the prices beyond 64 bits (OR-Tools refuses it while
    the model is built), a row beyond 2^62 (`check_integer_range`)."""
    prices = PriceTable.build(ev, DesignSpace(scenario, catalog))
    check_capacity(prices)
    check_capacity_rows(prices)
    try:
        sm = SpecModel(scenario, catalog, ev, prices=prices)
    except TypeError as exc:
        big = _overflowing_integer(exc)
        if big is None:
            raise
        raise _too_large(scenario, f"a bound the exact model derives from the priced operators reaches {big:.3g}, "
                                   f"beyond 64-bit integers ({_largest_price(prices)})") from None
    check_integer_range(sm)
    return sm


def check_capacity(model: SpecModel | PriceTable) -> None:
    """Raise the capacity shortfall when some model's tensors exceed every allowed architecture's total
    memory (PIM + normal units): infeasible whatever the placement, named before any solve (from the
    price table alone, so before any row is added)."""
    prices = model if isinstance(model, PriceTable) else model.prices
    for j, d in enumerate(prices.space.models):
        pm = prices.models[j]
        if all(pm.total_kib[a] > sum(pm.capacity_kib[a]) for a in d.archs):
            raise ScenarioError("infeasible: " + _cap_detail(prices, j, f"CAP capacity of {d.label} ({d.spec.name})"))


def _cap_detail(model: SpecModel | PriceTable, j: int, name: str) -> str:
    prices = model if isinstance(model, PriceTable) else model.prices
    archs, pm = prices.space.models[j].archs, prices.models[j]
    need = min(pm.total_kib[a] for a in archs)
    pim = max(pm.capacity_kib[a][0] for a in archs)
    normal = max(pm.capacity_kib[a][1] for a in archs)
    return (f"[{name}]: no allowed architecture holds its weights and KV cache ({need / (1 << 20):.2f} "
            f"GiB) with the placements the space allows (PIM units hold at most {pim / (1 << 20):.2f} "
            f"GiB, normal units at most {normal / (1 << 20):.2f} GiB)")


@dataclass(frozen=True)
class SolveProgress:
    """A progress event of a solve (for a CLI status line; nothing below the CLI prints): the stage,
    the incumbent's objective and the proven bound in evaluator units (ns/token, nJ/token)."""

    stage: str  # "latency" | "energy" | "pareto point N: latency" ...
    objective_name: str  # latency | energy
    incumbent: Fraction | None
    bound: Fraction | None
    iterations: int
    wall_s: float

    @property
    def gap(self) -> float | None:
        if self.incumbent is None or self.bound is None or self.incumbent == 0:
            return None
        return float((self.incumbent - self.bound) / self.incumbent)


ProgressHook = Callable[[SolveProgress], None]


@dataclass(frozen=True)
class SolverOptions:
    """How CP-SAT runs: the time limit (wall seconds, or deterministic time units with `deterministic`,
    which also means one worker), CP-SAT workers and the random seed. Part of every `inputs_hash`."""

    time_limit_s: float = 60.0
    workers: int = 1
    seed: int = 0
    deterministic: bool = False

    def as_dict(self) -> dict:
        return {"time_limit_s": self.time_limit_s, "workers": self.workers, "seed": self.seed,
                "deterministic": self.deterministic}

    @classmethod
    def from_dict(cls, data: Mapping) -> SolverOptions:
        """The options `as_dict` wrote (other keys of `data` are ignored)."""
        return cls(data["time_limit_s"], data["workers"], data["seed"], data["deterministic"])


@dataclass
class TimeBudget:
    """Remaining time (wall seconds, or deterministic time units in deterministic mode)."""

    opts: SolverOptions
    used: float = 0.0

    def remaining(self) -> float:
        return max(0.0, self.opts.time_limit_s - self.used)

    def configure(self, solver: cp_model.CpSolver) -> None:
        p = solver.parameters
        p.random_seed = self.opts.seed
        p.presolve_inclusion_work_limit = 0  # workaround for the 9.15 presolve bug #5293
        # one presolve pass with light probing: each Dinkelbach iteration re-presolves a clone, and on the
        # large spaces the default effort costs more than it saves (paper-full palm-62b-b1, proof from the
        # optimum as hint: 50 s -> 11 s; measured with benchmarks/bench_solver.py, formulations/objectives.md)
        p.max_presolve_iterations = 1
        p.cp_model_probing_level = 1
        p.log_search_progress = False
        rem = max(self.remaining(), 0.05)
        if self.opts.deterministic:
            p.num_workers = 1
            p.max_deterministic_time = rem
            p.max_time_in_seconds = max(10.0 * rem, 60.0)  # safety net only
        else:
            p.num_workers = self.opts.workers
            p.max_time_in_seconds = rem

    def charge(self, solver: cp_model.CpSolver) -> None:
        self.used += solver.deterministic_time if self.opts.deterministic else solver.wall_time


class RatioObjective:
    """A ratio objective N(x)/D(x) over the model: latency = T/E, energy = energy/E (per round)."""

    def __init__(self, sm: SpecModel, name: str):
        self.sm = sm
        self.name = name
        self.num = sm.T if name == "latency" else sm.energy
        self.den = sm.tokens_micro
        self.scale = Fraction(spec.TOKENS_SCALE, 1 if name == "latency" else sm.scenario.batch_size)

    @property
    def num_bounds(self) -> tuple[int, ...]:
        """CUT-3's bound of N per choice (CUT-4's for energy where `SpecModel.tighten_energy` raised it)."""
        return self.sm.choice_bounds[0 if self.name == "latency" else 1]

    def value(self, num: int, den: int) -> Fraction:
        """Objective in the evaluator's units (ns or nJ per token)."""
        return Fraction(num, den) * self.scale


#: `SolveSession.solve(cautious=NO_PRESOLVE)`: CP-SAT without presolve, the last re-solve after a
#: contradiction (paper-full/palm-62b-full-b32's OBJ-3 level: INFEASIBLE with presolve at either setting,
#: OPTIMAL without, formulations/objectives.md).
NO_PRESOLVE = "no presolve"


class SolveSession:
    """One solve session over a SpecModel: incumbent, hints, budget, statistics."""

    def __init__(self, sm: SpecModel, opts: SolverOptions):
        self.sm = sm
        self.opts = opts
        self.budget = TimeBudget(opts)
        self.iterations = 0
        self.hint: list[tuple[cp_model.IntVar, int]] | None = None
        self.t0 = time.perf_counter()
        self.trajectory: list[tuple[float, float]] = []  # (wall s, objective) of every new incumbent
        self.deterministic_time = 0.0  # CP-SAT deterministic time summed over the optimisation solves
        self.solve_log: list[dict] = []  # per solve: stage, status, deterministic and wall time (profiling)
        self.on_progress: ProgressHook | None = None
        self.stage = ""
        #: CP-SAT's linearization level for the solves, None: TimeBudget's (CP-SAT's default). Energy
        #: steps use 0: the LP of the idle-energy rows stalled them (objectives.md, 'Scaled rows')
        self.linearization: int | None = None

    def progress(self, ratio: RatioObjective, incumbent: Fraction | None, bound: Fraction | None) -> None:
        if self.on_progress is not None:
            self.on_progress(SolveProgress(self.stage or ratio.name, ratio.name, incumbent, bound, self.iterations,
                                           time.perf_counter() - self.t0))

    def solve(self, model: cp_model.CpModel, first_solution: bool = False,
              cautious: bool | str = False) -> tuple[int, cp_model.CpSolver]:
        """One CP-SAT solve on the budget; `cautious` uses CP-SAT's own presolve and LP settings (the
        re-solve after a contradiction, `_contradicts`)."""
        invalid = model.validate()
        if invalid:
            raise ModelMismatch(f"CP-SAT rejects the model: {invalid}")
        if self.hint is not None:
            model.clear_hints()
            for v, val in self.hint:
                model.add_hint(model.get_bool_var_from_proto_index(v.index), val)
        solver = cp_model.CpSolver()
        self.budget.configure(solver)
        if cautious:
            default = cp_model.CpSolver().parameters
            # all of presolve at CP-SAT's defaults, the #5293 workaround too: on paper-full/palm-62b-full-b64's
            # energy steps that workaround itself gave INFEASIBLE, the defaults the improving design
            for name in ("max_presolve_iterations", "cp_model_probing_level", "linearization_level",
                         "presolve_inclusion_work_limit"):
                setattr(solver.parameters, name, getattr(default, name))
        if self.linearization is not None:  # the energy steps' LP level holds in a cautious solve too
            solver.parameters.linearization_level = self.linearization
        if cautious == NO_PRESOLVE:  # the last resort after two contradictions: no presolve at all
            solver.parameters.cp_model_presolve = False
        if first_solution:
            solver.parameters.stop_after_first_solution = True
        status = solver.solve(model)
        self.budget.charge(solver)
        self.iterations += 1
        self.deterministic_time += solver.deterministic_time
        self.solve_log.append({"stage": self.stage + (f" ({'no presolve' if cautious == NO_PRESOLVE else 'cautious'})"
                                                      if cautious else ""),
                               "status": solver.status_name(status),
                               "deterministic_time": round(solver.deterministic_time, 3),
                               "wall_s": round(solver.wall_time, 3)})
        return status, solver

    def remember(self, solver: cp_model.CpSolver) -> Design:
        design = self.sm.decode(solver.boolean_value)
        self.hint = self.sm.decision_literals(design)
        return design


def _capped(sm: SpecModel, var, cap: int, name: str) -> tuple[cp_model.CpModel, cp_model.IntVar]:
    """A clone of the model with a copy of `var` whose domain is [0, cap] (keeps objectives in int64)."""
    model = sm.m.clone()
    sm.enforce_families(model)
    return model, cap_copy(model, var, cap, name)


def cap_copy(model: cp_model.CpModel, var, cap: int, name: str) -> cp_model.IntVar:
    """A variable equal to `var` (of the original model) with domain [0, cap]: products with it stay in int64."""
    capped = model.new_int_var(0, max(0, cap), name)
    model.add(capped == model.get_int_var_from_proto_index(var.index))
    return capped


def _measure(run: SolveSession, ratio: RatioObjective, design: Design) -> tuple[int, int, Design]:
    """(numerator, denominator, design) of a solution, taken from the evaluator (tight, exact)."""
    mt = run.sm.ev.evaluate(design).metrics
    n = _guarded_numerator(run.sm, ratio.name, mt)
    run.trajectory.append((time.perf_counter() - run.t0, float(ratio.value(n, mt.tokens_per_round_micro))))
    return n, mt.tokens_per_round_micro, design


def _guarded_numerator(sm: SpecModel, name: str, mt) -> int:
    """The evaluator's round time (latency) or energy per round (energy) of metrics `mt`, refused when
    it times the largest expected tokens could overflow the Dinkelbach, epsilon and OBJ-3 rows."""
    n = mt.round_time_ns if name == "latency" else mt.energy_nj_per_round
    d_max = max(st.tokens_micro for st in sm.stats)
    if n * d_max + d_max > INT_LIMIT:  # input guard of the Dinkelbach / epsilon rows that use n
        unit = "ns" if name == "latency" else "nJ"
        raise _too_large(sm.scenario, f"[OBJ-1] a design's {'round time' if unit == 'ns' else 'energy per round'} "
                                      f"({n:.3g} {unit}) times the largest expected tokens per round x "
                                      f"TOKENS_SCALE ({d_max:,}) is {n * d_max:.3g}")
    return n


def ratio_limits(sm: SpecModel, n: int, d: int, strict: bool) -> list[int]:
    """[OBJ-1] Per speculation choice c (expected tokens D_c): the largest integer N with N / D_c <= n / d,
    floor(n D_c / d), or with N / D_c < n / d (`strict`), ceil(n D_c / d) - 1. Exactly one choice literal
    is 1, so `N <= sum_c limit_c z_c` is the ratio row N * d <= n * D(x) (or < ) with coefficients the size
    of N, not of n x D (which reach 10^17 for energy and strain CP-SAT's LP: objectives.md, 'Scaled rows')."""
    if strict:
        return [-(-n * st.tokens_micro // d) - 1 for st in sm.stats]
    return [n * st.tokens_micro // d for st in sm.stats]


def choice_sum(model: cp_model.CpModel, sm: SpecModel, coeffs: Sequence[int]):
    """sum_c coeffs[c] * z_c on a clone."""
    return sum(c * model.get_bool_var_from_proto_index(z.index) for c, z in zip(coeffs, sm.z) if c)


#: OBJ-1 focus: the first Dinkelbach solves see only the choices whose CUT-3 bound ratio is at most
#: (1 + FOCUS_SLACK) x the least one (formulations/objectives.md).
FOCUS_SLACK = Fraction(1, 50)


def minimize_ratio(run: SolveSession, ratio: RatioObjective, extra=None, start: Evaluation | None = None,
                   choices: Collection[int] | None = None) -> tuple[str, Design | None, Fraction | None, Fraction]:
    """Dinkelbach iterations [OBJ-1]: min N(x)/D(x) (+ optional extra constraints on a clone).

    `choices`: the speculation choices the extra rows can leave (default all): CUT-4 prices only these.
    Returns (status, design, objective, bound) in evaluator units; status OPTIMAL, FEASIBLE,
    INFEASIBLE or UNKNOWN.
    """
    before = run.linearization
    keeps_energy = ratio.name == "energy" or extra is not None  # extra rows may read the energy (OBJ-2, OBJ-3)
    run.linearization = ENERGY_LINEARIZATION if keeps_energy else before
    try:
        return _dinkelbach(run, ratio, extra, start, choices)
    finally:
        run.linearization = before


#: CP-SAT's linearization level in energy Dinkelbach steps (objectives.md, 'Scaled rows'): at the default
#: (1) the LP of the idle-energy rows stalled paper/palm-62b-b1's third step past 40 s; at 0 it takes 5 s.
ENERGY_LINEARIZATION = 0


def _dinkelbach(run: SolveSession, ratio: RatioObjective, extra, start: Evaluation | None,
                choices: Collection[int] | None = None) -> tuple[str, Design | None, Fraction | None, Fraction]:
    sm = run.sm
    d_min = sm.min_tokens_micro()
    d_max = max(st.tokens_micro for st in sm.stats)
    # a latency solve with no extra rows never reads an energy: drop the rows that only define them
    latency_only = ratio.name == "latency" and extra is None

    def prepare(model: cp_model.CpModel) -> None:
        if extra is not None:
            extra(model)
        if latency_only:
            sm.drop_energy_rows(model)

    # starting point: the hint if feasible under `extra`, else minimise N alone
    if start is not None:  # a known feasible design: the evaluator's integers are the model's
        incumbent = _measure(run, ratio, start.design)
        run.hint = sm.decision_literals(start.design)
    else:  # find a first solution (any), then improve it
        model, nvar = _capped(sm, ratio.num, ub(ratio.num), "N")
        prepare(model)
        model.minimize(nvar)
        status, solver = run.solve(model, first_solution=True)
        if status == cp_model.INFEASIBLE:
            return "INFEASIBLE", None, None, Fraction(0)
        if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
            return "UNKNOWN", None, None, Fraction(0)
        incumbent = _measure(run, ratio, run.remember(solver))
    if ratio.name == "energy":  # [CUT-4] time-priced energy bounds of the choices that can beat the incumbent
        sm.tighten_energy(Fraction(incumbent[0], incumbent[1]), choices)
    # OBJ-1 focus: search first only the choices whose CUT-3 bound ratio is within FOCUS_SLACK of the least
    bound_ratio = [Fraction(lb, st.tokens_micro) for lb, st in zip(ratio.num_bounds, sm.stats)]
    focus = min(bound_ratio) * (1 + FOCUS_SLACK) if extra is None else None
    # a proven bound before any step: every design's N is at least its choice's CUT-3 bound (OBJ-1)
    bound = min(min(bound_ratio) * ratio.scale, ratio.value(*incumbent[:2]))
    # Dinkelbach, scaled: G(lambda) = min N(x) - (ceil(lambda D(x)) - 1), lambda = N_prev / D_prev; 1 at the optimum
    while True:
        n_prev, d_prev, _ = incumbent
        focused = focus is not None and focus < Fraction(n_prev, d_prev)  # narrower than the pruning below
        cap = -(-n_prev * d_max // d_prev)  # any x with ratio <= lambda has N <= lambda * D_max
        model, nvar = _capped(sm, ratio.num, cap, "N")
        prepare(model)
        # OBJ-1 pruning: a choice whose CUT-3 bound ratio exceeds lambda cannot give F < 0 (the
        # incumbent's own choice stays: its bound is at most its ratio)
        kept = []  # the choices this step leaves
        for k, (z, num_lb, st, br) in enumerate(zip(sm.z, ratio.num_bounds, sm.stats, bound_ratio)):
            if num_lb * d_prev > n_prev * st.tokens_micro or (focused and br > focus):
                model.add(model.get_bool_var_from_proto_index(z.index) == 0)
                continue
            kept.append(k)
            if ratio.name == "energy":
                prune_architectures(model, sm, k, n_prev, d_prev, focus if focused else None)
        # G(x) = N(x) - (ceil(lambda D(x)) - 1): G <= 0 iff N/D < lambda; the incumbent has G = 1
        limits = ratio_limits(sm, n_prev, d_prev, strict=True)
        objective = nvar - choice_sum(model, sm, limits)
        model.minimize(objective)
        if run.budget.remaining() <= 0:
            return "FEASIBLE", incumbent[2], ratio.value(n_prev, d_prev), bound
        status, solver = run.solve(model)
        f_val = _value_at(status, solver, objective)
        if not focused and _contradicts(status, f_val):
            # CP-SAT's own presolve, then one plain solve per choice left, then no presolve (objectives.md,
            # 'A CP-SAT 9.15 fault')
            for mode in (True, PER_CHOICE, NO_PRESOLVE):
                if mode == PER_CHOICE:
                    part = _per_choice_step(run, ratio, prepare, kept, limits)
                    if part[0] == cp_model.UNKNOWN:  # not tried, or a part unproven: on to no presolve
                        continue
                    status, f_val, solver = part
                else:
                    status, solver = run.solve(model, cautious=mode)
                    f_val = _value_at(status, solver, objective)
                if not _contradicts(status, f_val):
                    break
            if _contradicts(status, f_val):
                said = "INFEASIBLE" if status == cp_model.INFEASIBLE else f"OPTIMAL with F = {f_val}"
                raise ModelMismatch(
                    f"CP-SAT reports {said} for a Dinkelbach step whose incumbent has G = 1, also with its default "
                    "presolve and with none: a solver fault (formulations/objectives.md, 'A CP-SAT 9.15 fault'); no optimum is "
                    "claimed")
        if focused and (status == cp_model.INFEASIBLE or (status == cp_model.OPTIMAL and f_val >= 1)):
            focus = None  # nothing better among the focused choices: search every choice the pruning leaves
            continue
        if f_val is None:
            return "FEASIBLE", incumbent[2], ratio.value(n_prev, d_prev), bound
        # OPTIMAL: the bound is the (exact) optimum; else CP-SAT's bound, a double, rounded down with margin
        f_lb = f_val if status == cp_model.OPTIMAL else min(f_val, _floor_bound(solver.best_objective_bound))
        lam = Fraction(n_prev, d_prev)
        if not focused:  # a focused solve bounds only its choices: N >= lambda D - 1 + G_min everywhere
            lb = lam + Fraction(min(f_lb - 1, 0), d_min)
            bound = max(bound, lb * ratio.scale, Fraction(0))
        run.progress(ratio, ratio.value(n_prev, d_prev), bound)
        if f_val <= 0:
            incumbent = _measure(run, ratio, run.remember(solver))
            if Fraction(incumbent[0], incumbent[1]) >= lam:  # the evaluator's price must be below lambda
                raise ModelMismatch(f"a Dinkelbach step found G = {f_val} <= 0 but the evaluator prices the design at "
                                    f"{ratio.value(incumbent[0], incumbent[1])}, not below the incumbent's "
                                    f"{ratio.value(n_prev, d_prev)}")
            n1, d1, design = incumbent
            if status == cp_model.OPTIMAL and not focused and settled(sm, ratio, kept, limits, f_val, n1, d1):
                run.progress(ratio, ratio.value(n1, d1), ratio.value(n1, d1))
                return "OPTIMAL", design, ratio.value(n1, d1), ratio.value(n1, d1)
            if status != cp_model.OPTIMAL and run.budget.remaining() <= 0:
                return "FEASIBLE", design, ratio.value(n1, d1), bound
            continue
        obj = ratio.value(n_prev, d_prev)
        if focused:  # stopped early with no improvement among the focused choices (budget spent)
            return "FEASIBLE", incumbent[2], obj, min(bound, obj)
        if status == cp_model.OPTIMAL and f_lb >= 1:
            return "OPTIMAL", incumbent[2], obj, obj
        return "FEASIBLE", incumbent[2], obj, min(bound, obj)


def settled(sm: SpecModel, ratio: RatioObjective, kept: Sequence[int], limits: Sequence[int], g_min: int,
            n1: int, d1: int) -> bool:
    """[OBJ-1s] Whether an unfocused Dinkelbach step proven OPTIMAL at value `g_min` <= 0 already proves
    its design (N = n1 per D = d1 tokens) optimal, so the confirming step is not solved. Every design of a
    choice k the step kept has G = N - limits[k] >= g_min, and N at least the choice's CUT-3/CUT-4 bound;
    the choices and architectures the step pruned and the cap's designs are above the step's lambda, which
    is above n1 / d1. So when max(bound_k, g_min + limits[k]) / D_k >= n1 / d1 for every kept choice, no
    design beats n1 / d1."""
    for k in kept:
        tokens = sm.stats[k].tokens_micro
        if max(ratio.num_bounds[k], g_min + limits[k]) * d1 < n1 * tokens:
            return False
    return True


#: A contradicted Dinkelbach step is solved again as one plain minimisation per choice it leaves when it
#: leaves at most this many (`_per_choice_step`).
PER_CHOICE_MAX = 4
#: `_dinkelbach`'s fallback mode between CP-SAT's own presolve and none.
PER_CHOICE = "per choice"
#: An OBJ-3 integer level that contradicts the design so far is solved again as one part per verifier
#: architecture the ratio rows leave when they leave at most this many (`CanonicalOptimum._per_verifier_arch`).
PER_ARCH_MAX = 16
#: `_solve_group`'s fallback mode between CP-SAT's own presolve and none.
PER_ARCH = "per verifier architecture"


def _least_part(run: SolveSession, parts) -> tuple[int, tuple | None]:
    """Solve the parts of a split solve one after another on CP-SAT's own presolve (`_per_choice_step`,
    `CanonicalOptimum._per_verifier_arch`): `parts` yields (label, model, value, payload), `value(solver)`
    the part's objective in integers. Returns (UNKNOWN, None) when a part is not proven, (INFEASIBLE, None)
    when every part is, else (OPTIMAL, (least value, its solver, its payload))."""
    best = None
    stage = run.stage
    try:
        for label, model, value, payload in parts:
            run.stage = f"{stage} ({label})"
            status, solver = run.solve(model, cautious=True)
            if status == cp_model.INFEASIBLE:
                continue
            if status != cp_model.OPTIMAL:
                return cp_model.UNKNOWN, None
            v = value(solver)
            if best is None or v < best[0]:
                best = (v, solver, payload)
    finally:
        run.stage = stage
    return (cp_model.INFEASIBLE, None) if best is None else (cp_model.OPTIMAL, best)


def _per_choice_step(run: SolveSession, ratio: RatioObjective, prepare, kept: Sequence[int], limits: Sequence[int]
                     ) -> tuple[int, int | None, cp_model.CpSolver | None]:
    """[OBJ-1] A Dinkelbach step solved per speculation choice: with z_k fixed the tokens per round are the
    constant D_k, so min G = min over the choices k left of (min N given z_k) - limits[k]. Each part is the
    base model with the step's extra rows (`prepare`) and z_k = 1, minimising N itself: no capped copy of N,
    no pruning rows, CP-SAT's own presolve settings. paper-full/palm-62b-full-b32's last energy step is
    INFEASIBLE at presolve as one model (at every presolve setting, and as its z_k part with the capped
    copy), unfinished in 60 s without presolve, and OPTIMAL in 2-4 s this way. Returns (status, G_min, the
    best part's solver); UNKNOWN (the caller goes on without presolve) when more than `PER_CHOICE_MAX`
    choices are left or a part is not proven."""
    if len(kept) > PER_CHOICE_MAX:
        return cp_model.UNKNOWN, None, None
    sm = run.sm

    def parts():
        for k in kept:
            sub = sm.m.clone()
            sm.enforce_families(sub)
            prepare(sub)
            sub.add(sub.get_bool_var_from_proto_index(sm.z[k].index) == 1)
            n_k = sub.get_int_var_from_proto_index(ratio.num.index)
            sub.minimize(n_k)
            yield f"choice {k}", sub, lambda solver, n_k=n_k, k=k: int(solver.value(n_k)) - limits[k], None

    status, best = _least_part(run, parts())
    if best is None:
        return status, None, None
    return status, best[0], best[1]


def prune_architectures(model: cp_model.CpModel, sm: SpecModel, k: int, n_prev: int, d_prev: int,
                        focus: Fraction | None = None) -> None:
    """[CUT-4] in an energy step at lambda = n_prev / d_prev, z_k => not x_ja for every (model, architecture)
    whose bound with choice k exceeds lambda (or the focus, in a focused step): no such design beats lambda."""
    tokens = sm.stats[k].tokens_micro
    z = model.get_bool_var_from_proto_index(sm.z[k].index)
    for (j, a), lb in sm.arch_energy_bounds.get(k, {}).items():
        if lb * d_prev > n_prev * tokens or (focus is not None and Fraction(lb, tokens) > focus):
            model.add_implication(z, model.get_bool_var_from_proto_index(sm.x[j][a].index).Not())


def _contradicts(status: int, f_val: int | None) -> bool:
    """Whether an unfocused Dinkelbach solve contradicts its incumbent, a design the step keeps (the cap
    and the OBJ-1 pruning keep it, the extra rows hold for it) with G = 1: INFEASIBLE, or OPTIMAL above 1.
    OR-Tools 9.15 did this on some models with large coefficients (objectives.md)."""
    return status == cp_model.INFEASIBLE or (status == cp_model.OPTIMAL and f_val > 1)


def _value_at(status: int, solver: cp_model.CpSolver, objective) -> int | None:
    """The objective at the solution in integers, or None without one. CP-SAT reports `objective_value` as a
    double, which is inexact beyond 2^53: an energy step's F = D_k·E - N_k·D reaches 10^16 (PaLM-62B b2), where
    F = 0 read as a double came out negative and the loop repeated the same incumbent."""
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return None
    return int(solver.value(objective))


def _floor_bound(bound: float) -> int:
    """An integer at most CP-SAT's objective bound, a double that may be off by its last bits."""
    return math.floor(bound - abs(bound) * 1e-15) - 1


def tight_claim(sm: SpecModel, design: Design, opts: SolverOptions) -> tuple[int, int, int]:
    """(round ns, energy nJ, tokens micro) that CP-SAT computes for `design` with every decision fixed."""
    model = sm.m.clone()
    sm.enforce_families(model)
    for v, val in sm.decision_literals(design):
        model.add(model.get_bool_var_from_proto_index(v.index) == val)
    T = model.get_int_var_from_proto_index(sm.T.index)
    E = model.get_int_var_from_proto_index(sm.energy.index)
    # lexicographic in one objective: T first, then energy (T's weight exceeds any energy value)
    model.minimize(T * (ub(sm.energy) + 1) + E) if ub(sm.energy) * ub(sm.T) < (1 << 61) else model.minimize(T)
    solver = cp_model.CpSolver()
    solver.parameters.num_workers = 1
    solver.parameters.random_seed = opts.seed
    solver.parameters.presolve_inclusion_work_limit = 0
    solver.parameters.max_time_in_seconds = 60.0
    status = solver.solve(model)
    if status != cp_model.OPTIMAL:
        raise ModelMismatch(f"the CP-SAT model rejects its own design ({solver.status_name(status)})")
    t, e = solver.value(T), solver.value(E)
    if ub(sm.energy) * ub(sm.T) >= (1 << 61):  # energy not minimised above: minimise it with T fixed
        model.add(T == t)
        model.minimize(E)
        status = solver.solve(model)
        e = solver.value(E)
    k = sm.choice_index(design)
    return t, e, sm.stats[k].tokens_micro


def verify(sm: SpecModel, ev: Evaluator, design: Design, opts: SolverOptions) -> tuple[Evaluation, dict]:
    """Re-price with the evaluator and require exact agreement with the CP-SAT model."""
    evaluation = ev.evaluate(design)
    t, e, tok = tight_claim(sm, design, opts)
    m = evaluation.metrics
    claim = {"round_time_ns": t, "energy_nj_per_round": e, "tokens_per_round_micro": tok}
    actual = {"round_time_ns": m.round_time_ns, "energy_nj_per_round": m.energy_nj_per_round,
              "tokens_per_round_micro": m.tokens_per_round_micro}
    if claim != actual:
        raise ModelMismatch(f"CP-SAT claims {claim} but the evaluator prices {actual} for {design.key()}")
    return evaluation, claim


def explain_infeasible(sm: SpecModel, opts: SolverOptions) -> str:
    """Name the constraint families that make the scenario infeasible (CP-SAT assumptions)."""
    model = sm.m.clone()
    lits = {name: model.get_bool_var_from_proto_index(v.index) for name, v in sm.assumption_families.items()}
    model.add_assumptions(list(lits.values()))
    solver = cp_model.CpSolver()
    solver.parameters.num_workers = 1
    solver.parameters.presolve_inclusion_work_limit = 0  # workaround for the 9.15 presolve bug #5293
    solver.parameters.max_time_in_seconds = max(10.0, opts.time_limit_s)
    status = solver.solve(model)
    if status != cp_model.INFEASIBLE:
        return "no design satisfies the scenario within the time limit"
    core = set(solver.sufficient_assumptions_for_infeasibility())
    names = [name for name, v in lits.items() if v.index in core]
    if not names:
        return "the [space] restrictions leave no valid design (mapping rule vs PIM units)"
    details = []
    for name in names:
        if name.startswith("CAP "):
            j = next(j for j, d in enumerate(sm.data) if f"{d.label} ({d.spec.name})" in name)
            details.append(_cap_detail(sm, j, name))
        else:
            details.append(f"[{name}]")
    return "infeasible: " + "; ".join(details)


def best_start(sm: SpecModel, ev: Evaluator, objective: str, hint: Design | None) -> Evaluation | None:
    """The best feasible design among the hint and the baselines that lies in the (restricted) space."""
    best = best_known(sm, ev, objective, hint, sm.scenario)
    return None if best is None else _best_choice_for(sm, ev, objective, best)


def best_known(sm: SpecModel, ev: Evaluator, objective: str, hint: Design | None, baselines_of: Scenario,
               skip: tuple[type[Exception], ...] = (ScenarioError,)) -> Evaluation | None:
    """The best of the hint and the baselines of `baselines_of` that lie in the model's space (a candidate
    raising one of `skip` is left out), priced by the evaluator; None when none does."""
    from specpim_cp.solvers.baselines import run_baselines

    candidates = [hint] if hint is not None else []
    candidates += [b.evaluation.design for b in run_baselines(baselines_of, sm.catalog)
                   if b.evaluation is not None and len(b.evaluation.design.drafters) == sm.n_drafters]
    best = None
    for d in candidates:
        try:
            sm.decision_literals(d)
            e = ev.evaluate(d)
        except skip:
            continue
        if best is None or e.metrics.objective(objective) < best.metrics.objective(objective):
            best = e
    return best


#: Most speculation choices `_best_choice_for` prices one by one.
MAX_START_CHOICES = 20_000


def _best_choice_for(sm: SpecModel, ev: Evaluator, objective: str, start: Evaluation,
                     exclude: Collection[int] = (), limit: int | None = MAX_START_CHOICES) -> Evaluation:
    """The start design's hardware and placements with the best speculation choice of the space (every
    choice priced by the evaluator but the indices in `exclude`): a closer first incumbent saves Dinkelbach
    iterations. With more than `limit` choices, the start as it is."""
    if limit is not None and len(sm.choices) > limit:
        return start
    d = start.design
    archs = [md.arch for _, md in d.models()]
    places = [md.placement for _, md in d.models()]
    best, best_value = d, start.metrics.objective(objective)
    for k, c in enumerate(sm.choices):
        if k in exclude:
            continue
        cand = sm.space.build(archs, places, c)
        try:
            value = ev.metrics(cand, check=False).objective(objective)
        except ScenarioError:  # e.g. a draft2 model that cannot run on this drafter's host
            continue
        if value < best_value:
            best, best_value = cand, value
    return start if best is d else ev.evaluate(best)


# -- one canonical optimum [OBJ-3] ------------------------------------------------------------------
#: Most one packed OBJ-3 objective spans: the product of its keys' sizes (a mixed-radix number); keys
#: beyond it are minimised by the next solve, with these fixed.
PACK_LIMIT = 1 << 40

#: The ratio levels of the canonical optimum, per objective: the objective, then the other metric
#: (EDP: the latency, then the energy, of the front points of least EDP).
RATIO_LEVELS = {"latency": ("latency", "energy"), "energy": ("energy", "latency"),
                "edp": ("edp", "latency", "energy")}


@dataclass(frozen=True)
class RatioRow:
    """A ratio level fixed at its optimum n/d [OBJ-3]: N(x)/D(x) <= n/d, written N'·d <= n·D(x)."""

    name: str  # latency | energy
    n: int  # round ns or energy nJ per round of a design at the optimum (the evaluator's)
    d: int  # its expected tokens per round x TOKENS_SCALE

    @classmethod
    def of(cls, sm: SpecModel, name: str, metrics) -> RatioRow:
        return cls(name, _guarded_numerator(sm, name, metrics), metrics.tokens_per_round_micro)

    def keeps(self, sm: SpecModel) -> set[int]:
        """The choices whose CUT-3 bound ratio can reach this level (`add_ratio_rows` fixes the others to 0)."""
        bounds = sm.choice_bounds[0 if self.name == "latency" else 1]
        return {k for k, (lb, st) in enumerate(zip(bounds, sm.stats)) if lb * self.d <= self.n * st.tokens_micro}


def add_ratio_rows(sm: SpecModel, model: cp_model.CpModel, rows: list[RatioRow]) -> None:
    """OBJ-3: on a clone, every ratio level of `rows` at most its optimum (so equal to it), as exact
    cross-multiplied rows on capped copies (int64-safe like OBJ-2's); a choice whose CUT-3 bound ratio
    exceeds a level cannot reach it and is fixed to 0."""
    if not rows:
        return
    d_max = max(st.tokens_micro for st in sm.stats)
    for r in rows:
        var = sm.T if r.name == "latency" else sm.energy
        capped = cap_copy(model, var, -(-r.n * d_max // r.d), f"{r.name}_fixed")
        model.add(capped <= choice_sum(model, sm, ratio_limits(sm, r.n, r.d, strict=False)))
        keep = r.keeps(sm)
        for k, z in enumerate(sm.z):
            if k not in keep:
                model.add(model.get_bool_var_from_proto_index(z.index) == 0)


@dataclass
class TieLevel:
    """One level of the canonical optimum: its value at the returned design, whether CP-SAT proved it
    (OPTIMAL), and whether another design attains every level up to this one (None: not known)."""

    level: str  # latency | energy | edp | pim_units | devices | order
    value: Fraction | int | list[int] | None
    status: str  # OPTIMAL | FEASIBLE | UNKNOWN | SKIPPED | FAULT (left out: CP-SAT contradicted a known design)
    ties: bool | None = None

    def as_dict(self) -> dict:
        out: dict = {"level": self.level, "status": self.status, "ties": self.ties}
        if isinstance(self.value, Fraction):
            out["value"] = float(self.value)
            out["exact"] = _exact(self.value)
        else:
            out["value"] = self.value
        return out


def pack_keys(keys: Sequence[TieKey], limit: int = PACK_LIMIT) -> list[list[TieKey]]:
    """Consecutive keys grouped so that each group's mixed-radix number stays within `limit`."""
    groups: list[list[TieKey]] = []
    span = limit + 1
    for key in keys:
        if span * key.size > limit:
            groups.append([])
            span = 1
        groups[-1].append(key)
        span *= key.size
    return groups


def solve_key_groups(cano, groups: Sequence[list[TieKey]]) -> bool:
    """OBJ-3's integer levels on a tie-break (`CanonicalOptimum`, or the mix's MIX-13 `MixCanonical`): each
    packed group minimised by `cano._solve_group` with the earlier keys fixed (a group of one-valued keys
    is 0); False when one is not proven or the time limit came first (`cano.stop`, `cano.note` say which)."""
    for group in groups:
        first = len(cano.values)
        if all(k.size == 1 for k in group):  # a key with one value is 0
            cano.values += [0] * len(group)
            continue
        if cano.run.budget.remaining() <= 0:
            cano.stop = (first, "SKIPPED")
            cano.note = "the time limit was reached before the tie-break ended: the design is not canonical"
            return False
        if not cano._solve_group(group, first):
            return False
    return True


def level_before(keys: Sequence[TieKey], first: int, n_ratio: int) -> int:
    """The deepest tie-break level all of whose keys come before key `first` (levels counted after the
    `n_ratio` ratio levels; the last ratio level when no integer level is complete)."""
    names = list(dict.fromkeys(k.level for k in keys))
    done = [i for i, name in enumerate(names) if max(n for n, k in enumerate(keys) if k.level == name) < first]
    return n_ratio + max(done) if done else n_ratio - 1


def integer_entries(keys: Sequence[TieKey], values: Sequence[int], n_proven: int,
                    stop: tuple[int, str]) -> list[tuple[TieLevel, int]]:
    """The integer levels' entries at a design whose key values are `values`, each with the end of its keys:
    OPTIMAL when every key of the level is among the `n_proven` first, the unproven solve's status (`stop`:
    the end of its keys, its status) when a key of the level was in it, else SKIPPED."""
    end, status = stop
    out = []
    for name in dict.fromkeys(k.level for k in keys):
        idx = [n for n, k in enumerate(keys) if k.level == name]
        value = [values[n] for n in idx] if name == "order" else values[idx[0]]
        proven = max(idx) < n_proven
        out.append((TieLevel(name, value, "OPTIMAL" if proven else status if min(idx) < end else "SKIPPED"),
                    max(idx) + 1))
    return out


class CanonicalOptimum:
    """[OBJ-3] The lexicographic minimum, among the designs that attain the primary optimum, of: the
    other metric per token (EDP: latency, then energy), the PIM units over all devices, the devices, and
    the fixed order of `SpecModel.tie_break_keys`. Each level is solved to proof with the earlier ones
    fixed exactly, hinted by the design so far; then, from the deepest level up, a feasibility solve
    asks whether another design attains the levels so far (formulations/objectives.md, OBJ-3)."""

    def __init__(self, run: SolveSession, objective: str, best: Evaluation):
        self.run, self.sm, self.objective = run, run.sm, objective
        self.design = best.design
        self.rows: list[RatioRow] = []
        self.keys = self.sm.tie_break_keys()
        self.values: list[int] = []  # proven minima of keys[:len(values)]
        self.levels: list[TieLevel] = []
        self.scope: list[tuple[int, int]] = []  # per level: (ratio rows, keys) that fix it
        self.known: set[int] = set()  # levels another design attains (a later level changed the design)
        self.note: str | None = None
        self.several_points = False  # EDP: several front points of least EDP
        self.stop: tuple[int, str] = (0, "SKIPPED")  # (end of the unproven group's keys, its status)

    # -- the levels ------------------------------------------------------------------------------
    def ratio_levels(self, best: Evaluation, front: list[Evaluation] | None) -> bool:
        """The primary level and the other metric(s), fixed as RatioRows; False when not proven."""
        sm, names = self.sm, RATIO_LEVELS[self.objective]
        if self.objective == "edp":  # the front is exact: the least-EDP points, the least latency first
            least = [p for p in front or [best] if p.metrics.objective("edp") == best.metrics.objective("edp")]
            self.several_points = len(least) > 1
            self.rows = [RatioRow.of(sm, "latency", best.metrics), RatioRow.of(sm, "energy", best.metrics)]
            for name in names:
                self.levels.append(TieLevel(name, best.metrics.objective(name), "OPTIMAL"))
                self.scope.append((2, 0))
            return True
        self.rows = [RatioRow.of(sm, self.objective, best.metrics)]
        self.levels.append(TieLevel(self.objective, best.metrics.objective(self.objective), "OPTIMAL"))
        self.scope.append((1, 0))
        other = names[1]
        self.run.stage = f"tie-break: {other}"
        try:
            status, design, value, _ = minimize_ratio(self.run, RatioObjective(sm, other),
                                                      lambda model: add_ratio_rows(sm, model, self.rows[:1]),
                                                      start=best, choices=self.rows[0].keeps(sm))
        except (ModelMismatch, IntegerRangeError) as exc:  # go on without this level, say why
            fault = isinstance(exc, ModelMismatch)
            self.levels.append(TieLevel(other, None, "FAULT" if fault else "OUT_OF_RANGE"))
            self.scope.append((1, 0))
            why = ("CP-SAT contradicted a known design at the {other} level (formulations/objectives.md, 'A CP-SAT "
                   "9.15 fault')" if fault else "the {other} level's rows exceed the exact model's 64-bit range "
                   f"({exc})").format(other=other)
            self.note = (f"{why}: the design is the least in ({self.objective}, PIM units, devices, fixed order) "
                         f"instead, its {other} not minimised; not canonical")
            return True
        if design is None:
            status, design, value = "UNKNOWN", best.design, best.metrics.objective(other)
        if design.key() != self.design.key():
            self.known.add(0)
        self.design = design
        self.levels.append(TieLevel(other, value, status))
        self.scope.append((2, 0))
        if status != "OPTIMAL":
            self.note = f"the {other} level is not proven ({status}): the design is not canonical"
            return False
        self.rows.append(RatioRow.of(sm, other, sm.ev.evaluate(design).metrics))
        return True

    def _clone(self, n_rows: int, n_keys: int, minimise: list[TieKey] = ()):
        """A clone with the first `n_rows` ratio rows and `n_keys` keys fixed (and `minimise` minimised)."""
        sm = self.sm
        model = sm.m.clone()
        sm.enforce_families(model)
        add_ratio_rows(sm, model, self.rows[:n_rows])
        if all(r.name == "latency" for r in self.rows[:n_rows]):
            sm.drop_energy_rows(model)  # only the latency is fixed: the energy rows restrict nothing
        return model, sm.add_tie_break(model, self.keys, self.values[:n_keys], minimise)

    def integer_levels(self) -> bool:
        """OBJ-3's PIM units, devices and fixed order, in packed solves; False when one is not proven."""
        return solve_key_groups(self, pack_keys(self.keys))

    def _solve_group(self, group: list[TieKey], first: int) -> bool:
        """Minimise one packed group of keys with the earlier ones fixed, hinted by the design so far."""
        sm, run = self.sm, self.run
        run.stage = "tie-break: " + ", ".join(dict.fromkeys(k.level for k in group))
        model, key_vars = self._clone(len(self.rows), first, group)
        weight = [math.prod(k.size for k in group[i + 1:]) for i in range(len(group))]
        at_design = sum(w * v for w, v in zip(weight, sm.tie_key_values(self.design, group)))
        run.hint = sm.decision_literals(self.design)

        def packed(solver: cp_model.CpSolver, keys) -> int:  # the objective in integers (CP-SAT reports a double)
            return sum(w * solver.value(v) for w, v in zip(weight, keys))

        def contradicts(status: int, solver: cp_model.CpSolver, keys) -> bool:  # the design so far is feasible here
            return status == cp_model.INFEASIBLE or (status == cp_model.OPTIMAL and packed(solver, keys) > at_design)

        status, solver = run.solve(model)
        keys = key_vars  # the key variables of the model `solver` solved
        if contradicts(status, solver, keys):
            # CP-SAT's own presolve, then one solve per verifier architecture, then none (objectives.md, 9.15 fault)
            for mode in (True, PER_ARCH, NO_PRESOLVE):
                if mode == PER_ARCH:
                    part = self._per_verifier_arch(group, first, packed)
                    if part is None:
                        continue
                    status, solver, keys = part
                else:
                    status, solver = run.solve(model, cautious=mode)
                    keys = key_vars
                if not contradicts(status, solver, keys):
                    break
            if contradicts(status, solver, keys):
                self.note = ("CP-SAT contradicted the design of the previous level (formulations/objectives.md, "
                             "'A CP-SAT 9.15 fault'): the design is not canonical")
                return False
        if status in (cp_model.OPTIMAL, cp_model.FEASIBLE) and packed(solver, keys) <= at_design:
            design = sm.decode(solver.boolean_value)
            if design.key() != self.design.key():
                self.known.add(level_before(self.keys, first, len(RATIO_LEVELS[self.objective])))
            self.design = design
        if status != cp_model.OPTIMAL:
            self.stop = (first + len(group), solver.status_name(status))
            self.note = (f"the tie-break level {group[0].level} is not proven ({solver.status_name(status)}): "
                         "the design is not canonical")
            return False
        self.values += [solver.value(v) for v in keys]
        return True

    def _per_verifier_arch(self, group: list[TieKey], first: int, packed):
        """`_solve_group`'s solve split by the verifier's architecture: one part per architecture the ratio
        rows leave (`_live_verifier_archs`), x fixed, CP-SAT's own presolve (`_least_part`); the least packed
        value over the parts is the group's minimum (the order keys include the architecture's index). None
        (go on without presolve) when more than `PER_ARCH_MAX` are left or a part is not proven; else (status,
        the best part's solver, its key variables). On paper-full/palm-62b-full-b32 the whole group's solve is
        INFEASIBLE at presolve at every setting, and each of its 5 parts OPTIMAL in 0.3-0.5 s."""
        sm = self.sm
        archs = self._live_verifier_archs()
        if len(archs) > PER_ARCH_MAX:
            return None

        def parts():
            for a in archs:
                model, key_vars = self._clone(len(self.rows), first, group)
                model.add(model.get_bool_var_from_proto_index(sm.x[0][a].index) == 1)
                yield f"verifier on {a.label()}", model, lambda solver, kv=key_vars: packed(solver, kv), key_vars

        status, best = _least_part(self.run, parts())
        if status == cp_model.UNKNOWN:
            return None
        return (status, None, []) if best is None else (status, best[1], best[2])

    def _live_verifier_archs(self) -> list[ArchConfig]:
        """The verifier's architectures a design at the fixed ratio levels can have: for some choice the rows
        keep, CUT-4's per-architecture energy bound (where priced) is not above the energy level."""
        sm = self.sm
        kept = set(range(len(sm.z)))
        for r in self.rows:
            kept &= r.keeps(sm)

        def alive(a: ArchConfig, k: int) -> bool:
            lb = sm.arch_energy_bounds.get(k, {}).get((0, a))
            return all(lb is None or r.name != "energy" or lb * r.d <= r.n * sm.stats[k].tokens_micro
                       for r in self.rows)
        return [a for a in sm.x[0] if any(alive(a, k) for k in kept)]

    def add_integer_entries(self) -> None:
        """The integer levels' entries at the design (`integer_entries`), each with the rows and keys that fix it."""
        values = self.sm.tie_key_values(self.design, self.keys)
        for level, end in integer_entries(self.keys, values, len(self.values), self.stop):
            self.levels.append(level)
            self.scope.append((len(self.rows), end))

    # -- ties ------------------------------------------------------------------------------------
    def another_design(self, level: int) -> bool | None:
        """Whether a design other than the canonical one attains levels 0..`level` (None: not known)."""
        sm, run = self.sm, self.run
        if run.budget.remaining() <= 0:
            return None
        n_rows, n_keys = self.scope[level]
        model, _ = self._clone(n_rows, n_keys)
        model.add_bool_or([~model.get_bool_var_from_proto_index(v.index)
                           for v, val in sm.decision_literals(self.design) if val])
        run.stage = f"tie-break: another design at {self.levels[level].level}?"
        run.hint = sm.decision_literals(self.design)
        status, _ = run.solve(model)
        if status in (cp_model.OPTIMAL, cp_model.FEASIBLE):
            return True
        return False if status == cp_model.INFEASIBLE else None

    def find_ties(self) -> None:
        """Ties are a prefix (a design that attains level i attains every earlier one): from the deepest
        level up, one feasibility solve each, until one finds another design or a known tie is reached.
        The order level has none (its keys fix every decision)."""
        last = len(self.levels) - 1
        self.levels[last].ties = False
        first_checked = 2 if self.objective == "edp" else 0  # EDP: latency and energy name the same set
        deepest = max(self.known, default=-1)
        for i in range(last - 1, max(deepest, first_checked - 1), -1):
            found = self.another_design(i)
            self.levels[i].ties = found
            if found:
                deepest = i
                break
        for i in range(deepest + 1):
            self.levels[i].ties = True
        untied = next((i for i in range(last + 1) if self.levels[i].ties is False), last)
        for lv in self.levels[untied:]:  # no other design at level i: none at any later level either
            lv.ties = False
        if self.objective == "edp":
            self.levels[1].ties = self.levels[2].ties
            self.levels[0].ties = True if self.several_points else self.levels[2].ties

    def report(self) -> dict:
        return {"tie_break": [lv.as_dict() for lv in self.levels],
                "canonical": self.note is None, **({"tie_break_note": self.note} if self.note else {})}


def canonical_optimum(run: SolveSession, objective: str, best: Evaluation,
                      front: list[Evaluation] | None = None) -> tuple[Design, dict]:
    """[OBJ-3] The canonical optimum for a proven optimum `best` (EDP: its exact `front`), and the
    tie-break's report for SolveReport.extra (levels, values, statuses, ties; `canonical`)."""
    t0, dtime = time.perf_counter(), run.deterministic_time
    cano = CanonicalOptimum(run, objective, best)
    hook, run.on_progress = run.on_progress, None  # progress reports the primary objective only
    before, run.linearization = run.linearization, ENERGY_LINEARIZATION  # the levels keep energy rows
    try:
        proven = cano.ratio_levels(best, front) and cano.integer_levels()
    finally:
        run.on_progress, run.linearization = hook, before
    cano.add_integer_entries()
    for lv in cano.levels:  # a level left out after a fault: its value at the returned design
        if lv.value is None:
            lv.value = sm_objective(cano.sm, cano.design, lv.level)
    if proven and cano.note is None:
        cano.find_ties()
    else:  # no uniqueness is claimed, but two designs seen at the levels applied are a fact
        for lv in cano.levels[:max(cano.known, default=-1) + 1]:
            lv.ties = True if lv.status not in ("FAULT", "OUT_OF_RANGE") else None
    out = cano.report()
    out["tie_break_cost"] = {"wall_s": round(time.perf_counter() - t0, 3),
                             "deterministic_time": round(run.deterministic_time - dtime, 3)}
    return cano.design, out


def sm_objective(sm: SpecModel, design: Design, name: str) -> Fraction:
    """The evaluator's value of objective `name` for `design`."""
    return sm.ev.evaluate(design).metrics.objective(name)


def skipped_tie_break(status: str) -> dict:
    return {"tie_break": [], "canonical": False,
            "tie_break_note": f"skipped: the objective is not proven optimal ({status})"}


def _report(method: str, objective: str, status: str, obj: Fraction, bound: Fraction | None, t0: float,
            run: SolveSession, scenario: Scenario, opts: SolverOptions, extra: dict) -> SolveReport:
    return SolveReport(method=method, objective_name=objective, status=status, objective=obj, bound=bound,
                       wall_s=time.perf_counter() - t0, iterations=run.iterations, seed=opts.seed,
                       solver_version=solver_version(), inputs_hash=inputs_hash(scenario, opts.as_dict()),
                       extra=extra)


def _check_options(time_limit_s: float, workers: int) -> None:
    """Input guards of the entry points: a finite positive time limit, at least one worker."""
    if not time_limit_s > 0 or time_limit_s == float("inf"):
        raise ScenarioError(f"time_limit_s: must be a finite number above 0, got {time_limit_s}")
    if workers < 1:
        raise ScenarioError(f"workers: must be at least 1, got {workers}")


def solve(scenario: Scenario, *, objective: str | None = None, options: SolverOptions | None = None,
          hint: Design | None = None, catalog: Catalog | None = None,
          on_progress: ProgressHook | None = None) -> SolveResult:
    """The optimum of the scenario's (restricted) space for `objective`, with its proof or gap.

    `options`: CP-SAT's time limit, workers, seed and determinism (default `SolverOptions()`: 60 s, one
    worker, seed 0). `on_progress` is called with a SolveProgress after every Dinkelbach iteration
    (incumbent, bound).
    """
    t0 = time.perf_counter()
    opts = options or SolverOptions()
    _check_options(opts.time_limit_s, opts.workers)
    catalog = catalog or scenario_catalog(scenario)
    objective = objective or scenario.objective
    ev = Evaluator(scenario, catalog)
    try:
        sm = build_model(scenario, catalog, ev)
    except TreeMenuTooLarge as exc:  # [TREE-6] relaxed tree classes, refined, where they apply
        why = columns_refusal(scenario, catalog, objective)
        if why is not None:
            raise TreeMenuTooLarge(f"{exc}; the tree-class refinement [TREE-6] does not apply: {why}") from None
        return _solve_by_columns(scenario, catalog, ev, objective, opts, hint, on_progress, t0)
    run = SolveSession(sm, opts)
    run.t0 = t0  # progress and trajectory times count from the call, model building included
    run.on_progress = on_progress
    start = best_start(sm, ev, "energy" if objective == "edp" else objective, hint)
    if objective == "edp":  # EDP-1's least-energy run starts from the best known design by energy
        front, status, _ = _epsilon_front(sm, run, edp=True, start=start)
        if status == "INFEASIBLE":
            raise ScenarioError(explain_infeasible(sm, opts))
        if not front:
            raise ScenarioError(f"no design found within the time limit ({opts.time_limit_s} s)")
        # the least EDP, then the least latency (the front is exact: both are compared as Fractions)
        best = min(front, key=lambda e: (e.metrics.objective("edp"), e.metrics.latency_fraction()))
        obj = best.metrics.objective("edp")
        if status == "OPTIMAL":
            design, tie = canonical_optimum(run, "edp", best, front)  # OBJ-3
        else:
            design, tie = best.design, skipped_tie_break(status)
        best, _ = verify(sm, ev, design, opts)
        check_levels(best, obj, "edp", tie)
        bound = obj if status == "OPTIMAL" else None
        rep = _report("cp-sat", "edp", "OPTIMAL" if status == "OPTIMAL" else "FEASIBLE", obj, bound, t0, run,
                      scenario, opts, {"pareto_points": len(front),
                                       "deterministic_time": round(run.deterministic_time, 3),
                                       "solves": run.solve_log, **tie})
        return SolveResult(best, rep)
    status, design, obj, bound = minimize_ratio(run, RatioObjective(sm, objective), start=start)
    if status == "INFEASIBLE":
        raise ScenarioError(explain_infeasible(sm, opts))
    if design is None:
        raise ScenarioError(f"no design found within the time limit ({opts.time_limit_s} s)")
    if status == "OPTIMAL":
        design, tie = canonical_optimum(run, objective, ev.evaluate(design))  # OBJ-3
    else:
        tie = skipped_tie_break(status)
    evaluation, claim = verify(sm, ev, design, opts)
    check_levels(evaluation, obj, objective, tie)
    rep = _report("cp-sat", objective, status, obj, bound, t0, run, scenario, opts,
                  {"claimed": claim, "model_size": {"variables": len(sm.m.proto.variables),
                                                    "constraints": len(sm.m.proto.constraints)},
                   "trajectory": run.trajectory, "deterministic_time": round(run.deterministic_time, 3),
                   "solves": run.solve_log, **tie})
    return SolveResult(evaluation, rep)


def check_levels(evaluation: Evaluation, obj: Fraction, objective: str, tie: dict) -> None:
    """The evaluator's price of the returned design is the claimed objective and every ratio level's value."""
    if evaluation.metrics.objective(objective) != obj:
        raise ModelMismatch(f"the evaluator prices {objective} {evaluation.metrics.objective(objective)} for the "
                            f"returned design, the solve claims {obj}")
    for lv in tie["tie_break"]:
        if lv["level"] in RATIO_LEVELS and lv["status"] == "OPTIMAL" and \
                lv["exact"] != _exact(evaluation.metrics.objective(lv["level"])):
            raise ModelMismatch(f"the tie-break's {lv['level']} level claims {lv['exact']}, the evaluator prices "
                                f"{_exact(evaluation.metrics.objective(lv['level']))}")


def _exact(value: Fraction) -> str:
    return f"{value.numerator}/{value.denominator}"


def _least_energy(sm: SpecModel, run: SolveSession, start: Evaluation | None, stage: str = "EDP: least energy"
                  ) -> tuple[str, Evaluation | None, Fraction]:
    """[EDP-1] The least energy per token (status, its design priced, a proven lower bound)."""
    run.stage = stage
    status, design, _, bound = minimize_ratio(run, RatioObjective(sm, "energy"), start=start)
    return status, None if design is None else sm.ev.evaluate(design), bound


def _epsilon_front(sm: SpecModel, run: SolveSession, edp: bool = False,
                   resolution: Fraction = Fraction(0), start: Evaluation | None = None,
                   max_points: int | None = None) -> tuple[list[Evaluation], str, Fraction]:
    """`_sweep` (front, status, the resolution it used); for EDP, when the sweep is not proven, also the
    least-energy design it started from (a feasible design, so a time limit hit early still returns the best
    EDP seen)."""
    front, status, least, resolution = _sweep(sm, run, edp, resolution, start, max_points)
    if edp and status == "FEASIBLE" and least is not None and all(p.design.key() != least.design.key() for p in front):
        front = [*front, least]
    return front, status, resolution


def _sweep(sm: SpecModel, run: SolveSession, edp: bool, resolution: Fraction, start: Evaluation | None = None,
           max_points: int | None = None) -> tuple[list[Evaluation], str, Evaluation | None, Fraction]:
    """Exact latency-energy (per token) Pareto front by epsilon-constraint [OBJ-2]. `edp`: only the part
    of the front that can hold the least EDP [EDP-1]: the sweep goes from the least latency up and stops
    once the next point's latency (a proven lower bound) times the least energy per token exceeds the
    least EDP found, since every later point has at least that latency and at least that energy.
    `resolution` r > 0 [OBJ-2r]: the next point's energy per token is below (1 - r) x the last one's, so
    every point found is still a proven Pareto point, and every front point Q has a found point P no
    slower than Q with (1 - r) E_P <= E_Q. `max_points` [OBJ-2b] (not with `edp`): once the first point is
    known, r is widened where needed so that at most that many points fit between its energy and a proven
    lower bound on every design's energy. Returns the front, its status, EDP's least-energy design (None
    otherwise) and the resolution used."""
    lat, en = RatioObjective(sm, "latency"), RatioObjective(sm, "energy")
    d_max = max(st.tokens_micro for st in sm.stats)
    ev = sm.ev
    front: list[Evaluation] = []
    energy_cap: tuple[int, int] | None = None  # (energy numerator, tokens) of the last point: go strictly below
    proven = True
    least: Evaluation | None = None
    e_low: Fraction | None = None  # EDP-1: a proven lower bound on every design's energy per token
    best: Fraction | None = None  # EDP-2: the least EDP of a design seen so far
    if edp:
        st0, least, e_low = _least_energy(sm, run, start)
        if st0 == "INFEASIBLE":
            return front, "INFEASIBLE", least, resolution
        if least is None:
            return front, "FEASIBLE", least, resolution
        best = least.metrics.objective("edp")
        # [CUT-4] a design of EDP <= best has energy per token <= best / (its latency) <= best / least latency bound
        least_latency = min(Fraction(lt, st.tokens_micro) for lt, st in zip(lat.num_bounds, sm.stats)) * lat.scale
        sm.tighten_energy(best / (least_latency * en.scale))
    while True:
        run.stage = f"pareto point {len(front) + 1}: latency"

        def below_energy(model, cap=energy_cap, r=resolution):
            if cap is not None:  # strictly less energy per token than the last point
                e_n, e_d = cap
                keep = 1 - r  # OBJ-2r: below (1 - r) x the last energy per token
                E = cap_copy(model, sm.energy, -(-e_n * d_max // e_d), "E_eps")
                model.add(E <= choice_sum(model, sm, ratio_limits(sm, e_n * keep.numerator, e_d * keep.denominator,
                                                                   strict=True)))

        after = slower_than(front, proven) if edp else None

        def edp_box(model, cap=energy_cap, best=best, after=after, e_low=e_low):
            """EDP-2: only designs that can reach the least EDP seen: CUT-3's EDP bound of their choice and
            their latency (at most best / E_min) at most it. EDP-3: after a proven point, the latency bounds
            are at least its latency, the energy bounds at least E_min, and the latency above it."""
            below_energy(model, cap)
            slower = after.latency_fraction() if after is not None else Fraction(0)
            for k, z in enumerate(sm.z):  # CUT-3's EDP bound of the choice (CUT-4's energy, EDP-3's floors)
                tok = sm.stats[k].tokens_micro
                lat_k = max(lat.value(lat.num_bounds[k], tok), slower)
                if lat_k * max(en.value(en.num_bounds[k], tok), e_low or 0) > best:
                    model.add(model.get_bool_var_from_proto_index(z.index) == 0)
                    continue
                # CUT-4 per architecture: latency bound x energy bound > best, i.e. the energy bound (per round)
                # above best x tokens / (latency bound x energy scale)
                if lat_k <= 0:
                    continue
                le_max = best * tok / (lat_k * en.scale)
                for (j, a), le in sm.arch_energy_bounds.get(k, {}).items():
                    if le > le_max:
                        model.add_implication(model.get_bool_var_from_proto_index(z.index),
                                              model.get_bool_var_from_proto_index(sm.x[j][a].index).Not())
            if e_low:
                q = best / (e_low * lat.scale)  # T / D <= q
                T = model.get_int_var_from_proto_index(sm.T.index)
                model.add(T <= choice_sum(model, sm, ratio_limits(sm, q.numerator, q.denominator, strict=False)))
            if after is not None:  # EDP-3: T / D above the last point's (a redundant row: it removes no design)
                T = model.get_int_var_from_proto_index(sm.T.index)
                above = ratio_limits(sm, after.round_time_ns, after.tokens_per_round_micro, strict=False)
                model.add(T >= choice_sum(model, sm, [n + 1 for n in above]))

        # EDP: the least-energy design starts the stage while it satisfies the stage's rows (its EDP is the least
        # seen, so it is in the EDP box, and it is below the energy cap): a Dinkelbach step then has an
        # incumbent, so a solver fault that drops it is caught (paper-full/palm-62b-full-b32)
        usable = (edp and least is not None and least.metrics.objective("edp") <= best
                  and below_cap(least.metrics, energy_cap, resolution))
        st1, d1, _o1, l_low = minimize_ratio(run, lat, edp_box if edp else below_energy, start=least if usable else None)
        if st1 == "INFEASIBLE":
            return front, ("INFEASIBLE" if not front else ("OPTIMAL" if proven else "FEASIBLE")), least, resolution
        if edp and front and l_low * e_low > min(p.metrics.objective("edp") for p in front):  # EDP-1 stop
            return front, "OPTIMAL" if proven else "FEASIBLE", least, resolution
        if d1 is None:
            return front, "FEASIBLE", least, resolution
        proven &= st1 == "OPTIMAL"
        e1 = ev.evaluate(d1)
        t_n, t_d = e1.metrics.round_time_ns, e1.metrics.tokens_per_round_micro
        if edp:
            best = min(best, e1.metrics.objective("edp"))

        def within_latency(model, t_n=t_n, t_d=t_d, cap=energy_cap):
            below_energy(model, cap)
            T = cap_copy(model, sm.T, -(-t_n * d_max // t_d), "T_eps")
            model.add(T <= choice_sum(model, sm, ratio_limits(sm, t_n, t_d, strict=False)))

        # the latency stage's point satisfies both epsilon rows: a close starting ratio for Dinkelbach
        run.stage = f"pareto point {len(front) + 1}: energy"
        st2, d2, _o2, _ = minimize_ratio(run, en, within_latency, start=e1,
                                         choices=RatioRow("latency", t_n, t_d).keeps(sm))
        if d2 is None:
            return front, "FEASIBLE", least, resolution
        proven &= st2 == "OPTIMAL"
        point = ev.evaluate(d2)
        front.append(point)
        if max_points and not edp and len(front) == 1:  # OBJ-2b: widen r so that at most max_points fit
            _, _, e_low = _least_energy(sm, run, None, stage="pareto: least energy")
            resolution = max(resolution, point_budget_resolution(point.metrics.energy_fraction(), e_low,
                                                                 max_points))
        if edp:
            best = min(best, point.metrics.objective("edp"))
        energy_cap = (point.metrics.energy_nj_per_round, point.metrics.tokens_per_round_micro)
        # [OBJ-2s] no later point (that matters): the EDP test needs EDP-3's "later points are slower"
        if e_low is not None and last_point(point, e_low, best if slower_than(front, proven) else None):
            return front, "OPTIMAL" if proven else "FEASIBLE", least, resolution
        if run.budget.remaining() <= 0:
            return front, "FEASIBLE", least, resolution


def below_cap(metrics, cap: tuple[int, int] | None, resolution: Fraction) -> bool:
    """Whether a design's energy per round (per its tokens) meets a latency stage's energy cap, E / D <
    (1 - r) e_n / e_d, exactly as `below_energy`'s per-choice row states it."""
    if cap is None:
        return True
    keep = 1 - resolution
    used = metrics.energy_nj_per_round * cap[1] * keep.denominator
    return used < cap[0] * keep.numerator * metrics.tokens_per_round_micro


def slower_than(front: list[Evaluation], proven: bool):
    """[EDP-3] The metrics of the last front point when every stage so far was proven (every later front
    point is slower than it), else None."""
    return front[-1].metrics if front and proven else None


def last_point(point: Evaluation, e_low: Fraction, best: Fraction | None) -> bool:
    """[OBJ-2s] Whether the sweep can stop after `point` without solving the next latency stage. Every later
    front point is slower than `point` (a design no slower with less energy would have been stage 2's) and
    has energy per token at least the proven floor `e_low`: so none exists when `point` is at the floor,
    and under EDP (`best`, the least EDP seen; None unless every stage so far was proven, which the first
    claim needs) none beats or ties `best` once `point`'s latency times the floor reaches it."""
    energy = point.metrics.energy_fraction()
    if energy <= e_low:
        return True
    return best is not None and point.metrics.latency_fraction() * e_low >= best


def point_budget_resolution(first: Fraction, floor: Fraction, points: int) -> Fraction:
    """[OBJ-2b] The least resolution r (rounded up to 10^-6) at which a sweep from energy per token `first`
    lists at most `points` points above `floor` (a lower bound on every design's energy per token): point m
    has energy below (1 - r)^(m-1) first, so m - 1 < ln(floor / first) / ln(1 - r) <= points."""
    if floor <= 0 or floor >= first:
        return Fraction(0)
    r = 1 - math.exp(math.log(floor / first) / points)
    return Fraction(math.ceil(r * 10 ** 6), 10 ** 6)


#: The default options of a Pareto front: many solves share its time limit.
PARETO_OPTIONS = SolverOptions(time_limit_s=300.0)


@dataclass(frozen=True)
class ParetoFront:
    """A front and what it cost: OPTIMAL when every point's two stages are proven and the sweep ended proven
    (a closing latency stage INFEASIBLE, or OBJ-2s's floor reached): the front is exact at its `resolution`;
    FEASIBLE when the time limit cut it short."""

    points: list[Evaluation]
    status: str
    resolution: Fraction  # the resolution the front was listed at (OBJ-2r), widened by the point budget
    wall_s: float
    deterministic_time: float
    solves: int
    options: SolverOptions
    asked: Fraction | None = None  # the resolution asked for, when the point budget widened it
    max_points: int | None = None  # OBJ-2b's point budget (None: none)

    def statement(self) -> str:
        """One line on the front's status and budget (the CLI's CSV ends with it)."""
        exact = "exact front" if self.resolution == 0 else (
            f"every front point has a listed point no slower whose energy is at most {float(100 * self.resolution):g}% "
            "above it, in units of the listed point's")
        if self.asked is not None:
            exact += (f"; {float(100 * self.asked):g}% asked, widened to list at most {self.max_points} points "
                      "between the least latency and a proven least energy")
        proven = "every point proven" if self.status == "OPTIMAL" else "cut short by the time limit"
        limit = f"{self.options.time_limit_s:g} {'deterministic units' if self.options.deterministic else 's'}"
        n = len(self.points)
        budget = f", point budget {self.max_points}" if self.max_points else ""
        return (f"front: {self.status} ({proven}), {n} point{'' if n == 1 else 's'}, resolution "
                f"{float(100 * self.resolution):g}% ({exact}); {self.wall_s:.1f} s wall, deterministic time "
                f"{self.deterministic_time:.1f}, {self.solves} CP-SAT solves, time limit {limit}{budget}")

    def as_dict(self) -> dict:
        return {"status": self.status, "points": len(self.points), "resolution_pct": float(100 * self.resolution),
                "resolution_asked_pct": float(100 * (self.resolution if self.asked is None else self.asked)),
                "max_points": self.max_points,
                "wall_s": round(self.wall_s, 3), "deterministic_time": round(self.deterministic_time, 3),
                "solves": self.solves, **self.options.as_dict()}


def percent(value, name: str, high: int) -> Fraction:
    """A percentage option (`--within`, `--resolution`) as an exact Fraction of percent; ScenarioError
    naming `name` unless it is a number in [0, high)."""
    try:
        pct = Fraction(str(value))
    except (ValueError, ZeroDivisionError):
        raise ScenarioError(f"{name}: a percentage is a number such as 1 or 0.5, got {value!r}") from None
    if not 0 <= pct < high:
        raise ScenarioError(f"{name}: must be in [0, {high}) percent, got {value}")
    return pct


def check_resolution(resolution_pct) -> Fraction:
    """A front resolution in percent as a fraction of 1 (0 <= r < 50%)."""
    return percent(resolution_pct, "resolution", 50) / 100


def check_max_points(max_points) -> int | None:
    """A front's point budget [OBJ-2b]: None for 0 or None, else an integer from 2 to MAX_FRONT_POINTS."""
    if max_points is None:
        return None
    if isinstance(max_points, bool) or not isinstance(max_points, int) or not (
            max_points == 0 or 2 <= max_points <= MAX_FRONT_POINTS):
        raise ScenarioError(f"max-points: an integer from 2 to {MAX_FRONT_POINTS} (0: no budget), got {max_points!r}")
    return max_points or None


def pareto(scenario: Scenario, *, options: SolverOptions | None = None, catalog: Catalog | None = None,
           on_progress: ProgressHook | None = None, resolution_pct=DEFAULT_RESOLUTION_PCT,
           max_points: int | None = DEFAULT_MAX_POINTS) -> ParetoFront:
    """The latency-energy front (points sorted by latency) with its status and cost; `options` bound the
    whole front (default `PARETO_OPTIONS`: 300 s); `resolution_pct` [OBJ-2r]: percent, default
    `DEFAULT_RESOLUTION_PCT`; 0 with `max_points=None` for the exact front; `max_points` [OBJ-2b]: the
    resolution is widened where needed so that the front lists at most that many points (None or 0: no
    budget)."""
    t0 = time.perf_counter()
    asked = check_resolution(resolution_pct)
    max_points = check_max_points(max_points)
    opts = options or PARETO_OPTIONS
    _check_options(opts.time_limit_s, opts.workers)
    catalog = catalog or scenario_catalog(scenario)
    sm = build_model(scenario, catalog, Evaluator(scenario, catalog))
    run = SolveSession(sm, opts)
    run.on_progress = on_progress
    front, status, resolution = _epsilon_front(sm, run, resolution=asked, max_points=max_points)
    if status == "INFEASIBLE":
        raise ScenarioError(explain_infeasible(sm, opts))
    points = sorted(front, key=lambda e: e.metrics.latency_fraction())
    return ParetoFront(points, status, resolution, time.perf_counter() - t0, run.deterministic_time, run.iterations,
                       opts, asked if resolution != asked else None, max_points)


def pareto_front(scenario: Scenario, *, options: SolverOptions | None = None, catalog: Catalog | None = None,
                 on_progress: ProgressHook | None = None, resolution_pct=DEFAULT_RESOLUTION_PCT,
                 max_points: int | None = DEFAULT_MAX_POINTS) -> list[Evaluation]:
    """Non-dominated (latency per token, energy per token) designs, sorted by latency (`pareto`'s points)."""
    return pareto(scenario, options=options, catalog=catalog, on_progress=on_progress,
                  resolution_pct=resolution_pct, max_points=max_points).points


# -- token trees beyond the exact menu [TREE-6] ------------------------------------------------------
def _solve_by_columns(scenario: Scenario, catalog: Catalog, ev: Evaluator, objective: str, opts: SolverOptions,
                      hint: Design | None, on_progress: ProgressHook | None, t0: float) -> SolveResult:
    """[TREE-6] `solve` for a tree space beyond the exact menu: relaxed class columns refined until the
    optimum drafts a real profile; then the canonical optimum (OBJ-3) over the real columns."""
    status, design, obj, bound, run, search = solve_columns(scenario, catalog, ev, objective, opts, hint,
                                                            on_progress, t0)
    if status == "OPTIMAL":
        design, tie = canonical_optimum(run, objective, ev.evaluate(design))  # OBJ-3
    else:
        tie = skipped_tie_break(status)
    evaluation, claim = verify(run.sm, ev, design, opts)
    check_levels(evaluation, obj, objective, tie)
    rep = _report("cp-sat", objective, status, obj, bound, t0, run, scenario, opts,
                  {"claimed": claim, "model_size": {"variables": len(run.sm.m.proto.variables),
                                                    "constraints": len(run.sm.m.proto.constraints)},
                   "trajectory": run.trajectory, "deterministic_time": round(run.deterministic_time, 3),
                   "solves": run.solve_log, "tree_columns": search.summary(), **tie})
    return SolveResult(evaluation, rep)


def solve_columns(scenario: Scenario, catalog: Catalog, ev: Evaluator, objective: str, opts: SolverOptions,
                  hint: Design | None, on_progress: ProgressHook | None, t0: float
                  ) -> tuple[str, Design, Fraction, Fraction, SolveSession, ColumnSearch]:
    """[TREE-6] Dinkelbach with refinement over real and relaxed columns: (status, design, objective, bound,
    the session on a model of the real columns only, the column search). OPTIMAL only when a step proves
    F >= 2 (no real design below the incumbent, no relaxed column reaching it)."""
    search = ColumnSearch(scenario, catalog, ev)
    search.add_design(hint)
    sm, relaxed = search.build()
    check_capacity(sm.prices)
    check_capacity_rows(sm.prices)
    check_integer_range(sm)
    run = SolveSession(sm, opts)
    run.t0 = t0
    run.on_progress = on_progress
    if objective == "energy":  # the energy steps' LP level, as in `minimize_ratio`
        run.linearization = ENERGY_LINEARIZATION
    ratio = RatioObjective(sm, objective)
    start = _column_start(sm, ev, objective, hint, relaxed, scenario)
    if start is None:  # no baseline in the space: a first solution over the real columns
        first = _first_real_design(run, search, objective, opts)
        incumbent = _measure(run, ratio, first)
    else:
        incumbent = _measure(run, ratio, start.design)
    scale = ratio.scale
    d_lo = spec.TOKENS_SCALE - 1  # every design commits at least one token per round
    bound = min(min(Fraction(lb, st.tokens_micro) for lb, st in zip(ratio.num_bounds, sm.stats)) * scale,
                ratio.value(*incumbent[:2]))
    status_out = "FEASIBLE"
    focus: Fraction | None = bound / scale * (1 + FOCUS_SLACK)  # OBJ-1 focus: the cheapest-bounded columns first
    while True:
        n_prev, d_prev, design = incumbent
        lam = Fraction(n_prev, d_prev)
        if focus is not None and focus >= lam:
            focus = None
        search.prune(sm, relaxed, ratio.num_bounds, n_prev, d_prev)
        sm, relaxed = search.build()
        check_integer_range(sm)
        run.sm = sm
        ratio = RatioObjective(sm, objective)
        run.hint = sm.decision_literals(design)
        run.stage = f"{objective}: tree classes {len(search.classes)}, profiles {len(search.profiles)}"
        if run.budget.remaining() <= 0 or (not opts.deterministic and time.perf_counter() - t0 > opts.time_limit_s):
            break
        status, solver, f_val, f_lb = _column_step(run, objective, relaxed, n_prev, d_prev, focus)
        if focus is not None:  # a focused step bounds its columns only
            if status == cp_model.INFEASIBLE or (status == cp_model.OPTIMAL and f_val is not None and f_val >= 2):
                focus = None  # nothing below lambda among them: every column next
                continue
            f_lb = None
        if f_lb is not None:
            if f_lb >= 2:
                bound = max(bound, lam * scale)
            else:  # N >= lambda D - 1 + (F_lb - 1) / 2 for every design of the space
                bound = max(bound, (lam + Fraction(f_lb - 3, 2) / d_lo) * scale)
        run.progress(ratio, ratio.value(n_prev, d_prev), bound)
        if solver is None or f_val is None:  # no solution within the time limit
            break
        if f_val >= 2:
            if status == cp_model.OPTIMAL:
                status_out = "OPTIMAL"
            break
        k = next(k for k, z in enumerate(sm.z) if solver.boolean_value(z))
        if k in relaxed:  # refine the class on the solution's hardware; a real design found there is kept
            found = search.dive(hardware(sm, solver), relaxed[k], objective, n_prev, d_prev)
            if found is not None:
                incumbent = _measure(run, ratio, found)
            continue
        incumbent = _measure(run, ratio, run.remember(solver))
        if Fraction(incumbent[0], incumbent[1]) >= lam:
            raise ModelMismatch(f"a tree-column step found F = {f_val} but the evaluator prices the design at "
                                f"{ratio.value(incumbent[0], incumbent[1])}, not below {ratio.value(n_prev, d_prev)}")
    n_prev, d_prev, design = incumbent
    obj = ratio.value(n_prev, d_prev)
    if status_out == "OPTIMAL":
        bound = obj
    sm, _ = search.build(with_classes=False)  # every design at the optimum is a real column ([TREE-6])
    run.sm = sm
    run.linearization = None
    run.hint = sm.decision_literals(design)
    return status_out, design, obj, min(bound, obj), run, search


def _column_step(run: SolveSession, ratio_name: str, relaxed: dict, n_prev: int, d_prev: int,
                 focus: Fraction | None = None) -> tuple[int, cp_model.CpSolver | None, int | None, int | None]:
    """One step at lambda = n_prev / d_prev over real and relaxed columns ([TREE-6]): minimise F = 2 (N - L_c)
    + [c real], L_c = ceil(lambda D_c) - 1 (real) or floor(lambda D_c) (relaxed). Returns (status, solver,
    F at the solution, a proven lower bound on F); the incumbent (F = 3) is in the model, so INFEASIBLE or
    OPTIMAL above 3 is a contradiction (re-solved cautiously, then ModelMismatch, as OBJ-1). `focus`: only the
    columns whose CUT-3 bound ratio is at most it (OBJ-1 focus; the incumbent may be left out, so no
    contradiction is read and the bound holds for those columns only)."""
    sm = run.sm
    num = sm.T if ratio_name == "latency" else sm.energy
    if ratio_name == "energy":  # [CUT-4], as in an energy Dinkelbach step
        sm.tighten_energy(Fraction(n_prev, d_prev))
    bounds = sm.choice_bounds[0 if ratio_name == "latency" else 1]
    d_max = max(st.tokens_micro for st in sm.stats)
    model, nvar = _capped(sm, num, min(-(-n_prev * d_max // d_prev), ub(num)), "N")
    if ratio_name == "latency":
        sm.drop_energy_rows(model)
    limits = []
    for k, (z, lb, st) in enumerate(zip(sm.z, bounds, sm.stats)):
        if lb * d_prev > n_prev * st.tokens_micro or (focus is not None and Fraction(lb, st.tokens_micro) > focus):
            model.add(model.get_bool_var_from_proto_index(z.index) == 0)  # OBJ-1 pruning (and focus)
        elif ratio_name == "energy":
            prune_architectures(model, sm, k, n_prev, d_prev, focus)
        if k in relaxed:
            limits.append(2 * (n_prev * st.tokens_micro // d_prev))
        else:
            limits.append(2 * (-(-n_prev * st.tokens_micro // d_prev) - 1) - 1)
    objective = 2 * nvar - choice_sum(model, sm, limits)
    model.minimize(objective)

    def contradicts(status: int, solver: cp_model.CpSolver) -> bool:
        return status == cp_model.INFEASIBLE or (status == cp_model.OPTIMAL and solver.value(objective) > 3)

    status, solver = run.solve(model)
    if focus is None and contradicts(status, solver):
        for mode in (True, NO_PRESOLVE):  # CP-SAT's own presolve, then none (objectives.md, 9.15 fault)
            status, solver = run.solve(model, cautious=mode)
            if not contradicts(status, solver):
                break
        if contradicts(status, solver):
            raise ModelMismatch("CP-SAT contradicts the incumbent (F = 3) in a tree-column step, also with its "
                                "default presolve and with none: a solver fault; no optimum is claimed")
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return status, None, None, None
    f_val = int(solver.value(objective))
    f_lb = f_val if status == cp_model.OPTIMAL else min(f_val, _floor_bound(solver.best_objective_bound))
    return status, solver, f_val, f_lb


def _first_real_design(run: SolveSession, search: ColumnSearch, objective: str, opts: SolverOptions) -> Design:
    """Any design of the real columns (CP-SAT's first solution of the least numerator); ScenarioError naming the
    infeasible families when there is none (a tree changes no constraint but the round's: the chains decide)."""
    sm, _ = search.build(with_classes=False)
    run.sm = sm
    num = sm.T if objective == "latency" else sm.energy
    model, nvar = _capped(sm, num, ub(num), "N")
    model.minimize(nvar)
    status, solver = run.solve(model, first_solution=True)
    if status == cp_model.INFEASIBLE:
        raise ScenarioError(explain_infeasible(sm, opts))
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        raise ScenarioError(f"no design found within the time limit ({opts.time_limit_s} s)")
    return sm.decode(solver.boolean_value)


def _column_start(sm: SpecModel, ev: Evaluator, objective: str, hint: Design | None, relaxed: dict,
                  scenario: Scenario) -> Evaluation | None:
    """The best of the hint and the chain baselines (the scenario with trees off), with the best real column
    on its hardware (relaxed columns skipped: they are no designs)."""
    best = best_known(sm, ev, objective, hint, chain_start_scenario(scenario),
                      (ScenarioError, ValueError))  # ValueError: a draft not among the columns
    return None if best is None else _best_choice_for(sm, ev, objective, best, exclude=relaxed, limit=None)
