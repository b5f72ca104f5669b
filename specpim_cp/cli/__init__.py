"""`specpim-cp`: a thin click layer over the Python API. Nothing below the CLI prints.

One module per command group (`catalogs`, `info`, `pricing`, `optimize`, `mix`, `batch`, `show`, `trees`),
all on `common` (user errors as one line and exit code 2, scenario loading, atomic output); none imports
another. Click's own usage errors (unknown option, missing argument, bad value) are one `error:` line with
exit code 2 too.
"""

from __future__ import annotations

import click

from specpim_cp.cli import batch, catalogs, info, mix, optimize, pricing, show, trees
from specpim_cp.cli.common import OptionValueError, one_line


class _UsageError(click.ClickException):
    """A click usage error shown as one line, like every other user error."""

    exit_code = 2

    def show(self, file=None) -> None:
        click.echo(f"error: {self.message}", err=True)


def _one_line(exc: click.ClickException) -> click.ClickException:
    if isinstance(exc, click.exceptions.NoArgsIsHelpError):  # a group without its command: the help
        click.echo(exc.ctx.get_help())
        return click.exceptions.Exit(0)
    msg = one_line(exc.format_message()).rstrip(".")
    if isinstance(exc, OptionValueError):  # names the option and its limit, like BatchOptions.validate
        return _UsageError(msg)
    ctx = getattr(exc, "ctx", None)
    if ctx is not None:
        msg += f" (see '{ctx.command_path} --help')"
    return _UsageError(msg)


class OneLineErrors(click.Group):
    """The root group: every click exception from parsing or invoking becomes one `error:` line, exit 2."""

    def make_context(self, *args, **kwargs) -> click.Context:
        try:
            return super().make_context(*args, **kwargs)
        except click.ClickException as exc:
            raise _one_line(exc) from None

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except _UsageError:
            raise
        except click.ClickException as exc:
            raise _one_line(exc) from None


@click.group(cls=OneLineErrors, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="specpim-cp")
def main() -> None:
    """Exact (CP-SAT) design-space exploration for speculative LLM inference on PIM systems."""


for _module in (catalogs, info, pricing, optimize, mix, batch, show, trees):
    for _cmd in _module.COMMANDS:
        main.add_command(_cmd)

__all__ = ["main"]
