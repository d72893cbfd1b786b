"""Round 46 of public-style files: WeNet's Squeezeformer (time reduction and recovery around relative-position
attention), TiSASRec's time-interval-aware attention, Uni-Mol's pair-biased attention over atoms, Point-BERT's
point-patch transformer."""
