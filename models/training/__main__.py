from models.training.recipe import main

main()
