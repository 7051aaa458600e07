from mcprec.cli import main

main()
