"""S3's claims and S4's scale-up scored with the one rule (`core.stats.verdicts`, docs/verdicts.md), from the paired
tables of `pgbench_paired` and the A/A noise floor: one findings row per (claim, server).

Claims are quoted as docs/studies.md states them. What S3 only charted (the cluster's `du` after the series:
its growth is guaranteed by the inserts, and `du` counted other databases and the WAL too) is shown, not
scored."""

from __future__ import annotations

import polars as pl

from ...core.stats import between_runs as br
from ...core.stats import findings as fs
from ...core.stats import noise
from ...core.stats import verdicts as V

NO_CHANGE = 0.10  # "the curve no longer falls": read as no change within ±10 % over the series
CLAIMS = {
    "no_vacuum_tps": V.Claim(
        "S3: from 8.3 on (HOT) the tps of the runs without vacuum no longer fall run after run "
        "(read: no change within ±10 % over the series)",
        V.SAME,
        margin=NO_CHANGE,
    ),
    "no_vacuum_before_hot": V.Claim(
        "S3: 7.3 and 7.4 lose tps run after run without vacuum; 8.0 does better, 8.1 and 8.2 better again", V.LOWER
    ),
    "select_only_small": V.Claim(
        "S3: at scales 1 and 10 the oldest version (7.3) has the highest select-only tps "
        "(the data fits in the OS cache, where a small shared_buffers helps)",
        V.LOWER,
    ),
    "select_only_large": V.Claim("S3: at scale 100 select-only tps rises with each version", V.HIGHER),
    # S3's explanation of the claim above, tested directly on one server (params pgbench.buffers): select-only tps
    # with the smallest shared_buffers over the largest, the databases of scales 1 and 10 in the OS cache. S3 gives
    # no size (its chart only ranks 7.3 first), so a claim of direction judged by the one rule unchanged, decided
    # here on 2026-11-26 before any run of the experiment: supported only when the whole interval of the ratio lies
    # above max(UNSIZED_MIN = 5 %, the A/A noise floor of the select-only runs); wholly above the floor but not
    # wholly above 5 %: direction only (until 7 Dec: wholly below 5 %); wholly below 5 % and not past the floor, or
    # the opposite: contradicted; a floor wider than 5 %, or an interval covering under 90 % (fewer than 5 rounds:
    # min–max of 5 covers 94 %), decides nothing.
    # No claim-specific tolerance: nothing in S3 could justify one. Testable only where the large value holds the
    # database and the small one does not (else it compares nothing of the mechanism).
    "select_only_small_buffers": V.Claim(
        "S3: with the data in the OS cache, select-only runs faster with small shared_buffers "
        "(why 7.3 led at scales 1 and 10)",
        V.HIGHER,
    ),
    "load_time": V.Claim(
        "S3: load times mostly improve with newer versions, but vary too much for a firm conclusion", V.LOWER
    ),
    "tpcb_versions": V.Claim(
        "S3: performance improved steadily with newer versions, most at the largest scale "
        "(TPC-B-like runs without vacuum)",
        V.HIGHER,
    ),
    "widest_gap": V.Claim("S3: the widest gap, 7.3 vs 9.1, is more than 3× on the mean", V.HIGHER, 3.0),
    # S4 says "about": read as ±3 points around +5 % and ±5 points around +10 %
    "scaleup_select-only": V.Claim(
        "S4: v11 gave about 5 % more reference throughput than v10 (traced to faster aggregation)", V.HIGHER, 1.05, 0.03
    ),
    "scaleup_tpcb": V.Claim(
        "S4: v11 gave about 10 % more update throughput than v10 (traced to a CLOG change)", V.HIGHER, 1.10, 0.05
    ),
}
STUDY_SCALES = (1, 10, 100)
BUFFERS_SCALES = (1, 10)  # where S3 found 7.3 ahead and gave the small shared_buffers as the reason


# The A/A control runs select-only (params pgbench.aa): its floor is select-only tps's. Load times, the TPC-B-like
# series, the no-vacuum trend and S4's TPC-B scale-up have no A/A control of their own, so where their row is
# pooled over clusters no floor gates them (rule 15: an uncertainty belongs to its quantity; a pooled interval
# carries the clusters' disagreement, and on an archived kind is no narrower than the re-run spread), and their
# evidence says so. A row of one cluster (servers.clusters: 1, an external server) has only its rounds' interval,
# which covers a re-run poorly: there select-only's floor stands in, as the nearest A/A this run has.
OWN_FLOOR_NOTE = "no A/A control of its own: no noise floor, its pooled interval carries its noise"
STAND_IN_NOTE = "no A/A control of its own and one cluster: select-only's A/A floor stands in"


def _borrowed(floor: float | None, row: dict) -> tuple[float | None, str]:
    """The floor for a quantity without an A/A control of its own (`noise.borrowed_floor`), and what its evidence
    says."""
    f, pooled = noise.borrowed_floor(floor, row.get("n_clusters"))
    if pooled:
        return None, OWN_FLOOR_NOTE
    return f, STAND_IN_NOTE if f is not None else "no A/A control of its own"


def floor_of(noise: pl.DataFrame) -> float | None:
    """The noise floor over all A/A pairs (row "all"), None when no A/A control ran: select-only tps's."""
    r = noise.filter(pl.col("server") == "all") if noise.height else noise
    return r["floor"][0] if r.height and r["floor"][0] is not None else None


def _row(finding: str, key: str, server: str, v: V.Verdict, ev: V.Evidence | None = None, study: str = "S3") -> dict:
    return V.finding_row(study, finding, CLAIMS[key], server, v, ev)


def _evidence(r: dict) -> V.Evidence:
    return V.Evidence.from_row(r, [r.get("flag")])


def _paired(paired: pl.DataFrame, what: str, group: str) -> list[dict]:
    return paired.filter((pl.col("what") == what) & (pl.col("group") == group)).sort("server").to_dicts()


def _scored(
    finding: str, key: str, rows: list[dict], floor: float | None, note: str = "", borrowed: bool = False
) -> list[dict]:
    """Findings rows of one claim; borrowed: `floor` is another quantity's (`_borrowed`)."""
    out = []
    for r in rows:
        ev = _evidence(r)
        f, said = _borrowed(floor, r) if borrowed else (floor, "")
        v = V.verdict(CLAIMS[key], ev, f)
        why = f"{v.reason} ({r['server']} over {r['baseline']}{br.on_clusters(r)}{note}{'; ' + said if said else ''})"
        out.append(_row(finding, key, r["server"], V.Verdict(v.label, why, v.needs), ev))
    return out


def _majors(servers: pl.DataFrame) -> dict[str, int]:
    return {r["server"]: r["major"] for r in servers.iter_rows(named=True) if r["major"] is not None}


def no_vacuum_rows(trend: pl.DataFrame, majors: dict[str, int], floor: float | None) -> list[dict]:
    if trend.is_empty():
        return [_row("no_vacuum_tps", "no_vacuum_tps", "all", V.not_run("the no-vacuum series did not run"))]
    out = []
    for r in trend.iter_rows(named=True):
        ev = V.Evidence(r["ratio"], r["low"], r["high"], r["n_rounds"], r["coverage"], r["method"])
        f, said = _borrowed(floor, r)
        v = V.verdict(CLAIMS["no_vacuum_tps"], ev, f)
        what = f"last over first run of the series, fitted{br.on_clusters(r)}; {said}"
        v = V.Verdict(v.label, f"{what}: {v.reason}", v.needs)
        out.append(_row(f"no_vacuum_tps_scale_{r['scale']}", "no_vacuum_tps", r["server"], v, ev))
    if majors and min(majors.values()) >= 9:
        why = V.not_testable(
            f"every server here is {min(majors.values())} or newer, all with HOT", "needs a 7.3–8.2 build"
        )
        out.append(_row("no_vacuum_before_hot", "no_vacuum_before_hot", "all", why))
    return out


def version_rows(paired: pl.DataFrame, floor: float | None, scales: list[int]) -> list[dict]:
    out = []
    for scale in STUDY_SCALES:
        finding, key = f"select_only_scale_{scale}", "select_only_small" if scale < 100 else "select_only_large"
        rows = _paired(paired, "select-only tps", f"scale={scale}")
        if scale not in scales:
            v = V.not_run(f"scale {scale} not in this profile (select-only at {scales or 'none'})")
            out.append(_row(finding, key, "all", v))
        elif not rows:
            out.append(
                _row(finding, key, "all", V.not_testable("one server: no version to compare", "needs two versions"))
            )
        else:
            note = "; the oldest here stands for 7.3; every server on the same explicit settings"
            out += _scored(finding, key, rows, floor, note)
    for what, key in (("load time", "load_time"), ("series tps", "tpcb_versions")):
        groups = sorted(set(paired.filter(pl.col("what") == what)["group"])) if paired.height else []
        for g in groups:
            out += _scored(f"{key}_{g.replace('=', '_')}", key, _paired(paired, what, g), floor, borrowed=True)
        if not groups:
            out.append(_row(key, key, "all", V.not_testable("no two versions measured", "needs two versions")))
    return out


def _turned(r: dict) -> dict:
    """A paired row read the other way round (baseline over server): the ratio and both ends inverted, the ends
    swapped. Exact for these intervals, which are symmetric on the log scale (geometric means, min–max, t)."""
    inv = {k: (1 / r[k] if r.get(k) else r.get(k)) for k in ("ratio", "low", "high", "within_low", "within_high")}
    swap = {"low": inv["high"], "high": inv["low"], "within_low": inv["within_high"], "within_high": inv["within_low"]}
    return r | inv | swap | {"server": r["baseline"], "baseline": r["server"]}


def eleven_over_ten(rows: list[dict], majors: dict[str, int]) -> list[dict]:
    """S4's comparison, 11 over 10, from the scale-up rows whichever of the two was the baseline: S3's baseline
    (params pgbench.baseline, 11 in the default profile) makes them 10 over 11, to be read the other way round."""
    out = []
    for r in rows:
        pair = (majors.get(r["server"]), majors.get(r["baseline"]))
        if pair == (11, 10):
            out.append(r)
        elif pair == (10, 11):
            out.append(_turned(r))
    return out


def scaleup_rows(paired: pl.DataFrame, majors: dict[str, int], floor: float | None) -> list[dict]:
    out = []
    for mode in ("select-only", "tpcb"):
        key = f"scaleup_{mode}"
        rows = _paired(paired, "scale-up tps", f"mode={mode}")
        pair = eleven_over_ten(rows, majors)
        server, ev = (pair[0]["server"], _evidence(pair[0])) if pair else ("all", None)
        if not rows:
            v = V.not_run(f"no {mode} scale-up of two versions in this profile")
        elif not pair:
            which = ", ".join(sorted({r["server"] for r in rows} | {rows[0]["baseline"]}))
            v = V.not_testable(
                f"the scale-up compared {which}, not 10 and 11", "needs pgbench.scaling.versions [10, 11]"
            )
        elif mode == "select-only":  # the study's explanation is one pgbench -S does not exercise
            v = V.not_testable(
                "pgbench -S has no aggregate, and the +5 % was traced to faster aggregation "
                f"(ours, shown only: {ev.text()})",
                "needs S4's reference workload with aggregates",
            )
        else:
            f, said = _borrowed(floor, pair[0])  # TPC-B-like tps: no A/A control of its own
            got = V.verdict(CLAIMS[key], ev, f)
            why = f"11 / 10 over (clients, round) blocks{br.on_clusters(pair[0])}; {said}: {got.reason}; a CLOG change "
            v = V.Verdict(got.label, why + "shows with many cores and clients, this machine has few", got.needs)
        out.append(_row(key, key, server, v, ev, "S4"))
    return out


def _tps(x: float | None) -> str:
    return "no" if x is None else f"{x:,.0f}"


def _mib(b: int) -> str:
    return f"{b / 2**20:.0f} MiB" if b >= 2**20 else f"{b / 2**10:.0f} KiB"


def buffers_rows(bp: pl.DataFrame, floor: float | None) -> list[dict]:
    """S3's mechanism per study scale: the smallest shared_buffers over the largest (pgbench_buffers_paired)."""
    out = []
    for scale in BUFFERS_SCALES:
        finding = f"select_only_small_buffers_scale_{scale}"
        rows = bp.filter(pl.col("scale") == scale).sort("server", "shared_buffers_bytes") if bp.height else bp
        if bp.is_empty():
            v = V.not_run("the buffers experiment is not in this profile's pgbench.experiments")
            out.append(_row(finding, "select_only_small_buffers", "all", v))
            continue
        if rows.is_empty():
            scales = sorted(set(bp["scale"]))
            v = V.not_run(f"scale {scale} not among the buffers experiment's scales {scales}")
            out.append(_row(finding, "select_only_small_buffers", "all", v))
            continue
        for (server,), g in rows.group_by("server", maintain_order=True):
            r = g.row(0, named=True)  # the smallest value over the largest
            ev = _evidence(r)
            small, large, db = r["shared_buffers_bytes"], r["baseline_bytes"], r["db_bytes"]
            what = (
                f"shared_buffers {r['shared_buffers']} over {r['baseline']}, scale {scale}"
                + (f" ({_mib(db)} database)" if db else "")
                + f"; {_tps(r['tps_median'])} against {_tps(r['baseline_tps_median'])} tps (medians)"
            )
            if db and large < db:
                v = V.not_testable(
                    f"{what}: the large shared_buffers does not hold the database", "a larger shared_buffers value"
                )
            elif db and small >= db:
                v = V.not_testable(
                    f"{what}: the small shared_buffers holds the whole database too", "a smaller shared_buffers value"
                )
            else:
                got = V.verdict(CLAIMS["select_only_small_buffers"], ev, floor)
                fl = "" if floor is not None else "; no A/A floor (select_only's A/A control did not run)"
                v = V.Verdict(got.label, f"{got.reason} ({what}{fl})", got.needs)
            out.append(_row(finding, "select_only_small_buffers", server, v, ev))
    return out


def findings(t: dict[str, pl.DataFrame]) -> pl.DataFrame:
    """Findings of S3 and S4's scale-up from the paired tables (pgbench_paired, pgbench_noise, pgbench_no_vacuum,
    pgbench_servers, pgbench_select_only; pgbench_buffers_paired where the run has it)."""
    floor, majors, paired = floor_of(t["pgbench_noise"]), _majors(t["pgbench_servers"]), t["pgbench_paired"]
    so = t["pgbench_select_only"]
    scales = sorted(set(so["scale"].drop_nulls())) if so.height else []
    rows = no_vacuum_rows(t["pgbench_no_vacuum"], majors, floor) + version_rows(paired, floor, scales)
    rows += buffers_rows(t.get("pgbench_buffers_paired", pl.DataFrame()), floor)
    oldest = str(min(majors.values())) if majors else "not recorded"
    why = V.not_testable(
        f"the study's gap is 9.1 over 7.3; the oldest server here is {oldest}", "needs 7.3 and 9.1 builds"
    )
    rows.append(_row("widest_gap", "widest_gap", "all", why))
    return fs.table(rows + scaleup_rows(paired, majors, floor))
