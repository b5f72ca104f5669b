"""Command group `catalog`: list models and devices (built-in plus user files), check a user catalog,
import a Hugging Face config.json as a model entry."""

from __future__ import annotations

import click

from specpim_cp.cli.common import catalog_option, emit, user_catalog, user_errors


@click.group()
def catalog() -> None:
    """The catalogs: list them (with --catalog files merged in), check a user file, import a model."""


@catalog.command("models")
@catalog_option
@user_errors
def catalog_models(catalog_files: tuple[str, ...]) -> None:
    """Model shapes and their sources."""
    from specpim_cp.views.catalogs import model_line, models_table

    cat = user_catalog(catalog_files)
    click.echo(models_table(cat.models.values()))
    click.echo("")
    for m in cat.models.values():
        click.echo(model_line(m))
    _files_line(cat)


@catalog.command("devices")
@catalog_option
@user_errors
def catalog_devices(catalog_files: tuple[str, ...]) -> None:
    """Hosts and memory systems (PIM and normal units) with their sources."""
    from specpim_cp.views.catalogs import memories_table, memory_line
    from specpim_cp.views.tables import table

    cat = user_catalog(catalog_files)
    rows = [[h.name, h.peak_fp16_tflops, h.kernel_model, h.kernel_table_bandwidth_gbps, h.idle_power_mw / 1000,
             h.onchip_energy_pj_per_bit, h.link_bandwidth_gbps, h.native_memory or "-"] for h in cat.hosts.values()]
    click.echo(table(["host", "FP16 TFLOPS", "kernel model", "table GB/s", "idle W", "on-chip pJ/bit",
                      "link GB/s", "native memory"], rows))
    click.echo("\nA scenario naming a host with a native memory and no memory_types is priced on that memory; "
               "other hosts default to memory_types = [\"hbm\", \"gddr\"].")
    click.echo("")
    click.echo(memories_table(cat.memories.values()))
    click.echo("")
    for m in cat.memories.values():
        click.echo(memory_line(m))
    click.echo("\nMemory model (a scenario's [assumptions] memory_model): time-shared by default: the host reads "
               "PIM units in normal mode, host tensors are kept in normal units or spread over every unit; "
               "\"partitioned\" is the SpecPIM authors' convention (formulations/physics.md).")
    for m in list(cat.hosts.values()) + list(cat.memories.values()):
        for k, v in m.sources.items():
            click.echo(f"{m.name}.{k}: {v}")
        for k, (lo, hi) in m.ranges.items():
            click.echo(f"{m.name}.range_{k}: {lo:g} .. {hi:g}")
    _files_line(cat)


def _files_line(cat) -> None:
    if cat.files:
        click.echo(f"\nuser catalog files (merged in this order): {', '.join(cat.files)}")


@catalog.command("check")
@click.argument("files", nargs=-1, required=True, metavar="FILE...")
@user_errors
def catalog_check(files: tuple[str, ...]) -> None:
    """Load user catalog FILEs over the built-in catalog: what each adds or replaces, or the first error."""
    from specpim_cp.api import default_catalog

    base = default_catalog()
    cat = user_catalog(files)
    for kind, new, old in (("models", cat.models, base.models), ("ngrams", cat.ngrams, base.ngrams),
                           ("hosts", cat.hosts, base.hosts), ("memories", cat.memories, base.memories)):
        added = [n for n in new if n not in old]
        replaced = [n for n in new if n in old and new[n] != old[n]]
        if added or replaced:
            click.echo(f"{kind}: " + "; ".join(part for part in (
                f"adds {', '.join(added)}" if added else "", f"replaces {', '.join(replaced)}" if replaced else "")
                if part))
    for kind, new, old in (("acceptance pairs", cat.acceptance_pairs, base.acceptance_pairs),
                           ("acceptance families", cat.acceptance_families, base.acceptance_families)):
        changed = [k for k in new if old.get(k) != new[k]]
        if changed:
            click.echo(f"{kind}: {', '.join(changed)}")
    click.echo(f"ok: {', '.join(cat.files)}")


@catalog.command("import-hf")
@click.argument("config", metavar="CONFIG.json")
@click.option("--name", help="catalog name of the model [default: from _name_or_path, else the folder]")
@click.option("--tokenizer", help="tokenizer identity (drafters must share the verifier's) [default: the known "
                                  "tokenizer of model_type and vocab_size, padding ignored (catalog tokenizers.toml), "
                                  "else TYPE-vocabN]")
@click.option("-o", "--output", type=click.Path(dir_okay=False), help="write the TOML here [default: stdout]")
@user_errors
def catalog_import_hf(config: str, name: str | None, tokenizer: str | None, output: str | None) -> None:
    """Turn a Hugging Face CONFIG.json into a [models] entry: model_type llama (Llama 2/3), mistral, qwen2, opt,
    gpt2, and the mixtures of experts mixtral (Mixtral), qwen2_moe (Qwen2-MoE) and qwen3_moe (Qwen3-MoE).

    Every value carries `source_X` naming the config key it came from; use the file with --catalog or a
    scenario's `catalog = "FILE"`. A draft head's config (EAGLE-3 `draft_vocab_size`, DeepSeek-V3
    `num_nextn_predict_layers`, Medusa `medusa_num_heads`) becomes a scenario's [[drafters]] entry instead.
    """
    from specpim_cp.api import import_hf_toml

    _, text = import_hf_toml(config, name, tokenizer)
    emit(text.rstrip("\n"), output)


COMMANDS = (catalog,)
