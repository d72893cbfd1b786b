"""Round 45 of public-style files: OpenFold's triangle attention, the MSA Transformer's tied row attention,
the Non-stationary Transformer's de-stationary attention, Crossformer's two-stage attention."""
