from shapetrace.cli.app import main

main()
