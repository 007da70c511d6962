"""Text-format node lines: the name part mapped to the JSON node fields, and the cost / actual annotations.

How node lines map to the JSON fields ("Parallel " / "Async " prefixes set parallel_aware /
async_capable; names are unquoted; "schema.name" is split into schema and name like JSON's "Schema"):

    text                                         node_type          other columns
    Seq Scan on public.t t1                      Seq Scan           schema, relation, alias
    Index [Only] Scan [Backward] using i on t    Index [Only] Scan  index_name, scan_direction
    Bitmap Index Scan on i                       Bitmap Index Scan  index_name
    Nested Loop, Hash Join, Merge Join           (same)             join_type Inner
    Nested Loop|Hash|Merge <T> Join              Nested Loop, ...   join_type T (Left, Right Anti, ...)
    [Partial |Finalize ]Aggregate                Aggregate          strategy Plain, partial_mode
    ... GroupAggregate|HashAggregate|MixedAggregate  Aggregate      strategy Sorted|Hashed|Mixed
    SetOp|HashSetOp Except [All] (Intersect)     SetOp              strategy Sorted|Hashed, operation
    Insert|Update|Delete|Merge on t              ModifyTable        operation
    Foreign Scan|Insert|Update|Delete [on t]     Foreign Scan       operation Select|Insert|...
    Custom Scan (provider) [on t]                Custom Scan
    CTE Scan / WorkTable Scan on c [c1]          (same)             cte_name, alias
    Function Scan on pg_catalog.f [x]            Function Scan      function_name, schema, alias
    Subquery Scan / Values Scan on a             (same)             alias
    label lines "InitPlan 1 (returns $0)", "SubPlan 2", "CTE c"  ->  subplan_name of the node below,
                                                 parent_relationship InitPlan (also for CTE) / SubPlan
"""

from __future__ import annotations

import re

IDENT = r'(?:"(?:[^"]|"")*"|[^\s".]+)'
_TARGET = rf"(?P<obj>{IDENT}(?:\.{IDENT})?)(?: (?P<alias>{IDENT}))?"
_COSTS = (
    r"\s+\(cost=(?P<startup_cost>\d+\.\d+)\.\.(?P<total_cost>\d+\.\d+) "
    r"rows=(?P<plan_rows>\d+) width=(?P<plan_width>\d+)\)"
)
_ACTUAL = (
    r"\s+\((?:actual (?:time=(?P<t0>\d+\.\d+)\.\.(?P<t1>\d+\.\d+) )?"
    r"rows=(?P<rows>\d+(?:\.\d+)?) loops=(?P<loops>\d+)|(?P<never>never executed))\)"
)
NODE_LINE = re.compile(rf"(?P<name>.+?)(?:{_COSTS})?(?:{_ACTUAL})?")

_PLAIN = frozenset(
    "Result|ProjectSet|Append|Merge Append|Recursive Union|BitmapAnd|BitmapOr|Gather|Gather Merge|"
    "Materialize|Memoize|Sort|Incremental Sort|Group|WindowAgg|Unique|LockRows|Limit|Hash".split("|")
)
_RELATION_SCANS = "Seq Scan|Sample Scan|Bitmap Heap Scan|Tid Scan|Tid Range Scan"
# what the word after "on" names, per node type (None: only the alias is informative)
_TARGET_KIND = {
    **dict.fromkeys(_RELATION_SCANS.split("|"), "relation"),
    **dict.fromkeys(("Index Scan", "Index Only Scan", "Foreign Scan", "Custom Scan", "ModifyTable"), "relation"),
    "Function Scan": "function",
    "CTE Scan": "cte",
    "WorkTable Scan": "cte",
    "Subquery Scan": "alias",
    "Values Scan": "alias",
    "Table Function Scan": None,
    "Named Tuplestore Scan": None,
}
# scans printed as "<type> on <target>"; "Table Function Scan" before "Function Scan" in the alternation
_SCAN_TYPES = (
    f"{_RELATION_SCANS}|Subquery Scan|Table Function Scan|Function Scan|Values Scan|CTE Scan|"
    "Named Tuplestore Scan|WorkTable Scan"
)
_AGG_STRATEGY = {
    "Aggregate": "Plain",
    "GroupAggregate": "Sorted",
    "HashAggregate": "Hashed",
    "MixedAggregate": "Mixed",
}
_JOIN_TYPES = "Right Semi|Right Anti|Left|Full|Right|Semi|Anti"
_JOIN_NODE = {"Nested Loop": "Nested Loop", "Hash": "Hash Join", "Merge": "Merge Join"}


def _unquote(token: str) -> str:
    return token[1:-1].replace('""', '"') if token.startswith('"') else token


def _target(node_type: str, m: re.Match) -> dict:
    if not m["obj"]:
        return {}
    parts = [_unquote(t) for t in re.findall(IDENT, m["obj"])]
    schema, name = (parts[0], parts[1]) if len(parts) == 2 else (None, parts[0])
    qualified = f"{schema}.{name}" if schema else name
    kind = _TARGET_KIND[node_type]
    alias = _unquote(m["alias"]) if m["alias"] else name
    fields = {"alias": alias}
    if kind == "relation":
        fields.update(schema=schema, relation=qualified)
    elif kind == "function":
        fields.update(schema=schema, function_name=qualified)
    elif kind == "cte":
        fields["cte_name"] = name
    return fields


def _join(m):
    return {"node_type": _JOIN_NODE[m["kind"]], "join_type": m["jt"] or "Inner"}


def _agg(m):
    return {
        "node_type": "Aggregate",
        "strategy": _AGG_STRATEGY[m["agg"]],
        "partial_mode": m["pm"] or "Simple",
    }


def _setop(m):
    return {
        "node_type": "SetOp",
        "strategy": "Hashed" if m["op"] == "HashSetOp" else "Sorted",
        "operation": m["cmd"],
    }


def _index(m):
    return {
        "node_type": m["type"],
        "index_name": _unquote(m["index"]),
        "scan_direction": "Backward" if m["backward"] else "Forward",
        **_target(m["type"], m),
    }


def _modify(m):
    return {"node_type": "ModifyTable", "operation": m["op"], **_target("ModifyTable", m)}


def _foreign(m):
    op = "Select" if m["op"] == "Scan" else m["op"]
    return {"node_type": "Foreign Scan", "operation": op, **_target("Foreign Scan", m)}


def _scan(m):
    return {"node_type": m["type"], **_target(m["type"], m)}


_NAME_PATTERNS = [
    (
        re.compile(rf"(?P<kind>Nested Loop|Hash|Merge)(?: (?P<jt>{_JOIN_TYPES}))? Join|(?P<kind2>Nested Loop)"),
        lambda m: _join(m) if m["kind"] else {"node_type": "Nested Loop", "join_type": "Inner"},
    ),
    (
        re.compile(r"(?:(?P<pm>Partial|Finalize) )?(?P<agg>Aggregate|GroupAggregate|HashAggregate|MixedAggregate)"),
        _agg,
    ),
    (re.compile(r"(?P<op>SetOp|HashSetOp) (?P<cmd>Intersect All|Intersect|Except All|Except)"), _setop),
    (
        re.compile(
            rf"(?P<type>Index Scan|Index Only Scan)(?P<backward> Backward)? using (?P<index>{IDENT}) "
            rf"on {_TARGET}"
        ),
        _index,
    ),
    (
        re.compile(rf"Bitmap Index Scan on (?P<index>{IDENT})"),
        lambda m: {"node_type": "Bitmap Index Scan", "index_name": _unquote(m["index"])},
    ),
    (re.compile(rf"(?P<op>Insert|Update|Delete|Merge) on {_TARGET}"), _modify),
    (re.compile(rf"Foreign (?P<op>Scan|Insert|Update|Delete)(?: on {_TARGET})?"), _foreign),
    (
        re.compile(rf"Custom Scan \([^)]*\)(?: on {_TARGET})?"),
        lambda m: {"node_type": "Custom Scan", **_target("Custom Scan", m)},
    ),
    (re.compile(rf"(?P<type>{_SCAN_TYPES})(?: on {_TARGET})?"), _scan),
]


def parse_name(name: str) -> dict:
    fields = {"parallel_aware": False, "async_capable": False}
    if name.startswith("Parallel "):
        fields["parallel_aware"], name = True, name[len("Parallel ") :]
    if name.startswith("Async "):
        fields["async_capable"], name = True, name[len("Async ") :]
    if name in _PLAIN:
        return {**fields, "node_type": name}
    for pattern, build in _NAME_PATTERNS:
        if m := pattern.fullmatch(name):
            return {**fields, **build(m)}
    raise ValueError("unknown plan node type")
