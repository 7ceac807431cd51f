"""One line for a failed Spark run: Spark's and py4j's errors are long, and their first line is often not why.

Pure (no pyspark import): the CLI describes failures with it even where pyspark itself failed to load.
"""

import re
from typing import Any, Final

#: py4j's wrapper line ("An error occurred while calling o1351.count."): says which call, never why.
PY4J_CALL: Final = re.compile(r"^An error occurred while calling [\w.$]+\.?$")


def one_line(exc: BaseException) -> str:
    """A Python worker's error by its last line (the exception), others by their first (Spark's messages put the
    cause first and the JVM stack after); a py4j error by its Java root cause."""
    java = getattr(exc, "java_exception", None)
    text = (_root_cause(java) if java is not None else None) or _python_text(exc)
    lines = [line.strip().removeprefix(": ").strip() for line in text.splitlines()]
    lines = [line for line in lines if line and not PY4J_CALL.match(line)]
    if not lines:
        return type(exc).__name__
    return lines[-1] if _from_python_worker(exc) else lines[0]


def _root_cause(java: Any) -> str | None:
    try:
        cause = java
        while cause.getCause() is not None:
            cause = cause.getCause()
        return str(cause.toString())
    except Exception:  # noqa: BLE001 - the JVM may be gone: the Python side's text is all there is
        return None


def _python_text(exc: BaseException) -> str:
    try:
        return str(getattr(exc, "desc", None) or exc)
    except Exception:  # noqa: BLE001 - py4j's __str__ asks the JVM for its text, and the JVM may be gone
        return str(getattr(exc, "errmsg", "") or "")


def _from_python_worker(exc: BaseException) -> bool:
    # by name: pyspark.errors.PythonException, without importing pyspark here
    return any(cls.__name__ == "PythonException" for cls in type(exc).__mro__)
