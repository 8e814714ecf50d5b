"""Pure statistics on arrays and DataFrames: numpy, scipy and pandas only.

No torch, no I/O: everything here is a small function whose docstring states
the formula and its source (../shared/docs/references.md).
"""
