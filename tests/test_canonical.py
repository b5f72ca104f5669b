"""The canonical optimum [OBJ-3]: after the objective, ties are broken exactly and lexicographically (the
other metric per token, the PIM units, the devices, a fixed order), so the same inputs give the same design
whatever the workers; the tie report says at which levels other designs tie.

The oracle is an enumeration (`solvers/brute.py`, `enumerate_designs`) whose pruning keeps every design
that could be the lexicographic minimum: an option is dropped only for one at least as good in every
priced quantity *and* earlier in the tie-break's own key of the model's part (PIM units x devices,
devices, architecture and placement indices). A design that ties with the minimum may use a dropped
option; replacing dropped options by their kept dominators one at a time stays among the tied designs,
so some tied design differs from the minimum in one model's option only: the oracle checks those too.
"""

from __future__ import annotations

import importlib
from fractions import Fraction
from functools import cache

import pytest

from specpim_cp.errors import ScenarioError
from specpim_cp.physics.evaluate import Evaluation, Evaluator
from specpim_cp.problem.builtin_sets import resolve_scenario_path
from specpim_cp.problem.operators import PLACEABLE_OPS
from specpim_cp.problem.scenario import Scenario, load_scenario, parse_scenario, scenario_catalog
from specpim_cp.problem.space import DesignSpace
from specpim_cp.solvers.brute import enumerate_designs, every_design
from specpim_cp.solvers.deadline import Deadline
from specpim_cp.solvers.exact import SolverOptions, solve
from specpim_cp.solvers.exact.canonical import PACK_LIMIT, RATIO_LEVELS, pack_keys
from specpim_cp.solvers.exact.model import TieKey
from specpim_cp.solvers.result import Status
from specpim_cp.views.tables import tie_break_line

#: The levels after the ratio levels, in order.
INTEGER_LEVELS = ("pim_units", "devices", "order")


def tiny(name: str, verifier: str, drafter: str | None, memories: list[str], mapping: str, *,
         memory_model: str = "time-shared", objective: str = "latency", batch: int = 1, share_levels: int = 1,
         pim_units: int | None = None, verifier_devices: int | None = 1, budget: int | None = None) -> dict:
    """A scenario whose space the oracle enumerates in about a second."""
    space: dict = {"share_levels": share_levels, "mapping": mapping}
    if pim_units is not None:
        space["pim_units"] = pim_units
    data = {"name": name, "batch_size": batch, "prompt_tokens": 128, "generated_tokens": 64, "objective": objective,
            "host": "a100-40gb", "memory_types": memories, "max_draft_length": 3,
            "verifier": {"model": verifier, **({"devices": verifier_devices} if verifier_devices else {})},
            "drafters": [{"model": drafter, "devices": 1, "acceptance": 0.7}] if drafter else [],
            "space": space, "assumptions": {"memory_model": memory_model}}
    if budget is not None:
        data["device_budget"] = budget
    return data


#: Small spaces under both memory models and the three objectives; ties from none to every level but the
#: order (the comments: the levels other designs tie on, found by the oracle).
TINY = [
    tiny("ts-attention", "gpt2-large", "gpt2-small", ["gddr"], "attention-offload"),  # none
    tiny("ts-host-only", "gpt2-large", "gpt2-small", ["gddr", "hbm"], "host-only"),  # latency, energy
    tiny("ts-hbm-k3", "gpt2-large", "gpt2-small", ["hbm"], "fc-offload", pim_units=3, batch=2),  # up to devices
    tiny("ts-palm-shares", "palm-2.7b", "palm-1.3b", ["gddr"], "attention-offload", share_levels=2,
         pim_units=2),  # none
    tiny("ts-devices-edp", "gpt2-large", "gpt2-small", ["gddr"], "fc-offload", verifier_devices=None, budget=3,
         objective="edp"),  # none
    tiny("part-fc-energy", "opt-1.3b", "opt-125m", ["hbm", "gddr"], "fc-offload", memory_model="partitioned",
         objective="energy"),  # none
    tiny("part-attention-edp", "llama-2.7b", "llama-1.3b", ["gddr"], "attention-offload",
         memory_model="partitioned", objective="edp"),  # none
    tiny("part-host-devices", "gpt2-large", None, ["gddr"], "host-only", memory_model="partitioned",
         verifier_devices=None, budget=2),  # none
    tiny("part-palm-shares", "palm-2.7b", "palm-1.3b", ["gddr"], "attention-offload", memory_model="partitioned",
         share_levels=2, pim_units=2),  # latency (the energy breaks it)
    tiny("ts-hbm-k3-edp", "gpt2-large", "gpt2-small", ["hbm"], "fc-offload", pim_units=3, batch=2,
         objective="edp"),  # up to devices
    tiny("ts-hbm-k1-energy", "gpt2-large", "gpt2-small", ["hbm"], "fc-offload", pim_units=1, batch=2,
         objective="energy"),  # up to devices
]


def part_key(space: DesignSpace):
    """The tie-break's key of model j's part: (PIM units x devices, devices, architecture index, placement
    index per operator), the indices as `SpecModel.tie_break_keys` defines them, written independently."""
    places = [{op: list(dict.fromkeys(p for a in m.archs for p in m.allowed(a, op))) for op in PLACEABLE_OPS}
              for m in space.models]

    def key(j: int, md) -> tuple:
        a = md.arch
        return (a.pim_units * a.devices, a.devices, space.models[j].archs.index(a),
                *(places[j][op].index(md.placement[op]) for op in PLACEABLE_OPS))

    return key


def lex_key(space: DesignSpace, objective: str, e: Evaluation) -> tuple:
    """(ratio levels..., PIM units, devices, order) of a design: what the canonical optimum minimises."""
    key = part_key(space)
    parts = [key(j, md) for j, (_, md) in enumerate(e.design.models())]
    # a drafter absent from a design that does not speculate: no PIM units, no devices, index 0 everywhere
    parts += [(0,) * (3 + len(PLACEABLE_OPS))] * (space.n_models - len(parts))
    ratios = tuple(e.metrics.objective(name) for name in RATIO_LEVELS[objective])
    order = [x for p in parts for x in p[2:]] + [space.choice_list.index(e.design.choice)]
    return ratios + (sum(p[0] for p in parts), sum(p[1] for p in parts), order)


def oracle(sc: Scenario) -> tuple[Evaluation, tuple, list[bool]]:
    """The lexicographic minimum by enumeration, its key, and per level whether another design attains
    the minimum's key up to that level."""
    catalog = scenario_catalog(sc)
    space = DesignSpace(sc, catalog)
    enum = enumerate_designs(sc, tail=part_key(space), catalog=catalog)
    keyed = [(lex_key(space, sc.objective, e), e) for e in enum.evaluations]
    best_key, best = min(keyed, key=lambda t: t[0])
    ties = [sum(1 for k, _ in keyed if k[:i + 1] == best_key[:i + 1]) > 1 for i in range(len(best_key))]
    ev = Evaluator(sc, catalog)
    parts = [md for _, md in best.design.models()]
    for j, dropped in enumerate(enum.dropped):  # the designs one dropped option away from the minimum
        if j >= len(parts):  # the minimum does not speculate: a drafter's options change nothing
            continue
        staging = best.design.choice.drafters[j - 1].staging if j else None
        for md, draft2 in dropped:
            if draft2 != (staging.draft2 if staging else None):
                continue
            archs, places = [p.arch for p in parts], [p.placement for p in parts]
            archs[j], places[j] = md.arch, md.placement
            try:
                k = lex_key(space, sc.objective, ev.evaluate(space.build(archs, places, best.design.choice)))
            except ScenarioError:
                continue
            ties = [t or k[:i + 1] == best_key[:i + 1] for i, t in enumerate(ties)]
    return best, best_key, ties


@cache
def tiny_oracle(name: str) -> tuple[Evaluation, tuple, list[bool]]:
    return oracle(parse_scenario(next(d for d in TINY if d["name"] == name)))


@pytest.mark.parametrize("data", TINY, ids=lambda d: d["name"])
def test_canonical_optimum_is_the_brute_force_lexicographic_minimum(data):
    sc = parse_scenario(data)
    res = solve(sc, options=SolverOptions(60, deterministic=True))
    best, key, ties = tiny_oracle(data["name"])
    extra = res.report.extra
    assert res.report.status == "OPTIMAL" and extra["canonical"], extra.get("tie_break_note")
    assert res.design.key() == best.design.key()
    levels = extra["tie_break"]
    assert [lv["level"] for lv in levels] == [*RATIO_LEVELS[sc.objective], *INTEGER_LEVELS]
    assert all(lv["status"] == "OPTIMAL" for lv in levels)
    for lv, value in zip(levels, key):  # every level's value is the minimum's
        if lv["level"] in RATIO_LEVELS:
            assert lv["exact"] == f"{value.numerator}/{value.denominator}", lv["level"]
        else:
            assert lv["value"] == value, lv["level"]
    assert [lv["ties"] for lv in levels] == ties
    assert res.report.objective == key[0]
    # the tie checks go down from the first level not known to tie and stop at the first without another
    # design: none deeper than the first untied level, at most one "no other design" (EDP: levels 0 and 1
    # follow level 2, the first checked)
    first = 2 if sc.objective == "edp" else 0
    checks = [s for s in extra["solves"] if s["stage"].startswith("tie-break: another design at ")]
    names = [lv["level"] for lv in levels]
    asked = [names.index(s["stage"].removeprefix("tie-break: another design at ").removesuffix(" (cautious)")
                         .rstrip("?")) for s in checks]
    assert all(i <= ties.index(False, first) for i in asked), (asked, ties)
    assert len({i for i, s in zip(asked, checks) if s["status"] == "INFEASIBLE"}) <= 1
    if not ties[0] and sc.objective != "edp":  # the only design: one question (confirmed under energy), no level
        assert asked == [0] * len(asked) and not any(s["stage"].startswith("tie-break: ") and s not in checks
                                                     for s in extra["solves"])


def test_the_tiny_spaces_have_ties_at_every_level_but_the_order():
    """The tiny spaces exercise the tie report: ties at no level, at the first, up to the energy, up to the
    devices, for latency, energy and EDP, under both memory models."""
    seen = {name: tuple(tiny_oracle(name)[2]) for name in ("ts-attention", "ts-host-only", "ts-hbm-k3",
                                                          "part-palm-shares", "ts-hbm-k3-edp", "ts-hbm-k1-energy")}
    assert seen == {"ts-attention": (False,) * 5, "ts-host-only": (True, True, False, False, False),
                    "ts-hbm-k3": (True, True, True, True, False), "part-palm-shares": (True,) + (False,) * 4,
                    "ts-hbm-k3-edp": (True,) * 5 + (False,), "ts-hbm-k1-energy": (True, True, True, True, False)}


def test_known_ties_pick_the_fewest_pim_units():
    """Host-only on time-shared memory: the PIM units change neither latency nor energy, so designs tie on
    both and the canonical one has no PIM units; the text output says so in one line."""
    sc = parse_scenario(TINY[1])
    res = solve(sc, options=SolverOptions(60, deterministic=True))
    levels = {lv["level"]: lv for lv in res.report.extra["tie_break"]}
    assert levels["latency"]["ties"] and levels["energy"]["ties"]
    assert levels["pim_units"]["ties"] is False and levels["pim_units"]["value"] == 0
    assert all(md.pim_units == 0 for _, md in res.design.models())
    assert tie_break_line(res.report.extra) == ("tie-break: other designs tie on latency, energy; canonical by "
                                               "PIM units")


@pytest.mark.parametrize("name", ["examples/opt-13b", "paper/llama-32.5b-b8",
                                  pytest.param("paper/palm-62b-b1", marks=pytest.mark.slow)])  # 8 s: bench_slow_checks
def test_same_design_whatever_the_workers(name):
    sc = load_scenario(resolve_scenario_path(name))
    one = solve(sc, options=SolverOptions(120, deterministic=True))
    two = solve(sc, options=SolverOptions(120, workers=2))
    assert one.report.extra["canonical"] and two.report.extra["canonical"]
    assert one.design.to_json() == two.design.to_json()
    assert one.report.objective == two.report.objective
    assert one.report.extra["tie_break"] == two.report.extra["tie_break"]
    if name == "paper/llama-32.5b-b8":  # 0-4 PIM dies give the same latency and energy (OBJ-3)
        assert [lv["ties"] for lv in one.report.extra["tie_break"]] == [True, True, False, False, False]


def test_no_tie_break_without_a_proven_optimum():
    sc = load_scenario(resolve_scenario_path("paper/palm-62b-b1"))
    res = solve(sc, options=SolverOptions(0.01, deterministic=True))
    assert res.report.status == "FEASIBLE"
    assert res.report.extra["canonical"] is False and res.report.extra["tie_break"] == []
    assert "not proven optimal" in res.report.extra["tie_break_note"]
    assert tie_break_line(res.report.extra).startswith("tie-break: skipped")


def test_a_tie_break_stopped_by_the_time_limit_claims_nothing():
    """Deterministic time just past the primary proof: the tie-break runs out, says so, and claims no uniqueness
    (the design still attains the proven objective)."""
    sc = load_scenario(resolve_scenario_path("paper/llama-32.5b-b8"))
    full = solve(sc, options=SolverOptions(60, deterministic=True))
    primary = sum(s["deterministic_time"] for s in full.report.extra["solves"] if not s["stage"].startswith("tie"))
    # the command's wall-clock deadline (a deterministic limit in seconds also sets one) far away: only the
    # deterministic limit bites, on any machine
    res = solve(sc, options=SolverOptions(primary + 0.01, deterministic=True, deadline=Deadline.after(600)))
    assert res.report.status == "OPTIMAL" and res.report.objective == full.report.objective
    extra = res.report.extra
    assert extra["canonical"] is False and "not canonical" in extra["tie_break_note"]
    assert any(lv["status"] != "OPTIMAL" for lv in extra["tie_break"])
    assert all(lv["ties"] is not False for lv in extra["tie_break"])


def test_keys_pack_into_mixed_radix_numbers_within_the_limit():
    keys = [TieKey("order", f"k{i}", (), size) for i, size in enumerate([7, 1 << 20, 1 << 20, 3, 1 << 41, 2])]
    groups = pack_keys(keys)
    assert [k for g in groups for k in g] == keys  # consecutive, in order
    for g in groups:
        span = 1
        for k in g:
            span *= k.size
        assert span <= PACK_LIMIT or len(g) == 1


def test_a_faulty_energy_level_falls_back_to_the_least_in_the_other_levels(monkeypatch):
    """When CP-SAT contradicts a known design at the energy level (the 9.15 fault of paper-full PaLM b16-b64,
    formulations/objectives.md), the level is left out and marked FAULT: the design is the least in
    (latency, PIM units, devices, order), still one design whatever the workers, and not called canonical."""
    canonical = importlib.import_module("specpim_cp.solvers.exact.canonical")  # where the tie-break calls it
    real = canonical.minimize_ratio

    def faulty(run, ratio, extra=None, start=None, choices=None):
        if run.stage.startswith("tie-break"):
            raise canonical.ModelMismatch("CP-SAT reports INFEASIBLE for a Dinkelbach step (forced by the test)")
        return real(run, ratio, extra, start, choices)

    monkeypatch.setattr(canonical, "minimize_ratio", faulty)
    data = next(d for d in TINY if d["name"] == "part-palm-shares")  # ties on latency
    sc = parse_scenario(data)
    res = solve(sc, options=SolverOptions(60, deterministic=True))
    extra = res.report.extra
    assert res.report.status == "OPTIMAL" and extra["canonical"] is False and "9.15 fault" in extra["tie_break_note"]
    levels = {lv["level"]: lv for lv in extra["tie_break"]}
    assert levels["energy"]["status"] == "FAULT" and levels["pim_units"]["status"] == "OPTIMAL"
    catalog = scenario_catalog(sc)
    space = DesignSpace(sc, catalog)
    keyed = [(key[:1] + key[3:], e) for e in enumerate_designs(sc, tail=part_key(space), catalog=catalog).evaluations
             for key in [lex_key(space, sc.objective, e)]]
    least = min(keyed, key=lambda t: t[0])[1]
    assert res.design.key() == least.design.key()


@pytest.mark.slow  # 12 s: bench_slow_checks
def test_the_verifier_architectures_only_the_verifier_alone_takes_do_not_block_the_split():
    """palm-62b-full-b32 under energy meets the CP-SAT 9.15 fault at the PIM-units level; its split by the
    verifier's architecture leaves out those only a verifier alone may take (NOSPEC-2) when the ratio rows
    keep speculating choices only, so it has 5 parts, not more than PER_ARCH_MAX, and the level is proven
    (it was FEASIBLE after 52 s with no presolve)."""
    res = solve(load_scenario(resolve_scenario_path("paper-full/palm-62b-full-b32")), objective="energy")
    assert res.report.status == "OPTIMAL"
    assert res.report.extra["canonical"] is True, res.report.extra.get("tie_break_note")


@pytest.mark.parametrize("name", ["ts-hbm-k1-energy", "part-fc-energy"])
def test_a_wrong_no_other_design_is_caught_where_energy_rows_are_kept(monkeypatch, name):
    """CP-SAT 9.15's fault simulated on the tie checks: every "another design?" solve at the project's presolve
    settings answers INFEASIBLE. Under energy (energy rows kept) such an answer is taken only when CP-SAT's
    own presolve says it too, so the canonical design and every tie flag are still the enumeration's, and a
    design found by a check counts as a tie as deep as the evaluator says it goes."""
    session = importlib.import_module("specpim_cp.solvers.exact.session")
    ladder = importlib.import_module("specpim_cp.solvers.exact.ladder")
    honest = session.SolveSession.solve

    def faulty(self, model, first_solution=False, cautious=False):
        status, solver = honest(self, model, first_solution, cautious)
        if self.stage.startswith("tie-break: another design") and not cautious:
            return ladder.Solved(Status.INFEASIBLE, solver)
        return ladder.Solved(status, solver)

    monkeypatch.setattr(session.SolveSession, "solve", faulty)
    data = next(d for d in TINY if d["name"] == name)
    res = solve(parse_scenario(data), options=SolverOptions(60, deterministic=True))
    best, _, ties = tiny_oracle(name)
    assert res.design.key() == best.design.key()
    assert [lv["ties"] for lv in res.report.extra["tie_break"]] == ties
    assert any(s["stage"].endswith("(cautious)") for s in res.report.extra["solves"])


def test_a_design_met_at_the_optimum_ties_as_deep_as_its_levels_agree():
    """`known_ties`: another design a question found joins the known ties at every level it attains with the
    returned design, level by level until one differs (the evaluator's metrics, then the keys' values)."""
    from specpim_cp.solvers.exact.canonical import CanonicalOptimum, TieLevel
    from specpim_cp.solvers.exact.session import SolveSession
    from specpim_cp.solvers.exact.settled import settled_model

    data = next(d for d in TINY if d["name"] == "ts-hbm-k1-energy")  # ties up to the devices
    sc = parse_scenario(data)
    catalog = scenario_catalog(sc)
    opts = SolverOptions(60, deterministic=True)
    res = solve(sc, options=opts, catalog=catalog)
    space = DesignSpace(sc, catalog)
    best_key = lex_key(space, sc.objective, res.evaluation)
    others = [e for e in every_design(sc, catalog)
              if e.design.key() != res.design.key()]
    cano = CanonicalOptimum(SolveSession(settled_model(sc, catalog), opts), sc.objective, res.evaluation)
    cano.levels = [TieLevel(lv["level"], Fraction(lv["exact"]) if "exact" in lv else lv["value"], lv["status"])
                   for lv in res.report.extra["tie_break"]]
    seen = set()
    for e in others:
        key = lex_key(space, sc.objective, e)
        depth = next((i for i in range(len(key)) if key[i] != best_key[i]), len(key)) - 1
        cano.known, cano.met = set(), [e.design]
        cano.known_ties()
        assert cano.known == set(range(depth + 1)), (depth, cano.known)
        seen.add(depth)
    assert {-1, 3} <= seen  # designs that tie at no level, and designs that tie up to the devices


def test_the_check_of_the_claim_counts_in_the_seconds_inside_cp_sat():
    from specpim_cp.solvers.exact.finish import verify
    from specpim_cp.solvers.exact.session import SolveSession
    from specpim_cp.solvers.exact.settled import settled_model

    sc = parse_scenario(next(d for d in TINY if d["name"] == "ts-attention"))
    catalog = scenario_catalog(sc)
    res = solve(sc, options=SolverOptions(60, deterministic=True), catalog=catalog)
    run = SolveSession(settled_model(sc, catalog), SolverOptions(60, deterministic=True))
    verify(run, res.design)
    assert run.cp_sat_s > 0 and run.iterations == 0  # a CP-SAT solve outside the search's count
