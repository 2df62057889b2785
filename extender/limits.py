"""Every limit and default that bounds the work one request can cause, in one place.

A scheduler extender sits on every opted-in pod's path, and kube-scheduler gives it 5 s
(`httpTimeout`) before it counts the call as failed. These bounds keep any input, however large
or odd, to an answer well inside that: past a limit the pod gets a validation message (a policy)
or the request a 4xx (the wire), never a 500 and never a stall of other workloads' pods.
"""

from __future__ import annotations

# -- policies ---------------------------------------------------------------------------------------
# The largest group a policy may declare or its StatefulSets may add up to. Kubernetes documents
# 150,000 pods per cluster; a group beyond a million pods is a typo (or an attack), never a plan.
# Decisions no longer cost more for larger groups (pods still to come are counted, not listed),
# so the limit is about catching mistakes early, with the field named.
MAX_GROUP_SIZE = 1_000_000

# An inline policy annotation (placement.extender.dev/policy). Real policies are a few hundred
# bytes; Kubernetes allows 256 KiB for all of a pod's annotations together.
MAX_POLICY_ANNOTATION_BYTES = 32 * 1024

# Nesting depth of an inline policy, counted in containers ({} alone is 1). The deepest valid
# policy, {group: {selector: {matchExpressions: [{values: [..]}]}}}, is 6.
MAX_POLICY_DEPTH = 12

# A validation message, which kube-scheduler repeats for every node of the answer: a policy with
# thousands of errors must not become a multi-gigabyte answer over 5,000 nodes.
MAX_POLICY_MESSAGE = 1024
MAX_POLICY_ERRORS = 5  # field errors listed in one message; the rest are counted

# Caps in one policy: one per topology key (node, rack, zone, region...), so a handful in practice.
# Bounded, like a cap's fraction below, so that the CRD can check a fraction with a CEL rule: the
# API server refuses a rule whose cost, estimated over the longest list and string the schema
# allows, is over its budget (an unbounded caps list made the fraction rule 11x too costly).
MAX_CAPS = 16

# A cap's fraction "p/q", in characters. Each number then has at most 18 digits, so the CRD's CEL
# rule compares them as int64; a group of at most MAX_GROUP_SIZE pods needs no finer fraction.
MAX_FRACTION_LENGTH = 20

# A spread's minDomains: no key has more domains than a cluster has nodes (MAX_CANDIDATE_NODES).
# The dead-end analysis counts the missing domains, never lists them, so the bound is about
# catching a typo with the field named, not about cost.
MAX_MIN_DOMAINS = 65_000

# Zones one policy may name: in zones.allowed, in all of zones.fallbackGroups together, in
# zones.weights, in ordinalZones.order. Cloud regions have 3 to 6 zones and a cluster that spans
# regions a few dozen; per decision the engine walks the permitted zones, and a pod no node takes
# has its remedy tried zone by zone. A valid policy listing 5,000 zones held the cache 26.7 s.
# (A ZoneRotation's order has the same bound, extender/api/rotation.py.)
MAX_POLICY_ZONES = 64

# zones.fallbackGroups: ordered tiers (primary, secondary, ...). A decision may try each in turn.
MAX_FALLBACK_GROUPS = 8

# spread and shardAntiAffinity entries: one per topology key, as caps (MAX_CAPS); every key adds a
# column to the per-decision class table and a term to the dead-end analysis.
MAX_TOPOLOGY_RULES = 16

# group.selector: it is matched against every pod event of its namespace for every cached group
# (state/groups.py), so each part is bounded: label pairs, expressions, values in one expression.
# Real selectors name a handful of labels; at these bounds a selector is at most ~20 KB.
MAX_SELECTOR_LABELS = 16
MAX_SELECTOR_EXPRESSIONS = 8
MAX_SELECTOR_VALUES = 32
# A label value, as Kubernetes bounds it (63 characters).
MAX_LABEL_VALUE = 63

# A PlacementPolicy object's spec, in bytes of JSON, as the extender reads it: twice the inline
# annotation's (MAX_POLICY_ANNOTATION_BYTES), and room for every section at its bound at once with
# names of ordinary length (tests/extreme_policies.py: ~30 KB). The CRD bounds every list and
# string; names at their longest could pass those and not this, which the message then names.
MAX_POLICY_OBJECT_BYTES = 64 * 1024

# Remedies (engine/remedy.py): what would free a pod no node takes is tried change by change, each
# a decision; at most this many zones get a "one more node here" try (the pod's own ordinal zone
# and the zones with nodes first), and the whole search stops at the decision deadline.
MAX_REMEDY_ZONES = 8

# -- requests ---------------------------------------------------------------------------------------
# Nesting depth of a request body. A Pod as kube-scheduler sends it nests about 15 levels
# (managedFields' fieldsV1 is the deepest part); Python's decoder would give up near 1,000.
MAX_REQUEST_DEPTH = 128

# Candidate nodes in one filter/prioritize request (NodeNames, or Nodes.items). The largest
# clusters any provider supports have 65,000 nodes; kube-scheduler never sends more than it has.
MAX_CANDIDATE_NODES = 65_000

# Request body size. A full NodeList of 5,000 nodes (nodeCacheCapable: false) is about 30 MB.
DEFAULT_MAX_BODY = 128 * 1024 * 1024

# -- decisions --------------------------------------------------------------------------------------
# Wall time one decision may spend on dead-end avoidance before it falls back to the hard rules
# alone (logged, and counted in extender_decision_fallbacks_total). A tenth of kube-scheduler's
# 5 s extender timeout: no workload's policy can hold the store, and so other pods, for longer.
DEFAULT_DECISION_DEADLINE = 0.5
# In in-scheduler mode kube-scheduler waits only 100 ms for an answer (the stanza's httpTimeout,
# config/in-scheduler/scheduler-config.yaml: every other pod of the cluster waits behind that call),
# so the in-scheduler install stops decisions at under a third of it; a decision that ran out the
# call's time would fail the pod's every try. Decisions take 1-10 ms at 1,000-5,000 nodes.
IN_SCHEDULER_DECISION_DEADLINE = 0.03

# What one hold of the cache's lock may take beyond the decision deadline: the parts of a decision
# the deadline does not cut (reading the inputs, the hard rules over the candidate classes, one
# remedy try in progress when the remedy budget runs out). Held by a property over valid policies
# at every bound on the benchmark's 1,000-node cluster (tests/unit/test_extreme_policies.py).
LOCK_HOLD_MARGIN = 0.5

# How many final-count levels the dead-end analysis tries per hard spread (see
# engine/lookahead.py: the level is the emptiest domain's final count). The window of possible
# levels is about maxSkew wide, so this is only reached by pathological inputs.
MAX_SPREAD_LEVELS = 64

# -- serving ----------------------------------------------------------------------------------------
DEFAULT_LISTEN = "127.0.0.1:8888"
# connections served at once, a thread each (server/worker.py); kube-scheduler binds concurrently,
# and a Binding waits tens of ms on the API server, so binds alone held up to 7 of 8 in the e2e profile
DEFAULT_THREADS = 32
DEFAULT_TENTATIVE_TTL = 60.0

# How long a watched kind's list/watch may stay disconnected (a failed list or watch, a broken
# stream) before /readyz answers 503 naming it. A normal reconnect (a watch that timed out or
# broke, a 410 Gone's relist) connects again within the watcher's first back-off, 0.5 s, plus one
# request; a kube-apiserver restart takes 10 s or more. 5 s is well past the first and well
# short of the second, so readiness flips only when the cache really cannot follow the cluster.
MAX_CACHE_STALENESS = 5.0

# The longest pause between a kind's failed list/watch attempts (the pause doubles from 0.5 s).
# At 30 s (client-go's reflector cap) a kube-apiserver down for 15 s was seen back only 16 s
# later (attempts at 0.5, 1.5, 3.5, 7.5, 15.5, 31.5 s), the cache stale all that time; at 4 s it
# is seen within 4 s, for six cheap requests per replica every 4 s while it is down.
WATCH_RETRY_MAX = 4.0

# Seconds each watch asks the API server to keep it open (timeoutSeconds); it then resumes from
# the last resourceVersion seen (bookmarks keep that recent). The e2e compaction scenario lowers
# it so that watches resume, and meet a compacted history, within seconds.
DEFAULT_WATCH_TIMEOUT = 300
DEFAULT_COMMITTED_TTL = 120.0

# In-scheduler mode's placeable gate (server/place_gate.py): at most this many pods it lifted are
# in kube-scheduler's queue unbound at once, plus this many lifted with no place for autoscalers.
# Together they bound what a hung extender costs the cluster's other pods (docs/operations/failure-modes.md).
# 6 x the stanza's 100 ms per retry round: as much as 2 x 300 ms, and opted-in pods placed at 0.71
# of the gate floor's rate (every gate lifted at once; 12 gave 0.81); at 2 lifts, 0.41. The
# stanza can be that short because it has no bind: kube-scheduler binds to the node filter chose.
DEFAULT_PLACE_WINDOW = 6
DEFAULT_PLACE_VISIBLE = 1
# Seconds a lifted pod keeps its slot once kube-scheduler has tried it without binding it (it lost
# its place); until kube-scheduler has tried it, it keeps the slot (a partition lifts nothing more).
DEFAULT_PLACE_LIFTED_TTL = 60.0

# With mutual TLS, the client certificate name the extender admits unless told others
# (serve --tls-client-name): the name of the scheduler's certificate in the TLS install
# (Secret placement-scheduler-client-tls). Any other certificate of the same CA gets a 403.
DEFAULT_TLS_CLIENT_NAME = "placement-scheduler-client"

# Requests (filters, binds) waiting at once for the watch to show the pod they name: kube-scheduler
# sends one pod at a time, and waits are rare (the watch is usually ahead of it); a caller naming
# pods that do not exist gets no wait past this many, so it can hold at most a quarter of the
# connection threads (DEFAULT_THREADS), and each for 1 s: kube-scheduler's own requests always
# find a thread.
MAX_POD_WAITERS = 8
