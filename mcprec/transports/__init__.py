"""Transports: byte pumps that relay between a client and a server and report what they relay
to a ``SessionRecording`` (``recording.py``): the stdio tap, the recording HTTP proxy, HTTP
serving, the Streamable HTTP client, SSE. See docs/architecture.md#transports."""
