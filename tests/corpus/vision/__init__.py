"""Fresh vision attention files, one per public source, each a script for ``shapetrace trace``
(``python -m shapetrace trace tests/corpus/vision/swin.py --dims ... [bug]``) and a ``build(bug)``
for the tests (issue 33, the vision part of the self-measured held-out set)."""
