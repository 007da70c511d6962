"""What every notebook does first: read params, pick the run id, choose the servers.

`s = session.begin(params.load(params_file), run_id)` gives the validated params, the run's raw store and the
servers (not started yet); `s.start()` starts the kit's servers, `s.close()` stops them (they are also
stopped when the kernel exits)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from . import derived
from . import servers as servers_mod
from .config import CommonParams
from .servers import Server
from .store import RunStore, begin_run


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

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def begin(p: CommonParams, run_id: str | None = None, study: str | None = None) -> Session:
    """`p`: the run's params, as `pglab.params.load` read them. `study`: the params section of the notebook's
    study ("ssb", "pgbench", ...): its servers are the run's, or the versions that section names
    (servers.for_study); None: every server of the run (the environment)."""
    rid = begin_run(p.profile, run_id or p.run_id)
    os.environ[derived.RUN_ID_ENV] = rid  # derived tables written in this kernel name the run they came from
    store = RunStore(rid)
    # in the params' own order (auto_explain.conditions, items: the order is the tables'), read back by pglab derive
    store.save_json("params.json", {"file": p.source} | p.model_dump(mode="json", exclude={"servers"}), keep_order=True)
    return Session(params=p, store=store, servers=servers_mod.for_study(p, study))
