"""Stand-in for loguru: compressed-tensors only logs through `logger`; messages go to stderr."""
import sys


class _Logger:
    def _log(self, level, msg, *args, **kwargs):
        try:
            text = str(msg).format(*args) if args else str(msg)
        except Exception:
            text = str(msg)
        print(f"[{level}] {text}", file=sys.stderr)

    def debug(self, msg, *a, **k):
        pass

    def trace(self, msg, *a, **k):
        pass

    def info(self, msg, *a, **k):
        self._log("INFO", msg, *a)

    def success(self, msg, *a, **k):
        self._log("SUCCESS", msg, *a)

    def warning(self, msg, *a, **k):
        self._log("WARNING", msg, *a)

    def error(self, msg, *a, **k):
        self._log("ERROR", msg, *a)

    def critical(self, msg, *a, **k):
        self._log("CRITICAL", msg, *a)

    def exception(self, msg, *a, **k):
        self._log("EXCEPTION", msg, *a)

    def log(self, level, msg, *a, **k):
        self._log(level, msg, *a)

    def bind(self, **k):
        return self

    def opt(self, **k):
        return self

    def add(self, *a, **k):
        return 0

    def remove(self, *a, **k):
        pass

    def configure(self, *a, **k):
        pass

    def level(self, *a, **k):
        return None

    def enable(self, *a, **k):
        pass

    def disable(self, *a, **k):
        pass

    def patch(self, *a, **k):
        return self


logger = _Logger()
