from specpim_cp.cli import main

main()
