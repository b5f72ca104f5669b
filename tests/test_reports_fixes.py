"""Reports that say what they mean: a batch folder's errors name their file and its scenarios' own catalog is
not taken for a scenario; results.csv has the host and context columns; design strings tell designs apart;
the PIM plot gives each memory type its own colour and cuts no label; a memory as sold reads as having no
PIM units."""

from __future__ import annotations

import csv
import struct
from pathlib import Path

from click.testing import CliRunner
from helpers import one_line_error

from specpim_cp.catalog import default_catalog
from specpim_cp.cli import main
from specpim_cp.problem.builtin_sets import builtin_sets
from specpim_cp.problem.design import ArchConfig, Design, DrafterChoice, Placement, SpecChoice
from specpim_cp.problem.mapping_rules import rule_placement
from specpim_cp.problem.scenario import load_scenario
from specpim_cp.report.batch import MEMORY_COLORS, memory_colors
from specpim_cp.runs.batch import run_batch
from specpim_cp.runs.instances import BatchOptions, resolve_inputs
from specpim_cp.views.catalogs import memories_table, memory_line, pim_units_text
from specpim_cp.views.figures import new_figure, save_figure
from specpim_cp.views.tables import design_summary

PAPER = builtin_sets()["paper"] / "opt-13b-b1.toml"
CATALOG = '[models."opt-13b-copy"]\nbased_on = "opt-13b"\nsource = "test: a copy"\n'


def _folder(tmp_path: Path, named: bool) -> Path:
    """A folder with one paper scenario and a catalog file, which the scenario names when `named`."""
    folder = tmp_path / "set"
    folder.mkdir(parents=True)
    text = PAPER.read_text()
    if named:
        text = 'catalog = "models.toml"\n' + text
    (folder / "opt.toml").write_text(text)
    (folder / "models.toml").write_text(CATALOG)
    return folder


def test_a_catalog_in_a_batch_folder_is_named_or_skipped(tmp_path):
    loose = _folder(tmp_path / "a", named=False)
    res = CliRunner().invoke(main, ["batch", str(loose), "--methods", "baselines", "--out", str(tmp_path / "o")])
    one_line_error(res, str(loose / "models.toml"), "a catalog file", "--catalog")
    assert not (tmp_path / "o" / "results.csv").exists()
    named = _folder(tmp_path / "b", named=True)
    assert resolve_inputs(str(named), {})[1] == [named / "opt.toml"]  # the scenario's own catalog is no scenario


def test_every_scenario_error_of_a_batch_names_its_file(tmp_path):
    folder = tmp_path / "set"
    folder.mkdir()
    (folder / "a.toml").write_text(PAPER.read_text())
    (folder / "b.toml").write_text('name = "b"\nbatch_size = 1\n')
    res = CliRunner().invoke(main, ["batch", str(folder), "--methods", "baselines", "--out", str(tmp_path / "o")])
    line = one_line_error(res, str(folder / "b.toml"), "prompt_tokens")
    assert line.startswith(f"error: {folder / 'b.toml'}: ")


def test_results_csv_has_host_and_context_columns(tmp_path):
    out = tmp_path / "out"
    run_batch([PAPER], out, BatchOptions(methods=("baselines",), jobs=1))
    with (out / "results.csv").open() as f:
        rows = list(csv.DictReader(f))
    sc = load_scenario(PAPER)
    assert rows and all((r["host"], r["prompt_tokens"], r["generated_tokens"])
                        == (sc.host, str(sc.prompt_tokens), str(sc.generated_tokens)) for r in rows)


def _design(verifier: dict[str, Placement]) -> Design:
    sc = load_scenario(PAPER)
    names = [sc.verifier.model, sc.drafters[0].model]
    return Design.assemble(names, [ArchConfig("hbm", 4, 2), ArchConfig("hbm", 4, 1)],
                           [verifier, rule_placement("fc-offload", 4)], SpecChoice((DrafterChoice(2),), False))


def test_design_strings_tell_designs_apart():
    """Two designs that differ only in a PIM share or a host tensor's layout read differently."""
    sc = load_scenario(PAPER)
    base = rule_placement("attention-offload", sc.space.share_levels)
    half = {**base, "score": Placement(engine="pim", share=2)}
    spread = {**base, "qkv": Placement(engine="host", layout="spread")}
    texts = [design_summary(sc, _design(p)) for p in (base, half, spread)]
    assert len(set(texts)) == 3, texts
    assert "score@2/4" in texts[1] and "spread qkv" in texts[2]
    everywhere = rule_placement("attention-offload", sc.space.share_levels, host_layout="spread")
    assert "spread all" in design_summary(sc, _design(everywhere))


def test_each_memory_type_has_its_own_colour():
    mems = sorted(default_catalog().memories)
    colors = memory_colors(mems)
    assert len(set(colors.values())) == len(mems)
    assert colors["hbm3-pim"] != colors["hbm3e-pim"] and colors["hbm"] == MEMORY_COLORS["hbm"]


def _png_width(path: Path) -> int:
    return struct.unpack(">I", path.read_bytes()[16:20])[0]


def test_a_figure_keeps_text_past_its_layout(tmp_path):
    fig = new_figure(6, 3)
    ax = fig.subplots()
    ax.text(1.1, 0.5, "a label past the edge", transform=ax.transAxes).set_in_layout(False)
    path = save_figure(fig, tmp_path / "f.png")
    assert _png_width(path) > 6 * fig.dpi  # cropped to what is drawn: the label widens the image


def test_a_memory_as_sold_reads_as_having_no_pim_units():
    cat = default_catalog()
    hbm3, aquabolt, what_if = cat.memories["hbm3"], cat.memories["hbm"], cat.memories["hbm3-pim"]
    line = memory_line(hbm3)
    assert "a product" not in line and "no PIM units on it" in line
    assert (pim_units_text(hbm3), pim_units_text(aquabolt), pim_units_text(what_if)) == ("none", "product", "what-if")
    assert "a product" in memory_line(aquabolt) and "a what-if" in memory_line(what_if)
    row = next(r for r in memories_table([hbm3]).splitlines() if r.startswith("hbm3 "))
    assert row.rstrip().endswith("none")
