"""Stop sequences over a growing reply text, as OpenAI applies them (pure).

Generation ends at the first occurrence of any stop sequence, and the reply's text ends just
before it: the stop text itself is never returned, whole or streamed. While streaming, the end
of the text that could still grow into a stop sequence is held back until the next token shows
whether it does; once generation ends without one, it goes out. The tokens that wrote the stop
text were sampled, so they stay in the completion's token ids and behaviour logprobs (as vLLM
keeps them): the trainer sees every token the policy chose.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["StopText"]


@dataclass
class StopText:
    """The visible part of a reply whose full text is fed as it grows."""

    stops: tuple[str, ...]
    visible: str = ""  # the text released so far
    stopped: bool = False  # a stop sequence was met: generation must end

    def _cut(self, text: str) -> int:
        """Where the first stop sequence starts in ``text``, or -1. Only the part that can hold
        a new match is searched (everything before was released)."""
        start = max(0, len(self.visible) - max(map(len, self.stops), default=0))
        found = [i for i in (text.find(stop, start) for stop in self.stops) if i >= 0]
        return min(found, default=-1)

    def _held(self, text: str) -> int:
        """Length of the longest end of ``text`` that could grow into a stop sequence."""
        return max((n for stop in self.stops for n in range(len(stop) - 1, 0, -1)
                    if text.endswith(stop[:n])), default=0)

    def feed(self, text: str, final: bool = False) -> str:
        """The delta of ``text`` (the whole reply so far) that may be shown now; ``final``: no
        more text will come, so nothing is held back."""
        if self.stopped:
            return ""
        cut = self._cut(text) if self.stops else -1
        if cut >= 0:
            self.stopped = True
            end = cut
        else:
            end = len(text) if final else len(text) - self._held(text)
        delta = text[len(self.visible):end] if end > len(self.visible) else ""
        self.visible += delta
        return delta
