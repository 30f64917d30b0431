from training.recipe import main

main()
