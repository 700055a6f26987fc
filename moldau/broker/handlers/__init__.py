"""One module per Kafka API. Each opens with a docstring: versions served, behaviour, and what
is deliberately left out. Modules register themselves with ``@handler``; ApiVersions is built
from that registry."""
