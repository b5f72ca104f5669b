"""Scenario (what is asked): schema, TOML/JSON loading and validation (a Design, the answer, is in design.py).

Every validation error names the field (`drafters[1].devices: ...`). Loading resolves catalog names,
so a loaded Scenario carries the ModelSpecs it needs and downstream code never looks names up again.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Literal

import tomllib
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from specpim_cp.catalog import Catalog, default_catalog
from specpim_cp.design import DEVICE_COUNTS
from specpim_cp.errors import ScenarioError, format_validation_error


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class StagingSpace(_Strict):
    """Staged drafting options for one drafter: candidate draft2 models and their draft lengths."""

    draft2: list[str] = Field(min_length=1)
    acceptance: dict[str, float] = Field(default_factory=dict)
    max_draft_length: int = Field(default=4, ge=1, le=8)
    required: bool = False  # True: the drafter must be staged (no unstaged option)

    @field_validator("acceptance")
    @classmethod
    def _alpha_range(cls, v: dict[str, float]) -> dict[str, float]:
        for k, a in v.items():
            if not 0.0 <= a < 1.0:
                raise ValueError(f"acceptance of '{k}' must be in [0, 1), got {a}")
        return v


class ModelEntry(_Strict):
    model: str
    devices: int | None = None  # None: chosen by the optimizer under `device_budget`
    max_devices: int = 8


class DrafterEntry(ModelEntry):
    acceptance: float | None = Field(default=None, ge=0.0, lt=1.0)
    staging: StagingSpace | None = None


class Space(_Strict):
    """Restrictions of the design space (ablations and fixed-recipe baselines)."""

    memory_type: str | None = None
    pim_units: int | None = Field(default=None, ge=0)
    mapping: Literal["free", "fc-offload", "attention-offload", "host-only"] = "free"
    pipeline: Literal["free", "on", "off"] = "free"
    draft_lengths: list[int] | None = None
    staging: Literal["free", "off"] = "free"
    share_levels: int = Field(default=4, ge=1, le=8)


class Assumptions(_Strict):
    """Named modelling conventions a scenario can switch (formulations/physics.md).

    memory_model: "time-shared" (default; DESIGN.md rules 1-3: the host reads PIM units in normal mode,
    channels are shared in time, tensor layout is a decision) or "partitioned" (the SpecPIM authors'
    convention, rule 4: host data only in normal units, host bandwidth = external x normal fraction).
    energy_accounting: "total" (idle power of every device for the whole round included) or "dynamic"
    (idle power excluded, the accounting most PIM papers use).
    """

    memory_model: Literal["time-shared", "partitioned"] = "time-shared"
    energy_accounting: Literal["total", "dynamic"] = "total"


class Scenario(_Strict):
    name: str = Field(min_length=1)
    description: str = ""
    batch_size: int = Field(ge=1, le=512)
    prompt_tokens: int = Field(ge=1)
    generated_tokens: int = Field(ge=1)
    objective: Literal["latency", "energy", "edp"] = "latency"
    host: str = "a100-40gb"
    memory_types: list[str] = Field(default_factory=lambda: ["hbm", "gddr"], min_length=1)
    max_draft_length: int = Field(default=8, ge=1, le=16)
    device_budget: int | None = Field(default=None, ge=1)
    verifier: ModelEntry
    drafters: list[DrafterEntry] = Field(default_factory=list, max_length=4)
    space: Space = Field(default_factory=Space)
    assumptions: Assumptions = Field(default_factory=Assumptions)

    @model_validator(mode="after")
    def _devices(self) -> Scenario:
        entries = [("verifier", self.verifier)] + [(f"drafters[{i}]", d) for i, d in enumerate(self.drafters)]
        for label, e in entries:
            if e.devices is not None and e.devices not in DEVICE_COUNTS:
                raise ValueError(f"{label}.devices: must be one of {DEVICE_COUNTS}, got {e.devices}")
            if e.devices is None and self.device_budget is None:
                raise ValueError(f"{label}.devices: required unless the scenario sets device_budget")
        if self.space.draft_lengths is not None:
            if len(self.space.draft_lengths) != len(self.drafters):
                raise ValueError("space.draft_lengths: needs one entry per drafter")
            for g in self.space.draft_lengths:
                if not 1 <= g <= self.max_draft_length:
                    raise ValueError(f"space.draft_lengths: {g} is outside 1..max_draft_length")
        if self.device_budget is not None:
            fixed = sum(e.devices or 1 for _, e in entries)
            if fixed > self.device_budget:
                raise ValueError(f"device_budget: {self.device_budget} devices cannot give every model one")
        return self

    # -- derived quantities ------------------------------------------------------------------
    @property
    def max_context(self) -> int:
        return self.prompt_tokens + self.generated_tokens

    @property
    def average_context(self) -> int:
        """Context length seen by the average decode step (prompt + half the generation)."""
        return self.prompt_tokens + self.generated_tokens // 2

    def content_hash(self) -> str:
        return hashlib.sha256(json.dumps(self.model_dump(mode="json"), sort_keys=True).encode()).hexdigest()[:16]


def check_scenario(sc: Scenario, catalog: Catalog) -> Scenario:
    """Checks that need the catalog: names, tokenizer families, allowed memory types, space knobs."""
    catalog.host(sc.host)
    for m in sc.memory_types:
        catalog.memory(m)
    v = catalog.model(sc.verifier.model, "verifier.model")
    seen: dict[str, int] = {}
    for i, d in enumerate(sc.drafters):
        dm = catalog.model(d.model, f"drafters[{i}].model")
        if d.model in seen:
            raise ScenarioError(
                f"drafters[{i}].model: '{d.model}' duplicates drafters[{seen[d.model]}]; two copies of one drafter "
                "propose the same tokens, so their drafts are not independent")
        seen[d.model] = i
        if dm.parameter_count() >= v.parameter_count():
            raise ScenarioError(
                f"drafters[{i}].model: '{d.model}' ({dm.parameter_count() / 1e9:.2f} B parameters) is not smaller "
                f"than the verifier '{v.name}' ({v.parameter_count() / 1e9:.2f} B)")
        if dm.tokenizer != v.tokenizer:
            raise ScenarioError(
                f"drafters[{i}].model: '{d.model}' uses the {dm.tokenizer} tokenizer but the verifier "
                f"'{v.name}' uses {v.tokenizer}; a drafter must share the verifier's tokenizer"
            )
        if d.staging is not None:
            for j, d2 in enumerate(d.staging.draft2):
                if d2 in catalog.ngrams:
                    continue
                m2 = catalog.model(d2, f"drafters[{i}].staging.draft2[{j}]")
                if m2.tokenizer != dm.tokenizer:
                    raise ScenarioError(
                        f"drafters[{i}].staging.draft2[{j}]: '{d2}' does not share the drafter's tokenizer"
                    )
                if m2.parameter_count() >= dm.parameter_count():
                    raise ScenarioError(
                        f"drafters[{i}].staging.draft2[{j}]: '{d2}' is not smaller than the drafter '{dm.name}'"
                    )
            for k in d.staging.acceptance:
                if k not in d.staging.draft2:
                    raise ScenarioError(f"drafters[{i}].staging.acceptance: '{k}' is not one of draft2")
    sp = sc.space
    if sp.memory_type is not None and sp.memory_type not in sc.memory_types:
        raise ScenarioError(f"space.memory_type: '{sp.memory_type}' is not in memory_types {sc.memory_types}")
    if sp.pim_units is not None:
        for m in ([sp.memory_type] if sp.memory_type else sc.memory_types):
            if sp.pim_units > catalog.memory(m).max_pim_units:
                raise ScenarioError(
                    f"space.pim_units: {sp.pim_units} exceeds the {catalog.memory(m).max_pim_units} units "
                    f"per group of memory type '{m}'"
                )
    return sc


def parse_scenario(data: dict, catalog: Catalog | None = None) -> Scenario:
    try:
        sc = Scenario.model_validate(data)
    except ValidationError as exc:
        raise ScenarioError(format_validation_error(exc)) from None
    return check_scenario(sc, catalog or default_catalog())


def load_scenario(path: str | Path, catalog: Catalog | None = None) -> Scenario:
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise ScenarioError(f"{path}: cannot read ({exc.strerror})") from None
    try:
        data = json.loads(text) if path.suffix == ".json" else tomllib.loads(text)
    except (tomllib.TOMLDecodeError, json.JSONDecodeError) as exc:
        raise ScenarioError(f"{path}: not valid {'JSON' if path.suffix == '.json' else 'TOML'} ({exc})") from None
    return parse_scenario(data, catalog)
