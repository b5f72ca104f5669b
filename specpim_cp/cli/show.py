"""Command `show`: a picture of a design's schedule (one decoder layer per model, and the round)."""

from __future__ import annotations

import click

from specpim_cp.cli.common import catalog_option, check_writable, load_with_catalog, user_errors


@click.command()
@click.argument("scenario")
@click.option("--design", "design_path", required=True, type=click.Path(dir_okay=False),
              help="a design, or any --json output holding one")
@click.option("-o", "--output", type=click.Path(dir_okay=False),
              help="FILE.png (or .svg, .pdf); default: <scenario name>-schedule.png here")
@catalog_option
@user_errors
def show(scenario: str, design_path: str, output: str | None, catalog_files: tuple[str, ...]) -> None:
    """Draw the design's schedule as the evaluator prices it: per model one decoder layer (host, PIM
    units with their shares, all-reduce link) and the round (drafting, sync, verification, pipeline
    overlap and resync), times in us."""
    from specpim_cp.api.inputs import load_design, safe_stem
    from specpim_cp.views.schedule_picture import check_figure_path, schedule_figure

    sc, cat = load_with_catalog(scenario, catalog_files)
    path = output if output is not None else f"{safe_stem(sc.name)}-schedule.png"
    check_writable(path, "-o")
    check_figure_path(path)
    design = load_design(design_path)
    click.echo(schedule_figure(sc, design, path, cat))


COMMANDS = (show,)
