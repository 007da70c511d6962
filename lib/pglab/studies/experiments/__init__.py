"""Experiments of the user's own, declared in params (`experiments:`), measured with the studies' rigour
(docs/experiments.md)."""
