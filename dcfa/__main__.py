import sys

from dcfa.cli import main

sys.exit(main())
