"""Command `export-tree`: a solved design's token tree in the forms serving engines load."""

from __future__ import annotations

import json

import click

from specpim_cp.cli.common import check_writable, emit, user_errors


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
    from specpim_cp.api import TreeOptions
    from specpim_cp.api import export_tree as rebuild

    check_writable(output, "--out")
    tree = rebuild(design_path, TreeOptions(pick, engine, heads))
    text = json.dumps(tree.choices()) if fmt == "choices" else _json_text(tree.document())
    emit(text, output)
    if tree.note:
        click.echo(f"note: {tree.note}", err=True)


COMMANDS = (export_tree,)
