"""`make stability PARAMS=...`: run a profile twice on this machine and compare the verdicts (a benchmark of
the method, not a test: the default profile takes ~42 min a run, params/quick.yaml a few minutes).

    python -m pglab.report.stability --params params/quick.yaml [--out build/stability] [--compare-only]
    python -m pglab.report.stability --params params/default.yaml --archives ID ID [ID ...]

Each run is a fresh `python -m pglab.report` with its own data and state folders (`<out>/a/data`, `<out>/b/data`),
so nothing is resumed or shared; `--first DIR` takes an existing run's data folder (e.g. the `make report` run
that became the committed reference) as run a and measures only run b. The findings compared are every study's
stored verdicts (`<study>_findings`, judged once by each run: what the report summarises). Printed, per claim
(one verdict per (study, finding) over its servers, as the report's summary counts them:
`verdicts.claim_verdicts`) and then per (claim, server): the agreement (share with the same
verdict in both runs) and every flip; a flip between supported and contradicted, or contradicted and direction
only, is severe (either reverses a reader's conclusion).

`--archives`: no measuring; runs already recorded (data/raw-archive/<id>.tar.xz or data/raw/<id>/) are derived
anew by this checkout (`python -m pglab derive`, no server) into `<out>/<id>/`, and every pair of them is
compared, then the pairs pooled: the figure of several runs of one design scored by one revision; then
(`calibration.summary_text`) the agreement over the claims that can flip, each claim's flip probability, each
run's host (clock read cost, boot) and each pair's agreement, and the share of run pairs beyond their joint 95 %
interval per interval family."""

from __future__ import annotations

import argparse
import itertools
import os
import shutil
import subprocess
import sys
from pathlib import Path

import polars as pl

from ..core import derived, paths, raw_archive
from ..core.paramtypes import SAFE_NAME_RULE, is_safe_name

KEYS = ("study", "finding", "server")
MISSING = "(missing)"
SEVERE = ({"supported", "contradicted"}, {"contradicted", "direction only"})  # a reader's conclusion reversed


def compare_findings(a: pl.DataFrame, b: pl.DataFrame) -> dict:
    """Two runs' findings (columns study, finding, server, verdict) compared per claim and server.

    Returns claims (keys in either run), same, agreement (same / claims; None without claims) and flips: a table
    study, finding, server, verdict_a, verdict_b, severe, sorted by the keys. A claim found in one run only
    is a flip to or from "(missing)"."""

    def side(df: pl.DataFrame, name: str) -> pl.DataFrame:
        why = pl.col("evidence").cast(pl.String) if "evidence" in df.columns else pl.lit(None, dtype=pl.String)
        return df.select(*KEYS, pl.col("verdict").alias(f"verdict_{name}"), why.alias(f"evidence_{name}")).unique(
            KEYS, keep="first"
        )

    j = side(a, "a").join(side(b, "b"), on=list(KEYS), how="full", coalesce=True, nulls_equal=True)
    j = j.with_columns(pl.col("verdict_a", "verdict_b").fill_null(MISSING)).sort(KEYS)
    pair = pl.concat_list("verdict_a", "verdict_b")
    severe = pl.any_horizontal([pair.list.set_intersection(list(s)).list.len() == 2 for s in SEVERE])
    flips = j.filter(pl.col("verdict_a") != pl.col("verdict_b")).with_columns(severe.alias("severe"))
    n = j.height
    return {
        "claims": n,
        "same": n - flips.height,
        "agreement": (n - flips.height) / n if n else None,
        "flips": flips.select(
            "study", "finding", "server", "verdict_a", "verdict_b", "severe", "evidence_a", "evidence_b"
        ),
    }


def compare_claims(a: pl.DataFrame, b: pl.DataFrame) -> dict:
    """As `compare_findings`, one verdict per claim (study, finding) over its servers (`verdicts.claim_verdicts`:
    the servers' common verdict, mixed or direction only where they decided apart, else undetermined); the flips'
    server column reads "all"."""
    from ..core.stats.verdicts import claim_verdicts

    def per_claim(df: pl.DataFrame) -> pl.DataFrame:  # the per-server breakdown stands as its evidence
        c = claim_verdicts(df.select(*KEYS, "verdict"))
        return c.with_columns(server=pl.lit("all"), evidence=pl.col("breakdown"))

    return compare_findings(per_claim(a), per_claim(b))


def report_text(c: dict, label_a: str = "a", label_b: str = "b", unit: str = "verdicts", why: int = 0) -> str:
    """The comparison for reading: agreement, then every flip, severe ones marked; with `why` > 0 each flip's
    evidence in both runs under it (cut to `why` characters): what the verdicts rested on."""
    if not c["claims"]:
        return "no findings in either run"
    lines = [
        f"agreement: {c['same']} of {c['claims']} {unit} the same ({c['agreement']:.1%})",
        f"flips: {c['flips'].height}, severe (supported <-> contradicted, contradicted <-> direction only): "
        f"{c['flips']['severe'].sum()}",
    ]
    for r in c["flips"].iter_rows(named=True):
        mark = "SEVERE " if r["severe"] else "       "
        lines.append(
            f"  {mark}{r['study']} {r['finding']} [{r['server']}]: "
            f"{label_a}: {r['verdict_a']} -> {label_b}: {r['verdict_b']}"
        )
        for label, ev in ((label_a, r["evidence_a"]), (label_b, r["evidence_b"])):
            if why and ev:
                lines.append(f"           {label}: {ev[:why]}{'…' if len(ev) > why else ''}")
    return "\n".join(lines)


def report_findings(data_dir: Path, profile: str) -> pl.DataFrame:
    """Every study's stored findings (`<study>_findings`, judged once by the run) in `<data_dir>/derived/<profile>/`."""
    from .sections import all_findings

    return all_findings(profile, data_dir / "derived")


def _format_refusal(data_dir: Path, profile: str) -> str | None:
    """Why `<data_dir>/derived/<profile>/` cannot be read by this pglab (derived.FormatError), or None."""
    try:
        derived.check_format(data_dir / "derived" / profile)
    except derived.FormatError as e:
        return str(e)
    return None


def stability_text(a: pl.DataFrame, b: pl.DataFrame) -> str:
    """Per claim (the figure the acceptance counts), then per claim and server."""
    return (
        "per claim (one verdict over its servers, as the report counts):\n"
        + report_text(compare_claims(a, b), unit="claims")
        + "\n\nper claim and server (with what each verdict rested on):\n"
        + report_text(compare_findings(a, b), unit="claim-server verdicts", why=220)
    )


def run_profile(params: str, out: Path) -> int:
    """One fresh `make report` pass into `out` (notebooks), `out/data` and `out/state`."""
    shutil.rmtree(out, ignore_errors=True)  # a leftover run of the same profile would be resumed, not repeated
    env = {**os.environ, "PGLAB_DATA_DIR": str(out / "data"), "PGLAB_STATE_DIR": str(out / "state")}
    env.pop("PGLAB_DERIVED_DIR", None)
    cmd = [sys.executable, "-m", "pglab.report", "--params", params, "--out", str(out)]
    print(f"$ PGLAB_DATA_DIR={paths.shown(out / 'data')} {' '.join(cmd[1:])}", flush=True)
    rc = subprocess.run(cmd, env=env, cwd=paths.ROOT).returncode
    shutil.rmtree(out / "state", ignore_errors=True)  # its stopped clusters (≈ 0.5 GB for quick): not compared
    return rc


def derive_run(run_id: str, profile: str, out: Path) -> Path | None:
    """Run `run_id`'s tables derived anew by this checkout into `<out>/<run_id>/data/derived/<profile>/` (a
    subprocess: the report layer does not import the derive step; it unpacks an archived run into data/raw/ as
    `make derive` does); its data folder, or None when it failed or the run is of another profile."""
    if not is_safe_name(run_id):  # it names a folder that is replaced
        print(f"error: run id {run_id!r}: expected {SAFE_NAME_RULE}", file=sys.stderr)
        return None
    # before deriving (its params from the archive without unpacking it); a run that has none, derive refuses
    if (recorded := raw_archive.recorded_params(run_id)) is not None and recorded.get("profile") != profile:
        print(
            f"error: run {run_id} is of profile {recorded.get('profile')!r}, not {profile!r} (--params)",
            file=sys.stderr,
        )
        return None
    data = out / run_id / "data"
    shutil.rmtree(data, ignore_errors=True)
    cmd = [sys.executable, "-m", "pglab", "derive", "--run-id", run_id, "--out", str(data / "derived" / profile)]
    print(f"$ python {' '.join(cmd[1:])}", flush=True)
    return data if subprocess.run(cmd, cwd=paths.ROOT).returncode == 0 else None


def pairwise_text(found: dict[str, pl.DataFrame]) -> str:
    """Every pair of runs compared per claim (its flips listed) and per claim and server, then the pairs pooled:
    claims the same over all pairs, and the severe flips of any pair."""
    lines, same, total, same_s, total_s, severe, severe_claims = [], 0, 0, 0, 0, 0, 0
    pairs = list(itertools.combinations(found, 2))
    for x, y in pairs:
        c, s = compare_claims(found[x], found[y]), compare_findings(found[x], found[y])
        same, total, same_s, total_s = same + c["same"], total + c["claims"], same_s + s["same"], total_s + s["claims"]
        severe += int(s["flips"]["severe"].sum())
        severe_claims += int(c["flips"]["severe"].sum())
        lines += [
            f"{x} vs {y}, per claim:",
            report_text(c, x, y, unit="claims"),
            f"  per claim and server: {s['same']} of {s['claims']} the same"
            + (f" ({s['agreement']:.1%})" if s["claims"] else "")
            + f", severe claim-server flips {s['flips']['severe'].sum()}",
            "",
        ]
    if total:
        n = f"the {len(pairs)} pairs" if len(pairs) > 1 else "the one pair"
        lines.append(
            f"over {n}: {same} of {total} claims the same ({same / total:.1%}), severe claim flips: "
            f"{severe_claims}; {same_s} of {total_s} claim-server verdicts ({same_s / total_s:.1%}), "
            f"severe claim-server flips: {severe}"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m pglab.report.stability", description=__doc__.splitlines()[0])
    ap.add_argument("--params", default="params/default.yaml")
    ap.add_argument("--out", default="build/stability")
    ap.add_argument("--compare-only", action="store_true", help="compare the two runs already in --out")
    ap.add_argument(
        "--first", help="run a: an existing run's data folder (e.g. data, after make report); only run b is measured"
    )
    ap.add_argument(
        "--archives",
        nargs="+",
        metavar="RUN_ID",
        help="measure nothing: derive these recorded runs anew (no server) and compare every pair; "
        "not with --first or --compare-only",
    )
    args = ap.parse_args(argv)
    from .. import params as params_mod

    try:
        # the profile's name is all this needs: its servers are checked (and built) by the runs it starts
        profile = params_mod.load(args.params, check_servers=False).profile
    except params_mod.ParamsError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    out = paths.resolve(args.out)
    if args.archives:
        if args.first or args.compare_only:
            print(
                "error: --archives compares recorded runs only: not with --first or --compare-only",
                file=sys.stderr,
            )
            return 2
        if len(set(args.archives)) < 2:
            print("error: --archives needs two different run ids or more", file=sys.stderr)
            return 2
        data = {}
        for run_id in dict.fromkeys(args.archives):
            data[run_id] = derive_run(run_id, profile, out)
            if data[run_id] is None:
                print(f"error: could not derive run {run_id} (see above)", file=sys.stderr)
                return 1
        found = {run_id: report_findings(d, profile) for run_id, d in data.items()}
        print(f"\nstability of profile {profile!r}, {len(found)} recorded runs scored by this checkout:\n")
        print(pairwise_text(found))
        from .calibration import kinds_text, priors_text, spreads_text, summary_text

        folders = {r: d / "derived" / profile for r, d in data.items()}
        print("\n" + summary_text(found, folders))
        print("\n" + priors_text(folders))
        print("\n" + spreads_text(folders))
        print("\n" + kinds_text(folders))
        return 0
    runs = {name: out / name for name in ("a", "b")}
    data = {name: folder / "data" for name, folder in runs.items()}
    if args.first:
        data["a"] = paths.resolve(args.first)
        if not (data["a"] / "derived" / profile / "MANIFEST.json").exists():
            print(
                f"error: --first {args.first}: no derived/{profile}/MANIFEST.json there (run make report first)",
                file=sys.stderr,
            )
            return 2
        if (refused := _format_refusal(data["a"], profile)) is not None:  # before an hour of run b
            print(f"error: --first {args.first}: {refused}", file=sys.stderr)
            return 2
        del runs["a"]
    if not args.compare_only:
        for name, folder in runs.items():
            if run_profile(args.params, folder) != 0:
                print(f"error: run {name} failed; see {paths.shown(folder)}", file=sys.stderr)
                return 1
    for name, d in data.items():  # a folder of an older format holds no findings of every study
        if (refused := _format_refusal(d, profile)) is not None:
            print(f"error: run {name}: {refused}", file=sys.stderr)
            return 2
    found = {name: report_findings(d, profile) for name, d in data.items()}
    print(f"\nstability of profile {profile!r}, run a ({paths.shown(data['a'])}) vs run b ({paths.shown(data['b'])}):")
    print(stability_text(found["a"], found["b"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
