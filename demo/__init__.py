"""The demo, on top of both halves: synthetic workspaces and suite, trained demo adapters, the full run."""
