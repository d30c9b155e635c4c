import sys

from demo.gpucheck.run import main

sys.exit(main())
