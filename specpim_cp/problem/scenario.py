"""Scenario (what is asked): schema, TOML/JSON loading and validation (a Design, the answer, is in design.py).

Every validation error names the field (`drafters[1].devices: ...`). Loading resolves catalog names,
so a loaded Scenario carries the ModelSpecs it needs and downstream code never looks names up again.
A scenario's `catalog` names user catalog files (a path relative to the scenario's folder, or a list);
`scenario_catalog` is the catalog it is priced with, and its inputs hash covers those files' content.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

from pydantic import Field, ValidationError, field_validator, model_validator

from specpim_cp.catalog import Catalog, file_digest, load_catalog
from specpim_cp.catalog.tokenizers import same_tokenizer
from specpim_cp.errors import ScenarioError, format_validation_error
from specpim_cp.files import name_problem, read_table
from specpim_cp.problem.builtin_sets import resolve_scenario_path
from specpim_cp.problem.design import (
    DEVICE_COUNTS,
    MAX_DRAFT_LENGTH,
    MAX_DRAFTERS,
    MAX_SHARE_LEVELS,
    MAX_TREE_NODES,
    StrictModel,
)
from specpim_cp.problem.edge import check_edge, edge_defaults_dropped
from specpim_cp.problem.heads import (
    HEAD_KINDS,
    HeadFields,
    check_head_entry,
    head_name,
    needs_hidden_states,
    with_heads,
)
from specpim_cp.problem.trees import MAX_RANKS, check_positional


class StagingSpace(StrictModel):
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


class ModelEntry(StrictModel):
    model: str
    devices: int | None = None  # None: chosen by the optimizer under `device_budget`
    max_devices: int = Field(default=8, ge=1)
    # the decoder layers' weight precision (catalog/precision.py: bits per weight with scales)
    weights: Literal["fp16", "int8", "int4"] = "fp16"
    # shared_device: the channel groups of the device this model takes (None: chosen by the optimizer)
    channels: int | None = Field(default=None, ge=1)


class TreeSpace(StrictModel):
    """Token trees for one drafter (formulations/speculation_rounds.md, [TREE]): besides chains, every
    width profile with at most `max_nodes` nodes, `max_children` candidates per node and depth up to
    the scenario's max_draft_length, each drafted as its top-ranked tree (the exact model is offered
    those no other profile dominates, [TREE-4])."""

    max_nodes: int = Field(default=8, ge=1, le=MAX_TREE_NODES)
    # the catalog's conditional tail (Sequoia's measured vector) reaches rank 8; beyond, give acceptance_vector.
    # Medusa and EAGLE load ranks 0..9 only (a top-k of 10): max_children <= 10 keeps every tree exportable
    max_children: int = Field(default=4, ge=1, le=16)
    # marginal P(the rank-r candidate is accepted), as measured: any order (ranked by probability, [TREE-5]),
    # any length (the max_children likeliest ranks are used; missing ranks: 0)
    acceptance_vector: list[float] | None = Field(default=None, max_length=MAX_RANKS)

    @model_validator(mode="after")
    def _vector(self) -> TreeSpace:
        v = self.acceptance_vector
        if v is None:
            return self
        if not v:
            raise ValueError("acceptance_vector: needs at least one entry (P(rank 1 accepted))")
        check_positional(v, "acceptance_vector", ranked=False)
        return self


class DrafterEntry(ModelEntry):
    acceptance: float | None = Field(default=None, ge=0.0, lt=1.0)
    staging: StagingSpace | None = None
    tree: TreeSpace | None = None
    # a drafter model (a catalog model on devices of its own) or a head derived from the verifier
    # (formulations/drafter_kinds.md); a head's `model` is named for it (`heads.head_name`)
    kind: Literal["model", "eagle", "mtp", "medusa", "ngram"] = "model"
    placement: Literal["free", "verifier", "own"] = "free"  # a head's devices: the verifier's, its own, or chosen
    head: HeadFields | None = None

    @model_validator(mode="after")
    def _kind(self) -> DrafterEntry:
        check_head_entry(self.kind, self.head, self.placement, self.staging is not None, self.tree is not None)
        return self

    @property
    def needs_devices(self) -> bool:
        """Whether it may take devices of its own (a drafter model, or a head not pinned to the verifier's)."""
        return self.kind != "ngram" and self.placement != "verifier"

    @property
    def owns_devices(self) -> bool:
        """Whether it takes at least one device of its own when speculating (a drafter model, or a head pinned
        to devices of its own; a head free to sit with the verifier may take none)."""
        return self.kind == "model" or (self.kind != "ngram" and self.placement == "own")

    @model_validator(mode="after")
    def _tree_acceptance(self) -> DrafterEntry:
        v = None if self.tree is None else self.tree.acceptance_vector
        if v is not None and self.acceptance is not None and max(v) != self.acceptance:
            raise ValueError(f"tree.acceptance_vector: its rank-1 entry {max(v)} (its largest) is the chain "
                             f"acceptance, but acceptance is {self.acceptance} (give one of them, or equal values)")
        return self


class Space(StrictModel):
    """Restrictions of the design space (ablations and fixed-recipe baselines)."""

    memory_type: str | None = None
    pim_units: int | None = Field(default=None, ge=0)
    mapping: Literal["free", "fc-offload", "attention-offload", "host-only"] = "free"
    pipeline: Literal["free", "on", "off"] = "free"
    draft_lengths: list[int] | None = None
    staging: Literal["free", "off"] = "free"
    trees: Literal["free", "off"] = "free"  # "off": chains only, also for drafters with a [tree] table
    # "on": every design uses its drafters (the verifier alone, formulations/speculation_rounds.md [NOSPEC], left
    # out; pipeline = "on" leaves it out too)
    speculation: Literal["free", "on"] = "free"
    share_levels: int = Field(default=4, ge=1, le=MAX_SHARE_LEVELS)


class Assumptions(StrictModel):
    """Named modelling conventions a scenario can switch (formulations/physics.md).

    memory_model: "time-shared" (default; physics.md P1: the host reads PIM units in normal mode,
    channels are shared in time, tensor layout is a decision) or "partitioned" (the SpecPIM authors'
    convention: host data only in normal units, host bandwidth = external x normal fraction).
    energy_accounting: "total" (idle power of every device for the whole round included) or "dynamic"
    (idle power excluded, the accounting most PIM papers use).
    """

    memory_model: Literal["time-shared", "partitioned"] = "time-shared"
    energy_accounting: Literal["total", "dynamic"] = "total"


class Scenario(StrictModel):
    name: str = Field(min_length=1, max_length=100)
    description: str = ""
    batch_size: int = Field(ge=1, le=512)
    prompt_tokens: int = Field(ge=1)
    generated_tokens: int = Field(ge=1)
    # "request": time to first token + generated_tokens x latency per token (formulations/prefill.md PRE-5)
    objective: Literal["latency", "energy", "edp", "request"] = "latency"
    host: str = "a100-40gb"
    # not given: the host's native memory (`HostSpec.native_memory`, set when loaded), else these two
    memory_types: list[str] = Field(default_factory=lambda: ["hbm", "gddr"], min_length=1)
    max_draft_length: int = Field(default=8, ge=1, le=MAX_DRAFT_LENGTH)
    device_budget: int | None = Field(default=None, ge=1)
    # one device for every model (formulations/edge.md [EDGE-2]): true or "channels" (each model on its own
    # slice of the channels) or "interleaved" (every model over all channels, capacity shared)
    shared_device: bool | Literal["channels", "interleaved"] = False
    verifier: ModelEntry
    drafters: list[DrafterEntry] = Field(default_factory=list, max_length=MAX_DRAFTERS)
    space: Space = Field(default_factory=Space)
    assumptions: Assumptions = Field(default_factory=Assumptions)
    # user catalog files merged over the built-in catalog, in order (`load_scenario` makes them absolute)
    catalog: list[str] = Field(default_factory=list)

    @field_validator("catalog", mode="before")
    @classmethod
    def _catalog_list(cls, v):
        if isinstance(v, str):
            return [v]
        if not isinstance(v, list) or not all(isinstance(p, str) for p in v):
            raise ValueError(f"a catalog TOML file name or a list of them, got {v!r}")
        return v

    @field_validator("catalog")
    @classmethod
    def _catalog_paths(cls, v: list[str]) -> list[str]:
        if any(not p.strip() for p in v):
            raise ValueError("an empty file name (give the path of a catalog TOML file)")
        return v

    @field_validator("name")
    @classmethod
    def _file_stem(cls, v: str) -> str:
        """The name becomes output file and folder names (batch, sweep): it must not leave its folder
        (`files.name_problem`, the rule grid and mix names share)."""
        problem = name_problem(v)
        if problem is not None:
            raise ValueError(problem)
        return v

    @model_validator(mode="before")
    @classmethod
    def _head_names(cls, data):
        """A head drafter's model is named for its kind and verifier (`heads.head_name`)."""
        if not isinstance(data, dict) or not isinstance(data.get("drafters"), list):
            return data
        verifier = data.get("verifier", {}).get("model") if isinstance(data.get("verifier"), dict) else None
        drafters = []
        for i, d in enumerate(data["drafters"]):
            if isinstance(d, dict) and d.get("kind") in HEAD_KINDS and isinstance(verifier, str):
                name = head_name(d["kind"], verifier)
                if d.get("model", name) != name:
                    raise ValueError(f"drafters[{i}].model: a {d['kind']} head is derived from the verifier; "
                                     f"leave model out (it is named '{name}')")
                d = {**d, "model": name}
            drafters.append(d)
        return {**data, "drafters": drafters}

    @model_validator(mode="after")
    def _devices(self) -> Scenario:
        entries = [("verifier", self.verifier)] + [(f"drafters[{i}]", d) for i, d in enumerate(self.drafters)]
        heads = [(i, d) for i, d in enumerate(self.drafters) if needs_hidden_states(d.kind)]
        if heads and self.space.pipeline == "on":
            i, d = heads[0]
            raise ValueError(f"space.pipeline: 'on' cannot run drafters[{i}] (a {d.kind} head): it drafts from the "
                             "verifier's hidden states of the tokens just verified, so it cannot run ahead of "
                             "verification")
        entries = [(label, e) for label, e in entries if not isinstance(e, DrafterEntry) or e.needs_devices]
        for label, e in entries:
            if e.devices is not None and e.devices not in DEVICE_COUNTS:
                raise ValueError(f"{label}.devices: must be one of {DEVICE_COUNTS}, got {e.devices}")
            if e.devices is not None and e.devices > e.max_devices:
                raise ValueError(f"{label}.max_devices: {e.max_devices} is below its devices ({e.devices})")
            if e.devices is None and self.device_budget is None and not self.shared_device:
                raise ValueError(f"{label}.devices: required unless the scenario sets device_budget")
        if not self.drafters and self.space.pipeline == "on":
            raise ValueError("space.pipeline: 'on' needs at least one drafter (the pipeline overlaps drafting "
                             "with verification)")
        if len(set(self.memory_types)) != len(self.memory_types):
            dup = next(m for m in self.memory_types if self.memory_types.count(m) > 1)
            raise ValueError(f"memory_types: '{dup}' is listed twice")
        if self.space.draft_lengths is not None:
            if len(self.space.draft_lengths) != len(self.drafters):
                raise ValueError("space.draft_lengths: needs one entry per drafter")
            for g in self.space.draft_lengths:
                if not 1 <= g <= self.max_draft_length:
                    raise ValueError(f"space.draft_lengths: {g} is outside 1..max_draft_length")
        if self.device_budget is not None:
            fixed = sum(e.devices or 1 for _, e in entries
                        if not isinstance(e, DrafterEntry) or e.kind == "model" or e.placement == "own")
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

    def hash_data(self) -> dict:
        """What identifies the scenario's inputs: its fields, with the content (not the paths) of its
        catalog files, so a changed catalog changes every hash (batch resume re-runs it)."""
        data = edge_defaults_dropped(self.model_dump(mode="json", exclude={"catalog"}))
        for d in data["drafters"]:  # a drafter model's head fields at their defaults: the hash it always had
            for key, default in (("kind", "model"), ("placement", "free"), ("head", None)):
                if d.get(key) == default:
                    d.pop(key)
        if self.catalog:
            data["catalog_sha256"] = [file_digest(p) for p in self.catalog]
        return data

    def content_hash(self) -> str:
        return hashlib.sha256(json.dumps(self.hash_data(), sort_keys=True).encode()).hexdigest()[:16]


def scenario_catalog(sc: Scenario) -> Catalog:
    """The catalog `sc` is priced with: the built-in one with its `catalog` files merged in order, and its
    heads (`heads.with_heads`)."""
    return with_heads(load_catalog(sc.catalog), sc)


def require_catalog(sc: Scenario, catalog: Catalog) -> None:
    """A scenario that names catalog files is never priced with a catalog built without them (that would
    silently use the built-in constants)."""
    missing = [p for p in sc.catalog if p not in catalog.files]
    if missing:
        raise ScenarioError(f"catalog: scenario '{sc.name}' names catalog file {missing[0]}, but it is being "
                            f"priced with a catalog without it (merged files: {', '.join(catalog.files) or 'none'}); "
                            "price it with scenario_catalog(scenario)")


def with_native_memory(sc: Scenario, catalog: Catalog) -> Scenario:
    """`sc` with memory_types = [its host's native memory] when the scenario lists none and the host names
    one (h100-sxm: hbm3); otherwise `sc` unchanged (hosts without one keep the default ["hbm", "gddr"])."""
    native = catalog.host(sc.host).native_memory
    if "memory_types" in sc.model_fields_set or not native:
        return sc
    return sc.model_copy(update={"memory_types": [native]})


def check_positions(sc: Scenario, catalog: Catalog) -> None:
    """prompt_tokens + generated_tokens fit every model's position limit (`max_position`, a config's
    max_position_embeddings; 0: none known): the verifier's and each drafter's (staged drafts included)."""
    models = [("verifier.model", sc.verifier.model)]
    for i, d in enumerate(sc.drafters):
        if d.kind != "model":
            continue  # a head has no position limit of its own
        models.append((f"drafters[{i}].model", d.model))
        models += [(f"drafters[{i}].staging.draft2[{j}]", m) for j, m in enumerate(d.staging.draft2 if d.staging
                                                                                   else ()) if m in catalog.models]
    for where, name in models:
        limit = catalog.model(name, where).max_position
        if limit and sc.max_context > limit:
            raise ScenarioError(
                f"{where}: '{name}' takes at most {limit:,} positions (its max_position), but prompt_tokens + "
                f"generated_tokens = {sc.prompt_tokens:,} + {sc.generated_tokens:,} = {sc.max_context:,}; shorten "
                "prompt_tokens or generated_tokens")


def check_scenario(sc: Scenario, catalog: Catalog) -> Scenario:
    """Checks that need the catalog: names, tokenizer families, allowed memory types, space knobs; a
    scenario without memory_types gets its host's native memory (`with_native_memory`)."""
    require_catalog(sc, catalog)
    sc = with_native_memory(sc, catalog)
    for m in sc.memory_types:
        catalog.memory(m)
    v = catalog.model(sc.verifier.model, "verifier.model")
    seen: dict[str, int] = {}
    with_heads(catalog, sc)  # every head's shape fits its verifier (one line naming the field otherwise)
    for i, d in enumerate(sc.drafters):
        if d.kind != "model":
            if d.model in seen:
                raise ScenarioError(f"drafters[{i}].kind: a second {d.kind} head on one verifier (one per kind)")
            seen[d.model] = i
            continue
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
        if not same_tokenizer(dm.tokenizer, v.tokenizer):
            raise ScenarioError(
                f"drafters[{i}].model: '{d.model}' uses the {dm.tokenizer} tokenizer but the verifier "
                f"'{v.name}' uses {v.tokenizer}; a drafter must share the verifier's tokenizer (known "
                "tokenizers and their other names: catalog tokenizers.toml)"
            )
        if d.staging is not None:
            for j, d2 in enumerate(d.staging.draft2):
                if d2 in catalog.ngrams:
                    continue
                m2 = catalog.model(d2, f"drafters[{i}].staging.draft2[{j}]")
                if not same_tokenizer(m2.tokenizer, dm.tokenizer):
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
    check_positions(sc, catalog)
    check_edge(sc, catalog)
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
    return check_scenario(sc, catalog or scenario_catalog(sc))


def with_catalog_paths(data: dict, folder: Path, extra: Sequence[str | Path]) -> dict:
    """`data` with its `catalog` paths made absolute (relative ones against the scenario's folder) and
    the `extra` files (e.g. --catalog, relative to the working directory) after them."""
    own = data.get("catalog", [])
    own = [own] if isinstance(own, str) else own
    if not isinstance(own, list) or not all(isinstance(p, str) for p in own):
        return data  # the schema names the problem
    files = [str((folder / p).absolute()) if p.strip() else p for p in own]
    files += [str(Path(p).absolute()) for p in extra]
    if not files:
        return data
    return {**data, "catalog": list(dict.fromkeys(files))}


#: The top-level tables of a catalog file (models.toml, devices.toml, acceptance.toml), none a scenario's.
CATALOG_TABLES = ("models", "ngrams", "hosts", "memories", "pairs", "families")


def read_scenario_data(path: Path, extra_catalogs: Sequence[str | Path] = ()) -> dict:
    """A scenario file's fields (TOML or JSON), not yet validated, with its `catalog` paths made absolute
    and `extra_catalogs` after them (`with_catalog_paths`)."""
    data = read_table(path, "a scenario", if_empty="the file is empty (a scenario needs name, batch_size, "
                      "prompt_tokens, generated_tokens and [verifier])")
    tables = [k for k in CATALOG_TABLES if k in data]
    if tables and "verifier" not in data:
        raise ScenarioError(f"{path}: a catalog file ([{tables[0]}]), not a scenario: name it in a scenario's "
                            "catalog = \"FILE\" or pass it with --catalog (a scenario needs name, batch_size, "
                            "prompt_tokens, generated_tokens and [verifier])")
    return with_catalog_paths(data, path.parent, extra_catalogs)


def base_scenario_file(ref: str, referrer: Path, where: str, referrer_kind: str,
                       example: str = "examples/opt-13b") -> Path:
    """The base scenario a mix or grid file names: a scenario file relative to the referring file's folder,
    else a path from the current folder or a built-in SET/NAME; else a ScenarioError that starts with
    `where` (the field naming it) and gives `example` as a SET/NAME."""
    local = referrer.parent / ref
    if local.is_file():
        return local
    try:
        return resolve_scenario_path(ref)
    except ScenarioError:
        raise ScenarioError(f"{where}: '{ref}' is no scenario file (relative to the {referrer_kind} file or the "
                            f"current folder) and no built-in SET/NAME (e.g. {example})") from None


def load_scenario(path: str | Path, catalog: Catalog | None = None,
                  extra_catalogs: Sequence[str | Path] = ()) -> Scenario:
    """A scenario file (TOML or JSON), validated against `catalog` (default: the built-in catalog with the
    scenario's own `catalog` files, then `extra_catalogs`, merged in)."""
    return parse_scenario(read_scenario_data(Path(path), extra_catalogs), catalog)
