"""pglab: reproducible PostgreSQL performance studies."""

import sys

# jsonschema (under altair and nbformat) imports rfc3987_syntax, which builds some 35 Earley parsers at import: 2 s
# of every kit process on a 2-core host (each notebook kernel, the report driver, the CLI) for the `iri` formats
# that neither Vega-Lite's nor nbformat's schema uses. Marked absent, jsonschema leaves out only that check
# (python-jsonschema issue 1428). Not where something imported it already.
sys.modules.setdefault("rfc3987_syntax", None)
