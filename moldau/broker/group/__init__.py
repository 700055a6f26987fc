"""The group coordinator: consumer groups (classic and KIP-848) and committed offsets stored
in ``__consumer_offsets``. The broker starts it with
:func:`moldau.broker.group.service.start_group_coordinator`."""
