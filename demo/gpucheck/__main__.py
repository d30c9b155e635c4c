import sys

from demo.gpucheck.all_steps import main

sys.exit(main())
