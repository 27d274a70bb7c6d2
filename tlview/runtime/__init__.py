"""tlview.runtime"""
