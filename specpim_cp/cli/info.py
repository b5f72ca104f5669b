"""Commands `catalog` and `kernels`: the built-in data and the fitted host kernel model."""

from __future__ import annotations

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
    rows = [[h.name, h.peak_fp16_tflops, h.kernel_table, h.kernel_table_bandwidth_gbps, h.static_power_mw / 1000,
             h.link_bandwidth_gbps] for h in cat.hosts.values()]
    click.echo(table(["host", "FP16 TFLOPS", "kernel table", "table GB/s", "static W", "link GB/s"], rows))
    click.echo("")
    rows = []
    for m in cat.memories.values():
        units = m.groups * m.units_per_group
        rows.append([m.name, f"{m.groups} x {m.units_per_group}", m.group_external_bandwidth_gbps * m.groups,
                     units * m.normal_unit_capacity_mib / 1024, m.pim_unit_capacity_mib / 1024,
                     m.pim_lanes_per_unit * m.pim_lane_bandwidth_gbps, m.external_energy_pj_per_bit,
                     m.internal_energy_pj_per_bit])
    click.echo(table(["memory", "groups x units", "ext GB/s", "GiB (k=0)", "GiB/PIM unit", "PIM GB/s/unit",
                      "ext pJ/bit", "PIM pJ/bit"], rows))
    click.echo("\nRULE 2 (modelling assumption): host bandwidth = external x normal units / all units.")
    for m in list(cat.hosts.values()) + list(cat.memories.values()):
        for k, v in m.sources.items():
            click.echo(f"{m.name}.{k}: {v}")


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

COMMANDS = (catalog, kernels)
