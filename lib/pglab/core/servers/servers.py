"""The servers an experiment runs on: throwaway clusters of the installs found, and external servers.

Both answer the same calls (connect, configure, describe). The kit never starts, stops, restarts or
reconfigures an external server, and refuses destructive steps on it unless params say
`allow_destructive: true`. A database it creates on an external server is named as it is created and noted in the
run's folder (`CREATED_FILE`, where `make report`/`make experiment` point `CREATED_ENV`); when the run ends
`drop_created` drops each one, or keeps it where params say `keep_created: true`, and says which."""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

import polars as pl
import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict

from ..config import CommonParams, ExternalServer
from ..derived import NO_SERVERS_ENV
from ..installs.installs import Install, discover, downloaded, from_params
from ..replicas import base_names, replica_name, split_name
from .cluster import Cluster, InitdbOptions
from .db import connect, redact, register_secret, scrub

log = logging.getLogger(__name__)


class DestructiveStepRefused(Exception):
    pass


# where a kernel of `make report`/`make experiment` notes the databases it creates on external servers
CREATED_ENV = "PGLAB_CREATED_LOG"
CREATED_FILE = "external-created.jsonl"  # in the run's raw folder: a resumed run drops what the first one made


class ServersForbidden(RuntimeError):
    pass


def _allowed(what: str) -> None:
    reason = os.environ.get(NO_SERVERS_ENV)
    if reason:
        raise ServersForbidden(f"refusing to {what}: {NO_SERVERS_ENV} is set ({reason})")


@dataclass
class Server:
    name: str
    install: Install | None = None
    cluster: Cluster | None = None
    external: ExternalServer | None = field(default=None, repr=False)
    settings: dict = field(default_factory=dict)

    def __post_init__(self):
        if self.external is not None:
            # whatever text the kit stores or prints later goes through db.scrub, which removes it
            try:
                register_secret(conninfo_to_dict(self.external.dsn).get("password"))
            except psycopg.ProgrammingError:
                pass  # an unparseable dsn fails on connecting, with a message that does not quote it

    @property
    def kind(self) -> str:
        return "kit" if self.cluster else "external"

    @property
    def managed(self) -> bool:
        """Whether the kit created this server and may restart it or drop things in it."""
        return self.cluster is not None

    @property
    def allow_destructive(self) -> bool:
        return self.managed or bool(self.external and self.external.allow_destructive)

    def require_destructive(self, what: str) -> None:
        if not self.allow_destructive:
            raise DestructiveStepRefused(
                f"{self.name}: refusing to {what} on an external server; "
                "set allow_destructive: true for it in params to permit this"
            )

    def recreate_database(self, dbname: str) -> None:
        """Drop `dbname` if it is there and create it empty. Both are destructive steps: refused on an
        external server without allow_destructive."""
        self.require_destructive(f"drop and re-create database {dbname}")
        with self.connect() as conn:
            there = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (dbname,)).fetchone() is not None
            self.announce_created(dbname, replaced=there)
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {}").format(sql.Identifier(dbname)) + _force(conn))
            conn.execute(sql.SQL("CREATE DATABASE {} TEMPLATE template0").format(sql.Identifier(dbname)))

    def announce_created(self, dbname: str, replaced: bool = False) -> None:
        """On an external server, before creating `dbname` there: say so and what becomes of it, and note it for the
        run's end (`drop_created`). Nothing on a kit cluster: it is the kit's own."""
        if self.external is None:
            return
        noted = os.environ.get(CREATED_ENV)
        if self.external.keep_created:
            fate = "it is kept after the run (keep_created: true)"
        elif noted:
            fate = "it will be dropped when the run ends (keep_created: true keeps it)"
        else:  # a notebook run by hand: no run end to drop it at
            fate = f"it stays there (run outside make report/experiment): DROP DATABASE {dbname} removes it"
        what = "re-creating database (its contents replaced)" if replaced else "creating database"
        print(f"pglab: {what} {dbname} on external server {self.name}; {fate}", flush=True)
        log.info("%s %s on external server %s; %s", what, dbname, self.name, fate)
        if noted:
            with open(noted, "a", encoding="utf-8") as f:
                f.write(json.dumps({"server": self.name, "database": dbname}) + "\n")

    # -- lifecycle (no-ops on external servers) --------------------------------------------------------------

    def start(self) -> None:
        _allowed(f"start {self.name}")
        if self.cluster and not self.cluster.running:
            self.cluster.start(self.settings)

    def stop(self) -> None:
        if self.cluster:
            self.cluster.stop()

    def configure(self, settings: dict) -> dict:
        """Server-level settings. Returns {"status": reloaded|restarted|skipped, "reason": ...}.

        On an external server nothing is changed: the condition is recorded as skipped with the reason."""
        if self.cluster is None:
            return {"status": "skipped", "reason": "external server: the kit does not change its configuration"}
        merged = self.settings | settings
        return {"status": self.cluster.configure(merged), "reason": None}

    def reset(self) -> dict:
        """Back to the params' base settings."""
        return self.configure({})

    def restart(self, settings: dict | None = None) -> dict:
        """Stop and start again with the params' base settings plus `settings` (None: the settings it runs with),
        even where a reload would apply them: every condition of an experiment that restarts starts alike, from
        empty shared buffers and fresh processes. The same answer as `configure`; an external server is skipped."""
        if self.cluster is None:
            return {"status": "skipped", "reason": "external server: the kit does not restart it"}
        merged = self.cluster.settings if settings is None else self.cluster.applicable(self.settings | settings)
        self.cluster.validate(merged)  # before stopping: a value PostgreSQL refuses leaves the server running
        self.cluster.restart(dict(merged))
        return {"status": "restarted", "reason": None}

    # -- connecting ------------------------------------------------------------------------------------------

    def conninfo(self, dbname: str | None = None) -> str:
        """Full conninfo (may hold a password for external servers: do not store or print it)."""
        if self.cluster:
            return self.cluster.conninfo(dbname or "postgres")
        dsn = self.external.dsn
        return psycopg.conninfo.make_conninfo(dsn, dbname=dbname) if dbname else dsn

    def connect(self, dbname: str | None = None, settings: dict | None = None, **kw) -> psycopg.Connection:
        _allowed(f"connect to {self.name}")
        return connect(self.conninfo(dbname), settings=settings, **kw)

    def describe(self) -> dict:
        """What this server is, safe to store (no password)."""
        rec = {"server": self.name, "kind": self.kind}
        if self.install:
            rec |= {k: v for k, v in self.install.as_record().items() if k != "name"}
        if self.external:
            rec |= {"dsn": redact(self.external.dsn), "allow_destructive": self.external.allow_destructive}
        return rec


def select(params: CommonParams, installs: list[Install] | None = None) -> list[Server]:
    """The servers params choose (default: every install found plus every external server), not started."""
    if installs is None:
        # servers.versions: more majors, downloaded into the install cache when not there yet
        installs = discover(from_params(params.servers), versions=params.servers.versions)
    initdb = InitdbOptions(**params.initdb.model_dump())
    servers = [
        Server(name=i.name, install=i, cluster=Cluster(i, initdb=initdb), settings=dict(params.settings))
        for i in installs
    ]
    servers += [Server(name=e.name, external=e) for e in params.servers.external]
    if params.servers.use != "all":
        by_name = {s.name: s for s in servers}
        servers = [by_name[n] for n in params.servers.use]
    return servers


def matches_version(inst: Install, spec: int | str) -> bool:
    """Whether `inst` is the version a params `versions` entry names: a major (16) or an exact one (\"16.14\")."""
    if isinstance(spec, int):
        return inst.major == spec
    return f"{inst.major}.{inst.minor}" == spec


def for_study(
    params: CommonParams,
    study: str | None,
    base: list[Server] | None = None,
    fetch: Callable[[int | str], Install] | None = None,
) -> list[Server]:
    """The servers a study runs on: the run's servers (`select`), or, when the study's params section names
    versions, a server of each (one of the run's when it matches, else a downloaded build), plus for SSB every
    install with JIT (the parallel_jit mode needs one) and the external servers. `study=None`: every server
    any study of the run uses, for the environment notebook.

    When `servers.use` is a list, that list is the whole set: versions are picked among those servers only.
    `fetch` gives the install of a version the run lacks (None: `downloaded` into the cache); the time
    estimate of `make report` passes one that downloads nothing, to count the servers the same way.

    With `servers.clusters` N > 1 every kit server comes N times, each its own cluster (`with_replicas`)."""
    base = select(params) if base is None else base
    fetch = fetch or downloaded
    chosen = _chosen(params, study, base, fetch)
    # a study section's own `clusters` (e.g. auto_explain.clusters) over servers.clusters
    own = getattr(getattr(params, study, None), "clusters", None) if study else None
    return _jit_only_clusters(params, study, chosen, with_replicas(chosen, own or params.servers.clusters))


def _jit_only_clusters(params: CommonParams, study: str | None, chosen: list[Server], out: list[Server]):
    """SSB's servers added for their JIT only (`jit_installs`, not among its versions) on `jit_clusters` of the
    run's clusters: their block at a larger scale (ssb.jit_sf) costs a load and its rounds per cluster."""
    section = getattr(params, study, None) if study else None
    keep, versions = getattr(section, "jit_clusters", None), getattr(section, "versions", None)
    if not keep or not versions:
        return out
    downloads = getattr(section, "builds", "any") == "download"  # then a version is a download, never this
    only = {
        s.name
        for s in chosen
        if s.install
        and s.install.jit
        and (downloads and s.install.source != "download" or not any(matches_version(s.install, v) for v in versions))
    }
    return [s for s in out if not (split_name(s.name)[0] in only and split_name(s.name)[1] > keep)]


def with_replicas(servers: list[Server], clusters: int) -> list[Server]:
    """Every kit server followed by its clusters 2..N (`replicas.replica_name`: pg17, pg17_c2, ...), each its
    own initdb, data directory, port and socket, with the same install, initdb options and settings; an
    external server once (the kit makes no cluster of it)."""
    if clusters <= 1 or any(b != n for n, b in base_names([s.name for s in servers]).items()):
        return servers  # one cluster each, or the replicas are there already
    out: list[Server] = []
    for s in servers:
        out.append(s)
        if s.cluster is None:
            continue
        for k in range(2, clusters + 1):
            name = replica_name(s.name, k)
            cluster = Cluster(s.install, name=name, initdb=s.cluster.initdb_options)
            out.append(Server(name=name, install=s.install, cluster=cluster, settings=dict(s.settings)))
    return out


def _chosen(
    params: CommonParams, study: str | None, base: list[Server], fetch: Callable[[int | str], Install]
) -> list[Server]:
    if study is None:
        out = {s.name: s for s in base}
        for name in type(params).SECTIONS:
            out |= {s.name: s for s in _chosen(params, name, base, fetch)}
        return list(out.values())
    # an install params keep to some studies (servers.installs[].studies) takes no part in the others
    kept = {i.name: i.studies for i in params.servers.installs if i.studies is not None}
    base = [s for s in base if s.name not in kept or study in kept[s.name]]
    # a study section that names the versions it compares (params: `<section>.versions`: ssb, pgbench)
    section = getattr(params, study, None)
    versions = getattr(section, "versions", None)
    if not versions:
        return base
    kit = [s for s in base if s.install]
    chosen: dict[str, Server] = {}
    initdb = InitdbOptions(**params.initdb.model_dump())
    # builds: download: every version from the npm packages even where an install of that major is at hand
    pool = [s for s in kit if getattr(section, "builds", "any") == "any" or s.install.source == "download"]
    for spec in versions:
        match = next((s for s in pool if matches_version(s.install, spec)), None)
        if match is None and params.servers.use == "all":
            inst = fetch(spec)
            name = inst.name if inst.name not in {s.name for s in base} else f"pg{inst.major}.{inst.minor}"
            inst = replace(inst, name=name)
            match = Server(
                name=name, install=inst, cluster=Cluster(inst, initdb=initdb), settings=dict(params.settings)
            )
        if match is not None:
            chosen[match.name] = match
    if getattr(section, "jit_installs", False):  # ssb: the parallel_jit mode needs an install with JIT
        chosen |= {s.name: s for s in kit if s.install.jit and s.name not in chosen}
    chosen |= {s.name: s for s in base if s.external}
    return list(chosen.values())


def _force(conn: psycopg.Connection) -> sql.Composable:
    # WITH (FORCE) ends sessions still connected to the database; PostgreSQL 13+ only
    return sql.SQL(" WITH (FORCE)") if conn.info.server_version >= 130000 else sql.SQL("")


def external_notice(params: CommonParams) -> list[str]:
    """What a run may create on each external server it uses, said before it starts."""
    out = []
    for e in params.servers.external:
        if params.servers.use != "all" and e.name not in params.servers.use:
            continue
        if not e.allow_destructive:
            out.append(f"external server {e.name}: nothing is created or dropped there (allow_destructive: false)")
        elif e.keep_created:
            out.append(
                f"external server {e.name}: the databases the run creates there are named as they are created "
                "and kept after the run (keep_created: true)"
            )
        else:
            out.append(
                f"external server {e.name}: the databases the run creates there are named as they are created "
                "and dropped when the run ends (keep_created: true keeps them)"
            )
    return out


def drop_created(external: list[ExternalServer], noted: Path) -> list[str]:
    """At the end of a run: each database noted in `noted` (`announce_created`) dropped, or kept where its server
    says keep_created; one line each, with its size. The file is then removed, or keeps the ones a drop failed for
    (a resumed run tries them again)."""
    try:
        lines = noted.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return []
    created = list(dict.fromkeys((r["server"], r["database"]) for r in map(json.loads, filter(None, lines))))
    by_name = {e.name: e for e in external}
    said, failed = [], []
    for name, dbname in created:
        ext = by_name.get(name)
        if ext is None:  # params changed between runs: the server is not known any more
            said.append(f"database {dbname} on external server {name} is left: the params no longer name {name}")
            continue
        try:
            with Server(name=name, external=ext).connect() as conn:
                row = conn.execute("SELECT pg_database_size(%s)", (dbname,)).fetchone()
                if row is None or row[0] is None:
                    continue  # gone already (dropped by hand)
                size = f"{row[0] / 1e6:.0f} MB" if row[0] >= 1e6 else f"{row[0] / 1e3:.0f} kB"
                if ext.keep_created:
                    said.append(
                        f"kept database {dbname} ({size}) on external server {name} (keep_created: true); "
                        f"DROP DATABASE {dbname} removes it"
                    )
                    continue
                conn.execute(sql.SQL("DROP DATABASE {}").format(sql.Identifier(dbname)) + _force(conn))
                said.append(f"dropped database {dbname} ({size}) on external server {name}: this run created it")
        except Exception as ex:  # the server gone or the database in use: said, and tried again by a resume
            failed.append(json.dumps({"server": name, "database": dbname}))
            said.append(
                f"could not drop database {dbname} on external server {name} ({scrub(str(ex)).strip()}); "
                f"DROP DATABASE {dbname} removes it"
            )
    if failed:
        noted.write_text("\n".join(failed) + "\n", encoding="utf-8")
    else:
        noted.unlink()
    return said


def start_all(servers: list[Server]) -> list[Server]:
    for s in servers:
        s.start()
    return servers


def stop_all(servers: list[Server]) -> None:
    for s in servers:
        s.stop()


class Connections:
    """One open connection per (server, condition), reused across an experiment's interleaved repetitions:
    connecting anew for every step would add connection set-up to the work around each timing and start
    every repetition with a cold backend (catalog caches)."""

    def __init__(self, servers: dict[str, Server], dbname: str):
        self.servers, self.dbname, self.open = servers, dbname, {}

    def get(self, server: str, condition: str, settings: dict | None = None):
        conn = self.open.get((server, condition))
        if conn is None or conn.closed:
            conn = self.servers[server].connect(self.dbname, settings=settings)
            self.open[(server, condition)] = conn
        return conn

    def close(self) -> None:
        for c in self.open.values():
            c.close()
        self.open.clear()


def with_external_versions(servers_table: pl.DataFrame) -> pl.DataFrame:
    """The environment's servers table with `source`, `major` and `minor` for every server: an external server
    has no install to take them from, so its source is "external" and its version the one it reports."""
    df = servers_table
    missing = [c for c in ("source", "major", "minor") if c not in df.columns]
    df = df.with_columns([pl.lit(None, dtype=pl.Int64 if c == "major" else pl.String).alias(c) for c in missing])
    return df.with_columns(
        source=pl.col("source").fill_null(pl.col("kind")),
        major=pl.col("major").fill_null(pl.col("version_num") // 10000),
        minor=pl.col("minor").cast(pl.String).fill_null((pl.col("version_num") % 10000).cast(pl.String)),
    )
