"""Rebuilding a compile's input tensors from the log: plans first (no torch), then the builders.

exprs and plans make the records concrete; real and fake build from the plans (dtypes, fill and
rebuilt serve both); rows lists them, emit saves and loads them; options say what was asked.
"""
