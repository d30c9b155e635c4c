"""An API's stream read as the relay reads it (serve/gateway/proxy.py's `Relay`): split into whole events
once, each readable event given to the API's accumulator."""

from __future__ import annotations

from serve.gateway.apis.base import Api, SseEvent, SseEvents


class StreamReading:
    def __init__(self, api: Api) -> None:
        self.api = api
        self.accumulator = api.accumulator()
        self._events = SseEvents()

    def feed(self, *chunks: bytes) -> list[SseEvent]:
        """The whole events these chunks complete (each also given to the accumulator)."""
        seen = [event for chunk in chunks for event in self._events.feed(chunk)]
        for event in seen:
            self.accumulator.event(event.name, event.data)
        return seen

    def ends(self, events: list[SseEvent]) -> bool:
        """Whether one of `events` is the API's last event of a whole stream."""
        return any(self.api.stream_end(event) for event in events)
