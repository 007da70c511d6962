"""Names shared by the generator's modules, importable without numpy or polars (the CLI starts its
generator processes before it loads those)."""

# Identifies the generation rules: bump whenever any generated row changes.
GENERATOR_VERSION = "2"

FORMATS = ("copy", "tbl")
FLAVORS = ("dbgen", "spec")  # dbgen: byte-identical to ssb-dbgen; spec: the SSB rules, seeded streams
DEFAULT_FLAVOR = "dbgen"


def check_flavor(flavor: str) -> str:
    if flavor not in FLAVORS:
        raise ValueError(f"unknown SSB generator flavor {flavor!r}; expected one of {FLAVORS}")
    return flavor


def check_format(fmt: str) -> str:
    if fmt not in FORMATS:
        raise ValueError(f"unknown block format {fmt!r}; expected one of {FORMATS}")
    return fmt
