"""Command `export-tree`: a solved design's token tree in the forms serving engines load."""

from __future__ import annotations

import json
from pathlib import Path

import click

from specpim_cp.cli.common import check_writable, emit, user_errors
from specpim_cp.errors import ScenarioError


def _entry(path: str, design) -> dict:
    """The `--json` output entry that holds `design` (what `load_design` picked from `path`)."""
    from specpim_cp.files import read_data
    from specpim_cp.problem.design import parse_design

    text = path
    if "#" in text and not Path(text).exists():  # FILE#NAME or FILE#K, as load_design reads it
        text = text.rsplit("#", 1)[0]
    data = read_data(Path(text), "a design", syntax="JSON")
    if isinstance(data, list):
        return next((it for it in data if isinstance(it, dict) and it.get("design") is not None
                     and parse_design(it["design"]) == design), {})
    return data


def _json_text(doc: dict) -> str:
    """`doc` as JSON that reads: one line per list of numbers and per node, objects indented."""
    fields = []
    for key, value in doc.items():
        if isinstance(value, list) and value and isinstance(value[0], dict):
            body = "[\n" + ",\n".join(f"    {json.dumps(item)}" for item in value) + "\n  ]"
        elif isinstance(value, dict):
            body = json.dumps(value, indent=2).replace("\n", "\n  ")
        else:
            body = json.dumps(value)
        fields.append(f"  {json.dumps(key)}: {body}")
    return "{\n" + ",\n".join(fields) + "\n}"


@click.command("export-tree")
@click.argument("design_path", metavar="DESIGN.json")
@click.option("--drafter", "pick", metavar="N",
              help="the drafter: its 0-based index in the design (drafters[N]) or its model name; default: the "
                   "only drafter that drafts a tree (a chain drafter exports only when named here)")
@click.option("--format", "fmt", type=click.Choice(["choices", "json"]), required=True,
              help="choices: Medusa medusa_choices / EAGLE tree_choices; json: nodes with parents and probabilities")
@click.option("-o", "--out", "--output", "output", type=click.Path(dir_okay=False),
              help="write to FILE instead of stdout")
@click.option("--engine", type=click.Choice(["medusa", "eagle"]), default="medusa", show_default=True,
              help="refuse a tree this engine cannot load: ranks 0..9 (both hard-code a top-k of 10) and, for "
                   "Medusa (the stricter, the default), a depth within --medusa-heads")
@click.option("--medusa-heads", "heads", type=click.IntRange(1), metavar="N",
              help="the Medusa model's head count (one head per depth); without it the depth is only reported")
@user_errors
def export_tree(design_path: str, pick: str | None, fmt: str, output: str | None, engine: str,
                heads: int | None) -> None:
    """The token tree of a solved design, rebuilt from DESIGN.json alone: the `--json` output of `solve`,
    `heuristic` or `evaluate` (or `baselines --json` with FILE#NAME), whose breakdown records each drafter's
    width profile and acceptance vector.

    --format choices prints Medusa's `medusa_choices` / EAGLE's `tree_choices`: one path of 0-based
    candidate ranks per node, the root (the last committed token) excluded, sorted by (len(path), path) as
    those engines sort them, e.g. [[0], [1], [0, 0], [0, 1]]. --format json prints the same nodes with id,
    depth, parent (-1: the root), 0-based rank, path and path probability, with the conventions stated.

    \b
    # Tokens: expected_tokens_per_round = 1 + sum_d W(d), W(d) = P(at least d draft tokens accepted): the
    # accepted draft tokens plus the verifier's own next token (correction or bonus), as EAGLE's acceptance
    # length counts them; the root is not counted. A pipelined design's own tokens_per_round also drops the
    # bonus token of a round that continues (BONUS-1).
    """
    from specpim_cp.physics.speculation import expected_tokens_drafts
    from specpim_cp.problem.design import load_design
    from specpim_cp.problem.tree_export import (
        check_engine,
        choice_paths,
        drafter_tree,
        output_metrics,
        select_drafter,
        tree_document,
    )

    check_writable(output, "--out")
    design = load_design(design_path)
    index = select_drafter([(d.model, d.tree, d.draft_length) for d in design.drafters], pick, design_path)
    records, tokens = output_metrics(_entry(design_path, design))
    if records is None:
        raise ScenarioError(f"{design_path}: holds no acceptance vector (a bare design?); export from the `--json` "
                            "output of solve, heuristic or evaluate, whose breakdown records it")
    md = design.drafters[index]
    record = records[index] if index < len(records) else None
    tree = drafter_tree(index, md.model, md.tree, md.draft_length, record, design_path)
    note = check_engine(tree, engine, heads, design_path)
    if fmt == "choices":
        text = json.dumps(choice_paths(tree.nodes))
    else:
        summary = {"pipeline": design.pipeline, "drafters": len(design.drafters), "tokens_per_round": tokens}
        text = _json_text(tree_document(tree, expected_tokens_drafts([tree.draft]), summary))
    emit(text, output)
    if note:
        click.echo(f"note: {note}", err=True)


COMMANDS = (export_tree,)
