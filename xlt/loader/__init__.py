"""Loading a ``--model`` of any kind (:mod:`xlt.loader.kinds`: an xlt run, a transformers model, static
word vectors). It sits above :mod:`xlt.model`, :mod:`xlt.pretrain` and :mod:`xlt.embed`, since it
dispatches to all three; the interface they implement (:mod:`xlt.model.protocol`) stays below them."""
