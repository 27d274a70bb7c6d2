"""tlview.tensors"""
