"""Round 63 of public-style files: attention in structural biology and science models (lucidrains' alphafold2
axial attention over the pair representation, RFdiffusion's tied MSA row attention with pair bias and its column
attention, OpenFold's invariant point attention, struct2seq's k-nearest-neighbour attention, PhysicsNeMo's
Pangu-Weather earth-specific window attention)."""
