"""One log line and its reading: event types and shapes, the codec, the reader, safe opening, signing, redaction.

May import: the standard library, third-party libraries and nbagent's leaves (``errors``, ``terminal``, ``threads``).
"""
