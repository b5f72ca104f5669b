"""A design (an answer to a scenario) as values: architecture, placement, speculation choice.

`Design` is what every optimizer returns and what the evaluator prices; it serializes to the JSON
that `specpim-cp evaluate --design` reads. The speculation part of a design (draft per drafter,
staging, pipeline) is one value, `SpecChoice`, that the design space enumerates, the evaluator
prices and the optimizers choose, so a new speculation decision is added in one place.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_serializer,
    model_validator,
)

from specpim_cp.catalog import MAX_UNITS
from specpim_cp.errors import ScenarioError, format_validation_error, reject_bool_numbers
from specpim_cp.files import read_data
from specpim_cp.problem.operators import PLACEABLE_OPS

#: Device counts a model may take (tensor parallelism over 1, 2, 4 or 8 devices).
DEVICE_COUNTS = (1, 2, 4, 8)
#: The limits a scenario and a design file share (a design read from a file passes the scenario's bounds):
#: draft length (chain length, tree depth, a staged draft), drafters, nodes of a token tree, PIM share levels.
MAX_DRAFT_LENGTH = 16
MAX_DRAFTERS = 4
MAX_TREE_NODES = 128
MAX_SHARE_LEVELS = 8
#: Longest model or memory name a design may give (the catalog's names are far shorter).
MAX_NAME = 100

Engine = Literal["host", "pim"]
#: Where an operator's tensor lives: "normal" units only, "spread" over every unit (a share k/U on PIM
#: units), or "pim" units only (every PIM operator; formulations/costs.md).
Layout = Literal["normal", "spread", "pim"]


@dataclass(frozen=True, order=True)
class ArchConfig:
    """Architecture of one model's devices: memory type, PIM units per group (k), device count."""

    memory_type: str
    pim_units: int
    devices: int
    #: a head on the verifier's devices (this architecture is the verifier's; formulations/drafter_kinds.md)
    colocated: bool = False

    def label(self) -> str:
        return f"{self.memory_type}-k{self.pim_units}-x{self.devices}" + ("-on-verifier" if self.colocated else "")

    @property
    def own_devices(self) -> int:
        """Devices this architecture adds to the design's count and the device budget: none for a head on the
        verifier's devices ([HEAD-2])."""
        return 0 if self.colocated else self.devices


class StrictModel(BaseModel):
    """The base of every input schema (designs, scenarios, mixes): frozen; an unknown field, or `true`/`false`
    where a number belongs, is an error naming the field."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    @model_validator(mode="before")
    @classmethod
    def _no_bool_numbers(cls, data):
        return reject_bool_numbers(cls, data)


class Placement(StrictModel):
    """Where one operator runs and where its tensor lives: the host, or PIM on `share` of the model's
    `share_levels` PIM slots; `layout` defaults to "normal" on the host and is "pim" on PIM."""

    engine: Engine
    share: int = Field(default=0, ge=0, le=MAX_SHARE_LEVELS)  # PIM units used, in 1/share_levels of the model's PIM units
    layout: Layout = "normal"

    @model_validator(mode="before")
    @classmethod
    def _default_layout(cls, data):
        if isinstance(data, dict) and data.get("engine") == "pim" and "layout" not in data:
            data = {**data, "layout": "pim"}
        return data

    @model_validator(mode="after")
    def _pim_layout(self) -> Placement:
        if (self.engine == "pim") != (self.layout == "pim"):
            raise ValueError(f"layout: '{self.layout}' does not go with engine '{self.engine}' (PIM operators "
                             "keep their tensor in PIM units; host operators in normal units or spread)")
        return self

    @property
    def key(self) -> tuple[str, int, str]:
        """(engine, share, layout) with share 0 on the host: the placement's identity in cost tables."""
        return (self.engine, self.share if self.engine == "pim" else 0, self.layout)


HOST = Placement(engine="host", share=0)
HOST_SPREAD = Placement(engine="host", share=0, layout="spread")


class Staging(StrictModel):
    """Staged drafting: a cheaper draft2 model proposes `draft_length` tokens that the drafter verifies."""

    draft2: str = Field(max_length=MAX_NAME)
    draft_length: int = Field(ge=1, le=MAX_DRAFT_LENGTH)


@dataclass(frozen=True)
class DrafterChoice:
    """One drafter's speculation decisions: its draft (a chain of `draft_length` tokens, or a token tree
    given by its width profile `tree`, nodes per depth, of depth `draft_length`) and its staging."""

    draft_length: int
    staging: Staging | None = None
    tree: tuple[int, ...] | None = None

    @property
    def nodes(self) -> int:
        """Draft tokens the verifier checks for this drafter."""
        return self.draft_length if self.tree is None else sum(self.tree)


@dataclass(frozen=True)
class SpecChoice:
    """The speculation decisions of a whole design: one DrafterChoice per drafter, and the pipeline."""

    drafters: tuple[DrafterChoice, ...]
    pipeline: bool

    @property
    def gammas(self) -> tuple[int, ...]:
        return tuple(d.draft_length for d in self.drafters)

    @property
    def staging(self) -> tuple[Staging | None, ...]:
        return tuple(d.staging for d in self.drafters)

    @property
    def speculates(self) -> bool:
        """False for the verifier decoding alone (`NO_SPEC`: no drafter used, one token per pass)."""
        return bool(self.drafters)


#: Not speculating: the verifier decodes alone, one token per sequence per pass, no drafter on any device.
#: A design of it lists no drafters (`"drafters": []`); every scenario with drafters offers it
#: (formulations/speculation_rounds.md [NOSPEC]).
NO_SPEC = SpecChoice((), False)


class ModelDesign(StrictModel):
    """One model's part of a design. Drafters carry their DrafterChoice fields."""

    model: str = Field(max_length=MAX_NAME)
    memory_type: str = Field(max_length=MAX_NAME)
    pim_units: int = Field(ge=0, le=MAX_UNITS)
    devices: int = Field(ge=1, le=max(DEVICE_COUNTS))
    placement: dict[str, Placement] = Field(max_length=len(PLACEABLE_OPS))
    draft_length: int | None = Field(default=None, ge=1, le=MAX_DRAFT_LENGTH)
    staging: Staging | None = None
    # a token tree's width profile (draft_length = its depth), its nodes counted before any tree is built
    tree: tuple[int, ...] | None = Field(default=None, min_length=1, max_length=MAX_DRAFT_LENGTH)
    #: A fixed recipe's marker (FC-offload as SpecPIM ran it), never an optimizer's choice: the PIM-side bytes
    #: beyond the PIM units' capacity are kept in the normal units and moved into the PIM units over the
    #: external bus on every pass, priced by the evaluator (formulations/baselines.md SPILL-1, SPILL-2).
    #: A scenario's own space is capacity-checked and excludes it (`DesignSpace.violations`); left out of
    #: the JSON when false, so a design without it reads and writes as before.
    spill: bool = Field(default=False, strict=True)
    #: A head on the verifier's devices (its architecture is the verifier's, its tensors share their capacity,
    #: its devices are not counted again); left out of the JSON when false.
    colocated: bool = Field(default=False, strict=True)

    @model_serializer(mode="wrap")
    def _omit_no_spill(self, handler):
        data = handler(self)
        if isinstance(data, dict):
            for flag in ("spill", "colocated"):
                if not getattr(self, flag):
                    data.pop(flag, None)
        return data

    @field_validator("tree", mode="before")
    @classmethod
    def _tree_tuple(cls, v):
        # a JSON list is the profile's form (the model's before-check hands it over as a Python list, which
        # strict validation would refuse as a tuple); each entry still has to be a strict integer
        return tuple(v) if isinstance(v, list) else v

    @model_validator(mode="after")
    def _tree(self) -> ModelDesign:
        if self.tree is not None:
            if self.draft_length is not None and self.draft_length != len(self.tree):
                raise ValueError(f"tree: depth {len(self.tree)} but draft_length {self.draft_length}")
            if any(w < 1 for w in self.tree) or not self.tree:
                raise ValueError(f"tree: a width profile is a non-empty list of positive node counts, got "
                                 f"{list(self.tree)}")
            if sum(self.tree) > MAX_TREE_NODES:
                raise ValueError(f"tree: {sum(self.tree):,} nodes, more than the {MAX_TREE_NODES} a token tree may "
                                 "have (tree.max_nodes)")
            if self.staging is not None:
                raise ValueError("tree: a token tree is not staged (staging drafts chains)")
        return self

    @property
    def arch(self) -> ArchConfig:
        return ArchConfig(self.memory_type, self.pim_units, self.devices, self.colocated)

    @property
    def choice(self) -> DrafterChoice | None:
        """The drafter's speculation decisions (None for the verifier)."""
        if self.draft_length is None and self.tree is None:
            return None
        depth = len(self.tree) if self.tree is not None else self.draft_length
        return DrafterChoice(depth, self.staging, self.tree)


class Design(StrictModel):
    pipeline: bool = False
    verifier: ModelDesign
    drafters: list[ModelDesign] = Field(default_factory=list, max_length=MAX_DRAFTERS)

    @model_validator(mode="after")
    def _verifier_does_not_draft(self) -> Design:
        v = self.verifier
        for field in ("draft_length", "staging", "tree"):
            if getattr(v, field) is not None:
                raise ValueError(f"verifier.{field}: belongs to drafters (the verifier checks the drafts, it does "
                                 "not draft)")
        return self

    def models(self) -> list[tuple[str, ModelDesign]]:
        """(field label, model design), verifier first: the labels name fields in errors."""
        return [("verifier", self.verifier)] + [(f"drafters[{i}]", d) for i, d in enumerate(self.drafters)]

    @property
    def choice(self) -> SpecChoice:
        """The speculation decisions of the design (drafters without a draft length count as 1)."""
        return SpecChoice(tuple(d.choice or DrafterChoice(1, d.staging) for d in self.drafters), self.pipeline)

    @classmethod
    def assemble(cls, model_names: list[str], archs: list[ArchConfig], placements: list[dict[str, Placement]],
                 choice: SpecChoice) -> Design:
        """A design from its parts: per model (verifier first) name, architecture and placement."""
        if not choice.speculates:  # [NOSPEC] the verifier alone: the drafters' parts are left out
            model_names, archs, placements = model_names[:1], archs[:1], placements[:1]
        models = []
        for j, (name, arch, place) in enumerate(zip(model_names, archs, placements, strict=True)):
            dc = choice.drafters[j - 1] if j else None
            models.append(ModelDesign(
                model=name, memory_type=arch.memory_type, pim_units=arch.pim_units, devices=arch.devices,
                placement=dict(place), draft_length=None if dc is None else dc.draft_length,
                staging=None if dc is None else dc.staging, tree=None if dc is None else dc.tree,
                colocated=arch.colocated))
        return cls(pipeline=choice.pipeline, verifier=models[0], drafters=models[1:])

    def key(self) -> str:
        return json.dumps(self.model_dump(mode="json"), sort_keys=True)

    def to_json(self) -> str:
        return json.dumps(self.model_dump(mode="json"), indent=2, sort_keys=False)


def parse_design(data: dict) -> Design:
    """A design from its JSON form, under the strict schema every command reads designs with: integers are
    JSON integers (not booleans, not 2.0) within the limits a scenario has, checked before any arithmetic."""
    if not isinstance(data, dict):
        raise ScenarioError(f"design: a design is a JSON object (a table of fields), got {type(data).__name__}")
    try:
        text = json.dumps(data)
    except (TypeError, ValueError) as exc:  # not JSON data, or an integer beyond Python's text limit
        raise ScenarioError(f"design: not a design's JSON ({exc})") from None
    try:
        return Design.model_validate_json(text, strict=True)
    except ValidationError as exc:
        msg = format_validation_error(exc, root="design")
        raise ScenarioError(msg if msg.startswith("design") else "design." + msg) from None


def load_design(path: str | Path) -> Design:
    """A design from JSON: a design itself, or any `--json` output that holds one under `design`. An
    output holding several (`baselines --json`) needs one picked by `FILE#NAME` (a baseline's name) or
    `FILE#K` (its position, from 0)."""
    pick = None
    text = str(path)
    if "#" in text and not Path(text).exists():
        text, pick = text.rsplit("#", 1)
    path = Path(text)
    data = read_data(path, "a design", syntax="JSON")
    if isinstance(data, list):
        data = _pick_design(path, data, pick)
    elif pick is not None:
        raise ScenarioError(f"{path}#{pick}: the file holds one design; drop '#{pick}'")
    if isinstance(data, dict) and "design" in data and "verifier" not in data:
        data = data["design"]  # accept `solve --json` / `evaluate --json` output directly
    return parse_design(data)


def _pick_design(path: Path, items: list, pick: str | None) -> dict:
    """One entry of a list output (`baselines --json`) by name or position."""
    names = [str(it.get("name", k)) if isinstance(it, dict) else str(k) for k, it in enumerate(items)]
    with_design = [k for k, it in enumerate(items) if isinstance(it, dict) and it.get("design") is not None]
    if pick is None:
        if len(with_design) == 1:
            return items[with_design[0]]
        raise ScenarioError(f"{path}: holds {len(with_design)} designs ({', '.join(names[k] for k in with_design)}); "
                            f"pick one with {path}#NAME or {path}#K")
    k = names.index(pick) if pick in names else int(pick) if pick.isdigit() and int(pick) < len(items) else None
    if k is None:
        raise ScenarioError(f"{path}#{pick}: no such entry (entries: {', '.join(names)})")
    if k not in with_design:
        raise ScenarioError(f"{path}#{pick}: this entry holds no design (infeasible or failed)")
    return items[k]
