"""Start-up errors: one line on stderr and a documented exit code, never a traceback.

Exit codes (docs/operating.md, "Exit codes"):
  0  done (or stopped by a signal after draining)
  1  a failure at run time (a worker thread failed; a `validate` check failed)
  2  a bad setting or invocation, found before any work started
  3  the Kafka cluster could not be reached in time by a command that needs it now
     (`produce`, `replay`, `validate`); `run` keeps retrying instead
"""

from __future__ import annotations

import argparse
import sys
from typing import NoReturn

from worker.config.load import env_var_for
from worker.errors import RibbonError

EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_UNREACHABLE = 3


class StartupError(RibbonError):
    """A start-up failure outside settings validation; str() is one line naming the setting and its variable."""

    def __init__(self, setting: str | None, message: str, allowed: str = "", exit_code: int = EXIT_USAGE):
        self.setting, self.message, self.allowed, self.exit_code = setting, message, allowed, exit_code
        super().__init__(str(self))

    def __str__(self) -> str:
        if self.setting:
            line = f"setting {self.setting} ({env_var_for(self.setting)}): {self.message}"
        else:
            line = self.message
        if self.allowed:
            line += f"; allowed: {self.allowed}"
        return " ".join(line.split())


class OneLineParser(argparse.ArgumentParser):
    """argparse, but a usage error is one line (`ribbon run: error: ...; see --help`), exit 2."""

    def error(self, message: str) -> NoReturn:
        print(f"{self.prog}: error: {message} (see {self.prog} --help)", file=sys.stderr)
        raise SystemExit(EXIT_USAGE)


def fail(message: str, code: int = EXIT_USAGE) -> NoReturn:
    """Print `ribbon: error: <message>` as one line and exit with `code`."""
    print("ribbon: error: " + " ".join(str(message).split()), file=sys.stderr)
    raise SystemExit(code)
