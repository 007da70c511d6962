"""Statistics and judging: intervals (paired, pooled over clusters, floored by the re-run spread), the A/A noise
floor, artefact rounds, the host kinds and priors, the one verdict rule and the findings' shape. No server code."""
