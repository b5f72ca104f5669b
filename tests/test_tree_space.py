"""Token trees in the design space: CP-SAT = brute force, Sequoia's dynamic program, membership errors,
the Monte Carlo along an optimal tree, and the tree baseline."""

from __future__ import annotations

import json
from dataclasses import replace
from fractions import Fraction

import pytest
from click.testing import CliRunner
from sequoia_dp import sequoia_table

from specpim_cp.catalog import default_catalog
from specpim_cp.check.simulate_design import simulate_design
from specpim_cp.cli import main
from specpim_cp.errors import ScenarioError
from specpim_cp.physics import speculation as spec
from specpim_cp.physics.evaluate import Evaluator
from specpim_cp.physics.rounds import verifier_tokens
from specpim_cp.problem.design import DrafterChoice, SpecChoice
from specpim_cp.problem.scenario import parse_scenario
from specpim_cp.problem.space import DesignSpace
from specpim_cp.solvers.baselines import gpu_si, gpu_si_trees
from specpim_cp.solvers.brute import brute_force
from specpim_cp.solvers.exact import SolverOptions, solve


def tree_scenario(k: int, **extra) -> dict:
    """Small spaces with one tree drafter (and, for k = 3, a chain drafter next to it)."""
    fam = k % 3
    data = {
        "name": f"tree-{k}", "batch_size": [1, 2, 4][fam], "prompt_tokens": 128, "generated_tokens": 64,
        "host": "a100-40gb", "memory_types": ["hbm", "gddr"], "max_draft_length": 3,
        "objective": ["latency", "energy", "edp"][fam],
        "verifier": {"model": ["opt-1.3b", "gpt2-large", "llama-2.7b"][fam], "devices": 1},
        "drafters": [{"model": ["opt-125m", "gpt2-small", "llama-1.3b"][fam], "devices": 1,
                      "acceptance": [0.7, 0.8, 0.6][fam], "tree": {"max_nodes": 5, "max_children": 3}}],
        "space": {"memory_type": "gddr", "share_levels": 1, "mapping": ["host-only", "free", "fc-offload"][fam],
                  "pipeline": "free"},
    }
    if k == 3:  # a chain drafter beside the tree: pipelined trees are excluded, vanilla ones are not
        data.update(verifier={"model": "opt-1.3b", "devices": 1}, objective="latency")
        data["drafters"][0]["model"] = "opt-125m"
        data["drafters"].append({"model": "gpt2-small", "devices": 1, "acceptance": 0.6})
        data["space"]["pim_units"] = 2
    if k == 4:  # a pipelined tree on the host
        data["space"].update(pipeline="on", mapping="host-only")
        del data["drafters"][0]["acceptance"]  # the vector's rank 1 is the chain acceptance
        data["drafters"][0]["tree"]["acceptance_vector"] = [0.7, 0.12, 0.05]
    data.update(extra)
    return data


@pytest.mark.parametrize("k", range(5))
def test_cp_sat_optimum_equals_brute_force_with_trees(k):
    sc = parse_scenario(tree_scenario(k))
    exact = solve(sc, options=SolverOptions(60, deterministic=True))
    brute = brute_force(sc)
    assert exact.report.status == "OPTIMAL"
    assert exact.report.objective == brute.report.objective
    assert Evaluator(sc).evaluate(exact.design).metrics.objective(sc.objective) == exact.report.objective


def test_the_host_only_optimum_drafts_a_tree():
    """On plain memory the verifier's pass costs little more for a few more tokens: a tree pays."""
    sc = parse_scenario(tree_scenario(0))
    res = solve(sc, options=SolverOptions(60, deterministic=True))
    assert res.design.drafters[0].tree is not None
    # and the chain-only space is strictly worse
    chains = parse_scenario(tree_scenario(0, space={**tree_scenario(0)["space"], "trees": "off"}))
    assert solve(chains, options=SolverOptions(60, deterministic=True)).report.objective > res.report.objective


def test_space_counts_and_pairing_rule():
    sc = parse_scenario(tree_scenario(3))
    sp = DesignSpace(sc, default_catalog())
    trees = [o for o in sp.drafter_options[0] if o.tree is not None]
    assert trees and all(sum(o.tree) <= 5 and len(o.tree) <= 3 for o in trees)
    assert all(o.tree is None for o in sp.drafter_options[1])  # no [tree] table: chains only
    assert not any(c.pipeline and c.drafters[0].tree is not None for c in sp.choice_list)
    assert any(not c.pipeline and c.drafters[0].tree is not None for c in sp.choice_list)


class _FlatDrafter:
    """Evaluator.pass_price with the drafter's passes at one fixed price whatever their tokens (Sequoia's
    cost model: a drafting step costs the same at every width)."""

    def __init__(self, ev: Evaluator, drafter_model: str, time_ns: int):
        self.real = ev.pass_price
        self.drafter_model, self.time_ns = drafter_model, time_ns

    def __call__(self, md, tokens, *args, **kwargs):
        p = self.real(md, tokens, *args, **kwargs)
        return p if md.model != self.drafter_model else replace(p, time_ns=self.time_ns)


@pytest.mark.parametrize("draft_ns", [150_000, 900_000, 4_000_000])
def test_tree_choice_equals_sequoias_dynamic_program(draft_ns, monkeypatch):
    """Fixed hardware, width-independent drafting cost: the evaluator's best draft over every chain and
    tree profile of the space equals the best of Sequoia's dynamic program (its E per node budget and
    depth, priced with our pass counts: D drafting passes, the verifier at n + 1 tokens, sync)."""
    data = tree_scenario(0, max_draft_length=4, objective="latency")
    data["drafters"][0]["tree"] = {"max_nodes": 6, "max_children": 3}
    sc = parse_scenario(data)
    ev = Evaluator(sc)
    monkeypatch.setattr(ev, "pass_price", _FlatDrafter(ev, "opt-125m", draft_ns))
    sp = DesignSpace(sc, default_catalog())
    base = gpu_si(sc).design
    best = None
    for c in sp.choice_list:
        if c.pipeline or not c.speculates:  # Sequoia's program compares drafts (the verifier alone drafts none)
            continue
        d = sp.build([md.arch for _, md in base.models()], [md.placement for _, md in base.models()], c)
        m = ev.metrics(d)
        v = Fraction(m.round_time_ns) / m.tokens_per_round_micro
        if best is None or v < best[0]:
            best = (v, c.drafters[0])
    # Sequoia's table: T[m][l] = best expected tokens with m - 1 draft nodes and depth l - 1
    p = ev.acceptance.tree(0)
    table, _ = sequoia_table(p, 6, 4)
    sync = ev.costs.host.sync_latency_ns
    verify = {n: ev.pass_price(base.verifier, verifier_tokens(1, SpecChoice((DrafterChoice(n),), False))).time_ns
              for n in range(1, 7)}
    dp_best = min((depth * draft_ns + verify[n] + sync) / max(table[n + 1][depth + 1])
                  for n in range(1, 7) for depth in range(1, 5) if max(table[n + 1][depth + 1]) > 0)
    ours = float(best[0]) * spec.TOKENS_SCALE
    assert ours == pytest.approx(dp_best, rel=1e-6)


def test_simulation_along_the_optimal_tree_agrees():
    sc = parse_scenario(tree_scenario(4))
    res = solve(sc, options=SolverOptions(60, deterministic=True))
    assert res.design.drafters[0].tree is not None and res.design.pipeline
    sim = simulate_design(sc, res.design, rounds=100_000, seed=3)
    assert sim.simulation.tokens_agree() and sim.simulation.time_agree()
    assert sim.simulation.continue_agree() and sim.simulation.waste_agree()


def test_tree_baseline_never_beats_the_optimum_and_never_loses_to_gpu_si():
    sc = parse_scenario(tree_scenario(0, space={"share_levels": 1}))  # the baselines' hardware is in the space
    trees, chains = gpu_si_trees(sc), gpu_si(sc)
    opt = solve(sc, options=SolverOptions(60, deterministic=True))
    assert trees.metrics.objective(sc.objective) <= chains.metrics.objective(sc.objective)
    assert opt.report.objective <= trees.metrics.objective(sc.objective)


@pytest.mark.parametrize("tree, message", [
    ([1, 1, 1], "is a chain"),
    ([2, 2, 2, 2], "exceeds max_draft_length 3"),
    ([3, 3], "exceed tree.max_nodes 5"),
    ([1, 4], "exceed 1 x max_children 3"),
])
def test_a_tree_outside_the_space_is_named(tree, message):
    sc = parse_scenario(tree_scenario(0))
    base = gpu_si(sc).design
    d = base.model_copy(update={"drafters": [base.drafters[0].model_copy(update={"tree": tuple(tree),
                                                                                  "draft_length": len(tree)})]})
    errs = DesignSpace(sc, default_catalog()).violations(d)
    assert any("design.drafters[0].tree" in e and message in e for e in errs), errs


def test_bad_tree_inputs_are_one_line_errors(tmp_path):
    def run(data):
        path = tmp_path / "s.toml"
        path.write_text(_toml(data))
        return CliRunner().invoke(main, ["solve", str(path), "--deterministic"])

    for vector, needle in [([0.5, -0.1], "acceptance_vector[rank 2] must be in [0, 1]"),
                           ([0.5, 0.6], "must sum to at most 1")]:
        bad_vector = tree_scenario(0)
        bad_vector["drafters"][0]["tree"]["acceptance_vector"] = vector
        r = run(bad_vector)
        assert r.exit_code == 2 and "acceptance_vector" in r.output and needle in r.output, r.output
        assert "Traceback" not in r.output and len(r.output.strip().splitlines()) == 1
    clash = tree_scenario(0)
    clash["drafters"][0]["tree"]["acceptance_vector"] = [0.2, 0.5]
    r = run(clash)  # acceptance 0.7 but rank 1 of the vector (its largest entry) 0.5
    assert r.exit_code == 2 and "rank-1 entry 0.5" in r.output
    low = tree_scenario(0)
    low["drafters"][0]["acceptance"] = 0.2
    r = run(low)  # the catalog's conditional tail would rank rank 2 above rank 1
    assert r.exit_code == 2 and "give tree.acceptance_vector" in r.output
    too_many = tree_scenario(0)
    too_many["drafters"][0]["tree"] = {"max_nodes": 129}
    r = run(too_many)
    assert r.exit_code == 2 and "max_nodes" in r.output and "128" in r.output, r.output
    assert len(r.output.strip().splitlines()) == 1
    wide = tree_scenario(0)
    wide["drafters"][0]["tree"] = {"max_children": 17}
    r = run(wide)
    assert r.exit_code == 2 and "max_children" in r.output and "16" in r.output, r.output
    big = tree_scenario(3, max_draft_length=8)  # two drafters: beyond the tree classes of [TREE-6] too
    big["drafters"][0]["tree"] = {"max_nodes": 64, "max_children": 8}
    r = run(big)  # millions of profiles of depth <= 8: no exact menu
    assert r.exit_code == 2 and "width profiles" in r.output and "exceeding" in r.output and "[TREE-4]" in r.output
    assert len(r.output.strip().splitlines()) == 1


def test_a_tree_design_round_trips_through_json(tmp_path):
    sc = parse_scenario(tree_scenario(0))
    res = solve(sc, options=SolverOptions(60, deterministic=True))
    out = tmp_path / "d.json"
    out.write_text(json.dumps(res.design.model_dump(mode="json")))
    scen = tmp_path / "s.toml"
    scen.write_text(_toml(tree_scenario(0)))
    r = CliRunner().invoke(main, ["evaluate", str(scen), "--design", str(out)])
    assert r.exit_code == 0, r.output
    assert "token tree" in r.output and "W(d)" in r.output


def _toml(data: dict) -> str:
    """A scenario dict as TOML (scalars, lists, nested tables; enough for these tests)."""
    def value(v):
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, str):
            return json.dumps(v)
        if isinstance(v, list):
            return "[" + ", ".join(value(x) for x in v) + "]"
        return repr(v)

    lines, tables = [], []
    for k, v in data.items():
        if isinstance(v, dict):
            tables.append((k, v))
        elif isinstance(v, list) and v and isinstance(v[0], dict):
            tables += [(f"[{k}]", x) for x in v]
        else:
            lines.append(f"{k} = {value(v)}")
    for name, t in tables:
        lines.append(f"[{name}]")
        sub = []
        for k, v in t.items():
            if isinstance(v, dict):
                sub.append((k, v))
            else:
                lines.append(f"{k} = {value(v)}")
        head = name.strip("[]")
        for k, v in sub:
            lines.append(f"[{head}.{k}]")
            lines += [f"{kk} = {value(vv)}" for kk, vv in v.items()]
    return "\n".join(lines) + "\n"


def test_errors_stay_scenario_errors():
    with pytest.raises(ScenarioError, match="tree"):
        parse_scenario(tree_scenario(0, max_draft_length=3) | {
            "drafters": [{"model": "opt-125m", "devices": 1, "tree": {"max_nodes": 129}}]})


def test_the_heuristic_searches_tree_genes():
    """The GA's drafter genes include the trees: on a host-only space it returns a tree design of the space,
    never better than the proven optimum."""
    from specpim_cp.solvers.heuristic import BUDGETS, run_heuristic

    sc = parse_scenario(tree_scenario(0))
    res = run_heuristic(sc, budget=BUDGETS["quick"], seed=1)
    assert DesignSpace(sc, default_catalog()).violations(res.design) == []
    assert res.design.drafters[0].tree is not None
    assert res.report.objective >= solve(sc, options=SolverOptions(60, deterministic=True)).report.objective
