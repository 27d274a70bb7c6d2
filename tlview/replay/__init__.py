"""tlview.replay.make"""
