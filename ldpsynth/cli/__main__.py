import sys

from ldpsynth.cli.main import main

sys.exit(main())
