"""Loading a ``--model`` of any kind. It sits above :mod:`xlt.model` and :mod:`xlt.pretrain`, since it
dispatches to both; the interface they implement (:mod:`xlt.model.protocol`) stays below them."""
