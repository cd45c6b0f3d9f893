"""Data stages: memory-mapped token stores, pretraining streams, masking, data recipes."""
