"""Figures over a report, and the names every command gives compiles: summary, divergence, diff, gate."""
