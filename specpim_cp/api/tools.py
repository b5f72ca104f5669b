"""The front door's tools: the catalogs (check, import a Hugging Face config), the host kernel model, the
validation against measurements, and a solved design's token tree for serving engines."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from specpim_cp.api.inputs import user_catalog
from specpim_cp.api.options import TreeOptions
from specpim_cp.catalog.import_hf import ARCHITECTURES, import_hf_toml
from specpim_cp.check.validate import format_validation, validation_rows
from specpim_cp.errors import ScenarioError
from specpim_cp.kernels import fit_report, format_fit_report, known_gpus

__all__ = ["ARCHITECTURES", "TreeExport", "export_tree", "fit_report", "format_fit_report", "format_validation",
           "import_hf_toml", "kernel_latency_us", "known_gpus", "validation_rows"]

#: The most digits a drafter index has (a design never has this many drafters).
MAX_INDEX_DIGITS = 9


def kernel_latency_us(gpu: str, in_features: int, out_features: int, tokens: int, tensor_parallel: int = 1,
                      catalog=None) -> float:
    """Predicted latency (us) of an FP16 linear layer on a measured table (a100, h100, a40) at its bandwidth,
    or on a catalog host with its kernel model."""
    from specpim_cp.kernels import host_linear_us, predict_linear_us

    cat = catalog if catalog is not None else user_catalog()
    tables = known_gpus()
    if gpu.strip().lower() not in tables and gpu not in cat.hosts:
        raise ScenarioError(f"--gpu: unknown '{gpu}' (measured tables: {', '.join(tables)}; catalog hosts: "
                            f"{', '.join(cat.hosts)})")
    try:
        if gpu.strip().lower() in tables:
            return predict_linear_us(gpu, in_features, out_features, tokens, tensor_parallel)
        return host_linear_us(cat.hosts[gpu], in_features, out_features, tokens, tensor_parallel)
    except ValueError as exc:
        raise ScenarioError(str(exc)) from None


@dataclass(frozen=True)
class TreeExport:
    """A drafter's token tree rebuilt from a design file: the tree (nodes, draft), the design's pipeline
    flag, its drafters count and its tokens per round."""

    tree: object
    pipeline: bool
    drafters: int
    tokens_per_round: float | None
    note: str | None = None  # what the engine check could not check (Medusa's depth without a head count)

    def choices(self) -> list[list[int]]:
        """Medusa `medusa_choices` / EAGLE `tree_choices`: one path of 0-based ranks per node."""
        from specpim_cp.problem.tree_export import choice_paths

        return choice_paths(self.tree.nodes)

    def document(self) -> dict:
        """The nodes with id, depth, parent, rank, path and path probability, with the conventions stated."""
        from specpim_cp.physics.speculation import expected_tokens_drafts
        from specpim_cp.problem.tree_export import tree_document

        summary = {"pipeline": self.pipeline, "drafters": self.drafters, "tokens_per_round": self.tokens_per_round}
        return tree_document(self.tree, expected_tokens_drafts([self.tree.draft]), summary)


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


def check_drafter_pick(pick: str | None) -> None:
    """`--drafter`: an index is written with the digits 0-9 and at most MAX_INDEX_DIGITS of them."""
    if pick is None or not any(c.isdigit() for c in pick) or not pick.isdigit():
        return
    if not (pick.isascii() and pick.isdecimal()):
        raise ScenarioError(f"--drafter {pick!r}: a drafter index is written with the digits 0-9")
    if len(pick) > MAX_INDEX_DIGITS:
        raise ScenarioError(f"--drafter: a drafter index has at most {MAX_INDEX_DIGITS} digits, got {len(pick)}")


def export_tree(design_path: str, options: TreeOptions | None = None) -> TreeExport:
    """The token tree of a drafter of a solved design, from the `--json` output of solve, heuristic or
    evaluate (or baselines --json with FILE#NAME), whose breakdown records the acceptance vector."""
    options = options or TreeOptions()
    from specpim_cp.problem.design import load_design
    from specpim_cp.problem.tree_export import check_engine, drafter_tree, output_metrics, select_drafter

    check_drafter_pick(options.drafter)
    design = load_design(design_path)
    index = select_drafter([(d.model, d.tree, d.draft_length) for d in design.drafters], options.drafter,
                           design_path)
    records, tokens = output_metrics(_entry(design_path, design))
    if records is None:
        raise ScenarioError(f"{design_path}: holds no acceptance vector (a bare design?); export from the `--json` "
                            "output of solve, heuristic or evaluate, whose breakdown records it")
    md = design.drafters[index]
    record = records[index] if index < len(records) else None
    tree = drafter_tree(index, md.model, md.tree, md.draft_length, record, design_path)
    note = check_engine(tree, options.engine, options.medusa_heads, design_path)
    return TreeExport(tree, design.pipeline, len(design.drafters), tokens, note)
