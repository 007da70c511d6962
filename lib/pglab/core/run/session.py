"""What every notebook does first: read params, pick the run id, choose the servers.

`s = session.begin(params.load(params_file), run_id)` gives the validated params, the run's raw store and the
servers (not started yet); `s.start()` starts the kit's servers, `s.close()` stops them (they are also
stopped when the kernel exits)."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any

from .. import derived, paths, replicas
from ..config import CommonParams, ParamsError, check_reference
from ..servers import servers as servers_mod
from ..servers.servers import Server
from ..store import RunStore, begin_run


@dataclass
class Session:
    params: CommonParams  # pglab.params.Params: the common keys and every study's section
    store: RunStore
    servers: list[Server] = field(default_factory=list)

    @property
    def profile(self) -> str:
        return self.params.profile

    @property
    def run_id(self) -> str:
        return self.store.run_id

    def start(self) -> list[Server]:
        return servers_mod.start_all(self.servers)

    def close(self) -> None:
        servers_mod.stop_all(self.servers)

    def override(self, servers: list[str] | None = None, **sections: dict | Any) -> Session:
        """A notebook's parameters on top of the params, before its stage runs (`Study.run` reads them from here):
        `servers`, the names of the servers to measure on (None: every server of the study; a name stands for its
        replica clusters too); per params section,
        the keys the notebook sets (a None value keeps the params' own), the section validated again by its own
        type from its params-file form (pgbench's threads 'auto' is stored as 0, which params refuse), or the
        section already made by the study's own rule (parallel_index's `with_overrides`). The run's params digest
        and params.json stay the params file's; a stage that takes overrides records what it ran with beside its
        data (ssb's facts, parallel_index's setup)."""
        if servers:
            known = {x.name: x for x in self.servers}
            # a server named once stands for all its clusters (servers.clusters: pg17 is pg17 and pg17_c2)
            bases = replicas.base_names(known)
            unknown = [n for n in servers if n not in known]
            if unknown:
                raise ValueError(f"servers {unknown} are not among this run's servers {sorted(known)}")
            wanted = set(servers)
            self.servers = [
                x
                for n in servers
                for x in [known[n], *(r for r in self.servers if r.name not in wanted and bases[r.name] == n != r.name)]
            ]
        update = {}
        for key, values in sections.items():
            section = getattr(self.params, key)
            if isinstance(values, type(section)):
                update[key] = values
                continue
            given = {k: v for k, v in values.items() if v is not None}
            if given:
                update[key] = type(section).model_validate(section.model_dump(mode="json") | given)
        if update:
            self.params = self.params.model_copy(update=update)
        return self

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def begin(p: CommonParams, run_id: str | None = None, study: str | None = None) -> Session:
    """`p`: the run's params, as `pglab.params.load` read them. `study`: the params section of the notebook's
    study ("ssb", "pgbench", ...): its servers are the run's, or the versions that section names
    (servers.for_study); None: every server of the run (the environment)."""
    check_reference(p)
    rid = begin_run(p.profile, run_id or p.run_id)
    os.environ[derived.RUN_ID_ENV] = rid  # derived tables written in this kernel name the run they came from
    check_resume(rid, p)
    store = RunStore(rid)
    store.save_json(DIGEST, {"params": effective_params(p)})  # the first notebook's; a resume was checked against it
    # in the params' own order (auto_explain.conditions, items: the order is the tables'), read back by pglab derive
    store.save_json("params.json", {"file": p.source} | p.model_dump(mode="json", exclude={"servers"}), keep_order=True)
    return Session(params=p, store=store, servers=servers_mod.for_study(p, study))


# -- resuming a run only with the params it was measured with -------------------------------------------------------

DIGEST = "params-digest.json"
_NOT_MEASURED = {"run_id", "reference", "servers.connect_timeout_s"}  # keys that do not change what is measured


def flatten(doc, prefix: str = "") -> dict[str, object]:
    out: dict[str, object] = {}
    for k, v in doc.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict) and v:
            out |= flatten(v, key + ".")
        else:
            out[key] = v
    return out


def effective_params(p: CommonParams) -> dict[str, object]:
    """Every key that shapes what a run measures, flattened ('auto_explain.run.repetitions': 10): the servers
    without their DSNs (a password never reaches data/), the file's path and the run id left out."""
    doc = p.model_dump(mode="json", exclude={"servers"})
    doc["servers"] = p.servers.model_dump(mode="json", exclude={"external"}) | {
        "external": [{"name": e.name, "allow_destructive": e.allow_destructive} for e in p.servers.external]
    }
    return {k: v for k, v in flatten(doc).items() if k not in _NOT_MEASURED}


def _recorded(run_dir) -> dict[str, object] | None:
    digest, first = run_dir / DIGEST, run_dir / "params.json"
    if digest.is_file():
        return json.loads(digest.read_text())["params"]
    if first.is_file():  # a run recorded before the digest: its params.json has no servers
        doc = {k: v for k, v in json.loads(first.read_text()).items() if k != "file"}
        return {k: v for k, v in flatten(doc).items() if k not in _NOT_MEASURED}
    return None


def check_resume(run_id: str, p: CommonParams) -> int | None:
    """None for a new run; for one already begun (a notebook recorded its params), how many measurements it holds,
    or ParamsError naming every key that differs when it was begun with other params: resuming would mix two
    settings in one run."""
    run_dir = paths.raw_dir() / run_id
    then = _recorded(run_dir)
    if then is None:
        return None
    jsonl = run_dir / "measurements.jsonl"
    kept = sum(1 for _ in jsonl.open()) if jsonl.is_file() else 0
    now = effective_params(p)
    if not any(k.startswith("servers.") for k in then):  # an old record: compare what it kept
        now = {k: v for k, v in now.items() if not k.startswith("servers.")}
    unset = "(not set)"
    # a key the record lacks that is now at its default is a kit newer than the run's, not a change
    try:
        default = effective_params(type(p)())
    except Exception:  # noqa: BLE001 - a params type without defaults for every key: no key is excused
        default = {}
    new_at_default = {k for k in now.keys() - then.keys() if k in default and default[k] == now[k]}
    differ = sorted(k for k in (then.keys() | now.keys()) - new_at_default if then.get(k, unset) != now.get(k, unset))
    if not differ:
        return kept
    shown = "; ".join(f"{k}: {then.get(k, unset)!r} then, {now.get(k, unset)!r} now" for k in differ[:8])
    more = f"; and {len(differ) - 8} more" if len(differ) > 8 else ""
    raise ParamsError(
        f"{p.source or 'params'}: run {run_id} was begun with other params ({kept} measurements kept): {shown}{more}. "
        f"Either put those keys back as they were to resume it, or start a new run: "
        f"make report PARAMS={p.source or '<file>'} RUN_ID={p.profile}-<new name>"
    )
