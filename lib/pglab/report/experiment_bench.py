"""`make bench-experiment`: what the per-query evidence costs an SQL experiment. The example work_mem_queries (a
million orders, 3 queries, work_mem 4MB vs 64MB: 2 conditions and the A/A copy, 10 rounds after a warm-up) on the
embedded server, run alternately without and with the evidence sample (one untimed EXPLAIN (ANALYZE, BUFFERS,
TIMING OFF) per query and condition, `run.Runner.evidence`), each run from scratch under its own run id, the data
loaded once before. Prints every run's wall time, the median of each, the overhead (target: at most 10 %) and the
process's peak memory. Its clusters and runs live under build/bench/experiment/, not the user's.

    python -m pglab.report.experiment_bench [--pairs 2] [--rounds 10]"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import sys
import time
import uuid

from ..core import paths

EXAMPLE = "params/examples/work_mem_queries.yaml"
TARGET = 0.10


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m pglab.report.experiment_bench", description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=int, default=2, help="runs without and with the evidence, alternately (2)")
    ap.add_argument("--rounds", type=int, default=10)
    args = ap.parse_args(argv)
    home = paths.ROOT / "build" / "bench" / "experiment"
    os.environ["PGLAB_STATE_DIR"] = str(home / "state")  # its own clusters: never the user's, nor a test's
    os.environ["PGLAB_DATA_DIR"] = str(home / "data")

    import yaml

    from .. import params
    from ..core.installs.installs import discover
    from ..core.run import session
    from ..studies.experiments import run as xrun

    server = next(i for i in discover() if i.source == "embedded").name
    doc = yaml.safe_load((paths.ROOT / EXAMPLE).read_text())
    doc["profile"] = "bench-experiment"
    doc["servers"] = {"use": [server]}
    x = doc["experiments"][0]
    x |= {"servers": [server], "rounds": args.rounds, "warmups": 1}
    for key in ("data", "workload"):  # the example's files, named from where the temporary params file lives
        x[key] = {"sql": str((paths.ROOT / "params/examples" / x[key]["sql"]).resolve())}
    folder = home / "params"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "bench.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    p = params.load(path)
    e = p.experiments[0]

    def one(evidence: bool) -> float:
        s = session.begin(p, f"bench-experiment-{uuid.uuid4().hex[:8]}", study="experiments")
        s.start()
        try:
            t0 = time.monotonic()
            xrun.run_experiment(s, e, evidence=evidence)
            return time.monotonic() - t0
        finally:
            s.close()

    print(
        f"bench-experiment: {EXAMPLE} on {server}: 3 queries x 2 conditions (+ A/A) x {args.rounds} rounds", flush=True
    )
    t0 = time.monotonic()
    one(True)  # loads the data once (kept for the timed runs) and warms the server
    print(f"  data and a first run: {time.monotonic() - t0:.1f} s", flush=True)
    times: dict[bool, list[float]] = {False: [], True: []}
    for k in range(args.pairs):
        for evidence in (False, True) if k % 2 == 0 else (True, False):  # ABBA: drift falls on both alike
            took = one(evidence)
            times[evidence].append(took)
            print(f"  {'with' if evidence else 'without'} the evidence: {took:.1f} s", flush=True)
    without, with_ = statistics.median(times[False]), statistics.median(times[True])
    overhead = with_ / without - 1
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(
        f"bench-experiment: without {without:.1f} s, with {with_:.1f} s (medians of {args.pairs}): overhead "
        f"{overhead:+.1%} (target <= {TARGET:.0%}: {'met' if overhead <= TARGET else 'NOT met'}); "
        f"peak memory of this process {peak_mb:.0f} MB",
        flush=True,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
