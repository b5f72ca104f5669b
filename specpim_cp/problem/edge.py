"""Scenario rules of edge devices (formulations/edge.md): per-model weight precision and the shared device.

`shared_device = true`: every model runs on one device whose channel groups are split between them, each
model on its own slice (`channels`, or chosen); the host (an NPU) is time-shared, so rounds are not
pipelined. These checks need the catalog; the space (problem/space.py) and the exact model read
`slice_options` and `shared_pipeline_options`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from specpim_cp.catalog import Catalog, MemorySpec
from specpim_cp.catalog.slices import parse_slice, slice_name
from specpim_cp.errors import ScenarioError


class ModelEntry(Protocol):
    """What these rules read of a scenario's model entry (problem/scenario.py ModelEntry)."""

    model: str
    devices: int | None
    channels: int | None
    weights: str


class DrafterEntry(ModelEntry, Protocol):
    staging: object | None
    kind: str


class SpaceFields(Protocol):
    pipeline: str
    memory_type: str | None


class Scenario(Protocol):
    """What these rules read of a scenario (problem/scenario.py Scenario, which imports this module)."""

    shared_device: bool | str
    device_budget: int | None
    memory_types: list[str]
    verifier: ModelEntry
    drafters: Sequence[DrafterEntry]
    space: SpaceFields


#: Fields this module adds to a scenario, with their defaults: left out of the inputs hash at the default, so
#: a scenario that does not use them keeps its hash.
EDGE_DEFAULTS = {"shared_device": False}
EDGE_ENTRY_DEFAULTS = {"weights": "fp16", "channels": None}


def edge_defaults_dropped(data: dict) -> dict:
    """A scenario's dumped fields without the edge fields that hold their defaults."""
    out = {k: v for k, v in data.items() if not (k in EDGE_DEFAULTS and v == EDGE_DEFAULTS[k])}
    for key in ("verifier", "drafters"):
        entries = out.get(key)
        if entries is None:
            continue
        one = isinstance(entries, dict)
        cleaned = [{k: v for k, v in e.items() if not (k in EDGE_ENTRY_DEFAULTS and v == EDGE_ENTRY_DEFAULTS[k])}
                   for e in ([entries] if one else entries)]
        out[key] = cleaned[0] if one else cleaned
    return out


def sharing(sc: Scenario) -> str | None:
    """How the models share one device: "channels", "interleaved", or None (each model on its own devices)."""
    if sc.shared_device is False:
        return None
    return "channels" if sc.shared_device is True else str(sc.shared_device)


def model_entries(sc: Scenario) -> list[tuple[str, ModelEntry]]:
    return [("verifier", sc.verifier)] + [(f"drafters[{i}]", d) for i, d in enumerate(sc.drafters)]


def holds_channels(entry: ModelEntry) -> bool:
    """Whether a model takes a share of a shared device's channels and capacity: every model but an n-gram
    lookup, which runs on the host and stores nothing (formulations/edge.md [EDGE-2])."""
    return getattr(entry, "kind", "model") != "ngram"


def device_entries(sc: Scenario) -> list[tuple[str, ModelEntry]]:
    """The model entries that take a share of a shared device (`holds_channels`), verifier first."""
    return [(where, e) for where, e in model_entries(sc) if holds_channels(e)]


def weight_precisions(sc: Scenario) -> dict[str, str]:
    """Per model name, the precision its weights are stored in: each entry's `weights`; a draft2 model takes
    its drafter's. ScenarioError when one model is named with two precisions."""
    out: dict[str, tuple[str, str]] = {}

    def put(name: str, precision: str, where: str) -> None:
        if name in out and out[name][0] != precision:
            raise ScenarioError(f"{where}.weights: '{name}' is {precision} here but {out[name][0]} in "
                                f"{out[name][1]}; one model has one precision")
        out.setdefault(name, (precision, where))

    for where, e in model_entries(sc):
        put(e.model, e.weights, where)
    for i, d in enumerate(sc.drafters):
        for name in (d.staging.draft2 if d.staging else ()):
            put(name, d.weights, f"drafters[{i}].staging.draft2")
    return {k: v[0] for k, v in out.items()}


def check_edge(sc: Scenario, catalog: Catalog) -> None:
    """The shared device's rules: one device per model, no device budget, no pipeline, a slice per model
    within the device's channels (given slices summing to at most its channels, one channel at least for
    every model not given one)."""
    entries = model_entries(sc)
    for name, precision in weight_precisions(sc).items():
        spec = catalog.models.get(name)
        if precision != "fp16" and spec is not None and spec.is_moe:
            raise ScenarioError(f"weights: '{name}' is a mixture of experts, priced in FP16 only (weights = \"fp16\")")
    if sharing(sc) != "channels":
        for where, e in entries:
            if e.channels is not None:
                raise ScenarioError(f"{where}.channels: a channel slice needs shared_device = \"channels\" "
                                    f"(or true), got {sc.shared_device!r}")
    if not sc.shared_device:
        return
    if sc.device_budget is not None:
        raise ScenarioError("device_budget: a shared device is one device (leave device_budget out)")
    for i, d in enumerate(sc.drafters):
        if d.kind not in ("model", "ngram"):
            raise ScenarioError(f"drafters[{i}].kind: a {d.kind} head on a shared device is not modelled; on one "
                                "device a head already sits with the verifier (leave shared_device out; an "
                                "n-gram lookup, which stores nothing, is)")
        if not holds_channels(d) and d.channels is not None:
            raise ScenarioError(f"drafters[{i}].channels: an n-gram lookup runs on the host and stores nothing, "
                                "so it takes no channels")
    if sc.space.pipeline == "on":
        raise ScenarioError("space.pipeline: a shared device time-shares one host, so rounds are not pipelined")
    for where, e in entries:
        if e.devices not in (None, 1):
            raise ScenarioError(f"{where}.devices: a shared device is one device, got {e.devices}")
    if sharing(sc) != "channels":
        return
    memories = [sc.space.memory_type] if sc.space.memory_type else sc.memory_types
    entries = device_entries(sc)
    for m in memories:
        total = catalog.memory(m).groups
        given = sum(e.channels for _, e in entries if e.channels is not None)
        free = sum(1 for _, e in entries if e.channels is None)
        for where, e in entries:
            if e.channels is not None and e.channels > total - (len(entries) - 1):
                raise ScenarioError(f"{where}.channels: {e.channels} channels of memory '{m}' leave fewer than one "
                                    f"for each other model (it has {total})")
        if given + free > total:
            raise ScenarioError(f"channels: the models take {given} channels and need {free} more, above the "
                                f"{total} channels of memory '{m}'")


def slice_options(sc: Scenario, catalog: Catalog, memory: str, index: int) -> tuple[str, ...]:
    """The channel slices of `memory` model `index` (0 = verifier) may take on a shared device: its own
    `channels`, else every count that leaves the other models theirs (their given slices, one channel each
    for the rest; an n-gram lookup takes none)."""
    entries = model_entries(sc)
    total = catalog.memory(memory).groups
    own = entries[index][1].channels
    if own is not None:
        return (slice_name(memory, own, total),)
    others = sum(e.channels or 1 for j, (_, e) in enumerate(entries) if j != index and holds_channels(e))
    return tuple(slice_name(memory, c, total) for c in range(1, total - others + 1))


def whole_device(catalog: Catalog, memory: str) -> str:
    """The slice of every channel of `memory`: the verifier's when it decodes alone on a shared device."""
    total = catalog.memory(memory).groups
    return slice_name(memory, total, total)


#: Operators whose weights take a model's precision (the LM head stays FP16; attention reads the FP16 KV cache).
QUANTISED_OPS = ("qkv", "o_proj", "ffn_up", "ffn_down")


def pim_runs(memory: MemorySpec, precision: str, op: str, engine: str) -> bool:
    """Whether `op` of a model stored at `precision` may take `engine` on `memory` [EDGE-1]: PIM units run
    only the precisions the catalog lists for them (`pim_precisions`); the host runs every precision."""
    return engine != "pim" or op not in QUANTISED_OPS or precision in memory.pim_precisions


def shared_device_violations(sc: Scenario, archs: list[tuple[str, int]]) -> list[str]:
    """[EDGE-2] The (memory type, PIM units) of the models that hold channels (heads on the verifier's
    architecture left out): interleaved, one memory and one PIM count for all; by
    channels, slices of one memory that take every channel of it exactly once."""
    if sharing(sc) == "interleaved":
        if len(set(archs)) > 1:
            return [("design: on an interleaved shared device every model has the device's memory type and "
                    f"pim_units, got {sorted(set(archs))}")]
        return []
    memory_types = [m for m, _ in archs]
    parsed = [parse_slice(m) for m in memory_types]
    if any(p is None for p in parsed):
        return ["design: on a shared device every model takes a channel slice (memory_type NAME[c/C])"]
    bases = {p[0] for p in parsed}
    if len(bases) > 1:
        return [(f"design: the models' slices lie on different memories ({', '.join(sorted(bases))}); a shared "
                "device has one")]
    used, total = sum(p[1] for p in parsed), parsed[0][2]
    if used != total:
        return [f"design: the models' slices take {used} of the device's {total} channels (every channel once)"]
    return []
