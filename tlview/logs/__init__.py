"""tlview.logs"""
