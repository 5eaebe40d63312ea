"""The slow queue sweeper (seed 002): a queue that grows faster than it is served keeps a buffer in Redis and the
rest in database blobs, in order, brought back as its front empties."""
