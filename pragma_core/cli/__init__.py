"""The ``pragma`` command line: the group, its entry point ``main``, and the commands on it.

Bad input (a task file, a ``--set`` value, a plugin in strict mode) prints one line on standard
error and exits with code 2; ``--debug`` (or ``PRAGMA_DEBUG=1``) shows the traceback instead.

Each command lives in a module of its own (:mod:`.tasks`, :mod:`.verify`, :mod:`.optimize`...);
the options several commands take are declared once, in :mod:`.options`, with their defaults read
from the settings classes.
"""

from __future__ import annotations

import sys
import warnings

import click

from .._version import __version__
from ..errors import PragmaError
from ._audit import audit_command
from ._bench import bench_command, compare_command, report_command
from ._knowledge import knowledge_group
from ._optimize import optimize_command, trace_command
from ._output import EXIT_BAD_INPUT
from ._plugins import plugins_command
from ._profile import profile_command
from ._roofline import roofline_command
from ._tasks import tasks_command
from ._verify import verify_command

__all__ = ["cli", "main"]

_debug = False


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="pragma")
@click.option("--debug", is_flag=True, envvar="PRAGMA_DEBUG", help="Show tracebacks for errors.")
def cli(debug: bool) -> None:
    """Make compute kernels faster with a closed loop of agents and hardware profilers.

    A task is a PyTorch reference program in KernelBench format; see `pragma tasks`.
    """
    global _debug
    _debug = debug


for _command in (
    plugins_command,
    tasks_command,
    verify_command,
    audit_command,
    roofline_command,
    profile_command,
    optimize_command,
    trace_command,
    knowledge_group,
    bench_command,
    report_command,
    compare_command,
):
    cli.add_command(_command)


def main(argv: list[str] | None = None) -> None:
    """Entry point of the ``pragma`` script."""
    # torch's warnings about a task's own code (its arguments, its modules) are not pragma's to say:
    # the task's analysis keeps the ones its trace raised (task.json in every run folder)
    warnings.filterwarnings("ignore", category=UserWarning, module=r"torch(\.|$)")
    try:
        cli.main(args=argv, prog_name="pragma", standalone_mode=False)
    except PragmaError as error:
        if _debug:
            raise
        click.echo(f"pragma: error: {error}", err=True)
        sys.exit(EXIT_BAD_INPUT)
    except click.exceptions.Exit as done:
        sys.exit(done.exit_code)
    except click.ClickException as error:
        error.show()
        sys.exit(error.exit_code)
    except click.Abort:
        click.echo("Aborted.", err=True)
        sys.exit(1)
