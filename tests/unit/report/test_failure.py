"""The one line a failed report run prints: why it failed, not which py4j call raised."""

from dataclasses import dataclass

import pytest

from vigil_spark import failure


@dataclass
class JavaThrowable:
    """A stand-in for py4j's JavaObject of a Throwable: its toString and its cause."""

    text: str
    cause: "JavaThrowable | None" = None

    def getCause(self) -> "JavaThrowable | None":
        return self.cause

    def toString(self) -> str:
        return self.text


class Py4JError(Exception):
    """Shaped as py4j's Py4JJavaError: the wrapper line first, the Java exception on the next."""

    def __init__(self, text: str, java: JavaThrowable | None) -> None:
        super().__init__(text)
        self.java_exception = java


class PythonException(Exception):  # noqa: N818 - pyspark's name, which failure.py looks for
    """Named as pyspark's: a Python worker's traceback, the exception on its last line."""


STAGE = (
    "org.apache.spark.SparkException: Job aborted due to stage failure: Task 0 in stage 12.0 failed 4 times, most "
    "recent failure: Lost task 0.3 in stage 12.0 (TID 40) (10.77.1.9 executor 2): ExecutorLostFailure"
)
WRAPPED = f"An error occurred while calling o1351.count.\n: {STAGE}\n\tat org.apache.spark.scheduler.DAGScheduler"


@pytest.mark.parametrize(
    ("exc", "line"),
    [
        # the JVM answers: its root cause, whatever the wrapper said
        (Py4JError(WRAPPED, JavaThrowable(STAGE)), STAGE),
        (
            Py4JError(WRAPPED, JavaThrowable(STAGE, JavaThrowable("java.io.FileNotFoundException: /data/x"))),
            "java.io.FileNotFoundException: /data/x",
        ),
        # the JVM is gone (the gateway raises): the text after py4j's wrapper line
        (Py4JError(WRAPPED, None), STAGE),
        (Py4JError("An error occurred while calling o7.collect", None), "Py4JError"),
        (
            RuntimeError("\n  [STREAM_FAILED] Query terminated with exception: boom\n\tat org.apache..."),
            "[STREAM_FAILED] Query terminated with exception: boom",
        ),
        (
            PythonException("Traceback (most recent call last):\n  File x\nValueError: bad record"),
            "ValueError: bad record",
        ),
        (RuntimeError(""), "RuntimeError"),
    ],
)
def test_a_failure_is_described_by_why_it_failed(exc: BaseException, line: str) -> None:
    assert failure.one_line(exc) == line


class GoneGateway:
    def getCause(self) -> None:
        raise ConnectionError("gateway closed")


def test_a_gateway_that_fails_falls_back_to_the_python_text() -> None:
    assert failure.one_line(Py4JError(WRAPPED, GoneGateway())) == STAGE  # type: ignore[arg-type]


class GoneJvmError(Py4JError):
    """py4j's __str__ asks the gateway for the Java text: with the JVM gone, it raises."""

    errmsg = "An error occurred while calling o9.count"

    def __str__(self) -> str:
        raise ConnectionError("gateway closed")


def test_an_error_whose_text_needs_the_gone_jvm_is_still_one_line() -> None:
    assert failure.one_line(GoneJvmError("", GoneGateway())) == "GoneJvmError"  # type: ignore[arg-type]
