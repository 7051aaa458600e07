from mcprec._entry import main

main()
