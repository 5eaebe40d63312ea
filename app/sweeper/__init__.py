"""The slow queue sweeper (after TPF MQSeries': docs/sources.md): a queue that grows faster than it is served keeps
a buffer in Redis and the rest in database blobs, in order, brought back as its front empties."""
