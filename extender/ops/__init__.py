"""The operator commands, over the engine's exports: what a person asks of the extender.

    audit.py      is every group within its policy? (a CronJob alarm: exit 1 on a broken rule)
    explain.py    why is this pod where it is, or Pending: each node's verdict and the rule
    plan.py       what does it take to grow a group, or to drain nodes? (exit 1 when it cannot)
    translate.py  the closest native constraints for a policy (the retire path)
    adopt.py      adopt / retire: a workload onto the extender with its implied constraints, or back
    load.py       the one way they read a live cluster: the extender's own cache, listed once

They read a cluster as the extender does (state/), decide with the engine (engine/), and write
nothing but what adopt and retire write (through server/effects.py). The CLI (extender/cli/, a
module per command group) and the kubectl plugin are their front ends.
"""
