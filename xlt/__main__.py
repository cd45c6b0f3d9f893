from xlt.cli import main

main()
