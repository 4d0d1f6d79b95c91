from graphopt.cli import main

main()
