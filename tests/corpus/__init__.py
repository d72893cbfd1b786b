"""The engine v3 corpus (issue 21): small attention modules in the styles of public code and of public
bug reports, each citing its source; ``helpers.py`` holds the ``Case`` table format and the checks
(names of tagged lines, an error on the lines tagged ``[bug-...]``, nothing on correct twins)."""
