"""Static word embeddings trained jointly over several languages (Liu et al. 2020 §3).

* :mod:`xlt.embed.formats` -- the word2vec text format, read and written by every xlt tool.
* :mod:`xlt.embed.corpus` -- several languages' tokenized files read as one interleaved corpus.
* :mod:`xlt.embed.word2vec` -- Word2Vec through gensim.
* :mod:`xlt.embed.glove` -- GloVe (Pennington et al., 2014): co-occurrence counts, AdaGrad on the
  weighted least-squares objective.
* :mod:`xlt.embed.train` -- ``xlt embed train``: either method, the output file and its description.

The languages share one space with no language prefix: Liu et al. pretrain every model on the
concatenated, identically tokenized text of all languages ("unsupervised joint training"), so a
string that occurs in two languages is one row (an anchor), exactly as for their BERT.
"""
