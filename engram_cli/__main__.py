from engram_cli import main

raise SystemExit(main())
