"""tlview.read"""
