"""Commands `catalog` and `kernels`: the built-in data and the fitted host kernel model."""

from __future__ import annotations

import json

import click

from specpim_cp.cli.common import user_errors
from specpim_cp.errors import ScenarioError


@click.group()
def catalog() -> None:
    """List the built-in catalogs."""


@catalog.command("models")
@user_errors
def catalog_models() -> None:
    """Model shapes and their sources."""
    from specpim_cp.catalog import default_catalog
    from specpim_cp.report_text import table

    cat = default_catalog()
    rows = [[m.name, m.family, m.layers, m.hidden, m.heads, m.kv_heads, m.head_dim, m.ffn, m.ffn_kind,
             "yes" if m.parallel_block else "no", m.vocab, f"{m.parameter_count() / 1e9:.2f}"]
            for m in cat.models.values()]
    click.echo(table(["model", "family", "layers", "hidden", "heads", "kv", "head", "ffn", "ffn kind",
                      "parallel", "vocab", "params (B)"], rows))
    click.echo("")
    for m in cat.models.values():
        click.echo(f"{m.name}: {m.source}")


@catalog.command("devices")
@user_errors
def catalog_devices() -> None:
    """Hosts and memory systems (PIM and normal units) with their sources."""
    from specpim_cp.catalog import default_catalog
    from specpim_cp.report_text import table

    cat = default_catalog()
    rows = [[h.name, h.peak_fp16_tflops, h.kernel_table, h.kernel_table_bandwidth_gbps, h.idle_power_mw / 1000,
             h.onchip_energy_pj_per_bit, h.link_bandwidth_gbps] for h in cat.hosts.values()]
    click.echo(table(["host", "FP16 TFLOPS", "kernel table", "table GB/s", "idle W", "on-chip pJ/bit",
                      "link GB/s"], rows))
    click.echo("")
    rows = []
    for m in cat.memories.values():
        units = m.groups * m.units_per_group
        rows.append([m.name, f"{m.groups} x {m.units_per_group}", m.units_per_channel, m.pim_arrangement,
                     m.group_external_bandwidth_gbps * m.groups, units * m.normal_unit_capacity_mib / 1024,
                     m.pim_unit_capacity_mib / 1024, m.pim_lanes_per_unit * m.pim_lane_bandwidth_gbps,
                     m.pim_efficiency, m.pim_mode_switch_ns, m.external_energy_pj_per_bit,
                     m.internal_energy_pj_per_bit])
    click.echo(table(["memory", "groups x units", "units/channel", "PIM arrangement", "ext GB/s", "GiB (k=0)",
                      "GiB/PIM unit", "PIM GB/s/unit", "PIM efficiency", "PIM kernel ns", "ext pJ/bit",
                      "PIM pJ/bit"], rows))
    click.echo("\nMemory model (a scenario's [assumptions] memory_model): time-shared by default: the host reads "
               "PIM units in normal mode, host tensors are kept in normal units or spread over every unit; "
               "\"partitioned\" is the SpecPIM authors' convention (formulations/physics.md).")
    for m in list(cat.hosts.values()) + list(cat.memories.values()):
        for k, v in m.sources.items():
            click.echo(f"{m.name}.{k}: {v}")
        for k, (lo, hi) in m.ranges.items():
            click.echo(f"{m.name}.range_{k}: {lo:g} .. {hi:g}")


@click.group()
def kernels() -> None:
    """The fitted host kernel model."""


@kernels.command("predict")
@click.option("--gpu", required=True, help="a100 | h100 | a40")
@click.option("--in-features", type=click.IntRange(1), required=True)
@click.option("--out-features", type=click.IntRange(1), required=True)
@click.option("--tokens", type=click.IntRange(1), required=True)
@click.option("--tensor-parallel", type=click.IntRange(1), default=1, show_default=True)
@user_errors
def kernels_predict(gpu: str, in_features: int, out_features: int, tokens: int, tensor_parallel: int) -> None:
    """Predicted latency (microseconds) of an FP16 linear layer."""
    from specpim_cp.kernels import predict_linear_us

    try:
        us = predict_linear_us(gpu, in_features, out_features, tokens, tensor_parallel)
    except ValueError as exc:
        raise ScenarioError(str(exc)) from None
    click.echo(f"{us:.2f}")


@kernels.command("fit-report")
@user_errors
def kernels_fit_report() -> None:
    """Leave-one-source-model-out cross-validated error of the fit, per GPU."""
    from specpim_cp.kernels import fit_report, format_fit_report

    click.echo(format_fit_report(fit_report()))



@click.command()
@click.option("--json", "as_json", is_flag=True, help="machine-readable rows")
@user_errors
def validate(as_json: bool) -> None:
    """The model next to measurements: kernels, all-reduce, GPU latency and power, PIM GEMV, Monte Carlo."""
    from specpim_cp.validate import format_validation, validation_rows

    rows = validation_rows()
    click.echo(json.dumps([r.as_dict() for r in rows], indent=2) if as_json else format_validation(rows))
    if not all(r.ok for r in rows):
        raise SystemExit(1)


COMMANDS = (catalog, kernels, validate)
