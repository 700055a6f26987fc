"""Moldau's REST Proxy: Confluent's REST Proxy API v2 and v3 over :mod:`moldau.client`.

:class:`~.app.RestProxy` runs standalone (``moldau rest-proxy``) or in the broker's event loop
(``moldau serve`` with ``rest.proxy.listeners``). Settings: :mod:`.config`; shared state of
the resources: :mod:`.context`; content types: :mod:`.media`; API v2: :mod:`.v2`; API v3:
:mod:`.v3`.
"""
