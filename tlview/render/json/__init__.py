"""The machine formats: `tlview.report/1` and `tlview.diff/1`, written as they are computed."""
