"""Data sets the studies load: the SSB generator, loader and queries (datasets/ssb); knows no study."""
