"""``xlt track``: every pretraining snapshot evaluated once, as it lands (issue 30).

For each run and each weight-only snapshot ``checkpoints/step-N.pt`` (in step order), the measures
of :mod:`xlt.track.config` that are not yet recorded are computed with the analysis, pretraining and
fine-tuning libraries and appended to ``TRACKDIR/records.jsonl`` (:mod:`xlt.track.records`), which
``xlt report dynamics`` reads. Nothing here is imported by the package's face: torch loads only when
tracking runs.
"""
