"""Client metrics (KIP-714): the subscriptions operators create as ``client-metrics``
config resources (``subscriptions``), the reader of what clients push (``otlp``, sans-I/O),
and one broker's instances and their last numbers (``manager``), which the metrics endpoint
exports."""
