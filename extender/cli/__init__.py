"""The command line: `python -m extender ...` (`commands`) and its kubectl plugin spelling
(`kubectl_plugin`). The top layer: it parses arguments and calls the server, the operator
commands and the local cluster; nothing imports it."""

from .commands import main

__all__ = ["main"]
