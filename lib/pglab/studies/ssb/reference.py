"""Figures the source studies S1 and S4 published for SSB (see docs/studies.md), to set beside ours.
Their hardware and scale differ from ours: compare shapes and ratios, not seconds."""

import polars as pl

QUERIES = ("q1.1", "q1.2", "q1.3", "q2.1", "q2.2", "q2.3", "q3.1", "q3.2", "q3.3", "q3.4", "q4.1", "q4.2", "q4.3")

# S4 (PGECons WG1 2018), JIT test 2: time reduction with JIT per SSB query, percent
S4_JIT_REDUCTION_PCT = dict(
    zip(QUERIES, (32.1, 30.5, 29.5, 8.5, 4.1, 6.6, 13.6, 6.7, 7.7, 6.6, 8.4, 12.8, 11.1), strict=True)
)

# S1, SF 70: mean seconds with parallel query on (5 workers), PostgreSQL 16.6 and 17.2
S1_PARALLEL_MEAN_S = {
    "16.6": dict(
        zip(
            QUERIES, (9.57, 8.99, 9.03, 14.04, 10.86, 10.22, 17.59, 11.73, 9.98, 9.94, 17.51, 17.18, 18.87), strict=True
        )
    ),
    "17.2": dict(
        zip(
            QUERIES, (8.73, 8.16, 8.15, 14.08, 10.72, 10.12, 17.03, 11.41, 9.87, 9.76, 17.32, 17.07, 18.92), strict=True
        )
    ),
}
# S1: parallel off, 5 of the 13 queries (all 13 are in docs/studies.md)
S1_SERIAL_MEAN_S = {
    "16.6": {"q1.1": 50.6, "q2.1": 81.0, "q3.1": 131.4, "q4.1": 130.8, "q4.3": 80.2},
    "17.2": {"q1.1": 47.3, "q2.1": 93.8, "q3.1": 101.5, "q4.1": 130.8, "q4.3": 88.7},
}
# S1: parallel on + jit = on, 4 of the 13 queries (all 13 are in docs/studies.md)
S1_PARALLEL_JIT_MEAN_S = {
    "16.6": {"q1.1": 6.84, "q2.1": 12.99, "q3.1": 16.19, "q4.3": 17.89},
    "17.2": {"q1.1": 6.67, "q2.1": 13.10, "q3.1": 16.25, "q4.3": 17.80},
}
S1_ALLOWED_WORKERS = 5
S1_Q43_PLANNED_WORKERS = 4

# S4, parallel query test A: every SSB query 2-3x faster on v10 (default settings, i.e. 2 workers per Gather)
# than on 9.5 (no parallel query); test B: q4.3 stops improving at this many workers (v11)
S4_PARALLEL_A_SPEEDUP = (2.0, 3.0)
S4_PARALLEL_A_WORKERS = 2
S4_Q43_FLAT_FROM_WORKERS = 4


def s4_jit_table() -> pl.DataFrame:
    pct = S4_JIT_REDUCTION_PCT
    return pl.DataFrame({"query": list(pct), "s4_jit_reduction_pct": list(pct.values())})
