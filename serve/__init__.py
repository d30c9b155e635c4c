"""Serving half of worker-tier: the vLLM engine launcher and the OpenAI-compatible gateway."""
