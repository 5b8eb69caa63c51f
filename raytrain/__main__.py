from raytrain.cli import main

main()
