"""tlview.analyze"""
