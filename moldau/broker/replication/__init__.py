"""Replication's data plane: followers fetch from leaders (:mod:`.fetcher`), leaders track
each follower's progress and move the high watermark (:mod:`.progress`)."""
