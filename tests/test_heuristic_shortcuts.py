"""The heuristic's shortcuts change no result: the final selection re-prices only the archive's designs it may
pick and picks what it picks from the whole archive; an MCTS search told the device room skips the leaves
that asking each architecture skips (architectures sharing a leaf included)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from specpim_cp.catalog import default_catalog
from specpim_cp.problem.design import ArchConfig
from specpim_cp.problem.scenario import load_scenario
from specpim_cp.solvers.heuristic import Budget
from specpim_cp.solvers.heuristic.fill import Filler, SerialFiller
from specpim_cp.solvers.heuristic.ga import GeneticExplorer
from specpim_cp.solvers.heuristic.genes import SearchSpace
from specpim_cp.solvers.heuristic.mcts import ArchTree
from specpim_cp.solvers.heuristic.pricing import Pricer
from specpim_cp.solvers.heuristic.run import _contenders, _select, _warm_starts

EXAMPLES = Path(__file__).parents[1] / "benchmarks" / "examples"
TINY = Budget(generations=3, population=16, mcts_leaves_per_model=3)


@pytest.mark.parametrize("name,search,select", [("gpt2-staged", "latency", "latency"),
                                                ("palm-8b", "latency", "edp"),
                                                ("llama-13b", "energy", "latency"),
                                                ("opt-13b", "edp", "energy")])
def test_the_selection_picks_from_its_contenders_what_it_picks_from_the_whole_archive(name, search, select):
    sc = load_scenario(EXAMPLES / f"{name}.toml")
    catalog = default_catalog()
    space = SearchSpace(sc, catalog)
    pricer = Pricer(space, catalog, search)
    explorer = GeneticExplorer(space, SerialFiller(Filler(space, pricer, TINY.mcts_leaves_per_model)),
                               np.random.default_rng(7), 7, generations=TINY.generations, population=TINY.population)
    explorer.run(_warm_starts(sc, catalog, space))
    archive = explorer.archive
    contenders = _contenders(archive, search, select)
    assert set(contenders) <= set(archive)
    assert len(contenders) < len(archive)  # the shortcut leaves designs out
    whole = _select(pricer.metrics(archive), search, select)
    assert _select(pricer.metrics(contenders), search, select) == whole
    assert whole in contenders


def _arch_ids() -> list[ArchConfig]:
    """Architectures of one model, two of them on the same leaf (a head on the verifier's devices or not)."""
    archs = [ArchConfig(mem, k, n) for mem in ("hbm", "gddr") for k in (0, 4, 8) for n in (1, 2, 4, 8)]
    return archs + [ArchConfig("hbm", 4, 2, colocated=True), ArchConfig("gddr", 8, 8, colocated=True)]


@pytest.mark.parametrize("max_devices,leaves", [(0, 5), (1, 3), (2, 40), (4, 7), (8, 40), (3, 1)])
def test_a_device_room_skips_the_leaves_that_asking_each_architecture_skips(max_devices, leaves):
    archs = _arch_ids()
    ids = list(range(len(archs)))
    rewards = {aid: (aid * 37 % 11) / 10 for aid in ids}
    runs = []
    for by_room in (False, True):
        tree = ArchTree(ids, archs)
        rng = np.random.default_rng(3)
        out = []
        for solved in ((), (5,), (len(archs) - 1,), (9, 2)):  # several searches on the same statistics
            allowed = None if by_room else (lambda aid: archs[aid].devices <= max_devices)
            out.append(tree.search(rng, leaves, rewards.__getitem__, allowed, solved=solved,
                                   max_devices=max_devices if by_room else None))
        runs.append((out, tree.stats()))
    assert runs[0] == runs[1]
    assert any(runs[0][0]) == (max_devices > 0)  # leaves priced, none where no architecture fits
