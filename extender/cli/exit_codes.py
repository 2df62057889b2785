"""What an operator command's exit status means, the same for every command, like kubectl's.

A script can tell "the cluster breaks a rule" (1) from "the command could not look" (3): audit in
a CronJob alerts on the first and retries the second. The table is rendered into the CLI
reference (docs/reference/cli.md) from EXIT_CODES, so the documentation cannot drift from it.
"""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    OK = 0
    # The cluster, the plan or the policy is not what was asked: audit found a broken rule, a plan
    # is not feasible or not safe, check found an invalid policy.
    FINDING = 1
    # The command line is wrong (argparse's own code): unknown flag, missing argument.
    USAGE = 2
    # The command could not run: no kubeconfig, the API server unreachable or timing out, access
    # forbidden, the named object not found, a file unreadable. Nothing was judged.
    COULD_NOT_RUN = 3
    # Interrupted (Ctrl-C), as a shell reports SIGINT.
    INTERRUPTED = 130
    # The reader of its output went away (`... | head`), as a shell reports SIGPIPE; quietly.
    CLOSED_PIPE = 141


EXIT_CODES: dict[ExitCode, str] = {
    ExitCode.OK: "done; for audit, plan and check: nothing wrong found",
    ExitCode.FINDING: "audit found a broken rule or an invalid policy; a plan is not feasible (or, for "
    "`plan drain`, some node is not safe to drain); check found an invalid policy",
    ExitCode.USAGE: "the command line is wrong (an unknown flag, a missing argument)",
    ExitCode.COULD_NOT_RUN: "could not run: no kubeconfig, the API server unreachable, access forbidden, the "
    "named object not found, or a file unreadable; nothing was judged",
    ExitCode.INTERRUPTED: "interrupted (Ctrl-C)",
    ExitCode.CLOSED_PIPE: "the reader of the output went away (`| head`); nothing more is printed",
}
