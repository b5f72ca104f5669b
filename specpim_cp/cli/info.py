"""Commands `kernels` and `validate`: the host kernel model and the model next to measurements."""

from __future__ import annotations

import json

import click

from specpim_cp.api.limits import MAX_FEATURES, MAX_TENSOR_PARALLEL, MAX_TOKENS
from specpim_cp.cli.common import catalog_option, user_catalog, user_errors


@click.group()
def kernels() -> None:
    """The fitted host kernel model."""


@kernels.command("predict")
@click.option("--gpu", required=True,
              help="a measured table (a100, h100, a40) or a catalog host (a100-40gb, h100-sxm, mi100, ...)")
@click.option("--in-features", type=click.IntRange(1, MAX_FEATURES), required=True,
              help=f"the layer's input width, 1 .. {MAX_FEATURES:,}")
@click.option("--out-features", type=click.IntRange(1, MAX_FEATURES), required=True,
              help=f"the layer's output width (the whole layer), 1 .. {MAX_FEATURES:,}")
@click.option("--tokens", type=click.IntRange(1, MAX_TOKENS), required=True,
              help=f"tokens of the pass, 1 .. {MAX_TOKENS:,}")
@click.option("--tensor-parallel", type=click.IntRange(1, MAX_TENSOR_PARALLEL), default=1, show_default=True,
              help=f"GPUs sharing the output columns, 1 .. {MAX_TENSOR_PARALLEL}")
@catalog_option
@user_errors
def kernels_predict(gpu: str, in_features: int, out_features: int, tokens: int, tensor_parallel: int,
                    catalog_files: tuple[str, ...]) -> None:
    """Predicted latency (microseconds) of an FP16 linear layer.

    A table name predicts at the measured GPU's bandwidth; a host name uses the host's kernel model (its
    fitted table, or the derated roofline at its kernel_table_bandwidth_gbps for a host without
    measurements).
    """
    from specpim_cp.api import kernel_latency_us

    us = kernel_latency_us(gpu, in_features, out_features, tokens, tensor_parallel, user_catalog(catalog_files))
    click.echo(f"{us:.2f}")


@kernels.command("fit-report")
@user_errors
def kernels_fit_report() -> None:
    """Leave-one-source-model-out cross-validated error of the fit, per GPU."""
    from specpim_cp.api.tools import fit_report, format_fit_report

    click.echo(format_fit_report(fit_report()))



@click.command()
@click.option("--json", "as_json", is_flag=True, help="machine-readable rows")
@catalog_option
@user_errors
def validate(as_json: bool, catalog_files: tuple[str, ...]) -> None:
    """The model next to measurements: kernels, all-reduce, GPU latency and power, PIM GEMV, Monte Carlo, drafter kinds.

    With --catalog the built-in hosts and memories the checks use may carry your constants.
    """
    from specpim_cp.api.tools import format_validation, validation_rows

    rows = validation_rows(user_catalog(catalog_files))
    click.echo(json.dumps([r.as_dict() for r in rows], indent=2) if as_json else format_validation(rows))
    if not all(r.ok or r.miss for r in rows):  # a row that misses for its stated reason is reported, not failed
        raise SystemExit(1)


COMMANDS = (kernels, validate)
