"""tlview.repro.make"""
