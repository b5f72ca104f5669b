"""Commands `evaluate`, `baselines`, `simulate`: price one design, the baselines, the round model."""

from __future__ import annotations

import json

import click

from specpim_cp.cli.common import ROUNDS_TYPE, SEED_TYPE, catalog_option, emit, load_with_catalog, user_errors


@click.command()
@click.argument("scenario")
@click.option("--design", "design_path", required=True, type=click.Path(dir_okay=False))
@click.option("--json", "as_json", is_flag=True, help="machine-readable output")
@click.option("-o", "--output", type=click.Path(dir_okay=False), help="write to FILE instead of stdout")
@catalog_option
@user_errors
def evaluate(scenario: str, design_path: str, as_json: bool, output: str | None, catalog_files) -> None:
    """Price a design (metrics and breakdown)."""
    from specpim_cp.api import evaluate as price
    from specpim_cp.views.tables import format_evaluation

    sc, cat = load_with_catalog(scenario, catalog_files)
    ev = price(sc, design_path, cat)
    emit(json.dumps(ev.as_dict(), indent=2) if as_json else format_evaluation(sc, ev), output)


@click.command()
@click.argument("scenario")
@click.option("--json", "as_json", is_flag=True)
@click.option("-o", "--output", type=click.Path(dir_okay=False))
@catalog_option
@user_errors
def baselines(scenario: str, as_json: bool, output: str | None, catalog_files) -> None:
    """Evaluate the baselines (GPU-AR, GPU-SI, FC-offload, attention-offload, off-the-shelf)."""
    from specpim_cp.api import baseline_results
    from specpim_cp.views.tables import format_baselines

    sc, cat = load_with_catalog(scenario, catalog_files)
    res = baseline_results(sc, cat)  # GPU-AR infeasible (the verifier does not fit its devices): one line
    emit(json.dumps([r.as_dict() for r in res], indent=2) if as_json else format_baselines(sc, res), output)


@click.command()
@click.argument("scenario")
@click.option("--design", "design_path", required=True, type=click.Path(dir_okay=False))
@click.option("--rounds", type=ROUNDS_TYPE, default=100_000, show_default=True,
              help="Monte Carlo rounds (the most take about 90 s and 250 MB)")
@click.option("--seed", type=SEED_TYPE, default=0, show_default=True)
@click.option("--json", "as_json", is_flag=True)
@catalog_option
@user_errors
def simulate(scenario: str, design_path: str, rounds: int, seed: int, as_json: bool, catalog_files) -> None:
    """Monte Carlo simulation of rounds vs the closed forms (95% confidence intervals)."""
    from specpim_cp.api import SimulateOptions
    from specpim_cp.api import simulate as run
    from specpim_cp.api.solving import format_simulation

    sc, cat = load_with_catalog(scenario, catalog_files)
    res = run(sc, design_path, SimulateOptions(rounds, seed, catalog=cat))
    if as_json:
        click.echo(json.dumps(res.as_dict(), indent=2))
    else:
        click.echo(format_simulation(res.simulation))
        click.echo(f"evaluator (integer units): round {res.evaluator_round_ns} ns, "
                   f"{res.evaluator_tokens:.6f} tokens/round")

COMMANDS = (evaluate, baselines, simulate)
