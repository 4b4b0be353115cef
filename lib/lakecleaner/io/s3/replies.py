"""What an S3 store's replies mean (pure: codes, statuses and XML bodies in, errors out).

One classification for every request, whether boto3 or a lean signed request made it:
ObjectNotFound, ConditionFailed, NotSupported, Transient (to retry) or StorageError (permanent).
Messages are built from the operation, the location and the service's error code only, never
from credentials.
"""

from __future__ import annotations

from xml.etree import ElementTree

from lakecleaner.errors import ConditionFailed, NotSupported, ObjectNotFound, StorageError
from lakecleaner.io.base import Transient

TRANSIENT_CODES = {
    "InternalError",
    "ServiceUnavailable",
    "SlowDown",
    "RequestTimeout",
    "RequestTimeTooSkewed",
    "Throttling",
    "ThrottlingException",
    "RequestLimitExceeded",
    "OperationAborted",
    "500",
    "502",
    "503",
    "504",
}
#: Replies of a store that does not implement the request (a 501 is not an outage to ride out).
_NOT_SUPPORTED_CODES = {"NotImplemented", "MethodNotAllowed"}
_NOT_FOUND_CODES = {"NoSuchKey", "404", "NotFound"}
_CONDITION_CODES = {"PreconditionFailed", "412", "ConditionalRequestConflict", "409"}
_HINTS = {
    "NoSuchBucket": "the bucket does not exist; create it or fix lake.uri",
    "AccessDenied": "access denied; check the credentials and the bucket policy",
    "InvalidAccessKeyId": "the access key is not known to the endpoint; check AWS_ACCESS_KEY_ID",
    "SignatureDoesNotMatch": "the secret key does not match; check AWS_SECRET_ACCESS_KEY",
}


def reply_error(operation: str, location: str, code: str, status: str, message: str | None) -> Exception:
    """What an error reply of the store means, from its error code and HTTP status."""
    if code in _NOT_FOUND_CODES or (status == "404" and code != "NoSuchBucket"):
        return ObjectNotFound(operation, location, "no such object")
    if code in _CONDITION_CODES or status in ("412", "409"):
        return ConditionFailed(operation, location, f"condition not met ({code or status})")
    if code in _NOT_SUPPORTED_CODES or status in ("501", "405"):
        return NotSupported(operation, location, f"{code or status}: {message or 'not implemented'}")
    if code in TRANSIENT_CODES or status.startswith("5") or status == "429":
        return Transient(f"{code or status}")
    reason = _HINTS.get(code, f"{code or status}: {message or 'request failed'}")
    return StorageError(operation, location, reason)


def error_code_and_message(body: bytes) -> tuple[str, str | None]:
    """The Code and Message of an S3 error reply's XML (empty for a HEAD's bodiless reply)."""
    try:
        error = ElementTree.fromstring(body)
    except ElementTree.ParseError:
        return "", None
    return error.findtext("Code") or "", error.findtext("Message")


def delete_errors(body: bytes) -> list[tuple[str, str, str | None]]:
    """(key, code, message) of each <Error> of a DeleteObjects reply; a reply that is not XML is one
    error without a key."""
    try:
        reply = ElementTree.fromstring(body)
    except ElementTree.ParseError:
        return [("", "", "the store's reply to DeleteObjects is not XML")]
    out = []
    for element in reply.iter():
        if element.tag.rpartition("}")[2] == "Error":
            fields = {child.tag.rpartition("}")[2]: child.text for child in element}
            out.append((fields.get("Key") or "", fields.get("Code") or "", fields.get("Message")))
    return out


__all__ = ["TRANSIENT_CODES", "delete_errors", "error_code_and_message", "reply_error"]
