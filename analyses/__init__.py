"""Turns stored runs into findings: comparisons, fits, plots, reports."""
