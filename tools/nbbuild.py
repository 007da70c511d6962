"""Cell constructors for the notebook sources in tools/notebook_sources/."""

import nbformat as nbf


def md(text):
    return nbf.v4.new_markdown_cell(text.strip())


def code(text, tags=()):
    c = nbf.v4.new_code_cell(text.strip())
    if tags:
        c.metadata["tags"] = list(tags)
    return c


def params_cell(extra: str = ""):
    """The papermill parameters cell: every notebook takes the params file and the run id."""
    return code(
        f"""
# Parameters (papermill injects its own values after this cell)
params_file = "params/default.yaml"  # relative to the project root
run_id = None
{extra}
""",
        tags=["parameters"],
    )
