from jpwr.cli import main

raise SystemExit(main())
