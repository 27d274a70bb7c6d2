"""tlview.index.indexer"""
