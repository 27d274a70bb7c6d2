"""The terminal: the report and the diff drawn with rich, tables that fit, log text inert."""
