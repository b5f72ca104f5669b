"""Input guards of the exact model: the 64-bit range of CP-SAT's rows, the capacity shortfall, and
`ModelMismatch`, raised when the CP-SAT model and the evaluator price a design differently (a bug in one of
the two, never something to round away)."""

from __future__ import annotations

import re

import numpy as np

from specpim_cp.catalog import Catalog
from specpim_cp.errors import ScenarioError
from specpim_cp.physics.evaluate import Evaluator
from specpim_cp.problem.scenario import Scenario
from specpim_cp.solvers.exact.energy_bounds import table_memo
from specpim_cp.solvers.exact.model import SpecModel
from specpim_cp.solvers.exact.prices import PriceTable, scenario_prices
from specpim_cp.solvers.exact.proto_rows import linear_rows


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


def too_large(scenario: Scenario, what: str) -> IntegerRangeError:
    return IntegerRangeError(
        f"scenario too large for the exact model's 64-bit integers: {what}; CP-SAT rejects rows beyond 2^62 = "
        f"{INT_LIMIT:.3g}. Shorten the context (prompt_tokens + generated_tokens = {scenario.max_context}), the "
        f"batch ({scenario.batch_size}) or max_draft_length ({scenario.max_draft_length}), or use --method "
        "brute-force or the heuristic")


#: CP-SAT's sentinels for an unbounded side of a row's domain (`expr <= b` has [INT64_MIN, b]).
_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1


#: The float screen's margin: a row whose float sum is below INT_LIMIT x (1 - margin) is within the limit
#: (a sum of n float products errs by at most n x 2^-53 relative, far below it for any model's rows).
_SCREEN_MARGIN = 1e-9


def check_integer_range(sm: SpecModel) -> None:
    """Raise ScenarioError, naming the row's family and bound, when a linear row of the model could
    overflow CP-SAT's integer check (exactly CP-SAT's rule, on the base model every solve clones), or
    when a row's right-hand side (a capacity of CAP-1/2) lies beyond 2^62. Every row is screened at once
    in floats (`proto_rows.linear_rows`); the rows near the limit are summed again in exact integers."""
    lr = linear_rows(sm.m)
    variables = lr.proto.variables
    finite = (lr.dom != _INT64_MIN) & (lr.dom != _INT64_MAX)
    beyond = finite & (np.abs(np.where(finite, lr.dom, 0)) > INT_LIMIT)
    if beyond.any():  # the first row (in constraint order) whose bound lies beyond 2^62
        c = lr.constraint(int(lr.dom_row[beyond].min()))
        rhs = max(abs(b) for b in c.linear.domain if b not in (_INT64_MIN, _INT64_MAX))
        raise too_large(sm.scenario, f"[{_row_family(c, variables, '?')}] a row's bound is {rhs:.3g}")
    products = (lr.coeff * lr.lo[lr.var], lr.coeff * lr.hi[lr.var])
    n = len(lr.rows)
    pos = np.bincount(lr.term_row, weights=np.maximum(0.0, np.maximum(*products)), minlength=n)
    neg = np.bincount(lr.term_row, weights=np.minimum(0.0, np.minimum(*products)), minlength=n)
    near = np.nonzero(np.maximum(pos, -neg) >= INT_LIMIT * (1 - _SCREEN_MARGIN))[0]
    bounds: dict[int, tuple[int, int]] = {}
    worst = (0, None, None)
    for position in near:  # ascending: the first of equal rows is named, as a row-by-row scan would
        c = lr.constraint(int(position))
        part, big = _row_part(c, variables, bounds)
        if part > worst[0]:
            worst = (part, big, c)
    part, big, row = worst
    if part <= INT_LIMIT:
        return
    _, idx, k = big
    name = variables[idx].name
    family, what, unit = _VARIABLE_MEANING.get(name.split("[")[0], (None, f"variable {name}", ""))
    family = family or _row_family(row, variables, "?")
    raise too_large(sm.scenario, f"[{family}] the {what} ({name}) can reach {bounds[idx][1]:.3g} {unit}, and its "
                                 f"row multiplies it by {abs(k):,}, summing to {part:.3g}")


def _row_part(c, variables, bounds: dict[int, tuple[int, int]]) -> tuple[int, tuple[int, int, int]]:
    """CP-SAT's sum for one linear row in exact integers, max(positive part, -negative part), and its
    largest term (|coefficient| x max|bound|, variable, coefficient); `bounds` caches variable domains."""
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
    return max(pos, -neg), big


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
        by_arch: dict = {}  # architecture -> its tensor splits and draft2 models' KiB, one pass over the table
        for (arch, _, _), v in pm.tensor_kib.items():
            by_arch.setdefault(arch, []).append(v)
        for (arch, _), v in pm.draft2_kib.items():
            if v is not None:
                by_arch.setdefault(arch, []).append(v)
        for a in d.archs:
            splits = by_arch.get(a, [])
            for side, word in enumerate(("PIM", "normal")):
                need = sum(v[side] for v in splits)
                worst = max(need, pm.capacity_kib[a][side])
                if worst > INT_LIMIT:
                    raise too_large(prices.space.scenario, f"[CAP-{side + 1}] the {word} units of {d.label} "
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
    the model is built), a row beyond 2^62 (`check_integer_range`, once per price table: the models built
    from one table have the same rows)."""
    prices = scenario_prices(ev, scenario, catalog)
    check_capacity(prices)
    check_capacity_rows(prices)
    try:
        sm = SpecModel(scenario, catalog, ev, prices=prices)
    except TypeError as exc:
        big = _overflowing_integer(exc)
        if big is None:
            raise
        raise too_large(scenario, f"a bound the exact model derives from the priced operators reaches {big:.3g}, "
                                  f"beyond 64-bit integers ({_largest_price(prices)})") from None
    checked = table_memo(prices)  # one table, one model: its rows were checked when it was first built
    if not checked.get("integer_range"):
        check_integer_range(sm)
        checked["integer_range"] = True
    return sm


def check_capacity(model: SpecModel | PriceTable) -> None:
    """Raise the capacity shortfall when some model's tensors exceed every allowed architecture's total
    memory (PIM + normal units): infeasible whatever the placement, named before any solve (from the
    price table alone, so before any row is added)."""
    prices = model if isinstance(model, PriceTable) else model.prices
    for j, d in enumerate(prices.space.models):
        pm = prices.models[j]
        if all(pm.total_kib[a] > sum(pm.capacity_kib[a]) for a in d.archs):
            raise ScenarioError("infeasible: " + cap_detail(prices, j, f"CAP capacity of {d.label} ({d.spec.name})"))


def cap_detail(model: SpecModel | PriceTable, j: int, name: str) -> str:
    prices = model if isinstance(model, PriceTable) else model.prices
    archs, pm = prices.space.models[j].archs, prices.models[j]
    need = min(pm.total_kib[a] for a in archs)
    pim = max(pm.capacity_kib[a][0] for a in archs)
    normal = max(pm.capacity_kib[a][1] for a in archs)
    return (f"[{name}]: no allowed architecture holds its weights and KV cache ({need / (1 << 20):.2f} "
            f"GiB) with the placements the space allows (PIM units hold at most {pim / (1 << 20):.2f} "
            f"GiB, normal units at most {normal / (1 << 20):.2f} GiB)")


def guarded_numerator(sm: SpecModel, name: str, mt) -> int:
    """The evaluator's round time (latency) or energy per round (energy) of metrics `mt`, refused when
    it times the largest expected tokens could overflow the Dinkelbach, epsilon and OBJ-3 rows."""
    n = mt.round_time_ns if name == "latency" else mt.energy_nj_per_round
    d_max = max(st.tokens_micro for st in sm.stats)
    if n * d_max + d_max > INT_LIMIT:  # input guard of the Dinkelbach / epsilon rows that use n
        unit = "ns" if name == "latency" else "nJ"
        raise too_large(sm.scenario, f"[OBJ-1] a design's {'round time' if unit == 'ns' else 'energy per round'} "
                                     f"({n:.3g} {unit}) times the largest expected tokens per round x "
                                     f"TOKENS_SCALE ({d_max:,}) is {n * d_max:.3g}")
    return n


def check_options(time_limit_s: float, workers: int) -> None:
    """Input guards of the entry points: a finite positive time limit, at least one worker."""
    if not time_limit_s > 0 or time_limit_s == float("inf"):
        raise ScenarioError(f"time_limit_s: must be a finite number above 0, got {time_limit_s}")
    if workers < 1:
        raise ScenarioError(f"workers: must be at least 1, got {workers}")
