"""S3's explanation of its select-only ranking, on one server: the pgbench stage's buffers experiment
(`run.Stage` is a `Buffers`; the experiment is described with the others in `run`'s docstring)."""

from __future__ import annotations

import logging
from dataclasses import replace

from ...core import replicas
from ...core.run import outcomes, schedule
from ...core.servers.db import scrub
from ...core.servers.servers import Server, matches_version
from . import prepare
from .bench import failed, scale_of
from .params import size_bytes

log = logging.getLogger(__name__)

EXP_BUFFERS = "pgbench_buffers"
BUFFERS_RESTORED = "pgbench/buffers/{server}.restored.json"  # the server's shared_buffers before and after


def _shared_buffers(srv: Server) -> str:
    """shared_buffers as the server reports it ('2MB', '2GB')."""
    with srv.connect() as conn:
        return conn.execute("SELECT current_setting('shared_buffers')").fetchone()[0]


class Buffers:
    """Small against large shared_buffers, on one server (`Stage.buffers`): its server, schedule and restarts."""

    def buffers_server(self) -> Server | None:
        """The server of the buffers experiment: params buffers.version's among pgbench's servers (null: the newest),
        its first cluster only (params servers.clusters: `pg17_c2` is a replica of pg17, not another server). None
        when there is no kit server: the kit restarts no external server."""
        bases = replicas.base_names([s.name for s in self.servers])
        kit = [s for s in self.servers if bases[s.name] == s.name and s.managed and s.install is not None]
        wanted = self.p.buffers.version
        if wanted is not None:
            kit = [s for s in kit if matches_version(s.install, wanted)]
            if not kit:
                raise ValueError(
                    f"pgbench.buffers.version {wanted}: none of this run's kit servers for pgbench "
                    f"({[s.name for s in self.servers]}) is of that version; name it in pgbench.versions"
                )
        return max(kit, key=prepare.version, default=None)

    def buffers_steps(self, server: str) -> list[schedule.Step]:
        """Per round, every shared_buffers value in shuffled order (the stage's seed), each a block: the server
        restarted with it, then per scale (shuffled too) a warm-up run and the measured run."""
        q = self.p.buffers
        shuffled = schedule.shuffler(self.p.shuffle_seed)
        steps = []
        for rnd in range(q.repetitions):
            for sb in shuffled(q.shared_buffers):
                for sc in shuffled(q.scales):
                    warm = [schedule.Step(server, sb, f"s{sc}", rnd, True, rnd)] if q.warmup_s else []
                    steps += [*warm, schedule.Step(server, sb, f"s{sc}", rnd, False, rnd)]
        return steps

    def buffers(self) -> int:
        q = self.p.buffers
        srv = self.buffers_server()
        if srv is None:
            for s in self.servers:
                outcomes.skip(self.store, EXP_BUFFERS, s.name, "an external server: the kit restarts only its own")
            return 0
        steps = self.buffers_steps(srv.name)
        errors = self._prepare(steps, EXP_BUFFERS, lambda st: scale_of(st.item))
        # the block running now (round, shared_buffers), what the server reports, the scales warmed since its restart
        state: dict = {"block": None, "shown": None, "error": None, "warmed": set(), "restarts": 0, "changed": False}

        def measure(st):
            sc = scale_of(st.item)
            base = {"scale": sc, "mode": "select-only", "clients": q.clients, "shared_buffers": st.condition}
            base["shared_buffers_bytes"] = size_bytes(st.condition)
            if (st.server, sc) in errors:
                return base | failed(errors[(st.server, sc)])
            if state["block"] != (st.round, st.condition):
                state.update(block=(st.round, st.condition), warmed=set(), shown=None)
                state["error"] = self._restart_buffers(srv, st.condition, state)
            if state["error"]:
                return base | failed(state["error"])
            prefix = f"buffers/{st.server}/{st.condition}.s{sc}"
            if not st.warmup and q.warmup_s and sc not in state["warmed"]:
                # resumed after this block's warm-up was recorded: the restart emptied the buffers, warm them again
                # (kept as a raw artefact, not recorded)
                self._timed_run(replace(st, warmup=True), sc, "select-only", q.clients, q, prefix, tag="rewarm")
            fields = self._timed_run(st, sc, "select-only", q.clients, q, prefix)
            state["warmed"].add(sc)
            return base | fields | {"shared_buffers_shown": state["shown"], "restarts": state["restarts"]}

        before = _shared_buffers(srv)
        settings = dict(srv.cluster.settings)
        done = False
        try:
            n = self._timed(EXP_BUFFERS, steps, measure, "pgbench -S, shared_buffers")
            done = True
        finally:
            if state["changed"]:
                self._restore_buffers(srv, settings, before, state, raise_errors=done)
        return n

    def _restart_buffers(self, srv: Server, value: str, state: dict) -> str | None:
        """Restart `srv` with shared_buffers `value`; the error text when it did not come back with it."""
        state["changed"] = True  # from here on the server is no longer as it was: restored at the end
        try:
            srv.restart({"shared_buffers": value})
            state["restarts"] += 1
            state["shown"] = _shared_buffers(srv)
        except Exception as e:
            return scrub(f"restart with shared_buffers {value}: {type(e).__name__}: {e}")
        if size_bytes(state["shown"]) != size_bytes(value):
            return f"restarted with shared_buffers {value}, the server reports {state['shown']}"
        return None

    def _restore_buffers(self, srv: Server, settings: dict, before: str, state: dict, raise_errors: bool) -> None:
        """The server back on the settings it ran with before the experiment (a restart), what it reports then
        kept beside the runs. Raised when the experiment itself ended well; logged when an error is on its way."""
        try:
            srv.restart(settings)
            after = _shared_buffers(srv)
        except Exception as e:
            if raise_errors:
                raise
            log.error("%s: shared_buffers not restored to %s: %s", srv.name, before, scrub(f"{type(e).__name__}: {e}"))
            return
        rel = BUFFERS_RESTORED.format(server=srv.name)
        self.store.save_json(rel, {"before": before, "after": after, "restarts": state["restarts"] + 1})
        if after != before and raise_errors:
            raise RuntimeError(f"{srv.name}: shared_buffers {after} after the buffers experiment, {before} before")
