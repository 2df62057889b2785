"""The command line: `python -m extender ...` (`commands`) and its kubectl plugin spelling
(`kubectl_plugin`). The top layer: it parses arguments and calls the server, the operator
commands and the local cluster; nothing imports it.

`commands` holds the top-level parser and `main`; each command group is a module holding its
argparse registration and its handlers, so the layout reads as the commands do: `serve`,
`in_cluster` (deletion-costs, label-namespace), `schemas` (schema, crd), `dev`, `native`
(translate, ab), `inspection` (explain, audit), `workloads` (adopt, retire), `rotation`
(rotation export), `planning` (plan, check); `common` is what several of them share."""

from .commands import main

__all__ = ["main"]
