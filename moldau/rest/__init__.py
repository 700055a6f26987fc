"""Moldau's REST proxy: Confluent's REST Proxy API v2 (:mod:`.v2`) and v3 (:mod:`.v3`) on the
shared HTTP layer (:mod:`moldau.http`), talking to Kafka only through :mod:`moldau.client`."""
