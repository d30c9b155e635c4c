"""Helpers the tests share: free ports and HTTP, the named fault injector, a gateway harness, E13 fixtures."""
