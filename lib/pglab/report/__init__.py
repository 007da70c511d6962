"""The report: the papermill driver (driver, `python -m pglab.report`), the section plumbing (sections, evidence,
setups, summary, appendix), the HTML export, progress, and run-to-run comparison and stability."""
